//! A net run's figures per step (`perflab run net`): transactions per
//! second or bits per second, TCP retransmits on both ends, and the CPU
//! each transaction (or each gigabyte, for `stream` and `maerts`) cost on
//! both ends — netperf's *service demand*: CPU time used over the window
//! divided by the work done in it (the utilisation law `D = U·m / X`).
//!
//! This end's figures are the host probe's: perflab's own process group
//! and the host's CPUs, and /proc/net/snmp's retransmits. The far end's
//! are the agent's counters the net workload stored with each interval
//! (`workload::net::costs`): its process's CPU ticks and its host's busy
//! and total ticks, so the agent's CPU share is ticks over ticks, timed by
//! the interval's own length. Intervals lacking a figure leave it out of
//! the sums, and a figure missing from every interval is none.

use super::costs::{
    AGENT_CPU_TICKS, HOST_ALL_TICKS, HOST_BUSY_TICKS, HOST_CPUS, RETRANS_SEGS, SAME_HOST,
};
use crate::measure::Phase;
use crate::probe::counters::process::PERFLAB_LABEL;
use crate::record::{IntervalRecord, StepResult};
use crate::units::Latency;
use crate::workload::figures::{Cost, CostWords, Figures, StepFigures};
use serde::Serialize;

/// What a net step's costs are counted per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CostUnit {
    /// A transaction (rr, crr).
    Transaction,
    /// A gigabyte (10⁹ bytes) moved (stream, maerts).
    Gigabyte,
}

/// CPU seconds one unit of work cost, on each side.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub(crate) struct CpuPerUnit {
    /// perflab's own process, seconds per unit.
    pub(crate) perflab: Option<f64>,
    /// This host, all its CPUs.
    pub(crate) host: Option<f64>,
    /// The agent's own process.
    pub(crate) agent: Option<f64>,
    /// The agent's host, all its CPUs.
    pub(crate) agent_host: Option<f64>,
}

impl CpuPerUnit {
    /// Both processes together (perflab's and the agent's): what the
    /// path's two ends spent on it, whatever else runs on their hosts.
    pub(crate) fn both_processes(&self) -> Option<f64> {
        Some(self.perflab? + self.agent?)
    }
}

/// One step of a net run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NetStep {
    /// The step's load, as tables show it.
    pub(crate) load: String,
    /// Transactions (or stream messages) per second.
    pub(crate) transactions_per_s: f64,
    /// Payload bits per second, both ways together.
    pub(crate) bits_per_s: f64,
    /// Segments retransmitted over the measured window, here and at the agent.
    pub(crate) retransmits: Option<u64>,
    pub(crate) agent_retransmits: Option<u64>,
    pub(crate) unit: CostUnit,
    /// CPU seconds per unit over the whole measured window.
    pub(crate) cpu: CpuPerUnit,
    /// Both processes' CPU seconds per unit in each measured interval,
    /// for a comparison's test.
    #[serde(skip)]
    pub(crate) per_interval: Vec<f64>,
    /// The shapers on this host's links (tbf, htb) over the window.
    #[serde(skip)]
    pub(crate) shaped: Vec<ShapedLink>,
    /// The agent's process's CPUs over the window when it runs on this
    /// host: the server's CPU, which the host's CPU also counts.
    #[serde(skip)]
    pub(crate) agent_cpus_here: Option<f64>,
}

/// A link a queueing discipline shapes, over a step's measured window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShapedLink {
    /// `veth0`, and `server` when in the server's namespace.
    pub(crate) interface: String,
    pub(crate) kind: String,
    /// The rate it shapes to, and what it carried, bytes per second.
    pub(crate) rate_bytes_per_s: f64,
    pub(crate) carried_bytes_per_s: f64,
}

/// A shaper carrying this share of its rate is full: the link's
/// bandwidth, not either end's CPU, is what a stream met.
pub(crate) const FULL_LINK: f64 = 0.9;

