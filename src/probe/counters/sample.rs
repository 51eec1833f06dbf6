//! A [`HostSample`]: what the host did between two snapshots, as rates and
//! shares. CPU shares are fractions of the time elapsed (per CPU, and in
//! total across CPUs); disk busy is io_ticks over the elapsed time; link
//! utilisation is bytes per second against the reported link speed.

use super::believe::{increase, per_second, MAX_INTERVAL};
use super::process::ProcessSample;
use super::snapshot::{HostSnapshot, NicCounters, PressureTotals};
use super::threads::ThreadStates;
use crate::probe::cgroup::CgroupSample;
use crate::probe::qdisc::QdiscSample;
use procfs_core::CpuTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Shares of CPU time by state, each in 0..=1.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuSample {
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    pub iowait: f64,
    pub steal: f64,
    pub idle: f64,
}

impl CpuSample {
    /// Busy share: everything but idle and iowait.
    pub fn busy(&self) -> f64 {
        (1.0 - self.idle - self.iowait).max(0.0)
    }

    /// `%ISR`: hardware and software interrupt handling.
    pub(crate) fn isr(&self) -> f64 {
        self.irq + self.softirq
    }

    /// The shares between two readings of CPU times.
    pub(crate) fn between(a: &CpuTime, b: &CpuTime) -> Option<Self> {
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let o = |x: Option<u64>, y: Option<u64>| d(x.unwrap_or(0), y.unwrap_or(0));
        let parts = [
            d(a.user, b.user),
            d(a.nice, b.nice),
            d(a.system, b.system),
            o(a.irq, b.irq),
            o(a.softirq, b.softirq),
            o(a.iowait, b.iowait),
            o(a.steal, b.steal),
            d(a.idle, b.idle),
        ];
        let total: f64 = parts.iter().sum();
        (total > 0.0).then(|| CpuSample {
            user: parts[0] / total,
            nice: parts[1] / total,
            system: parts[2] / total,
            irq: parts[3] / total,
            softirq: parts[4] / total,
            iowait: parts[5] / total,
            steal: parts[6] / total,
            idle: parts[7] / total,
        })
    }
}

/// Memory and paging.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MemorySample {
    pub total_bytes: u64,
    pub available_bytes: Option<u64>,
    pub cached_bytes: u64,
    pub dirty_bytes: u64,
    pub swap_used_bytes: u64,
    pub page_faults_per_s: Option<f64>,
    pub major_faults_per_s: Option<f64>,
    pub swap_in_per_s: Option<f64>,
    pub swap_out_per_s: Option<f64>,
    /// Pages scanned for reclaim (kswapd and direct), per second.
    pub pages_scanned_per_s: Option<f64>,
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DiskSample {
    pub name: String,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    /// Share of the time with I/O in flight (io_ticks).
    pub busy: f64,
    /// Average number of I/Os in flight (weighted io_ticks).
    pub queue: f64,
    /// Average time per completed I/O, ms (None when none completed).
    pub await_ms: Option<f64>,
    /// What a stacked disk hands its I/O to (loop, dm, md): disks, or
    /// `memory` for a file on tmpfs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lower: Vec<String>,
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NicSample {
    pub name: String,
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    /// Counts over the interval.
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_drops: u64,
    pub tx_drops: u64,
    pub collisions: u64,
    pub rx_crc_errors: Option<u64>,
    pub tx_window_errors: Option<u64>,
    pub carrier_changes: Option<u64>,
    pub speed_mbps: Option<u64>,
    pub duplex: Option<String>,
    /// Share of the link's speed used each way, when the speed is known.
    pub rx_utilisation: Option<f64>,
    pub tx_utilisation: Option<f64>,
}

/// TCP, per second or per interval.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpSample {
    pub segments_out_per_s: f64,
    pub retransmits_per_s: f64,
    /// Retransmission timeouts over the interval.
    pub timeouts: Option<u64>,
    pub listen_drops: Option<u64>,
    pub listen_overflows: Option<u64>,
}

