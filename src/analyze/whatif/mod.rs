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

mod memory;

use super::bottleneck::growth::relative_half_width;
use super::bottleneck::{Bottleneck, BottleneckKind};
use super::demands::Demands;
use super::mva;
use super::points::{ResourceKind, StepPoint};
use crate::units::Percent;
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

/// One change to predict.
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub(super) words: String,
    /// The network after it.
    pub(super) after: Vec<Centre>,
    /// The CPUs the server has after it, for a change of its CPUs.
    pub(super) server_cpus: Option<f64>,
    /// The memory limit the server has after it, bytes, for a change of
    /// its memory.
    pub(super) server_memory: Option<f64>,
    pub(super) changed: Changed,
    /// The network at the two ends of what the change itself leaves
    /// uncertain (the cache a memory limit gives), when it does.
    pub(super) ends: Option<[Vec<Centre>; 2]>,
}

impl Change {
    fn of(words: String, after: Vec<Centre>, server_cpus: Option<f64>, changed: Changed) -> Self {
        Change {
            words,
            after,
            server_cpus,
            server_memory: None,
            changed,
            ends: None,
        }
    }
}

/// The interface a link centre's name holds: `link eth0 tx`,
/// `link veth0 (tbf)`, `link veth1 in the server's namespace (tbf)`.
fn interface(name: &str) -> Option<&str> {
    name.strip_prefix("link ")?.split(' ').next()
}

/// The other centres of the link `target` is part of: a link is faster
/// or gone in both directions at once. They are the centres of the same
/// interface (its two directions, the queueing discipline on it) and,
/// for the server's own link (a shaped pair whose far end is in the
/// server's namespace), the shaped far end — paired when there is one
/// shaped interface on each side, so that no other shaped link is taken
/// for it.
fn same_link(target: &Centre, centres: &[Centre]) -> Vec<String> {
    if target.kind != ResourceKind::Link {
        return Vec::new();
    }
    let Some(iface) = interface(&target.name) else {
        return Vec::new();
    };
    let links = || centres.iter().filter(|c| c.kind == ResourceKind::Link);
    let far = |c: &&Centre| c.name.contains(" in the server's namespace ");
    let shaped = |c: &&Centre| c.name.ends_with(')');
    let sides: Vec<Option<&str>> = [true, false]
        .iter()
        .map(|&in_namespace| {
            let mut names: Vec<&str> = links()
                .filter(|c| shaped(c) && far(c) == in_namespace)
                .filter_map(|c| interface(&c.name))
                .collect();
            names.dedup();
            (names.len() == 1).then(|| names[0])
        })
        .collect();
    let peer = match (sides[0], sides[1]) {
        (Some(ns), Some(host)) if ns == iface => Some(host),
        (Some(ns), Some(host)) if host == iface => Some(ns),
        _ => None,
    };
    links()
        .filter(|c| c.name != target.name)
        .filter(|c| interface(&c.name).is_some_and(|i| i == iface || Some(i) == peer))
        .map(|c| c.name.clone())
        .collect()
}

/// The changes worth predicting for a bottleneck centre. A confined
/// server gets twice what it had, at most the host's CPUs; where that is
/// more than the host has besides perflab's own use, perflab's work per
/// operation shares the server's CPUs. None when that gives no more than
/// it had.
fn changes(target: &Centre, centres: &[Centre], room: Option<HostRoom>) -> Vec<Change> {
    let (more, shared_s) = cpus_after_doubling(target, room);
    let group = same_link(target, centres);
    let changed = |c: &Centre| c.name == target.name || group.contains(&c.name);
    let both = if group.is_empty() { "" } else { " (both ways)" };
    let doubled: Vec<Centre> = centres
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if changed(&c) {
                match c.kind {
                    ResourceKind::Disk | ResourceKind::Link => c.demand_s /= 2.0,
                    _ => {
                        c.servers = more;
                        c.demand_s += shared_s;
                    }
                }
            }
            c
        })
        .collect();
    let grows = match target.kind {
        ResourceKind::Disk | ResourceKind::Link | ResourceKind::Cpu => true,
        _ => more / (target.demand_s + shared_s) > target.bound() * 1.05,
    };
    let cleared: Vec<Centre> = centres.iter().filter(|c| !changed(c)).cloned().collect();
    let (cpus_after, factor) = match target.kind {
        ResourceKind::Cpu | ResourceKind::OneCpu | ResourceKind::CpuQuota => {
            (Some(more), more / target.servers)
        }
        ResourceKind::Disk | ResourceKind::Link => (None, 2.0),
    };
    let kind = target.kind;
    let mut out = Vec::new();
    if grows {
        let twice = doubling_words(target, more, shared_s, room, both);
        let changed = Changed {
            kind,
            factor: Some(factor),
        };
        out.push(Change::of(twice, doubled, cpus_after, changed));
    }
    let gone = Changed { kind, factor: None };
    out.push(Change::of(
        format!("{} out of the way{both}", target.name),
        cleared,
        None,
        gone,
    ));
    out
}

