//! One point per step: the figures the analysis works on, read off a
//! stored step — load, throughput, response time, think time, the share of
//! slow operations, the throughput of each interval, the server host's
//! resources (utilisation, saturation, errors), the generator's own CPU
//! against what it was allowed, the limits of the server's cgroup and the
//! shaping of its links, and the database's waits and counters.

use super::host::HostSource;
use crate::engine::StepResult;
use crate::measure::{LatencySummary, Phase, StepSummary};
use crate::plan::Level;
use crate::probe::counters::{weighted_mean, HostSample};
use crate::units::{Rate, RateUnit};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// What kind of resource: it decides the law applied to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ResourceKind {
    /// All CPUs of the host together (a multi-server centre).
    Cpu,
    /// One CPU (a server confined to it shows here first).
    OneCpu,
    Disk,
    Link,
    /// The CPU quota of the server's cgroup: `servers` is the quota in
    /// CPUs, utilisation the share of it used.
    CpuQuota,
}

impl ResourceKind {
    /// CPU time, whichever way it is counted (the host's CPUs, one CPU, a
    /// quota): the same seconds, never to be added up.
    pub(crate) fn is_cpu(self) -> bool {
        matches!(
            self,
            ResourceKind::Cpu | ResourceKind::OneCpu | ResourceKind::CpuQuota
        )
    }
}

/// One resource's use over a step's measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ResourceUse {
    /// `cpu`, `cpu0`, `disk vda`, `link eth0 tx`.
    pub(crate) name: String,
    pub(crate) kind: ResourceKind,
    /// Servers of the centre: CPUs for `cpu`, else 1.
    pub(crate) servers: f64,
    /// Busy share per server, 0..1.
    pub(crate) utilisation: f64,
    /// A saturation figure and its name (run queue, disk queue).
    pub(crate) saturation: Option<(String, f64)>,
    /// An error count over the window and its name (link errors).
    pub(crate) errors: Option<(String, f64)>,
}

/// The generator's own CPU over a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub(crate) struct GeneratorUse {
    /// CPUs perflab used.
    pub(crate) cpus: f64,
    /// CPUs it could have used, when known.
    pub(crate) capacity: Option<f64>,
    /// Share of the step its cgroup's quota held it back.
    pub(crate) throttled_share: Option<f64>,
    /// Open loop: 99th percentile of dispatch lateness, seconds.
    pub(crate) lag_p99_s: Option<f64>,
    /// Of `cpus`, those in user mode and in the kernel (system time),
    /// when the step kept them apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_cpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) system_cpus: Option<f64>,
}