/// Pressure stall information over one interval: the share of it in which
/// some (or all) non-idle tasks stalled, %, from the difference of the
/// kernel's `total=` stall counters (Documentation/accounting/psi.rst) —
/// the exact stalled time of this interval, not the 10 s decaying `avg10`
/// that carries a load's stalls into the quiet after it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PressureSample {
    pub(crate) cpu_some: Option<f64>,
    pub(crate) memory_some: Option<f64>,
    pub(crate) memory_full: Option<f64>,
    pub(crate) io_some: Option<f64>,
    pub(crate) io_full: Option<f64>,
}

/// The share of `seconds` that a stall counter grew by from `a` to `b`, %;
/// None without both readings or without an interval.
pub fn stall_percent(a: Option<u64>, b: Option<u64>, seconds: f64) -> Option<f64> {
    let (a, b) = a.zip(b)?;
    (seconds > 0.0).then(|| (b.saturating_sub(a) as f64 / 1e6 / seconds * 100.0).min(100.0))
}

impl PressureSample {
    /// The shares stalled between two readings `seconds` apart.
    pub(crate) fn between(a: &PressureTotals, b: &PressureTotals, seconds: f64) -> Self {
        PressureSample {
            cpu_some: stall_percent(a.cpu_some_us, b.cpu_some_us, seconds),
            memory_some: stall_percent(a.memory_some_us, b.memory_some_us, seconds),
            memory_full: stall_percent(a.memory_full_us, b.memory_full_us, seconds),
            io_some: stall_percent(a.io_some_us, b.io_some_us, seconds),
            io_full: stall_percent(a.io_full_us, b.io_full_us, seconds),
        }
    }
}

/// One interrupt source's rate on each CPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IrqSample {
    /// `NUMBER:DEVICE` or the kernel's name (`LOC`, `NMI`, …).
    pub source: String,
    /// Interrupts per second on CPU 0, 1, …
    pub per_cpu_per_s: Vec<f64>,
}

/// Length-weighted mean of `value` over the samples that have it.
pub fn weighted_mean(
    samples: &[&HostSample],
    value: impl Fn(&HostSample) -> Option<f64>,
) -> Option<f64> {
    let (sum, weight) = samples
        .iter()
        .filter_map(|s| value(s).map(|v| (v * s.seconds, s.seconds)))
        .fold((0.0, 0.0), |(a, b), (v, w)| (a + v, b + w));
    (weight > 0.0).then(|| sum / weight)
}

/// What the host did over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSample {
    /// Seconds between the two snapshots.
    pub seconds: f64,
    /// All CPUs together.
    pub cpu: Option<CpuSample>,
    /// Each CPU, in order.
    pub cpus: Vec<CpuSample>,
    pub context_switches_per_s: Option<f64>,
    pub interrupts_per_s: Option<f64>,
    /// Interrupt sources that fired during the interval, busiest first.
    pub irqs: Vec<IrqSample>,
    /// Runnable tasks at the end of the interval (run-queue length).
    pub procs_running: Option<u32>,
    pub memory: Option<MemorySample>,
    pub disks: Vec<DiskSample>,
    /// CPUs the kernel threads serving each stacked disk used (its loop
    /// worker, its journal, dm's and md's threads), by disk.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_io_cpus: BTreeMap<String, f64>,
    pub nics: Vec<NicSample>,
    pub tcp: Option<TcpSample>,
    pub pressure: PressureSample,
    /// The followed process groups (perflab itself, the server under test).
    pub processes: Vec<ProcessSample>,
    /// The cgroup the server under test runs in, when its processes are
    /// followed: the limits it is held to and how hard they bit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cgroup: Option<CgroupSample>,
    /// perflab's own cgroup: a disk or files run's I/O is perflab's, and
    /// so are the limits on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perflab_cgroup: Option<CgroupSample>,
    /// The queueing disciplines on the host's interfaces and on the
    /// server's, when it runs in a network namespace of its own: a shaped
    /// or lossy link shows here, not in the NIC's nominal speed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<QdiscSample>,
    /// The kernel groups each session for scheduling (autogroup): others'
    /// niced work in sessions of their own does not give way to the
    /// server's (see [`cpu_yielded`](Self::cpu_yielded)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autogroup: Option<bool>,
}