/// The servers a CPU centre has once doubled (a confined server's at most
/// the host's CPUs), and the seconds of perflab's work per operation that
/// land on them when the host has no more room than that.
fn cpus_after_doubling(target: &Centre, room: Option<HostRoom>) -> (f64, f64) {
    let want = match target.kind {
        ResourceKind::Cpu => target.servers * 2.0,
        ResourceKind::OneCpu => 2.0,
        ResourceKind::CpuQuota => target.servers * 2.0,
        ResourceKind::Disk | ResourceKind::Link => target.servers,
    };
    let confined = matches!(target.kind, ResourceKind::OneCpu | ResourceKind::CpuQuota);
    match room.filter(|_| confined) {
        Some(r) if r.cpus - r.perflab_cpus < want => {
            let more = want.min(r.cpus);
            let overlap = (more + r.perflab_cpus - r.cpus).clamp(0.0, r.perflab_cpus);
            let share = if r.perflab_cpus > 0.0 {
                overlap / r.perflab_cpus
            } else {
                0.0
            };
            (more, r.perflab_cpu_per_op_s * share)
        }
        _ => (want, 0.0),
    }
}

/// The doubling of a centre in words.
fn doubling_words(
    target: &Centre,
    more: f64,
    shared_s: f64,
    room: Option<HostRoom>,
    both: &str,
) -> String {
    let perflab_cpus = room.map_or(0.0, |r| r.perflab_cpus);
    match target.kind {
        ResourceKind::Cpu => format!("twice the CPUs ({})", target.servers * 2.0),
        ResourceKind::OneCpu if shared_s > 0.0 => format!(
            "the server allowed a second CPU besides {} (shared with perflab's {perflab_cpus:.2} CPUs)",
            target.name,
        ),
        ResourceKind::OneCpu => {
            format!("the server allowed a second CPU besides {}", target.name)
        }
        ResourceKind::CpuQuota if shared_s > 0.0 => format!(
            "the server's CPU quota raised from {:.2} to {:.2} CPUs (shared with perflab's {perflab_cpus:.2})",
            target.servers, more,
        ),
        ResourceKind::CpuQuota => format!(
            "the server's CPU quota raised from {:.2} to {:.2} CPUs",
            target.servers, more
        ),
        ResourceKind::Disk => format!("{} twice as fast", target.name),
        ResourceKind::Link => format!("{} at twice the speed{both}", target.name),
    }
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

/// The prediction for the server with a memory limit of `bytes` (a lab's
/// variant that has it), when the run measured what its cache holds.
pub(crate) fn at_memory(
    points: &[StepPoint],
    demands: &Demands,
    bottleneck: &Bottleneck,
    peak: usize,
    bytes: f64,
) -> Option<Scenario> {
    let closed = matches!(points.first()?.level, crate::plan::Level::Users(_));
    predict(points, demands, bottleneck, closed, peak, None, Some(bytes))?
        .scenarios
        .into_iter()
        .find(|s| s.server_memory.is_some())
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
    memory: Option<f64>,
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
        changed.extend(memory::changes(c, &centres, memory));
    }
    if changed.is_empty() {
        return None;
    }
    if closed {
        closed_loop(points, demands, peak, &target, &centres, changed, highest)
    } else {
        open_loop(points, peak, &target, &centres, changed, highest)
    }
}

