//! One point per step: the figures the analysis works on, read off a
//! stored step — load, throughput, response time, think time, the share of
//! slow operations, the throughput of each interval, the server host's
//! resources (utilisation, saturation, errors), the generator's own CPU
//! against what it was allowed, and the database's wait classes.

use crate::engine::{StepResult, StepStatus};
use crate::measure::{LatencySummary, Phase, StepSummary};
use crate::plan::Level;
use crate::probe::counters::{weighted_mean, HostSample};
use crate::report::HostSource;
use serde::Serialize;
use std::collections::BTreeMap;

/// What kind of resource: it decides the law applied to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// All CPUs of the host together (a multi-server centre).
    Cpu,
    /// One CPU (a server confined to it shows here first).
    OneCpu,
    Disk,
    Link,
}

/// One resource's use over a step's measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceUse {
    /// `cpu`, `cpu0`, `disk vda`, `link eth0 tx`.
    pub name: String,
    pub kind: ResourceKind,
    /// Servers of the centre: CPUs for `cpu`, else 1.
    pub servers: f64,
    /// Busy share per server, 0..1.
    pub utilisation: f64,
    /// A saturation figure and its name (run queue, disk queue).
    pub saturation: Option<(String, f64)>,
    /// An error count over the window and its name (link errors).
    pub errors: Option<(String, f64)>,
}

/// The generator's own CPU over a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct GeneratorUse {
    /// CPUs perflab used.
    pub cpus: f64,
    /// CPUs it could have used, when known.
    pub capacity: Option<f64>,
    /// Share of the step its cgroup's quota held it back.
    pub throttled_share: Option<f64>,
    /// Open loop: 99th percentile of dispatch lateness, seconds.
    pub lag_p99_s: Option<f64>,
}

/// Host-wide figures that are not a single resource's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct HostExtras {
    pub retransmits_per_s: Option<f64>,
    pub segments_out_per_s: Option<f64>,
    pub tcp_timeouts: Option<f64>,
    pub major_faults_per_s: Option<f64>,
    pub swap_in_per_s: Option<f64>,
    pub pages_scanned_per_s: Option<f64>,
    pub run_queue: Option<f64>,
    pub cpu_isr: Option<f64>,
    /// Shares of all CPUs' time in user mode (with nice), in the kernel
    /// (system) and waiting on I/O.
    pub cpu_user: Option<f64>,
    pub cpu_system: Option<f64>,
    pub cpu_iowait: Option<f64>,
    /// The server under test's processes, in CPUs, when followed.
    pub server_cpus: Option<f64>,
    /// CPUs the host's own processes kept busy (busy share less steal,
    /// which went to other guests, × CPUs).
    pub busy_cpus: Option<f64>,
    /// Share of CPU time the hypervisor gave to other guests.
    pub steal: Option<f64>,
}

/// What the analysis knows of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPoint {
    pub index: usize,
    pub level: Level,
    /// Users, or arrivals per second.
    pub load: f64,
    /// The step ran its whole window and did not fail.
    pub complete: bool,
    /// Operations served per second.
    pub throughput: f64,
    pub completed: u64,
    pub error_rate: f64,
    pub retries: u64,
    pub response: LatencySummary,
    /// Shares of operations whose response took over 200 ms and over 1 s.
    pub over_200ms: f64,
    pub over_1s: f64,
    /// Share of operations slower than ten times the 90th percentile: a
    /// group apart from the body of the distribution.
    pub far_tail: f64,
    /// Mean think time, seconds (closed loop).
    pub think_s: f64,
    /// Throughput of each measured interval.
    pub interval_throughputs: Vec<f64>,
    /// The server host's resources.
    pub resources: Vec<ResourceUse>,
    pub extras: HostExtras,
    pub generator: GeneratorUse,
    /// Database sessions seen in each wait class over the window.
    pub waits: BTreeMap<String, u64>,
}

impl StepPoint {
    /// Mean response time, seconds.
    pub fn response_s(&self) -> f64 {
        self.response.mean.as_secs_f64()
    }

    /// A resource by name.
    pub fn resource(&self, name: &str) -> Option<&ResourceUse> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// Reads a stored step; the server host's resources come from `source`.
    pub fn of(step: &StepResult, source: HostSource<'_>) -> Self {
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
            .map(|i| i.tally.all_ops().completed() as f64 / i.length.as_secs_f64())
            .collect();
        let samples: Vec<&HostSample> = measured_intervals
            .iter()
            .filter_map(|i| source.sample(i))
            .collect();
        let mut waits = BTreeMap::new();
        for db in measured_intervals.iter().filter_map(|i| i.db.as_ref()) {
            for (k, v) in &db.waits {
                *waits.entry(k.clone()).or_insert(0) += v;
            }
        }
        let wall = step.usage.wall.as_secs_f64();
        let generator = GeneratorUse {
            cpus: step.usage.cpu_share(),
            capacity: step.usage.cpu_capacity,
            throttled_share: step
                .usage
                .throttled
                .filter(|_| wall > 0.0)
                .map(|t| t.as_secs_f64() / wall),
            lag_p99_s: matches!(step.level, Level::Rate(_)).then(|| summary.lag.p99.as_secs_f64()),
        };
        StepPoint {
            index: step.index,
            level: step.level,
            load: step.level.value(),
            complete: step.status == StepStatus::Ok,
            throughput: summary.throughput,
            completed: summary.completed,
            error_rate: summary.error_rate,
            retries: summary.retries,
            response: summary.response,
            over_200ms: share_over(200_000),
            over_1s: share_over(1_000_000),
            far_tail: share_over(
                summary
                    .response
                    .p90
                    .as_micros()
                    .saturating_mul(10)
                    .min(u128::from(u64::MAX)) as u64,
            ),
            think_s: summary.mean_think.as_secs_f64(),
            interval_throughputs,
            resources: resources(&samples),
            extras: extras(&samples),
            generator,
            waits,
        }
    }
}

/// Every resource the samples show, with its mean use.
fn resources(samples: &[&HostSample]) -> Vec<ResourceUse> {
    let mut out = Vec::new();
    let Some(first) = samples.first() else {
        return out;
    };
    let cpus = first.cpus.len();
    if let Some(busy) = weighted_mean(samples, |s| s.cpu.map(|c| c.busy())) {
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
            if let Some(busy) = weighted_mean(samples, |s| s.cpus.get(index).map(|c| c.busy())) {
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

fn extras(samples: &[&HostSample]) -> HostExtras {
    HostExtras {
        retransmits_per_s: weighted_mean(samples, |s| s.tcp.map(|t| t.retransmits_per_s)),
        segments_out_per_s: weighted_mean(samples, |s| s.tcp.map(|t| t.segments_out_per_s)),
        tcp_timeouts: {
            let v: Vec<u64> = samples
                .iter()
                .filter_map(|s| s.tcp.and_then(|t| t.timeouts))
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64)
        },
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
        server_cpus: weighted_mean(samples, |s| {
            s.processes
                .iter()
                .find(|p| p.label == "server")
                .map(|p| p.cpu())
        }),
        busy_cpus: weighted_mean(samples, |s| {
            s.cpu
                .map(|c| (c.busy() - c.steal).max(0.0) * s.cpus.len() as f64)
        }),
        steal: weighted_mean(samples, |s| s.cpu.map(|c| c.steal)),
    }
}