impl HostSample {
    /// The rates between two snapshots of the same host.
    pub fn between(a: &HostSnapshot, b: &HostSnapshot) -> Self {
        let seconds = b.at.saturating_duration_since(a.at).as_secs_f64();
        Self::between_over(a, b, seconds)
    }

    /// As [`between`](Self::between), with the elapsed time given (fixtures).
    pub fn between_over(a: &HostSnapshot, b: &HostSnapshot, seconds: f64) -> Self {
        // Under a millisecond (or no number) is no interval to take rates
        // over: a rate over it would be no finite number. Over 11 days is
        // no interval either (an agent's clock that leapt).
        let seconds = if (1e-3..=MAX_INTERVAL).contains(&seconds) {
            seconds
        } else {
            0.0
        };
        let rate = PerSecond(seconds);
        let (cpu, cpus, ctxt, procs_running) = match (&a.stat, &b.stat) {
            (Some(sa), Some(sb)) => (
                CpuSample::between(&sa.total, &sb.total),
                sa.cpu_time
                    .iter()
                    .zip(&sb.cpu_time)
                    .filter_map(|(x, y)| CpuSample::between(x, y))
                    .collect(),
                Some(rate.of(sa.ctxt, sb.ctxt)),
                sb.procs_running,
            ),
            _ => (None, Vec::new(), None, None),
        };
        HostSample {
            seconds,
            cpu,
            cpus,
            context_switches_per_s: ctxt,
            interrupts_per_s: a.interrupts.zip(b.interrupts).map(|(x, y)| rate.of(x, y)),
            irqs: IrqSample::all_between(&a.irqs, &b.irqs, rate),
            procs_running,
            memory: MemorySample::between(a, b, rate),
            disks: DiskSample::all_between(&a.disks, &b.disks, rate)
                .into_iter()
                .map(|mut d| {
                    d.lower = b.disk_lower.get(&d.name).cloned().unwrap_or_default();
                    d
                })
                .collect(),
            kernel_io_cpus: super::stack::worker_cpus(
                &a.kernel_workers,
                &b.kernel_workers,
                seconds,
                100.0,
            ),
            nics: NicSample::all_between(&a.nics, &b.nics, rate),
            tcp: TcpSample::between(&a.tcp, &b.tcp, rate),
            pressure: PressureSample::between(&a.pressure, &b.pressure, seconds),
            processes: b
                .processes
                .iter()
                .map(|(group, after)| {
                    let before = a
                        .processes
                        .iter()
                        .find(|(g, _)| g == group)
                        .map(|(_, c)| c.clone())
                        .unwrap_or_default();
                    let mut p = ProcessSample::between(&group.label, &before, after, seconds);
                    p.thread_states = a
                        .threads_of(&group.label)
                        .zip(b.threads_of(&group.label))
                        .and_then(|(a, b)| ThreadStates::between(a, b, seconds));
                    p
                })
                .collect(),
            server_cgroup: a
                .server_cgroup
                .as_ref()
                .zip(b.server_cgroup.as_ref())
                .map(|(x, y)| CgroupSample::between(x, y, seconds)),
            perflab_cgroup: a
                .perflab_cgroup
                .as_ref()
                .zip(b.perflab_cgroup.as_ref())
                .map(|(x, y)| CgroupSample::between(x, y, seconds)),
            qdiscs: QdiscSample::all_between(&a.qdiscs, &b.qdiscs, seconds),
            autogroup: b.autogroup,
        }
    }

    /// The disk with the highest busy share (then the most bytes).
    pub(crate) fn busiest_disk(&self) -> Option<&DiskSample> {
        let bytes = |d: &DiskSample| d.read_bytes_per_s + d.write_bytes_per_s;
        self.disks.iter().max_by(|a, b| {
            a.busy
                .total_cmp(&b.busy)
                .then(bytes(a).total_cmp(&bytes(b)))
        })
    }