/// Host-wide figures that are not a single resource's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub(crate) struct HostExtras {
    pub(crate) retransmits_per_s: Option<f64>,
    pub(crate) segments_out_per_s: Option<f64>,
    pub(crate) tcp_timeouts: Option<f64>,
    /// Connections a full listen (accept) queue on the host turned away
    /// over the step: each waits for the client's SYN retransmit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) listen_overflows: Option<f64>,
    pub(crate) major_faults_per_s: Option<f64>,
    pub(crate) swap_in_per_s: Option<f64>,
    pub(crate) pages_scanned_per_s: Option<f64>,
    pub(crate) run_queue: Option<f64>,
    pub(crate) cpu_isr: Option<f64>,
    /// Shares of all CPUs' time in user mode (with nice), in the kernel
    /// (system) and waiting on I/O.
    pub(crate) cpu_user: Option<f64>,
    pub(crate) cpu_system: Option<f64>,
    pub(crate) cpu_iowait: Option<f64>,
    /// The server under test's processes, in CPUs, when followed.
    pub(crate) server_cpus: Option<f64>,
    /// CPUs the origin's processes used, when perflab runs the origin
    /// behind a caching accelerator.
    pub(crate) origin_cpus: Option<f64>,
    /// CPUs the host's own processes kept busy (busy share less steal,
    /// which went to other guests, and less the niced time others yielded
    /// to the server and perflab, × CPUs).
    pub(crate) busy_cpus: Option<f64>,
    /// Of `busy_cpus`, those that served interrupts (hard and soft): no
    /// process's time, the run's own I/O and packets among them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) isr_cpus: Option<f64>,
    /// CPUs that other processes ran at a nice value above 0: spare
    /// capacity to the server, not counted in `busy_cpus`.
    pub(crate) yielded_cpus: Option<f64>,
    /// CPUs that other processes ran at a nice value above 0 while the
    /// kernel grouped each session for scheduling (autogroup): work that
    /// did not give way, counted in `busy_cpus`.
    pub(crate) niced_unyielded_cpus: Option<f64>,
    /// Seconds per second the server's threads were runnable but waited
    /// for a CPU (schedstat run delay), when followed.
    pub(crate) server_run_delay: Option<f64>,
    /// Seconds per second perflab's own threads were runnable but waited
    /// for a CPU (its schedstat run delay, summed over its threads).
    pub(crate) perflab_run_delay: Option<f64>,
    /// The CPU of the server's busiest single-threaded process, as a
    /// share of one CPU, when followed.
    pub(crate) server_single_thread: Option<f64>,
    /// Share of CPU time the hypervisor gave to other guests.
    pub(crate) steal: Option<f64>,
    /// The server's own reads from storage, bytes per second, and its
    /// major page faults per second.
    pub(crate) server_read_bytes_per_s: Option<f64>,
    /// Bytes per second the server's processes and perflab's read from
    /// and wrote to storage (`/proc/PID/io`), each when followed.
    pub(crate) server_io_bytes_per_s: Option<f64>,
    pub(crate) perflab_io_bytes_per_s: Option<f64>,
    pub(crate) server_major_faults_per_s: Option<f64>,
    /// The server's cgroup: memory limit, memory charged, times the limit
    /// was hit over the step, share of time stalled on memory.
    pub(crate) memory_limit_bytes: Option<f64>,
    pub(crate) memory_usage_bytes: Option<f64>,
    /// Of the memory charged, the processes' own (anonymous), which no
    /// cache can use.
    pub(crate) memory_anon_bytes: Option<f64>,
    pub(crate) memory_limit_hits: Option<f64>,
    pub(crate) memory_stall_share: Option<f64>,
    /// The host's memory pressure (PSI `some`, the stalled share of each
    /// interval), a share.
    pub(crate) memory_pressure: Option<f64>,
    /// The server's cgroup CPU quota in CPUs, the share of periods it was
    /// throttled, and the CPUs its cpuset or affinity allow.
    pub(crate) cpu_quota_cpus: Option<f64>,
    pub(crate) quota_throttled_share: Option<f64>,
    pub(crate) server_cpus_allowed: Option<f64>,
    /// The highest loss a queueing discipline on the server's path drops
    /// on purpose (netem), a share.
    pub(crate) qdisc_loss: Option<f64>,
}

