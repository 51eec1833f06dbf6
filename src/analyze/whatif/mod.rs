//! What would change under a different configuration: the run's measured
//! service demands put into a closed queueing network and solved by exact
//! MVA (Reiser and Lavenberg, 1980) at the run's highest load, once as
//! measured and once per change to the bottleneck — twice its capacity,
//! and out of the way altogether (which names the next bottleneck:
//! clearing one exposes the next).
//!
//! The network: every resource with a fitted demand is a queueing centre;
//! a centre of m servers (the host's CPUs) queues as one server of demand
//! D/m (Seidmann's approximation, whose remaining D·(m−1)/m is a delay).
//! All time an operation spends outside the queues is one delay, sized so
//! that the model's response time at the lowest load equals the measured
//! one: network round trips and the client's path that no resource
//! accounts for, the multi-server delays — less whatever the resources
//! did in parallel within one operation (a log writer beside a backend).
//! A change that spares the operations their reads from storage keeps at
//! least the lowest load's median response, less the queues after it, as
//! its delay: there the reads were most of the response time, and what
//! they leave of it is too small a difference to be measured.
//! The think time is a delay too. The model is first
//! checked against the run itself: its throughput at each measured load
//! up to the peak against what was measured. A model that misses by more
//! than [`CREDIBLE`] says so, and its predictions are rough.
//!
//! Open loops have no population to solve for: their predictions are the
//! new asymptotic bound and the offered rate it allows.
//!
//! Predictions start from the measurement: when the model's throughput at
//! the highest load misses what was measured there by more than
//! [`CREDIBLE`], each prediction is the measured throughput times the
//! model's gain — unless the model held at the peak and the throughput
//! then fell away with the load (a server on one CPU thrashing under a
//! deep run queue: its work per operation grew). A change that relieves
//! the queue relieves that growth too, so then the predictions come from
//! the demands measured cleanly, up to the peak, and not from the
//! thrashing point; [`WhatIf::basis`] says which was done. Each
//! prediction is given at the highest load and at the peak's.
//!
//! Every prediction carries a 95% interval, the prediction times
//! 1 ± w, where w combines two errors independent of each other, to first
//! order: the noise of the throughput the prediction starts from (the 95%
//! half-width over its step's intervals, relative to its mean; a
//! saturated resource's demand is its busy share over that throughput,
//! so the bound it sets is as noisy) and the model's largest miss on this
//! run up to the peak (what the model gets wrong that no noise explains),
//! as `w = √(noise² + miss²)`. A lab checks each prediction against the
//! variant that made the change: within 10%, or the interval overlaps
//! the measured step's and is no wider than ±15%
//! ([`super::held::judge`]).
//!
//! A link shaped by a token bucket (tbf) is not a queue the operation
//! passes in series: its tokens refill while the operation's other work
//! goes on, and a packet that finds tokens passes at once. It caps the
//! throughput at its bound instead, and its waiting shows in the
//! response time only once it caps (by Little's law). Modelled as a
//! queue, a link shaped to 2 Mbit/s (468 µs of tokens per operation
//! each way, the server's CPU 160 µs) put 1,068 µs in series where one
//! user measured 471 µs, and the model missed that user by 52%. When the
//! link already capped the lowest load measured, the time the operation
//! needs without it is hidden in the delay, so a prediction for a faster
//! link that it no longer caps is a floor.
//!
//! More CPU for a server confined to one CPU or a quota is what the host
//! has: where that is more than the host has besides perflab's own use,
//! the server's CPUs are shared with perflab, whose work per operation
//! (its CPU over the throughput at the peak) then queues at the same
//! centre — perflab's use grows with the throughput it drives, so a
//! fixed "spare" share would overstate the gain. A doubled resource that
//! still limits is said to, not named as the next.

mod changes;
mod closed;
pub(crate) mod log;
mod memory;