    /// The share of all CPUs' time that processes other than the followed
    /// groups ran at a nice value above 0. The host's counters are sampled
    /// at the timer tick, which lands on a busy loop far more often than on
    /// a server's short bursts; the groups' own CPU is measured exactly. So
    /// the share is at most what is busy beyond the groups' own CPU.
    /// Without a followed group every niced tick counts as others'.
    pub(crate) fn cpu_niced_by_others(&self) -> Option<f64> {
        let cpu = self.cpu?;
        let cpus = self.cpus.len().max(1) as f64;
        let own_niced: f64 = self.processes.iter().map(|p| p.cpu_niced).sum();
        let own: f64 = self.processes.iter().map(ProcessSample::cpu).sum();
        let beyond_own = (cpu.busy() - own / cpus).max(0.0);
        Some((cpu.nice - own_niced / cpus).clamp(0.0, beyond_own))
    }

    /// The share of others' niced work ([`cpu_niced_by_others`]) that
    /// gave way to the server and perflab: spare capacity to them, not a
    /// busy CPU, since the scheduler weighs nice 19 at 15 against nice
    /// 0's 1024. None of it where the kernel groups each session for
    /// scheduling (autogroup): a session weighs as much as any other
    /// whatever its nice values, and the server, started in a session of
    /// its own, gets no more than its share against a niced loop in
    /// another (measured here: 137 ticks to the nice-19 loop, 151 to the
    /// nice-0 one on one CPU; 1 to 285 in one session).
    ///
    /// [`cpu_niced_by_others`]: Self::cpu_niced_by_others
    pub(crate) fn cpu_yielded(&self) -> Option<f64> {
        let niced = self.cpu_niced_by_others()?;
        Some(if self.autogroup == Some(true) {
            0.0
        } else {
            niced
        })
    }

    /// All CPUs' busy share less the time others yielded
    /// ([`cpu_yielded`](Self::cpu_yielded)): how much of the host's CPU the
    /// server and perflab could not have had.
    pub(crate) fn cpu_taken(&self) -> Option<f64> {
        let cpu = self.cpu?;
        Some((cpu.busy() - self.cpu_yielded().unwrap_or(0.0)).max(0.0))
    }

    /// CPU `index`'s busy share less its part of the yielded time (its
    /// niced time, in the proportion others' niced time bears to all).
    pub(crate) fn cpu_taken_of(&self, index: usize) -> Option<f64> {
        let one = self.cpus.get(index)?;
        let others = match (self.cpu, self.cpu_yielded()) {
            (Some(all), Some(yielded)) if all.nice > 0.0 => (yielded / all.nice).min(1.0),
            _ => 0.0,
        };
        Some((one.busy() - one.nice * others).max(0.0))
    }

    /// Bytes per second over every interface but loopback, both ways.
    pub(crate) fn network_bytes_per_s(&self) -> f64 {
        self.nics
            .iter()
            .filter(|n| n.name != "lo")
            .map(|n| n.rx_bytes_per_s + n.tx_bytes_per_s)
            .sum()
    }
}

/// The time between two snapshots, turning counter increases into rates.
#[derive(Debug, Clone, Copy)]
struct PerSecond(f64);

impl PerSecond {
    /// The increase from `x` to `y` per second (0 over no time; a counter
    /// that went backwards, reset, or leapt beyond belief counts as no
    /// increase: see [`increase`]).
    fn of(self, x: u64, y: u64) -> f64 {
        per_second(self.count(x, y), self.0)
    }

    /// The increase from `x` to `y` over the interval ([`increase`]).
    fn count(self, x: u64, y: u64) -> u64 {
        increase(x, y, self.0)
    }

    /// The increase from `x` to `y`, each `unit` bytes, in bytes per second.
    fn bytes(self, x: u64, y: u64, unit: u64) -> f64 {
        per_second(self.count(x, y).saturating_mul(unit), self.0)
    }
}