/// What the analysis knows of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StepPoint {
    pub(crate) index: usize,
    pub(crate) level: Level,
    /// Users, or arrivals per second.
    pub(crate) load: f64,
    /// The step ran its whole window and did not fail.
    pub(crate) complete: bool,
    /// Operations served per second.
    pub(crate) throughput: f64,
    /// What the throughput counts (transactions, requests, I/Os,
    /// operations): every rate of operations said of this point names it.
    pub(crate) unit: RateUnit,
    pub(crate) completed: u64,
    pub(crate) error_rate: f64,
    pub(crate) retries: u64,
    pub(crate) response: LatencySummary,
    /// Seconds users spent in operations that failed, over the window
    /// (failed operations keep no latency; Little's law counts their
    /// time). Zero in runs stored before it was kept.
    #[serde(skip)]
    pub(crate) failed_s: f64,
    /// Shares of operations whose response took over 200 ms and over 1 s.
    pub(crate) over_200ms: f64,
    pub(crate) over_1s: f64,
    /// Seconds the users spent in operations over 1 s: those served, and
    /// those still in flight at the window's end (their time so far).
    #[serde(skip)]
    pub(crate) held_over_1s_s: f64,
    /// Share of operations slower than ten times the 90th percentile: a
    /// group apart from the body of the distribution.
    pub(crate) far_tail: f64,
    /// A group of responses separated from the body by an empty stretch
    /// of the histogram, whatever its share.
    pub(crate) slow_group: Option<SlowGroup>,
    /// Mean think time, seconds (closed loop).
    pub(crate) think_s: f64,
    /// Throughput of each measured interval.
    pub(crate) interval_throughputs: Vec<f64>,
    /// The server host's resources.
    pub(crate) resources: Vec<ResourceUse>,
    pub(crate) extras: HostExtras,
    pub(crate) generator: GeneratorUse,
    /// On generators: the one whose use `generator` is (the busiest).
    pub(crate) busiest_generator: Option<String>,
    /// Database sessions seen in each wait (`Type:Event`, or a stored
    /// type alone) over the window.
    pub(crate) waits: BTreeMap<String, u64>,
    /// Each disk's mean time per completed I/O (await), seconds.
    pub(crate) disk_await_s: BTreeMap<String, f64>,
    /// Each disk's completed I/Os per second, reads and writes.
    pub(crate) disk_iops: BTreeMap<String, f64>,
    /// Each disk's bytes per second, read and written.
    pub(crate) disk_bytes_per_s: BTreeMap<String, f64>,
    /// The database's counters summed over the window (commits,
    /// blocks_hit, blocks_read, row_lock_waits, …).
    pub(crate) db: BTreeMap<String, f64>,
    /// What the step's I/O passed through: cgroup I/O limits, I/O
    /// pressure, stacked disks and their kernel threads' CPU.
    pub(crate) io_path: super::iopath::IoPath,
    /// Where the server's and perflab's threads spent the window.
    #[serde(skip_serializing_if = "super::threads::StepThreads::is_empty")]
    pub(crate) threads: super::threads::StepThreads,
}

/// Responses apart from the body of the distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct SlowGroup {
    /// Share of the step's operations in the group.
    pub(crate) share: f64,
    /// Where the group starts and its median, seconds.
    pub(crate) from_s: f64,
    pub(crate) median_s: f64,
}

impl StepPoint {
    /// `x` operations per second, in this point's unit: `1250 tps`.
    pub(crate) fn rate(&self, x: f64) -> Rate {
        Rate(x, self.unit)
    }

    /// Mean response time, seconds.
    pub(crate) fn response_s(&self) -> f64 {
        self.response.mean.as_secs_f64()
    }

    /// How long the server's threads waited for a CPU per operation
    /// (schedstat run delay over throughput), and that as a share of the
    /// mean response time. The delay is its serving threads' when their
    /// states were read (a background thread's wait is no operation's),
    /// and an operation's wait is part of its response, so never more
    /// than it: what the threads waited beyond that they waited between
    /// operations.
    pub(crate) fn run_delay_per_op(&self) -> Option<(Duration, f64)> {
        let serving = self
            .threads
            .server
            .as_ref()
            .map(|s| s.serving())
            .filter(|s| s.total() > 0.0)
            .map(|s| s.cpu_wait);
        let delay = serving.or(self.extras.server_run_delay)?;
        if self.throughput <= 0.0 {
            return None;
        }
        let response = self.response_s();
        let per_op = (delay / self.throughput).min(response);
        let share = if response > 0.0 {
            per_op / response
        } else {
            0.0
        };
        Some((Duration::try_from_secs_f64(per_op).ok()?, share))
    }

    /// A resource by name.
    pub(crate) fn resource(&self, name: &str) -> Option<&ResourceUse> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// Coefficient of variation of the step's throughput between its
    /// intervals: the step's own noise.
    pub(crate) fn interval_cv(&self) -> Option<f64> {
        (self.interval_throughputs.len() >= 2)
            .then(|| crate::engine::coefficient_of_variation(&self.interval_throughputs))
    }

    /// Operations attempted per second: served and failed.
    pub(crate) fn attempts_per_s(&self) -> f64 {
        if self.error_rate < 1.0 {
            self.throughput / (1.0 - self.error_rate)
        } else {
            self.throughput
        }
    }