#[cfg(test)]
use changes::same_link;
use changes::{changes, Change};

use super::bottleneck::growth::relative_half_width;
use super::bottleneck::{Bottleneck, BottleneckKind};
use super::demands::Demands;
use super::mva;
use super::points::{ResourceKind, StepPoint};
use serde::Serialize;

/// Largest relative miss of the model at a measured load for its
/// predictions to be called more than rough.
pub(crate) const CREDIBLE: f64 = 0.15;

/// Populations above this are solved at this size: MVA's cost grows with N,
/// and the throughput has long reached its bound by then.
const MAX_POPULATION: u32 = 20_000;

/// What the host has besides the server: its CPUs, and those perflab
/// itself used at the peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HostRoom {
    pub(crate) cpus: f64,
    pub(crate) perflab_cpus: f64,
    /// perflab's CPU seconds per operation at the peak.
    pub(crate) perflab_cpu_per_op_s: f64,
    /// The host's CPU seconds per operation, the least and the most of
    /// the steps up to the peak: how far the work of an operation moved
    /// as the CPUs handed it over differently (waking idle CPUs at one
    /// user, staying busy at the peak).
    pub(crate) cpu_per_op_s: Option<[f64; 2]>,
}

impl HostRoom {
    /// How much the host's CPU per operation moved over the run's loads,
    /// relative to its least (at most 1): what a change that puts
    /// perflab's work on the server's CPUs leaves uncertain, since it
    /// changes how the CPUs hand each operation over — on one CPU or
    /// across two, which this run did not measure.
    pub(crate) fn handoff_spread(&self) -> Option<f64> {
        let [least, most] = self.cpu_per_op_s?;
        (least > 0.0 && most >= least).then(|| ((most - least) / least).min(1.0))
    }
}

/// One queueing centre of the model.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Centre {
    pub(super) name: String,
    pub(super) kind: ResourceKind,
    pub(super) servers: f64,
    /// Seconds per operation, all servers together.
    pub(super) demand_s: f64,
}

impl Centre {
    fn bound(&self) -> f64 {
        self.servers / self.demand_s
    }

    /// A token bucket, which caps the throughput rather than queueing the
    /// operation in series (see the module's header).
    fn limiter(&self) -> bool {
        self.kind == ResourceKind::Link && self.name.ends_with("(tbf)")
    }
}

/// The lowest bound of the limiters among `centres`, if any.
fn cap(centres: &[Centre]) -> Option<f64> {
    centres
        .iter()
        .filter(|c| c.limiter())
        .map(Centre::bound)
        .min_by(f64::total_cmp)
}

/// One predicted configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Scenario {
    /// `disk vda twice as fast`, `cpu out of the way`.
    pub(crate) change: String,
    /// The load the prediction is for: the run's highest.
    pub(crate) load: f64,
    /// Predicted throughput there.
    pub(crate) throughput: f64,
    /// Predicted mean response time there (closed loops).
    pub(crate) response_s: Option<f64>,
    /// Predicted throughput over the model's for the run as measured.
    pub(crate) gain: f64,
    /// The tightest resource after the change, and its bound.
    pub(crate) limited_by: Option<String>,
    pub(crate) bound: Option<f64>,
    /// The changed resource still limits.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) still: bool,
    /// The CPUs the server has after the change, for a change of its
    /// CPUs (a lab checks the prediction against the variant that has
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_cpus: Option<f64>,
    /// The memory limit the server has after the change, bytes, for a
    /// change of its memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_memory: Option<f64>,
    /// The throughput at the two ends of what the change itself leaves
    /// uncertain, which the interval spans too.
    #[serde(skip)]
    pub(crate) ends: Option<[f64; 2]>,
    /// The relative uncertainty the change itself adds to the interval
    /// (a server's CPUs shared with perflab: [`HostRoom::handoff_spread`]).
    #[serde(skip)]
    pub(crate) sharing: f64,
    /// The prediction is a floor, not a figure: the change of memory
    /// moves the limit to a resource measured far from busy, whose demand
    /// per operation then carries the fixed work of an idle server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) at_least: bool,
    /// What was changed, for a lab that looks for the variant with it.
    pub(crate) changed: Changed,
    /// The same change at the peak's load, when that is not the highest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) at_peak: Option<AtLoad>,
    /// The prediction's 95% interval, operations per second (none for a
    /// prediction with no figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<[f64; 2]>,
}