impl IrqSample {
    /// The sources that interrupted between two readings of
    /// /proc/interrupts, busiest first.
    fn all_between(
        a: &BTreeMap<String, Vec<u64>>,
        b: &BTreeMap<String, Vec<u64>>,
        rate: PerSecond,
    ) -> Vec<Self> {
        let mut irqs: Vec<IrqSample> = b
            .iter()
            .filter_map(|(source, after)| {
                let before = a.get(source)?;
                let per_cpu_per_s: Vec<f64> = before
                    .iter()
                    .zip(after)
                    .map(|(x, y)| rate.of(*x, *y))
                    .collect();
                (per_cpu_per_s.iter().sum::<f64>() > 0.0).then(|| IrqSample {
                    source: source.clone(),
                    per_cpu_per_s,
                })
            })
            .collect();
        let total = |s: &IrqSample| s.per_cpu_per_s.iter().sum::<f64>();
        irqs.sort_by(|x, y| total(y).total_cmp(&total(x)));
        irqs
    }
}

/// The /proc/vmstat counters [`MemorySample`] reads: all a snapshot keeps.
pub(super) const VMSTAT_KEYS: [&str; 6] = [
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    "pgscan_kswapd",
    "pgscan_direct",
];

impl MemorySample {
    /// Memory as `b` found it, with paging rates from both snapshots'
    /// /proc/vmstat.
    fn between(a: &HostSnapshot, b: &HostSnapshot, rate: PerSecond) -> Option<Self> {
        let m = b.meminfo.as_ref()?;
        let vm = |key: &str| {
            a.vmstat
                .as_ref()
                .zip(b.vmstat.as_ref())
                .and_then(|(va, vb)| {
                    // A counter below zero is no counter (nor a huge one).
                    let read = |v: &BTreeMap<String, i64>| u64::try_from(*v.get(key)?).ok();
                    Some(rate.of(read(va)?, read(vb)?))
                })
        };
        let scanned = ["pgscan_kswapd", "pgscan_direct"]
            .iter()
            .map(|k| vm(k))
            .try_fold(0.0, |acc, v| v.map(|v| acc + v));
        Some(MemorySample {
            total_bytes: m.mem_total,
            available_bytes: m.mem_available,
            cached_bytes: m.cached,
            dirty_bytes: m.dirty,
            swap_used_bytes: m.swap_total.saturating_sub(m.swap_free),
            page_faults_per_s: vm("pgfault"),
            major_faults_per_s: vm("pgmajfault"),
            swap_in_per_s: vm("pswpin"),
            swap_out_per_s: vm("pswpout"),
            pages_scanned_per_s: scanned,
        })
    }
}

impl DiskSample {
    /// Each disk of `b` also in `a`: its rates, busy share (io_ticks over
    /// the elapsed milliseconds), queue and mean wait.
    fn all_between(
        a: &[procfs_core::DiskStat],
        b: &[procfs_core::DiskStat],
        rate: PerSecond,
    ) -> Vec<Self> {
        let ms = rate.0 * 1000.0;
        b.iter()
            .filter_map(|db| {
                let da = a.iter().find(|d| d.name == db.name)?;
                let ios = rate
                    .count(da.reads, db.reads)
                    .saturating_add(rate.count(da.writes, db.writes));
                let io_ms = rate
                    .count(da.time_reading, db.time_reading)
                    .saturating_add(rate.count(da.time_writing, db.time_writing));
                Some(DiskSample {
                    name: db.name.clone(),
                    reads_per_s: rate.of(da.reads, db.reads),
                    writes_per_s: rate.of(da.writes, db.writes),
                    read_bytes_per_s: rate.bytes(da.sectors_read, db.sectors_read, 512),
                    write_bytes_per_s: rate.bytes(da.sectors_written, db.sectors_written, 512),
                    busy: if ms > 0.0 {
                        (rate.count(da.time_in_progress, db.time_in_progress) as f64 / ms).min(1.0)
                    } else {
                        0.0
                    },
                    queue: if ms > 0.0 {
                        rate.count(da.weighted_time_in_progress, db.weighted_time_in_progress)
                            as f64
                            / ms
                    } else {
                        0.0
                    },
                    await_ms: (ios > 0).then(|| io_ms as f64 / ios as f64),
                    lower: Vec::new(),
                })
            })
            .collect()
    }
}

