//! Counters and samples that came from outside the process — a perflab
//! agent's `/v1/snapshot` and `/v1/samples`, or anything answering as
//! one — made safe to show and to compute with, right after decoding.
//! Names lose their control characters (a newline in a disk's name would
//! forge a line of output) and are cut to [`MAX_NAME`] characters; a
//! figure no host could show is absent; the differencing in
//! [`super::HostSample::between_over`] takes a counter that went backwards
//! or leapt beyond [`MAX_RATE`] for a reset.

use super::believe::{MAX_FIGURE, MAX_RATE};
use super::sample::{CpuSample, HostSample};
use super::snapshot::HostSnapshot;
use serde_json::Value;

/// The longest name kept, in characters: a cgroup path of a Kubernetes
/// pod's container is about 170.
pub(crate) const MAX_NAME: usize = 256;

/// The largest memory size believed, bytes (1 PiB).
const MAX_MEMORY: u64 = 1 << 50;

/// The fastest link believed, Mb/s (10 Tb/s).
const MAX_LINK_MBPS: u64 = 10_000_000;

/// `text` without control characters (nor the bidirectional overrides
/// that reorder what a terminal shows), at most [`MAX_NAME`] characters.
pub(crate) fn name(text: &str) -> String {
    text.chars()
        .filter(|c| !unwanted(*c))
        .take(MAX_NAME)
        .collect()
}

/// A character a name may not hold.
fn unwanted(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Every string of `value` and every key of its objects made a
/// [`name`]. Recursion is bounded by serde_json's nesting limit (128).
pub(crate) fn clean_names(value: &mut Value) {
    match value {
        Value::String(s) => {
            if s.len() > MAX_NAME || s.chars().any(unwanted) {
                *s = name(s);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_names),
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (key, mut item) in old {
                clean_names(&mut item);
                map.insert(name(&key), item);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Every number of `value` below 0 or above [`MAX_FIGURE`] made 0: for a
/// sample, whose every figure is a rate, a share, a count or a size.
pub(crate) fn clean_figures(value: &mut Value) {
    match value {
        Value::Number(n) => {
            let believable = n.as_u64().is_some_and(|v| v as f64 <= MAX_FIGURE)
                || n.as_f64().is_some_and(|v| (0.0..=MAX_FIGURE).contains(&v));
            if !believable {
                *value = Value::from(0u64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_figures),
        Value::Object(map) => map.values_mut().for_each(clean_figures),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// `x` when it is a finite number in `range`; none otherwise.
fn within(x: Option<f64>, range: std::ops::RangeInclusive<f64>) -> Option<f64> {
    x.filter(|v| range.contains(v))
}

impl HostSnapshot {
    /// The snapshot with what no host could show taken for absent: memory
    /// sizes beyond [`MAX_MEMORY`], links faster than [`MAX_LINK_MBPS`],
    /// a cgroup's CPUs or a qdisc's settings that are no finite figure.
    /// Its names were cleaned in its JSON ([`clean_names`]).
    pub(crate) fn cleaned(mut self) -> Self {
        if self.meminfo.as_ref().is_some_and(|m| {
            [m.mem_total, m.cached, m.dirty, m.swap_total, m.swap_free]
                .into_iter()
                .chain(m.mem_available)
                .any(|v| v > MAX_MEMORY)
        }) {
            self.meminfo = None;
        }
        for nic in self.nics.values_mut() {
            nic.speed_mbps = nic.speed_mbps.filter(|s| *s <= MAX_LINK_MBPS);
        }
        for cgroup in [&mut self.server_cgroup, &mut self.perflab_cgroup]
            .into_iter()
            .flatten()
        {
            cgroup.cpus_allowed = within(cgroup.cpus_allowed, 0.0..=1e6);
            cgroup.cpu_quota_cpus = within(cgroup.cpu_quota_cpus, 0.0..=1e6);
            cgroup.memory_limit_bytes = cgroup.memory_limit_bytes.filter(|b| *b <= MAX_MEMORY);
            cgroup.memory_usage_bytes = cgroup.memory_usage_bytes.filter(|b| *b <= MAX_MEMORY);
            cgroup.memory_anon_bytes = cgroup.memory_anon_bytes.filter(|b| *b <= MAX_MEMORY);
            let high = &mut cgroup.more.memory_high_bytes;
            *high = high.filter(|b| *b <= MAX_MEMORY);
        }
        for qdisc in &mut self.qdiscs {
            qdisc.rate_bytes_per_s = within(qdisc.rate_bytes_per_s, 0.0..=MAX_RATE);
            qdisc.loss = within(qdisc.loss, 0.0..=1.0);
            qdisc.delay_s = within(qdisc.delay_s, 0.0..=1e6);
            if qdisc.backlog_bytes > MAX_MEMORY {
                qdisc.backlog_bytes = 0;
            }
        }
        self
    }
}

impl HostSample {
    /// A sample as an agent computed it, its figures already bounded
    /// ([`clean_figures`]), with its shares held to 0..=1 and its stall
    /// percentages to 0..=100.
    pub(crate) fn with_shares_bounded(mut self) -> Self {
        let cpu = |c: &mut CpuSample| {
            for share in [
                &mut c.user,
                &mut c.nice,
                &mut c.system,
                &mut c.irq,
                &mut c.softirq,
                &mut c.iowait,
                &mut c.steal,
                &mut c.idle,
            ] {
                *share = share.clamp(0.0, 1.0);
            }
        };
        self.cpu
            .iter_mut()
            .chain(self.cpus.iter_mut())
            .for_each(cpu);
        for disk in &mut self.disks {
            disk.busy = disk.busy.clamp(0.0, 1.0);
        }
        let p = &mut self.pressure;
        for stall in [
            &mut p.cpu_some,
            &mut p.memory_some,
            &mut p.memory_full,
            &mut p.io_some,
            &mut p.io_full,
        ] {
            *stall = stall.map(|v| v.clamp(0.0, 100.0));
        }
        self
    }
}