/// A prediction at one load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct AtLoad {
    pub(crate) load: f64,
    pub(crate) throughput: f64,
    /// A floor, not a figure ([`Scenario::at_least`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) at_least: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<[f64; 2]>,
}

/// The 95% interval of a prediction `x` whose relative half-width is
/// `width`; none for a figure that is not one.
fn band(x: f64, width: f64) -> Option<[f64; 2]> {
    (x.is_finite() && width.is_finite()).then(|| [(x * (1.0 - width)).max(0.0), x * (1.0 + width)])
}

/// The change a scenario makes: the kind of resource, and its capacity's
/// factor (none: out of the way altogether).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Changed {
    pub(crate) kind: ResourceKind,
    pub(crate) factor: Option<f64>,
}

/// The model's check against the run, and its predictions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WhatIf {
    /// Largest relative miss of the model's throughput at a measured load
    /// up to the peak.
    pub(crate) model_error: f64,
    /// The model's throughput at the highest load, as measured.
    pub(crate) baseline: f64,
    /// The throughput measured at the highest load.
    pub(crate) measured: f64,
    /// The model missed the measurement at the highest load by more than
    /// [`CREDIBLE`]: predictions are the measurement times the model's gain.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) scaled: bool,
    pub(crate) credible: bool,
    /// The relative 95% half-width of the throughput the predictions
    /// start from, over its step's intervals.
    pub(crate) noise: f64,
    /// Each prediction's relative 95% half-width: the noise and the
    /// model's miss combined.
    pub(crate) width: f64,
    /// What the predictions were made from, in words: the demands
    /// measured up to the peak, or the measurement at the highest load
    /// times the model's gain.
    pub(crate) basis: String,
    pub(crate) scenarios: Vec<Scenario>,
}

/// The network's centres: the fitted demands, without the single CPUs
/// (the host's CPUs already count their time) unless the bottleneck is
/// one of them — a server confined to one CPU — which then stands for
/// the CPU time in place of the whole host's.
fn centres(demands: &Demands, bottleneck: &str) -> Vec<Centre> {
    let confined = demands.resources.iter().any(|d| {
        matches!(d.kind, ResourceKind::OneCpu | ResourceKind::CpuQuota) && d.resource == bottleneck
    });
    demands
        .resources
        .iter()
        .filter(|d| match d.kind {
            ResourceKind::OneCpu | ResourceKind::CpuQuota => confined && d.resource == bottleneck,
            ResourceKind::Cpu => !confined,
            _ => true,
        })
        .filter(|d| d.seconds > 0.0 && d.servers > 0.0)
        .map(|d| Centre {
            name: d.resource.clone(),
            kind: d.kind,
            servers: d.servers,
            demand_s: d.seconds,
        })
        .collect()
}

/// Throughput and response time of the closed network at `users`, with
/// `delay_s` per operation outside the queues and think time `think_s`.
/// The limiters cap the queues' throughput; the response time is then
/// what Little's law gives the users at the cap.
fn solve(centres: &[Centre], delay_s: f64, think_s: f64, users: u32) -> Option<(f64, f64)> {
    let users = users.clamp(1, MAX_POPULATION);
    let last = mva::solve(&queues(centres), think_s + delay_s, users).pop()?;
    let (x, r) = (last.throughput, last.response_s + delay_s);
    match cap(centres) {
        Some(cap) if cap < x => Some((cap, (f64::from(users) / cap - think_s).max(r))),
        _ => Some((x, r)),
    }
}