impl NicSample {
    /// Each interface of `b` also in `a`: its rates, error counts and
    /// utilisation against the link speed it reports.
    fn all_between(
        a: &BTreeMap<String, NicCounters>,
        b: &BTreeMap<String, NicCounters>,
        rate: PerSecond,
    ) -> Vec<Self> {
        b.iter()
            .filter_map(|(name, nb)| {
                let na = a.get(name)?;
                let (x, y) = (&na.dev, &nb.dev);
                let count = |p: u64, q: u64| rate.count(p, q);
                let opt = |p: Option<u64>, q: Option<u64>| p.zip(q).map(|(p, q)| count(p, q));
                let rx = rate.of(x.recv_bytes, y.recv_bytes);
                let tx = rate.of(x.sent_bytes, y.sent_bytes);
                // A link of no speed has no utilisation (not an infinite one).
                let capacity = nb
                    .speed_mbps
                    .filter(|s| *s > 0)
                    .map(|s| s as f64 * 1e6 / 8.0);
                Some(NicSample {
                    name: name.clone(),
                    rx_bytes_per_s: rx,
                    tx_bytes_per_s: tx,
                    rx_packets_per_s: rate.of(x.recv_packets, y.recv_packets),
                    tx_packets_per_s: rate.of(x.sent_packets, y.sent_packets),
                    rx_errors: count(x.recv_errs, y.recv_errs),
                    tx_errors: count(x.sent_errs, y.sent_errs),
                    rx_drops: count(x.recv_drop, y.recv_drop),
                    tx_drops: count(x.sent_drop, y.sent_drop),
                    collisions: count(x.sent_colls, y.sent_colls),
                    rx_crc_errors: opt(na.rx_crc_errors, nb.rx_crc_errors),
                    tx_window_errors: opt(na.tx_window_errors, nb.tx_window_errors),
                    carrier_changes: opt(na.carrier_changes, nb.carrier_changes),
                    speed_mbps: nb.speed_mbps,
                    duplex: nb.duplex.clone(),
                    rx_utilisation: capacity.map(|c| rx / c),
                    tx_utilisation: capacity.map(|c| tx / c),
                })
            })
            .collect()
    }
}

/// The `Tcp:` and `TcpExt:` counters [`TcpSample`] reads: all a snapshot keeps.
pub(super) const TCP_KEYS: [&str; 5] = [
    "OutSegs",
    "RetransSegs",
    "TCPTimeouts",
    "ListenDrops",
    "ListenOverflows",
];