/// What the verdict says of a net run's step: the CPU a unit of work cost
/// each end (netperf's service demand, the figure that compares adapters,
/// drivers and settings), and a shaped link the step filled.
pub(crate) fn evidence(net: &NetStep) -> Vec<String> {
    let mut out = Vec::new();
    let (scale, unit) = match net.unit {
        CostUnit::Transaction => (1e6, "µs per transaction"),
        CostUnit::Gigabyte => (1e3, "ms per gigabyte"),
    };
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", v * scale));
    if net.cpu.perflab.is_some() || net.cpu.agent.is_some() {
        out.push(format!(
            "the network path's CPU at {}: perflab's process {}, the agent's {} ({unit}; their hosts' CPUs {} and {})",
            net.load,
            show(net.cpu.perflab),
            show(net.cpu.agent),
            show(net.cpu.host),
            show(net.cpu.agent_host),
        ));
    }
    for link in &net.shaped {
        let share = link.carried_bytes_per_s / link.rate_bytes_per_s;
        if share >= FULL_LINK {
            out.push(format!(
                "the {} on {} shapes to {:.1} Mbit/s and carried {:.1} Mbit/s ({:.0}% of it) at {}: the link's bandwidth is the limit, not either end's CPU",
                link.kind,
                link.interface,
                link.rate_bytes_per_s * 8.0 / 1e6,
                link.carried_bytes_per_s * 8.0 / 1e6,
                share * 100.0,
                net.load
            ));
        }
    }
    out
}

/// Sums of one step's measured intervals.
#[derive(Default)]
struct Sums {
    seconds: f64,
    ops: u64,
    bytes: u64,
    perflab: Option<f64>,
    host: Option<f64>,
    agent: Option<f64>,
    agent_host: Option<f64>,
    retransmits: Option<f64>,
    agent_retransmits: Option<f64>,
    /// Intervals whose agent said it shares this host, and that said not.
    here: (u32, u32),
}

fn add(to: &mut Option<f64>, value: Option<f64>) {
    if let Some(v) = value.filter(|v| v.is_finite()) {
        *to = Some(to.unwrap_or(0.0) + v);
    }
}

/// The CPU seconds each side used over one interval of `seconds`:
/// perflab's, this host's, the agent's, the agent host's.
fn interval_cpu(interval: &IntervalRecord, seconds: f64) -> [Option<f64>; 4] {
    let host = interval.host.as_ref();
    let perflab = host.and_then(|h| {
        h.processes
            .iter()
            .find(|p| p.label == PERFLAB_LABEL)
            .map(|p| p.cpu() * seconds)
    });
    let busy = host.and_then(|h| {
        h.cpu
            .as_ref()
            .map(|c| c.busy() * h.cpus.len().max(1) as f64 * seconds)
    });
    let counter = |name: &str| {
        interval
            .db
            .as_ref()
            .and_then(|d| d.counters.get(name).copied())
    };
    // Ticks over ticks: the agent's share of its host's time, times its
    // host's CPUs, over this interval's length.
    let per_cpu_ticks = match (counter(HOST_ALL_TICKS), counter(HOST_CPUS)) {
        (Some(all), Some(cpus)) if all > 0.0 && cpus > 0.0 => Some(all / cpus),
        _ => None,
    };
    let agent = counter(AGENT_CPU_TICKS)
        .zip(per_cpu_ticks)
        .map(|(t, per)| t / per * seconds);
    let agent_host = counter(HOST_BUSY_TICKS)
        .zip(per_cpu_ticks)
        .map(|(t, per)| t / per * seconds);
    [perflab, busy, agent, agent_host]
}

/// The figures of a net run's steps, from its steps and its operation
/// names (a bulk test's costs are per gigabyte).
pub(crate) fn net_steps(steps: &[StepResult], op_names: &[String]) -> Vec<NetStep> {
    let bulk = op_names
        .first()
        .is_some_and(|op| super::NetTest::is_bulk_name(op));
    let unit = if bulk {
        CostUnit::Gigabyte
    } else {
        CostUnit::Transaction
    };
    steps.iter().map(|s| net_step(s, unit)).collect()
}

/// A net run's figures as every report shows them: per step, its rate,
/// the latency's median and p99, the retransmits at both ends and the CPU
/// each unit of work cost perflab's process, this host, the agent's
/// process and the agent's host; the verdict's evidence at a step, the
/// agent's CPU as the server's when it shares this host, and both
/// processes' CPU per unit for a comparison.
pub(super) fn figures(steps: &[StepResult], op_names: &[String]) -> Figures {
    let nets = net_steps(steps, op_names);
    let unit = nets.first().map_or(CostUnit::Transaction, |n| n.unit);
    let words = cost_words(unit);
    let (rate, per) = match unit {
        CostUnit::Transaction => ("tps", "µs/tx"),
        CostUnit::Gigabyte => ("Gbit/s", "ms/GB"),
    };
    let mut heads: Vec<String> = [rate, "p50", "p99", "retrans", "agent retrans"]
        .map(String::from)
        .into();
    for whom in ["perflab", "host", "agent", "agent host"] {
        heads.push(format!("{whom} {per}"));
    }
    Figures {
        title: "the network path".to_string(),
        about: format!(
            "CPU per {}, {}: perflab's process, this host, the agent's process, its host",
            words.work, words.unit
        ),
        heads,
        key: "net",
        cost: Some(words),
        legend: Vec::new(),
        steps: nets
            .into_iter()
            .zip(steps)
            .map(|(net, step)| step_figures(net, step, words))
            .collect(),
    }
}