/// Each queueing centre's demand per server (Seidmann's single server);
/// the limiters are not queues.
fn queues(centres: &[Centre]) -> Vec<f64> {
    centres
        .iter()
        .filter(|c| !c.limiter())
        .map(|c| c.demand_s / c.servers)
        .collect()
}

/// The delay outside the queues that makes the response time at one user
/// the measured `total_s`.
fn delay_for(centres: &[Centre], total_s: f64) -> f64 {
    let queued: f64 = queues(centres).iter().sum();
    (total_s - queued).max(0.0)
}

fn tightest(centres: &[Centre]) -> Option<&Centre> {
    centres
        .iter()
        .min_by(|a, b| a.bound().total_cmp(&b.bound()))
}

/// Predictions for a run whose bottleneck is a resource; none otherwise
/// (the generator, contention, loss and an unreached limit are not
/// changed by more hardware).
pub(crate) fn what_if(
    points: &[StepPoint],
    demands: &Demands,
    bottleneck: &Bottleneck,
    closed: bool,
    peak: usize,
    room: Option<HostRoom>,
) -> Option<WhatIf> {
    predict(points, demands, bottleneck, closed, peak, room, None)
}

/// The prediction for the server with memory `memory` (a lab's variant
/// that has that memory limit or buffer pool), when the run measured what
/// its cache holds.
pub(crate) fn at_memory(
    points: &[StepPoint],
    demands: &Demands,
    bottleneck: &Bottleneck,
    peak: usize,
    memory: super::memory::Memory,
) -> Option<Scenario> {
    let closed = matches!(points.first()?.level, crate::plan::Level::Users(_));
    // Asked for memory, the predictions are of that change alone.
    predict(
        points,
        demands,
        bottleneck,
        closed,
        peak,
        None,
        Some(memory),
    )?
    .scenarios
    .into_iter()
    .next()
}

/// The predictions: for the bottleneck's resource twice as large and out
/// of the way, and for more or less memory where the run measured its
/// cache — or for the memory limit `memory` alone.
fn predict(
    points: &[StepPoint],
    demands: &Demands,
    bottleneck: &Bottleneck,
    closed: bool,
    peak: usize,
    room: Option<HostRoom>,
    memory: Option<super::memory::Memory>,
) -> Option<WhatIf> {
    if bottleneck.kind != BottleneckKind::Resource || bottleneck.unreliable {
        return None;
    }
    let cached = super::memory::reads(points.get(peak)?);
    let mut centres = centres(demands, bottleneck.resource.as_deref().unwrap_or_default());
    if let Some(reads) = cached.as_ref().and_then(memory::centre_now) {
        centres.push(reads);
    }
    let name = match (&bottleneck.resource, &cached) {
        (Some(name), _) => name.clone(),
        (None, Some(c)) if bottleneck.name.starts_with("memory") => c.name.clone(),
        _ => return None,
    };
    let target = centres.iter().find(|c| c.name == name)?.clone();
    let highest = points.iter().map(|p| p.load).fold(0.0, f64::max);
    let mut changed = match (memory, &bottleneck.resource) {
        (None, Some(_)) => changes(&target, &centres, room),
        _ => Vec::new(),
    };
    if let Some(c) = &cached {
        let body_s = points.first().map_or(0.0, |p| p.response.p50.as_secs_f64());
        changed.extend(memory::changes(c, &centres, memory, body_s));
    }
    if changed.is_empty() {
        return None;
    }
    if closed {
        closed::closed_loop(points, demands, peak, &target, &centres, changed, highest)
    } else {
        open_loop(points, peak, &target, &centres, changed, highest)
    }
}