impl TcpSample {
    /// TCP's rates and counts between two readings of /proc/net/snmp and
    /// /proc/net/netstat; none unless both have `OutSegs`.
    fn between(
        a: &BTreeMap<String, u64>,
        b: &BTreeMap<String, u64>,
        rate: PerSecond,
    ) -> Option<Self> {
        let tcp_count = |key: &str| Some(rate.count(*a.get(key)?, *b.get(key)?));
        let per_s = |key: &str| per_second(tcp_count(key).unwrap_or(0), rate.0);
        (a.contains_key("OutSegs") && b.contains_key("OutSegs")).then(|| TcpSample {
            segments_out_per_s: per_s("OutSegs"),
            retransmits_per_s: per_s("RetransSegs"),
            timeouts: tcp_count("TCPTimeouts"),
            listen_drops: tcp_count("ListenDrops"),
            listen_overflows: tcp_count("ListenOverflows"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(user: f64, nice: f64) -> CpuSample {
        CpuSample {
            user,
            nice,
            idle: 1.0 - user - nice,
            ..CpuSample::default()
        }
    }

    /// A host of these CPUs (all of them, their mean) whose server used
    /// `user` of a CPU, `niced` of it at a nice value above 0.
    fn host(cpus: Vec<CpuSample>, user: f64, niced: f64) -> HostSample {
        let n = cpus.len() as f64;
        let mean = |f: fn(&CpuSample) -> f64| cpus.iter().map(f).sum::<f64>() / n;
        HostSample {
            seconds: 1.0,
            cpu: Some(cpu(mean(|c| c.user), mean(|c| c.nice))),
            processes: vec![ProcessSample {
                label: "server".to_string(),
                cpu_user: user,
                cpu_niced: niced,
                ..ProcessSample::default()
            }],
            cpus,
            ..HostSample::default()
        }
    }

    /// Two CPUs: cpu0 all the server's, cpu1 all a nice-19 hog.
    fn hog_beside_server(server_niced: f64) -> HostSample {
        host(vec![cpu(1.0, 0.0), cpu(0.0, 1.0)], 1.0, server_niced)
    }

    #[test]
    fn others_niced_time_is_spare_capacity_not_busy() {
        let s = hog_beside_server(0.0);
        assert_eq!(s.cpu.map(|c| c.busy()), Some(1.0));
        assert_eq!(s.cpu_yielded(), Some(0.5));
        assert_eq!(s.cpu_taken(), Some(0.5));
        assert_eq!(s.cpu_taken_of(0), Some(1.0));
        assert_eq!(s.cpu_taken_of(1), Some(0.0));
        assert_eq!(s.cpu_taken_of(2), None);
    }

    /// With the kernel grouping each session (autogroup), a nice-19 loop
    /// in another session weighs as much as the server's session: its
    /// time is busy, not spare, and still counted as others' niced work.
    #[test]
    fn others_niced_time_under_autogroup_is_busy() {
        let s = HostSample {
            autogroup: Some(true),
            ..hog_beside_server(0.0)
        };
        assert_eq!(s.cpu_niced_by_others(), Some(0.5));
        assert_eq!(s.cpu_yielded(), Some(0.0));
        assert_eq!(s.cpu_taken(), Some(1.0));
        assert_eq!(s.cpu_taken_of(1), Some(1.0));
        let off = HostSample {
            autogroup: Some(false),
            ..hog_beside_server(0.0)
        };
        assert_eq!(off.cpu_yielded(), Some(0.5));
    }

    #[test]
    fn a_followed_groups_own_niced_time_stays_busy() {
        // Half of the niced CPU is the server's own (it runs at nice 5).
        let s = hog_beside_server(0.5);
        assert_eq!(s.cpu_yielded(), Some(0.25));
        assert_eq!(s.cpu_taken(), Some(0.75));
        assert_eq!(s.cpu_taken_of(1), Some(0.5));
    }

    /// Ticks gave the hogs 98% of the host while the server's own
    /// counters show it used 0.3 CPU: the yielded share is what is left.
    #[test]
    fn the_groups_exact_cpu_bounds_what_ticks_give_to_others() {
        let s = host(vec![cpu(0.02, 0.98), cpu(0.02, 0.98)], 0.3, 0.0);
        let yielded = s.cpu_yielded().unwrap();
        assert!((yielded - 0.85).abs() < 1e-9, "{yielded}");
        assert!((s.cpu_taken().unwrap() - 0.15).abs() < 1e-9);
        let one = s.cpu_taken_of(0).unwrap();
        assert!((one - 0.15).abs() < 1e-9, "{one}");
    }

    #[test]
    fn a_host_without_niced_work_is_as_busy_as_it_was() {
        let s = HostSample {
            cpu: Some(cpu(0.7, 0.0)),
            cpus: vec![cpu(0.7, 0.0)],
            ..HostSample::default()
        };
        assert_eq!(s.cpu_yielded(), Some(0.0));
        assert_eq!(s.cpu_taken(), s.cpu.map(|c| c.busy()));
        assert_eq!(s.cpu_taken_of(0), Some(0.7));
        assert_eq!(HostSample::default().cpu_taken(), None);
    }
}