/// Why no prediction is made for the cure of a bottleneck the model has
/// no centre for: more memory (without the server's statistics of what
/// it caches, or a read limit to measure its reads against), the
/// log on a device of its own (the log's and the data's I/O are not
/// measured apart), a link without loss (TCP's throughput under loss
/// depends on the round trip and the loss's pattern, which one run does
/// not separate). None for the other verdicts.
pub(crate) fn not_predicted(bottleneck: &Bottleneck) -> Option<String> {
    let name = bottleneck.name.as_str();
    let why = if bottleneck.kind == BottleneckKind::NetworkLoss {
        "no prediction for a link without loss: TCP's throughput under loss depends on the round trip and the loss's pattern, which one run does not separate — run again without the loss to measure it"
    } else if bottleneck.kind != BottleneckKind::Resource || bottleneck.unreliable {
        return None;
    } else if name.starts_with("memory") {
        "no prediction for more memory: it needs the server's statistics of what it caches (PostgreSQL's relations) and a read limit on its cgroup whose capacity the reads are measured against (a device's reads are not told apart from its other I/O) — run the sweep again with more memory (a lab with a memory axis) to measure it"
    } else if name.starts_with("commit I/O") {
        "no prediction for the log on a device of its own: the log's I/O and the data's are not measured apart — run again with the log moved (--log-dir) to measure it"
    } else if name.starts_with("disk reads") {
        "no prediction for a faster I/O path: the limit is above the device, where no demand was measured"
    } else {
        return None;
    };
    Some(why.to_string())
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
        s.interval = band(s.throughput, w.width).filter(|_| !s.at_least);
        // What the change leaves uncertain widens it to its ends' bands.
        if let (Some([lo, hi]), Some(ends)) = (s.interval, s.ends) {
            let (a, b) = (ends[0].min(ends[1]), ends[0].max(ends[1]));
            s.interval = Some([
                lo.min(a * (1.0 - w.width)).max(0.0),
                hi.max(b * (1.0 + w.width)),
            ]);
        }
        if let Some(p) = &mut s.at_peak {
            p.interval = band(p.throughput, w.width).filter(|_| !p.at_least);
            // The same relative spread as at the highest load.
            if let (Some([lo, hi]), Some(ends)) = (p.interval, s.ends) {
                let r = p.throughput / s.throughput;
                let (a, b) = (ends[0].min(ends[1]) * r, ends[0].max(ends[1]) * r);
                p.interval = Some([
                    lo.min(a * (1.0 - w.width)).max(0.0),
                    hi.max(b * (1.0 + w.width)),
                ]);
            }
        }
    }
    w
}

/// A closed loop: exact MVA at the highest population (and at the
/// peak's), checked against the steps up to the peak.
fn closed_loop(
    points: &[StepPoint],
    demands: &Demands,
    peak: usize,
    target: &Centre,
    centres: &[Centre],
    changed: Vec<Change>,
    highest: f64,
) -> Option<WhatIf> {
    let lowest = points.first()?;
    let model = ClosedModel {
        delay_s: delay_for(centres, demands.total_s),
        think_s: lowest.think_s,
        hidden_cap: cap(centres).filter(|&c| lowest.throughput >= HIDDEN * c),
    };
    let mut model_error: f64 = 0.0;
    for p in points.iter().take(peak + 1) {
        let (x, _) = model.solve(centres, p.load)?;
        if p.throughput > 0.0 {
            model_error = model_error.max((x - p.throughput).abs() / p.throughput);
        }
    }
    let fit = model.fit(points, &points[peak], centres, highest)?;
    let scenarios = changed
        .into_iter()
        .map(|change| model.scenario(change, &fit, target))
        .collect::<Option<Vec<_>>>()?;
    // The noise of what the predictions start from: the highest load's
    // measurement when they are scaled to it, the peak's otherwise.
    let start = if fit.scaled {
        points
            .iter()
            .filter(|p| p.load == highest)
            .max_by(|a, b| a.throughput.total_cmp(&b.throughput))
            .unwrap_or(fit.at_peak)
    } else {
        fit.at_peak
    };
    Some(with_intervals(WhatIf {
        model_error,
        baseline: fit.baseline,
        measured: fit.measured,
        scaled: fit.scaled,
        credible: model_error <= CREDIBLE,
        noise: relative_half_width(start),
        width: 0.0,
        basis: fit.basis(model_error <= CREDIBLE),
        scenarios,
    }))
}

/// A closed loop's model: the centres' delay and the users' think time.
struct ClosedModel {
    delay_s: f64,
    think_s: f64,
    /// The limiters' cap, when it held the lowest load measured: the
    /// delay then holds time the operation spent waiting for it.
    hidden_cap: Option<f64>,
}

/// The share of a limiter's bound at the lowest load from which its
/// waiting is taken to be in the delay.
const HIDDEN: f64 = 0.8;

/// How the closed-loop model met the run at its highest load and at its
/// peak.
struct ClosedFit<'a> {
    /// The highest load, and the model's and the run's throughput there.
    highest: f64,
    baseline: f64,
    measured: f64,
    /// The peak step and the model's throughput there.
    at_peak: &'a StepPoint,
    peak_model: f64,
    /// The model missed the highest load's throughput and its predictions
    /// are scaled to what was measured.
    scaled: bool,
    /// The model held at the peak and the throughput fell away past it.
    thrashed: bool,
}

impl ClosedModel {
    /// The model's throughput and response time with `centres` at `load` users.
    fn solve(&self, centres: &[Centre], load: f64) -> Option<(f64, f64)> {
        solve(
            centres,
            self.delay_s,
            self.think_s,
            load.round().max(1.0) as u32,
        )
    }

    /// Whether the prediction `x` with the centres `after` is a floor: a
    /// change that relieves the limiter which held the lowest load,
    /// where it no longer caps `x`. The delay keeps that load's wait for
    /// the limiter, which the faster link no longer imposes.
    fn hidden_floor(&self, after: &[Centre], x: f64) -> bool {
        self.hidden_cap
            .is_some_and(|before| cap(after).is_none_or(|c| c > before && x < c * (1.0 - 1e-9)))
    }