/// Why no prediction is made for the cure of a bottleneck the model has
/// no centre for: more memory (without the server's statistics of what
/// it caches, or a read limit to measure its reads against), the
/// log on a device of its own (until its flush time is given:
/// [`log::add_to`]), a link without loss (TCP's throughput under loss
/// depends on the round trip and the loss's pattern, which one run does
/// not separate). None for the other verdicts.
pub(crate) fn not_predicted(bottleneck: &Bottleneck, peak: Option<&StepPoint>) -> Option<String> {
    let name = bottleneck.name.as_str();
    if name.starts_with("memory") && bottleneck.kind == BottleneckKind::Resource {
        if let Some(why) = peak.and_then(misses_past_accesses) {
            return Some(why);
        }
    }
    let why = if bottleneck.kind == BottleneckKind::NetworkLoss {
        "no prediction for a link without loss: TCP's throughput under loss depends on the round trip and the loss's pattern, which one run does not separate — run again without the loss to measure it"
    } else if bottleneck.kind != BottleneckKind::Resource || bottleneck.unreliable {
        return None;
    } else if name.starts_with("memory") {
        "no prediction for more memory: it needs the server's statistics of what it caches (PostgreSQL's relations) and a read limit on its cgroup whose capacity the reads are measured against (a device's reads are not told apart from its other I/O) — run the sweep again with more memory (a lab with a memory axis) to measure it"
    } else if name.starts_with("commit I/O") {
        "no prediction for the log on a device of its own without that device's flush time: perflab analyze RUN --log-flush-dir DIR times it and predicts from the commits this run timed (or run again with the log moved, --log-dir)"
    } else if name.starts_with("disk reads") {
        "no prediction for a faster I/O path: the limit is above the device, where no demand was measured"
    } else {
        return None;
    };
    Some(why.to_string())
}

/// Why a cache whose statistics and read limit were measured gets no
/// prediction: it read more pages from storage per operation than the
/// accesses its statistics counted, so no cache size misses as many
/// ([`super::memory::cache_for`]). A row fetched through an index touches
/// its upper levels too, which a small cache loses, and InnoDB's page
/// cleaner keeps up to `innodb_lru_scan_depth` pages of its pool free
/// (1536 by default): measured here, an 8 MiB pool (507 pages) held 25 to
/// 45 pages of data while the bank's balance enquiries read 7.3 pages
/// each, 3 of them read ahead.
fn misses_past_accesses(p: &StepPoint) -> Option<String> {
    let reads = super::memory::reads(p)?;
    let c = &reads.cache;
    let asked: f64 = c.relations.iter().map(|r| r.per_op).sum();
    if c.found.is_some() || c.missed < asked {
        return None;
    }
    let cache = if c.pool {
        format!(
            "its buffer pool of {} (InnoDB's page cleaner keeps up to innodb_lru_scan_depth pages of it free, 1536 by default: a pool that small holds few pages of data)",
            crate::units::Bytes(c.limit_bytes as u64)
        )
    } else {
        format!(
            "its cache under a memory limit of {}",
            crate::units::Bytes(c.limit_bytes as u64)
        )
    };
    Some(format!(
        "no prediction for more memory: the server read {:.2} pages from storage per operation, more than the {:.2} accesses its statistics counted (an index's upper levels, read-ahead): no cache size misses that many, so {cache} cannot be found from its misses — run again with more memory (a lab with a memory axis) to measure it",
        c.missed, asked
    ))
}