/// How a net run's cost is said.
fn cost_words(unit: CostUnit) -> CostWords {
    let (scale, unit, work) = match unit {
        CostUnit::Transaction => (1_000_000, "CPU-µs", "transaction"),
        CostUnit::Gigabyte => (1_000, "CPU-ms", "gigabyte"),
    };
    CostWords {
        scale,
        unit,
        work,
        whom: "perflab + agent",
    }
}

/// One step's figures from its [`NetStep`].
fn step_figures(net: NetStep, step: &StepResult, words: CostWords) -> StepFigures {
    let summary = step.summary();
    let cost = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", words.scaled(v)));
    let count = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
    let cells = vec![
        match net.unit {
            CostUnit::Transaction => format!("{:.0}", net.transactions_per_s),
            CostUnit::Gigabyte => format!("{:.2}", net.bits_per_s / 1e9),
        },
        Latency(summary.response.p50).to_string(),
        Latency(summary.response.p99).to_string(),
        count(net.retransmits),
        count(net.agent_retransmits),
        cost(net.cpu.perflab),
        cost(net.cpu.host),
        cost(net.cpu.agent),
        cost(net.cpu.agent_host),
    ];
    StepFigures {
        cells,
        export: serde_json::to_value(&net).unwrap_or_default(),
        evidence: evidence(&net),
        server_cpus: net.agent_cpus_here,
        cost: net.cpu.both_processes().map(|whole| Cost {
            whole,
            per_interval: net.per_interval.clone(),
        }),
    }
}

/// Units of work in `ops` operations moving `bytes`.
fn units(unit: CostUnit, ops: u64, bytes: u64) -> f64 {
    match unit {
        CostUnit::Transaction => ops as f64,
        CostUnit::Gigabyte => bytes as f64 / 1e9,
    }
}

/// A shaped link seen in a step: (interface, kind, rate, bytes carried,
/// seconds).
type Shaper = (String, String, f64, f64, f64);

fn net_step(step: &StepResult, unit: CostUnit) -> NetStep {
    let mut sums = Sums::default();
    let mut per_interval = Vec::new();
    let mut shapers: Vec<Shaper> = Vec::new();
    for interval in step.intervals.iter().filter(|i| i.phase == Phase::Measured) {
        let seconds = interval.length.as_secs_f64();
        if seconds <= 0.0 {
            continue;
        }
        let tally = interval.tally.all_ops();
        let ops = tally.completed();
        sums.seconds += seconds;
        sums.ops += ops;
        sums.bytes += tally.bytes;
        let [perflab, _, agent, _] = add_interval(&mut sums, interval, seconds);
        add_shapers(&mut shapers, interval, seconds);
        let done = units(unit, ops, tally.bytes);
        if let (Some(p), Some(a), true) = (perflab, agent, done > 0.0) {
            per_interval.push((p + a) / done);
        }
    }
    let done = units(unit, sums.ops, sums.bytes);
    let per = |cpu: Option<f64>| cpu.filter(|_| done > 0.0).map(|c| c / done);
    let rate = |n: f64| {
        if sums.seconds > 0.0 {
            n / sums.seconds
        } else {
            0.0
        }
    };
    NetStep {
        load: step.level.to_string(),
        transactions_per_s: rate(sums.ops as f64),
        bits_per_s: rate(sums.bytes as f64 * 8.0),
        retransmits: sums.retransmits.map(|r| r.round() as u64),
        agent_retransmits: sums.agent_retransmits.map(|r| r.round().max(0.0) as u64),
        unit,
        cpu: CpuPerUnit {
            perflab: per(sums.perflab),
            host: per(sums.host),
            agent: per(sums.agent),
            agent_host: per(sums.agent_host),
        },
        per_interval,
        shaped: shapers
            .into_iter()
            .filter(|s| s.4 > 0.0)
            .map(|(interface, kind, rate, bytes, secs)| ShapedLink {
                interface,
                kind,
                rate_bytes_per_s: rate,
                carried_bytes_per_s: bytes / secs,
            })
            .collect(),
        agent_cpus_here: sums
            .agent
            .filter(|_| sums.here.0 > 0 && sums.here.1 == 0 && sums.seconds > 0.0)
            .map(|cpu| cpu / sums.seconds),
    }
}