    /// Reads a stored step; the server host's resources come from `source`.
    pub(crate) fn of(step: &StepResult, source: HostSource<'_>, unit: RateUnit) -> Self {
        let (tally, measured) = step.measured();
        let summary = StepSummary::of(&tally, measured);
        let all = tally.all_ops();
        let share_over = |micros: u64| {
            let n = all.response.len();
            if n == 0 {
                0.0
            } else {
                all.response
                    .count_between(micros + 1, all.response.max().max(micros + 1))
                    as f64
                    / n as f64
            }
        };
        let measured_intervals: Vec<_> = step
            .intervals
            .iter()
            .filter(|i| i.phase == Phase::Measured)
            .collect();
        let interval_throughputs = measured_intervals
            .iter()
            .filter(|i| i.length.as_secs_f64() > 0.0)
            .map(|i| i.tally.completed() as f64 / i.length.as_secs_f64())
            .collect();
        let samples: Vec<&HostSample> = measured_intervals
            .iter()
            .filter_map(|i| source.sample(i))
            .collect();
        let (waits, db_counters) = database_sums(&measured_intervals);
        let generator = GeneratorUse::of(step, &summary);
        StepPoint {
            index: step.index,
            level: step.level,
            load: step.level.value(),
            complete: step.status.ran_whole(),
            throughput: summary.throughput,
            unit,
            completed: summary.completed,
            error_rate: summary.error_rate,
            retries: summary.retries,
            response: summary.response,
            failed_s: all.failed_time.as_secs_f64(),
            over_200ms: share_over(200_000),
            over_1s: share_over(1_000_000),
            held_over_1s_s: time_over(&all.response, 1_000_000)
                + time_over(&tally.unfinished, 1_000_000),
            far_tail: share_over(
                summary
                    .response
                    .p90
                    .as_micros()
                    .saturating_mul(10)
                    .min(u128::from(u64::MAX)) as u64,
            ),
            slow_group: slow_group(&all.response),
            think_s: summary.mean_think.as_secs_f64(),
            interval_throughputs,
            resources: resources(&samples),
            extras: extras(&samples),
            generator,
            busiest_generator: step
                .generators
                .iter()
                .find(|g| g.usage == step.usage)
                .map(|g| g.generator.clone()),
            waits,
            db: db_counters,
            disk_await_s: per_disk(&samples, |d| d.await_ms.map(|ms| ms / 1e3)),
            disk_iops: per_disk(&samples, |d| Some(d.reads_per_s + d.writes_per_s)),
            disk_bytes_per_s: per_disk(&samples, |d| {
                Some(d.read_bytes_per_s + d.write_bytes_per_s)
            }),
            io_path: super::iopath::IoPath::of(&samples),
            threads: super::threads::StepThreads::of(&samples),
        }
    }
}