/// An open loop: each change's bound, at the highest rate offered.
fn open_loop(
    points: &[StepPoint],
    peak: usize,
    target: &Centre,
    centres: &[Centre],
    changed: Vec<Change>,
    highest: f64,
) -> Option<WhatIf> {
    let baseline = tightest(centres)?.bound().min(highest);
    let at_peak_x = points.get(peak)?.throughput;
    let scenarios = changed
        .into_iter()
        .map(|c| {
            let t = tightest(&c.after);
            let bound = t.map(Centre::bound);
            let x = bound.map_or(highest, |b| b.min(highest));
            let at = |after: &[Centre]| tightest(after).map_or(highest, |t| t.bound().min(highest));
            let at_least = floor(&c, t, at_peak_x);
            Scenario {
                change: c.words,
                load: highest,
                throughput: x,
                response_s: None,
                gain: x / baseline,
                limited_by: t.map(|c| c.name.clone()),
                still: t.is_some_and(|c| c.name == target.name),
                bound,
                server_cpus: c.server_cpus,
                server_memory: c.server_memory,
                ends: c.ends.as_ref().map(|[a, b]| [at(a), at(b)]),
                sharing: c.sharing,
                at_least,
                changed: c.changed,
                at_peak: None,
                interval: None,
            }
        })
        .collect();
    let at = points.get(peak)?;
    let measured = at.throughput;
    let model_error = (baseline - measured).abs() / measured;
    Some(with_intervals(WhatIf {
        model_error,
        baseline,
        measured,
        scaled: false,
        credible: true,
        noise: relative_half_width(at),
        width: 0.0,
        basis: "the bounds of the demands measured, at the highest rate offered".to_string(),
        scenarios,
    }))
}

/// `w` with each prediction's 95% interval: its noise and the model's
/// miss combined.
fn with_intervals(mut w: WhatIf) -> WhatIf {
    w.width = w.noise.hypot(w.model_error);
    for s in &mut w.scenarios {
        // What the change itself adds, independent of the rest.
        let width = w.width.hypot(s.sharing);
        s.interval = band(s.throughput, width).filter(|_| !s.at_least);
        // What the change leaves uncertain widens it to its ends' bands.
        if let (Some([lo, hi]), Some(ends)) = (s.interval, s.ends) {
            let (a, b) = (ends[0].min(ends[1]), ends[0].max(ends[1]));
            s.interval = Some([
                lo.min(a * (1.0 - width)).max(0.0),
                hi.max(b * (1.0 + width)),
            ]);
        }
        if let Some(p) = &mut s.at_peak {
            p.interval = band(p.throughput, width).filter(|_| !p.at_least);
            // The same relative spread as at the highest load.
            if let (Some([lo, hi]), Some(ends)) = (p.interval, s.ends) {
                let r = p.throughput / s.throughput;
                let (a, b) = (ends[0].min(ends[1]) * r, ends[0].max(ends[1]) * r);
                p.interval = Some([
                    lo.min(a * (1.0 - width)).max(0.0),
                    hi.max(b * (1.0 + width)),
                ]);
            }
        }
    }
    w
}

/// Whether a change's prediction is a floor — a change of memory or of the
/// log's device ([`Change::idle_floor`]): the limit after it
/// (`t`) is a CPU, or was less than half busy at the peak's throughput
/// `x`. A resource that idle carries the server's fixed work (its
/// background, the probes beside it) in each operation's demand, so the
/// bound it sets is low; and a server whose data no longer comes from
/// storage spends less CPU per operation, however busy its CPU was (the
/// kernel's reads and its reclaim under the limit go). Measured: a
/// PostgreSQL under a 96 MiB limit spent 163–224 µs of CPU per operation,
/// the same with its data in 1 GiB 47–74 µs; on one CPU, a 96 MiB cell
/// whose CPU was over half busy at 16 users predicted 498 tps with 1 GiB,
/// and the 1 GiB cell measured 5,637.
fn floor(change: &Change, t: Option<&Centre>, x: f64) -> bool {
    let Some(t) = t else {
        return false;
    };
    let busy = t.demand_s * x / t.servers;
    // The changed centre's own demand after it was computed, not measured
    // idle: the cache's reads, the log's flushes.
    change.idle_floor
        && !t.name.starts_with("reads (")
        && t.name != log::LOG
        && (busy < 0.5 || t.name.starts_with("cpu"))
}

#[cfg(test)]
mod tests;
