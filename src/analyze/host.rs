//! The server host's view of each step: whose samples stand for the
//! server's host (this host, or a remote probe's), and a step's host
//! figures over its measured window — CPU busy and `%ISR`, run queue,
//! context switches, the busiest disk, network throughput and link use, TCP
//! retransmissions, the server's and perflab's CPU — averaged over the
//! window's intervals, weighted by their length. The analysis reads them;
//! the reports draw them.

use crate::engine::{IntervalRecord, StepResult};
use crate::measure::Phase;
use crate::probe::counters::{weighted_mean as mean, HostSample};
use std::collections::BTreeMap;

/// A step's host figures over its measured window.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StepHost {
    pub(crate) cpu_busy: Option<f64>,
    pub(crate) cpu_isr: Option<f64>,
    pub(crate) run_queue: Option<f64>,
    pub(crate) context_switches_per_s: Option<f64>,
    /// The disk with the highest mean busy share, and that share.
    pub(crate) busiest_disk: Option<(String, f64)>,
    /// That disk's own figures.
    pub(crate) disk_figures: Option<DiskFigures>,
    /// Bytes per second over every interface but loopback.
    pub(crate) network_bytes_per_s: f64,
    /// The highest mean link utilisation of any direction of any interface.
    pub(crate) link_utilisation: Option<f64>,
    pub(crate) retransmits_per_s: Option<f64>,
    /// The server under test's CPU, as a share of one CPU.
    pub(crate) server_cpu: Option<f64>,
    /// The origin's CPU behind a caching accelerator, when perflab runs
    /// the origin, as a share of one CPU.
    pub(crate) origin_cpu: Option<f64>,
    /// perflab's own CPU, as a share of one CPU.
    pub(crate) perflab_cpu: Option<f64>,
    /// Measured intervals the source did not answer for.
    pub(crate) gaps: usize,
}

/// A disk's figures over a step, means of its samples.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct DiskFigures {
    pub(crate) reads_per_s: f64,
    pub(crate) writes_per_s: f64,
    /// Bytes read and written per second.
    pub(crate) bytes_per_s: f64,
    /// I/Os in flight on average (iostat's aqu-sz).
    pub(crate) queue: f64,
    /// Time per completed I/O, seconds.
    pub(crate) await_s: Option<f64>,
}

/// Whose samples: this host's, or a remote probe's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostSource<'a> {
    Local,
    Probe(&'a str),
}

impl HostSource<'_> {
    /// The interval's sample from this source; `None` when it has none.
    pub(crate) fn sample(self, interval: &IntervalRecord) -> Option<&HostSample> {
        match self {
            HostSource::Local => interval.host.as_ref(),
            HostSource::Probe(name) => interval
                .probes
                .iter()
                .find(|p| p.source == name)?
                .sample
                .as_ref(),
        }
    }
}

impl HostSource<'_> {
    /// True when the source was asked for this interval and did not answer.
    fn is_gap(self, interval: &IntervalRecord) -> bool {
        match self {
            HostSource::Local => false,
            HostSource::Probe(name) => interval
                .probes
                .iter()
                .any(|p| p.source == name && p.sample.is_none()),
        }
    }
}

/// The remote probes that sampled any of these steps, in order.
pub(crate) fn probe_sources(steps: &[StepResult]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for interval in steps.iter().flat_map(|s| &s.intervals) {
        for p in &interval.probes {
            if !out.contains(&p.source.as_str()) {
                out.push(&p.source);
            }
        }
    }
    out
}

impl StepHost {
    /// Summarises a step's measured samples from `source`; None when it
    /// has none.
    pub(crate) fn of(step: &StepResult, source: HostSource<'_>) -> Option<Self> {
        let measured: Vec<&IntervalRecord> = step
            .intervals
            .iter()
            .filter(|i| i.phase == Phase::Measured)
            .collect();
        let samples: Vec<&HostSample> = measured.iter().filter_map(|i| source.sample(i)).collect();
        let gaps = measured.iter().filter(|i| source.is_gap(i)).count();
        if samples.is_empty() && gaps == 0 {
            return None;
        }
        let mut disks: BTreeMap<&str, ()> = BTreeMap::new();
        for s in &samples {
            for d in &s.disks {
                disks.insert(d.name.as_str(), ());
            }
        }
        let busiest_disk = disks
            .keys()
            .filter_map(|name| {
                let busy = mean(&samples, |s| {
                    s.disks.iter().find(|d| d.name == *name).map(|d| d.busy)
                })?;
                Some((name.to_string(), busy))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let disk_figures = busiest_disk.as_ref().map(|(name, _)| {
            let of = |f: &dyn Fn(&crate::probe::counters::DiskSample) -> Option<f64>| {
                mean(&samples, |s| f(s.disks.iter().find(|d| d.name == *name)?))
            };
            DiskFigures {
                reads_per_s: of(&|d| Some(d.reads_per_s)).unwrap_or(0.0),
                writes_per_s: of(&|d| Some(d.writes_per_s)).unwrap_or(0.0),
                bytes_per_s: of(&|d| Some(d.read_bytes_per_s + d.write_bytes_per_s)).unwrap_or(0.0),
                queue: of(&|d| Some(d.queue)).unwrap_or(0.0),
                await_s: of(&|d| d.await_ms.map(|ms| ms / 1e3)),
            }
        });
        let mut nics: BTreeMap<&str, ()> = BTreeMap::new();
        for s in &samples {
            for n in &s.nics {
                nics.insert(n.name.as_str(), ());
            }
        }
        let link_utilisation = nics
            .keys()
            .filter_map(|name| {
                let nic = |s: &HostSample| s.nics.iter().find(|n| n.name == *name).cloned();
                let rx = mean(&samples, |s| nic(s).and_then(|n| n.rx_utilisation));
                let tx = mean(&samples, |s| nic(s).and_then(|n| n.tx_utilisation));
                rx.into_iter().chain(tx).max_by(f64::total_cmp)
            })
            .max_by(f64::total_cmp);
        Some(StepHost {
            cpu_busy: mean(&samples, |s| s.cpu.map(|c| c.busy())),
            cpu_isr: mean(&samples, |s| s.cpu.map(|c| c.isr())),
            run_queue: mean(&samples, |s| s.procs_running.map(f64::from)),
            context_switches_per_s: mean(&samples, |s| s.context_switches_per_s),
            busiest_disk,
            disk_figures,
            network_bytes_per_s: mean(&samples, |s| Some(s.network_bytes_per_s())).unwrap_or(0.0),
            link_utilisation,
            retransmits_per_s: mean(&samples, |s| s.tcp.map(|t| t.retransmits_per_s)),
            server_cpu: process_cpu(&samples, "server"),
            origin_cpu: process_cpu(&samples, "origin"),
            perflab_cpu: process_cpu(&samples, "perflab"),
            gaps,
        })
    }
}

/// A process group's mean CPU, as a share of one CPU.
fn process_cpu(samples: &[&HostSample], label: &str) -> Option<f64> {
    mean(samples, |s| {
        s.processes
            .iter()
            .find(|p| p.label == label)
            .map(|p| p.cpu())
    })
}