/// The database's wait samples and counter increases over the measured
/// intervals, summed (gauges, `now_…`, left out but for sizes — a cache's,
/// kept as `cache_max_bytes`, InnoDB's buffer pool's pages and page
/// (`buffer_pool_pages`, `page_bytes`), and each relation's — at the
/// largest the window saw).
fn database_sums(
    measured_intervals: &[&crate::engine::IntervalRecord],
) -> (BTreeMap<String, u64>, BTreeMap<String, f64>) {
    let mut waits = BTreeMap::new();
    let mut db_counters = BTreeMap::new();
    for db in measured_intervals.iter().filter_map(|i| i.db.as_ref()) {
        for (k, v) in &db.waits {
            *waits.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in db.counters.iter().filter(|(k, _)| !k.starts_with("now_")) {
            *db_counters.entry(k.clone()).or_insert(0.0) += v;
        }
        // Sizes are kept at the largest the window saw.
        for (k, v) in &db.counters {
            let kept = if let Some(size) = ["cache_max_bytes", "buffer_pool_pages", "page_bytes"]
                .iter()
                .find(|s| k.strip_prefix("now_") == Some(**s))
            {
                size.to_string()
            } else if let Some(name) = k.strip_prefix(crate::probe::RELATION_BYTES_NOW) {
                format!("{}{name}", crate::probe::RELATION_BYTES)
            } else {
                continue;
            };
            let kept = db_counters.entry(kept).or_insert(0.0);
            *kept = kept.max(*v);
        }
    }
    (waits, db_counters)
}

impl GeneratorUse {
    /// perflab's own CPU over a step, its allowance and throttling, and
    /// (open loop) how late it dispatched arrivals.
    fn of(step: &StepResult, summary: &StepSummary) -> Self {
        let wall = step.usage.wall.as_secs_f64();
        let (user, system) = (step.usage.cpu_user, step.usage.cpu_system);
        // A step stored before user and system time were kept has neither.
        let split = (wall > 0.0 && !(user + system).is_zero())
            .then(|| (user.as_secs_f64() / wall, system.as_secs_f64() / wall));
        GeneratorUse {
            user_cpus: split.map(|s| s.0),
            system_cpus: split.map(|s| s.1),
            cpus: step.usage.cpu_share(),
            capacity: step.usage.cpu_capacity,
            throttled_share: step
                .usage
                .throttled
                .filter(|_| wall > 0.0)
                .map(|t| t.as_secs_f64() / wall),
            lag_p99_s: matches!(step.level, Level::Rate(_)).then(|| summary.lag.p99.as_secs_f64()),
        }
    }
}

/// Every resource the samples show, with its mean use.
fn resources(samples: &[&HostSample]) -> Vec<ResourceUse> {
    let Some(first) = samples.first() else {
        return Vec::new();
    };
    let mut out = cpu_resources(samples, first.cpus.len());
    out.extend(disk_resources(samples));
    out.extend(link_resources(samples));
    out.extend(shaped_links(samples));
    out
}

/// The host's CPUs together, each CPU of several, and the server's cgroup
/// quota; `cpus` is how many the first sample shows.
fn cpu_resources(samples: &[&HostSample], cpus: usize) -> Vec<ResourceUse> {
    let mut out = Vec::new();
    if let Some(busy) = weighted_mean(samples, HostSample::cpu_taken) {
        out.push(ResourceUse {
            name: "cpu".to_string(),
            kind: ResourceKind::Cpu,
            servers: cpus.max(1) as f64,
            utilisation: busy,
            saturation: weighted_mean(samples, |s| s.procs_running.map(f64::from))
                .map(|q| ("run queue".to_string(), q)),
            errors: None,
        });
    }
    if cpus > 1 {
        for index in 0..cpus {
            if let Some(busy) = weighted_mean(samples, |s| s.cpu_taken_of(index)) {
                out.push(ResourceUse {
                    name: format!("cpu{index}"),
                    kind: ResourceKind::OneCpu,
                    servers: 1.0,
                    utilisation: busy,
                    saturation: None,
                    errors: None,
                });
            }
        }
    }
    if let Some(quota) = weighted_mean(samples, |s| s.server_cgroup.as_ref()?.cpu_quota_cpus) {
        if let Some(used) = weighted_mean(samples, |s| s.server_cgroup.as_ref()?.cpu_used_cpus) {
            out.push(ResourceUse {
                name: "cpu quota".to_string(),
                kind: ResourceKind::CpuQuota,
                servers: quota,
                utilisation: (used / quota.max(f64::MIN_POSITIVE)).min(1.0),
                saturation: weighted_mean(samples, |s| s.server_cgroup.as_ref()?.throttled_share)
                    .map(|t| ("throttled".to_string(), t)),
                errors: None,
            });
        }
    }
    out
}

/// Every disk any sample shows.
fn disk_resources(samples: &[&HostSample]) -> Vec<ResourceUse> {
    let mut out = Vec::new();
    let mut disks: Vec<&str> = samples
        .iter()
        .flat_map(|s| s.disks.iter().map(|d| d.name.as_str()))
        .collect();
    disks.sort_unstable();
    disks.dedup();
    for name in disks {
        let disk = |s: &HostSample| s.disks.iter().find(|d| d.name == name).cloned();
        let Some(busy) = weighted_mean(samples, |s| disk(s).map(|d| d.busy)) else {
            continue;
        };
        out.push(ResourceUse {
            name: format!("disk {name}"),
            kind: ResourceKind::Disk,
            servers: 1.0,
            utilisation: busy,
            saturation: weighted_mean(samples, |s| disk(s).map(|d| d.queue))
                .map(|q| ("queue".to_string(), q)),
            errors: None,
        });
    }
    out
}

/// Every interface but loopback, each direction against its link speed.
fn link_resources(samples: &[&HostSample]) -> Vec<ResourceUse> {
    let mut out = Vec::new();
    let mut nics: Vec<&str> = samples
        .iter()
        .flat_map(|s| s.nics.iter().map(|n| n.name.as_str()))
        .filter(|n| *n != "lo")
        .collect();
    nics.sort_unstable();
    nics.dedup();
    for name in nics {
        let nic = |s: &HostSample| s.nics.iter().find(|n| n.name == name).cloned();
        let errors: f64 = samples
            .iter()
            .filter_map(|s| nic(s))
            .map(|n| (n.rx_errors + n.tx_errors + n.collisions) as f64)
            .sum();
        for (dir, pick) in [
            (
                "rx",
                (|n: &crate::probe::counters::NicSample| n.rx_utilisation) as fn(&_) -> _,
            ),
            ("tx", |n| n.tx_utilisation),
        ] {
            if let Some(u) = weighted_mean(samples, |s| nic(s).and_then(|n| pick(&n))) {
                out.push(ResourceUse {
                    name: format!("link {name} {dir}"),
                    kind: ResourceKind::Link,
                    servers: 1.0,
                    utilisation: u,
                    saturation: None,
                    errors: Some(("errors and collisions".to_string(), errors)),
                });
            }
        }
    }
    out
}

/// Links shaped by a queueing discipline (tbf, htb): their capacity is the
/// shaper's rate, whatever speed the interface reports.
fn shaped_links(samples: &[&HostSample]) -> Vec<ResourceUse> {
    let mut keys: Vec<(String, String, String)> = samples
        .iter()
        .flat_map(|s| s.qdiscs.iter())
        .filter(|q| q.rate_bytes_per_s.is_some_and(|r| r > 0.0))
        .map(|q| (q.namespace.clone(), q.interface.clone(), q.kind.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|(ns, iface, kind)| {
            let find = |s: &HostSample| {
                s.qdiscs
                    .iter()
                    .find(|q| q.namespace == ns && q.interface == iface && q.kind == kind)
                    .cloned()
            };
            let u = weighted_mean(samples, |s| {
                let q = find(s)?;
                Some(q.bytes_per_s / q.rate_bytes_per_s?)
            })?;
            let overlimits: f64 = samples
                .iter()
                .filter_map(|s| find(s))
                .map(|q| q.overlimits as f64)
                .sum();
            let place = if ns == "host" {
                iface.clone()
            } else {
                format!("{iface} in the server's namespace")
            };
            Some(ResourceUse {
                name: format!("link {place} ({kind})"),
                kind: ResourceKind::Link,
                servers: 1.0,
                utilisation: u.min(1.0),
                saturation: weighted_mean(samples, |s| find(s).map(|q| q.backlog_bytes as f64))
                    .map(|b| ("backlog bytes".to_string(), b)),
                errors: Some(("overlimits".to_string(), overlimits)),
            })
        })
        .collect()
}

/// Seconds of the values over `micros` a microsecond histogram holds.
fn time_over(h: &hdrhistogram::Histogram<u64>, micros: u64) -> f64 {
    h.iter_recorded()
        .filter(|v| h.lowest_equivalent(v.value_iterated_to()) > micros)
        .map(|v| h.median_equivalent(v.value_iterated_to()) as f64 * v.count_at_value() as f64)
        .sum::<f64>()
        / 1e6
}

/// A group of responses apart from the body: above the median, a stretch
/// of at least a factor of four in latency with (next to) nothing in it,
/// and at least 0.2% of operations beyond it. A single-humped
/// distribution, however long its tail, has no such empty stretch; a
/// retransmission timeout or a stall puts its victims far beyond one.
pub(crate) fn slow_group(h: &hdrhistogram::Histogram<u64>) -> Option<SlowGroup> {
    let total = h.len();
    if total < 100 {
        return None;
    }
    let median = h.value_at_quantile(0.5).max(1);
    // Counts per doubling of latency, from the median up.
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    let mut low = median;
    while low <= h.max() {
        let high = low.saturating_mul(2);
        buckets.push((low, h.count_between(low + 1, high)));
        low = high;
    }
    let empty = (total as f64 * 1e-4).max(1.0) as u64;
    let mut run = 0;
    for (i, (low, n)) in buckets.iter().enumerate() {
        if *n <= empty {
            run += 1;
            continue;
        }
        if run >= 2 {
            let beyond: u64 = buckets[i..].iter().map(|b| b.1).sum();
            let share = beyond as f64 / total as f64;
            if share >= 0.002 {
                let from = *low;
                let median_s = h.value_at_quantile(1.0 - share / 2.0) as f64 / 1e6;
                return Some(SlowGroup {
                    share,
                    from_s: from as f64 / 1e6,
                    median_s,
                });
            }
        }
        run = 0;
    }
    None
}

/// A figure of each disk, its mean over the samples, by resource name.
fn per_disk(
    samples: &[&HostSample],
    figure: impl Fn(&crate::probe::counters::DiskSample) -> Option<f64>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for name in samples
        .iter()
        .flat_map(|s| s.disks.iter().map(|d| d.name.as_str()))
    {
        if out.contains_key(&format!("disk {name}")) {
            continue;
        }
        let disk = |s: &HostSample| figure(s.disks.iter().find(|d| d.name == name)?);
        if let Some(v) = weighted_mean(samples, disk) {
            out.insert(format!("disk {name}"), v);
        }
    }
    out
}

/// A process group's storage bytes per second, read and written.
fn io_bytes(p: &crate::probe::counters::process::ProcessSample) -> Option<f64> {
    Some(p.read_bytes_per_s? + p.write_bytes_per_s?)
}

/// The server under test's processes in a sample, when followed.
fn server(s: &HostSample) -> Option<&crate::probe::counters::process::ProcessSample> {
    labelled(s, "server")
}

/// The process group of a sample with `label`, when followed.
fn labelled<'a>(
    s: &'a HostSample,
    label: &str,
) -> Option<&'a crate::probe::counters::process::ProcessSample> {
    s.processes.iter().find(|p| p.label == label)
}

