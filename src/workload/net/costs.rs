//! The far end's costs, read from the agent's `/v1/snapshot` at each
//! interval's end as a server's statistics are: its own process's CPU
//! time, its host's busy and total CPU time (clock ticks), its host's
//! CPUs, and the TCP segments it sent and retransmitted (/proc/net/snmp
//! `OutSegs`, `RetransSegs`). The probe keeps each counter's increase over
//! the interval; [`super::figures`] turns them into CPU per transaction. It
//! also notes whether the agent shares this host (the same boot id), so
//! that the verdict counts the echo's CPU as the server's there.
//! Ticks are divided by ticks (the agent's CPU by its host's total over
//! the same reading), so the agent's clock rate is never needed.

use crate::probe::agent_client::AgentClient;
use crate::probe::counters::process::AGENT_LABEL;
use crate::probe::DbStatsSource;
use std::collections::BTreeMap;

/// Counter names, as stored with each interval.
pub(crate) const AGENT_CPU_TICKS: &str = "agent_cpu_ticks";
pub(crate) const HOST_BUSY_TICKS: &str = "agent_host_busy_ticks";
pub(crate) const HOST_ALL_TICKS: &str = "agent_host_all_ticks";
/// A gauge: the agent host's CPUs.
pub(crate) const HOST_CPUS: &str = "now_agent_host_cpus";
/// A gauge: 1 when the agent runs on this host (the same boot id), 0 when
/// on another; absent when either cannot tell.
pub(crate) const SAME_HOST: &str = "now_agent_same_host";
pub(crate) const RETRANS_SEGS: &str = "agent_retrans_segs";
pub(crate) const OUT_SEGS: &str = "agent_out_segs";

/// The agent, asked at each interval's end.
pub(crate) struct AgentCosts {
    client: AgentClient,
    /// This host's boot id, to tell whether the agent shares it.
    here: Option<String>,
}

impl AgentCosts {
    pub(crate) fn new(client: AgentClient) -> Self {
        AgentCosts {
            client,
            here: crate::util::boot_id(),
        }
    }
}

impl DbStatsSource for AgentCosts {
    fn sample_waits(&mut self, _waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        let body = self.client.snapshot_body()?;
        let snapshot = body.snapshot;
        let mut out = BTreeMap::new();
        if let (Some(here), Some(there)) = (&self.here, &body.boot_id) {
            out.insert(SAME_HOST.to_string(), f64::from(u8::from(here == there)));
        }
        if let Some(stat) = &snapshot.stat {
            let t = &stat.total;
            let idle = t.idle + t.iowait.unwrap_or(0);
            let all = t.user
                + t.nice
                + t.system
                + t.idle
                + t.iowait.unwrap_or(0)
                + t.irq.unwrap_or(0)
                + t.softirq.unwrap_or(0)
                + t.steal.unwrap_or(0);
            out.insert(HOST_ALL_TICKS.to_string(), all as f64);
            out.insert(HOST_BUSY_TICKS.to_string(), all.saturating_sub(idle) as f64);
            out.insert(HOST_CPUS.to_string(), stat.cpu_time.len() as f64);
        }
        if let Some((_, pids)) = snapshot
            .processes
            .iter()
            .find(|(group, _)| group.label == AGENT_LABEL)
        {
            let ticks: u64 = pids.values().map(|p| p.utime + p.stime).sum();
            out.insert(AGENT_CPU_TICKS.to_string(), ticks as f64);
        }
        for (name, key) in [(RETRANS_SEGS, "RetransSegs"), (OUT_SEGS, "OutSegs")] {
            if let Some(value) = snapshot.tcp.get(key) {
                out.insert(name.to_string(), *value as f64);
            }
        }
        Ok(out)
    }
}