/// Adds one measured interval's CPU, placement and retransmits to `sums`;
/// returns its CPU figures (perflab, host, agent, agent's host).
fn add_interval(sums: &mut Sums, interval: &IntervalRecord, seconds: f64) -> [Option<f64>; 4] {
    let cpu = interval_cpu(interval, seconds);
    let [perflab, host, agent, agent_host] = cpu;
    match interval.db.as_ref().and_then(|d| d.counters.get(SAME_HOST)) {
        Some(same) if *same >= 0.5 => sums.here.0 += 1,
        Some(_) => sums.here.1 += 1,
        None => {}
    }
    add(&mut sums.perflab, perflab);
    add(&mut sums.host, host);
    add(&mut sums.agent, agent);
    add(&mut sums.agent_host, agent_host);
    add(
        &mut sums.retransmits,
        interval
            .host
            .as_ref()
            .and_then(|h| h.tcp.as_ref())
            .map(|t| t.retransmits_per_s * seconds),
    );
    add(
        &mut sums.agent_retransmits,
        interval
            .db
            .as_ref()
            .and_then(|d| d.counters.get(RETRANS_SEGS).copied()),
    );
    cpu
}

/// Adds one interval's shaped links (by interface and kind) to `shapers`.
fn add_shapers(shapers: &mut Vec<Shaper>, interval: &IntervalRecord, seconds: f64) {
    for q in interval.host.iter().flat_map(|h| h.qdiscs.iter()) {
        let Some(rate) = q.rate_bytes_per_s.filter(|r| *r > 0.0) else {
            continue;
        };
        let name = if q.namespace == "host" {
            q.interface.clone()
        } else {
            format!("{} ({})", q.interface, q.namespace)
        };
        match shapers.iter_mut().find(|s| s.0 == name && s.1 == q.kind) {
            Some(s) => {
                s.3 += q.bytes_per_s * seconds;
                s.4 += seconds;
            }
            None => shapers.push((name, q.kind.clone(), rate, q.bytes_per_s * seconds, seconds)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Outcome, PackedTally, Tally};
    use crate::probe::counters::process::ProcessSample;
    use crate::probe::counters::{CpuSample, HostSample};
    use crate::probe::DbSample;
    use crate::record::StepStatus;
    use std::time::{Duration, SystemTime};

    /// One measured second: `ops` transactions of 2 bytes, perflab at
    /// `cpu` CPUs, the agent at `agent_ticks` of 100 per CPU on 2 CPUs.
    fn second(ops: u64, cpu: f64, agent_ticks: f64) -> IntervalRecord {
        let mut tally = Tally::new(1);
        for _ in 0..ops {
            let done = Outcome {
                bytes: 2,
                ..Outcome::ok()
            };
            tally.ops[0].record(&done, Duration::from_micros(10), Duration::from_micros(10));
        }
        let mut host: HostSample = serde_json::from_value(serde_json::json!({
            "seconds": 1.0, "cpu": null, "cpus": [], "context_switches_per_s": null,
            "interrupts_per_s": null, "irqs": [], "procs_running": null, "memory": null,
            "disks": [], "nics": [], "tcp": {"segments_out_per_s": 10.0, "retransmits_per_s": 1.0,
            "timeouts": null, "listen_drops": null, "listen_overflows": null},
            "pressure": {}, "processes": []
        }))
        .unwrap();
        host.cpu = Some(CpuSample {
            user: 0.25,
            idle: 0.75,
            ..CpuSample::default()
        });
        host.cpus = vec![CpuSample::default(); 4];
        let mut perflab: ProcessSample = serde_json::from_value(serde_json::json!({
            "label": "perflab", "processes": 1, "cpu_user": 0.0, "cpu_system": 0.0,
            "rss_bytes": 0, "threads": 1, "context_switches_per_s": 0.0
        }))
        .unwrap();
        perflab.cpu_user = cpu;
        host.processes = vec![perflab];
        let db = DbSample {
            counters: [
                (AGENT_CPU_TICKS, agent_ticks),
                (HOST_BUSY_TICKS, 100.0),
                (HOST_ALL_TICKS, 200.0),
                (HOST_CPUS, 2.0),
                (RETRANS_SEGS, 3.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            waits: Default::default(),
        };
        IntervalRecord {
            phase: Phase::Measured,
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            tally: PackedTally::pack(&tally),
            db: Some(db),
            host: Some(host),
            probes: Vec::new(),
        }
    }

    #[test]
    fn the_cpu_per_transaction_of_both_ends_is_their_time_over_the_work() {
        let step = StepResult {
            index: 0,
            level: crate::plan::Level::Users(1),
            started_at: SystemTime::UNIX_EPOCH,
            intervals: vec![second(1000, 0.5, 20.0), second(1000, 0.5, 20.0)],
            status: StepStatus::Ok,
            usage: Default::default(),
            generators: Vec::new(),
        };
        let net = net_step(&step, CostUnit::Transaction);
        assert_eq!(net.transactions_per_s, 1000.0);
        assert_eq!(net.bits_per_s, 16_000.0);
        assert_eq!((net.retransmits, net.agent_retransmits), (Some(2), Some(6)));
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
        // perflab: 0.5 CPU over 1000 tps = 500 µs each.
        assert!(close(net.cpu.perflab, 500e-6), "{:?}", net.cpu);
        // This host: 25% of 4 CPUs = 1 CPU: 1 ms each.
        assert!(close(net.cpu.host, 1e-3), "{:?}", net.cpu);
        // The agent: 20 of 100 ticks per CPU = 0.2 CPU: 200 µs each.
        assert!(close(net.cpu.agent, 200e-6), "{:?}", net.cpu);
        // Its host: 100 busy of 200 on 2 CPUs = 1 CPU: 1 ms each.
        assert!(close(net.cpu.agent_host, 1e-3), "{:?}", net.cpu);
        assert_eq!(net.per_interval.len(), 2);
        assert!((net.per_interval[0] - 700e-6).abs() < 1e-12);
        // Per gigabyte: 2000 bytes a second is 2e-6 GB.
        let bulk = net_step(&step, CostUnit::Gigabyte);
        assert!(close(bulk.cpu.perflab, 0.5 / 2e-6));
        // The verdict says both ends' costs.
        let said = evidence(&net).join("\n");
        assert!(
            said.contains("perflab's process 500.0, the agent's 200.0 (µs per transaction; their hosts' CPUs 1000.0 and 1000.0)"),
            "{said}"
        );
    }

    /// The same second, its agent saying whether it shares this host.
    fn second_where(same_host: f64) -> IntervalRecord {
        let mut s = second(1000, 0.5, 20.0);
        if let Some(db) = s.db.as_mut() {
            db.counters.insert(SAME_HOST.to_string(), same_host);
        }
        s
    }

    /// An echo on this host is the server whose CPU the host's counts: its
    /// CPUs are known only when every interval's agent said it is here.
    #[test]
    fn the_agents_cpu_is_the_servers_here_only_when_it_shares_the_host() {
        let step = |intervals: Vec<IntervalRecord>| StepResult {
            index: 0,
            level: crate::plan::Level::Users(1),
            started_at: SystemTime::UNIX_EPOCH,
            intervals,
            status: StepStatus::Ok,
            usage: Default::default(),
            generators: Vec::new(),
        };
        let here = net_step(
            &step(vec![second_where(1.0), second_where(1.0)]),
            CostUnit::Transaction,
        );
        // 20 of 100 ticks per CPU: 0.2 CPU.
        assert!(
            (here.agent_cpus_here.unwrap() - 0.2).abs() < 1e-12,
            "{here:?}"
        );
        let elsewhere = net_step(&step(vec![second_where(0.0)]), CostUnit::Transaction);
        assert_eq!(elsewhere.agent_cpus_here, None);
        let mixed = net_step(
            &step(vec![second_where(1.0), second_where(0.0)]),
            CostUnit::Transaction,
        );
        assert_eq!(mixed.agent_cpus_here, None);
        let untold = net_step(&step(vec![second(1000, 0.5, 20.0)]), CostUnit::Transaction);
        assert_eq!(untold.agent_cpus_here, None);
    }

    fn stream_through(carried: f64) -> NetStep {
        NetStep {
            load: "1 user".to_string(),
            transactions_per_s: 100.0,
            bits_per_s: carried * 8.0,
            retransmits: Some(0),
            agent_retransmits: Some(0),
            unit: CostUnit::Gigabyte,
            cpu: CpuPerUnit::default(),
            per_interval: Vec::new(),
            agent_cpus_here: None,
            shaped: vec![ShapedLink {
                interface: "plv0".to_string(),
                kind: "tbf".to_string(),
                rate_bytes_per_s: 12.5e6,
                carried_bytes_per_s: carried,
            }],
        }
    }

    /// A stream that fills the shaped link is held by the link; one that
    /// does not leaves the link out of the verdict.
    #[test]
    fn a_stream_that_fills_a_shaped_link_names_the_link() {
        let full = evidence(&stream_through(12.2e6)).join("\n");
        assert!(
            full.contains("the tbf on plv0 shapes to 100.0 Mbit/s and carried 97.6 Mbit/s (98% of it) at 1 user: the link's bandwidth is the limit"),
            "{full}"
        );
        assert!(evidence(&stream_through(6e6)).is_empty());
    }
}