    /// The model against the run at its highest load and its peak.
    fn fit<'a>(
        &self,
        points: &[StepPoint],
        at_peak: &'a StepPoint,
        centres: &[Centre],
        highest: f64,
    ) -> Option<ClosedFit<'a>> {
        let (baseline, _) = self.solve(centres, highest)?;
        let measured = points
            .iter()
            .filter(|p| p.load == highest)
            .map(|p| p.throughput)
            .fold(0.0, f64::max);
        let (peak_model, _) = self.solve(centres, at_peak.load)?;
        let missed = measured > 0.0 && (baseline - measured).abs() > CREDIBLE * measured;
        // The model held at the peak and the throughput fell away past it:
        // the work per operation grew with the queue (thrashing), which the
        // change relieves; predict from the clean demands, not the fall.
        let thrashed = missed
            && measured < baseline
            && highest > at_peak.load
            && measured < at_peak.throughput * (1.0 - CREDIBLE / 2.0)
            && (peak_model - at_peak.throughput).abs() <= CREDIBLE * at_peak.throughput;
        Some(ClosedFit {
            highest,
            baseline,
            measured,
            at_peak,
            peak_model,
            scaled: missed && !thrashed,
            thrashed,
        })
    }

    /// The prediction for one change: at the highest load, and at the
    /// peak's when that is lower.
    fn scenario(&self, change: Change, fit: &ClosedFit, target: &Centre) -> Option<Scenario> {
        let after = &change.after;
        let (x, r) = self.solve(after, fit.highest)?;
        let t = tightest(after);
        let gain = x / fit.baseline;
        let scale = |x: f64| {
            if fit.scaled {
                fit.measured * x / fit.baseline
            } else {
                x
            }
        };
        let ends = match &change.ends {
            Some([a, b]) => Some([
                scale(self.solve(a, fit.highest)?.0),
                scale(self.solve(b, fit.highest)?.0),
            ]),
            None => None,
        };
        let at_peak = fit.at_peak;
        let peak_prediction = if at_peak.load < fit.highest {
            let (xp, _) = self.solve(after, at_peak.load)?;
            let throughput = if fit.scaled {
                at_peak.throughput * xp / fit.peak_model
            } else {
                xp
            };
            Some(AtLoad {
                load: at_peak.load,
                throughput,
                at_least: floor(&change, t, at_peak.throughput) || self.hidden_floor(after, xp),
                interval: None,
            })
        } else {
            None
        };
        Some(Scenario {
            load: fit.highest,
            throughput: if fit.scaled { fit.measured * gain } else { x },
            response_s: Some(r),
            gain,
            limited_by: t.map(|c| c.name.clone()),
            still: t.is_some_and(|c| c.name == target.name),
            bound: t.map(Centre::bound),
            server_cpus: change.server_cpus,
            server_memory: change.server_memory,
            ends,
            at_least: floor(&change, t, at_peak.throughput) || self.hidden_floor(after, x),
            changed: change.changed,
            change: change.words,
            at_peak: peak_prediction,
            interval: None,
        })
    }
}

impl ClosedFit<'_> {
    /// What the predictions start from, in words; `credible` when the
    /// model reproduced the run up to its peak.
    fn basis(&self, credible: bool) -> String {
        let (measured, highest, at_peak) = (self.measured, self.highest, self.at_peak);
        if self.thrashed {
            format!(
                "the demands measured cleanly up to the peak ({}): past it the work per operation grew with the queue ({} at {}, {} below the peak), which the change relieves, so the predictions do not start from that fall",
                load_words(at_peak.load),
                at_peak.rate(measured),
                load_words(highest),
                Percent(1.0 - measured / at_peak.throughput)
            )
        } else if self.scaled {
            format!(
                "the {} measured at {} times the model's gain (the model missed it by over {})",
                at_peak.rate(measured),
                load_words(highest),
                Percent(CREDIBLE)
            )
        } else {
            let reproduce = if credible {
                "which reproduce the run"
            } else {
                "which reproduce the highest load's throughput but not every lower load's"
            };
            format!(
                "the demands measured up to the peak ({}), {reproduce}",
                load_words(at_peak.load)
            )
        }
    }
}

/// Whether a change of memory's prediction is a floor: the limit after it
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
    change.server_memory.is_some()
        && !t.name.starts_with("reads (")
        && (busy < 0.5 || t.name.starts_with("cpu"))
}

/// A closed loop's load in words (`16 users`).
fn load_words(load: f64) -> String {
    crate::plan::Level::Users(load.round().max(1.0) as u32).to_string()
}

#[cfg(test)]
mod tests;