/// The sum of a count over the samples that have it; none when none has.
fn total(samples: &[&HostSample], pick: impl Fn(&HostSample) -> Option<u64>) -> Option<f64> {
    let v: Vec<u64> = samples.iter().filter_map(|s| pick(s)).collect();
    (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64)
}

fn extras(samples: &[&HostSample]) -> HostExtras {
    HostExtras {
        retransmits_per_s: weighted_mean(samples, |s| s.tcp.map(|t| t.retransmits_per_s)),
        segments_out_per_s: weighted_mean(samples, |s| s.tcp.map(|t| t.segments_out_per_s)),
        tcp_timeouts: total(samples, |s| s.tcp.and_then(|t| t.timeouts)),
        listen_overflows: total(samples, |s| s.tcp.and_then(|t| t.listen_overflows)),
        major_faults_per_s: weighted_mean(samples, |s| s.memory.and_then(|m| m.major_faults_per_s)),
        swap_in_per_s: weighted_mean(samples, |s| s.memory.and_then(|m| m.swap_in_per_s)),
        pages_scanned_per_s: weighted_mean(samples, |s| {
            s.memory.and_then(|m| m.pages_scanned_per_s)
        }),
        run_queue: weighted_mean(samples, |s| s.procs_running.map(f64::from)),
        cpu_isr: weighted_mean(samples, |s| s.cpu.map(|c| c.isr())),
        cpu_user: weighted_mean(samples, |s| s.cpu.map(|c| c.user + c.nice)),
        cpu_system: weighted_mean(samples, |s| s.cpu.map(|c| c.system)),
        cpu_iowait: weighted_mean(samples, |s| s.cpu.map(|c| c.iowait)),
        server_cpus: weighted_mean(samples, |s| server(s).map(|p| p.cpu())),
        busy_cpus: weighted_mean(samples, |s| {
            let steal = s.cpu?.steal;
            Some((s.cpu_taken()? - steal).max(0.0) * s.cpus.len() as f64)
        }),
        isr_cpus: weighted_mean(samples, |s| Some(s.cpu?.isr() * s.cpus.len() as f64)),
        yielded_cpus: weighted_mean(samples, |s| Some(s.cpu_yielded()? * s.cpus.len() as f64)),
        niced_unyielded_cpus: weighted_mean(samples, |s| {
            let unyielded = s.cpu_niced_by_others()? - s.cpu_yielded()?;
            Some(unyielded * s.cpus.len() as f64)
        }),
        steal: weighted_mean(samples, |s| s.cpu.map(|c| c.steal)),
        origin_cpus: weighted_mean(samples, |s| labelled(s, "origin").map(|p| p.cpu())),
        server_run_delay: weighted_mean(samples, |s| server(s)?.run_delay),
        perflab_run_delay: weighted_mean(samples, |s| labelled(s, "perflab")?.run_delay),
        server_single_thread: weighted_mean(samples, |s| server(s)?.busiest_single_thread),
        server_read_bytes_per_s: weighted_mean(samples, |s| server(s)?.read_bytes_per_s),
        server_io_bytes_per_s: weighted_mean(samples, |s| io_bytes(server(s)?)),
        perflab_io_bytes_per_s: weighted_mean(samples, |s| io_bytes(labelled(s, "perflab")?)),
        server_major_faults_per_s: weighted_mean(samples, |s| server(s)?.major_faults_per_s),
        memory_limit_bytes: weighted_mean(samples, |s| {
            s.server_cgroup
                .as_ref()?
                .memory_limit_bytes
                .map(|b| b as f64)
        }),
        memory_usage_bytes: weighted_mean(samples, |s| {
            s.server_cgroup
                .as_ref()?
                .memory_usage_bytes
                .map(|b| b as f64)
        }),
        memory_anon_bytes: weighted_mean(samples, |s| {
            s.server_cgroup
                .as_ref()?
                .memory_anon_bytes
                .map(|b| b as f64)
        }),
        memory_limit_hits: total(samples, |s| s.server_cgroup.as_ref()?.memory_limit_hits),
        memory_stall_share: weighted_mean(samples, |s| {
            s.server_cgroup.as_ref()?.memory_stall_share
        }),
        memory_pressure: weighted_mean(samples, |s| s.pressure.memory_some.map(|p| p / 100.0)),
        cpu_quota_cpus: weighted_mean(samples, |s| s.server_cgroup.as_ref()?.cpu_quota_cpus),
        quota_throttled_share: weighted_mean(samples, |s| {
            s.server_cgroup.as_ref()?.throttled_share
        }),
        server_cpus_allowed: weighted_mean(samples, |s| s.server_cgroup.as_ref()?.cpus_allowed),
        qdisc_loss: samples
            .iter()
            .flat_map(|s| s.qdiscs.iter().filter_map(|q| q.loss))
            .filter(|l| *l > 0.0)
            .max_by(f64::total_cmp),
    }
}

#[cfg(test)]
mod tests {
    use super::time_over;

    /// The time held in operations over 1 s is each one's own time, not
    /// a second each: a SYN retransmitted twice waited 3 s.
    #[test]
    fn the_time_over_a_second_is_each_operations_own() {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        h.record_n(2_000, 1_000).unwrap();
        h.record_n(1_000_000, 5).unwrap();
        h.record_n(1_030_000, 4).unwrap();
        h.record(3_100_000).unwrap();
        let held = time_over(&h, 1_000_000);
        assert!((held - (4.0 * 1.03 + 3.1)).abs() < 0.01, "{held}");
        assert_eq!(time_over(&h, 5_000_000), 0.0);
    }
}
