//! What stops the server, with the numbers that show it and the strongest
//! alternative ruled out. The order of the tests, each stated:
//!
//! 1. **load generator** — perflab's cgroup quota throttled it for over 5%
//!    of a step; or, for a target outside perflab's process, perflab used
//!    ≥ 90% of the CPUs it could use (affinity, quota, worker threads); or
//!    a closed-loop step broke Little's law `N = X·(R+Z)` by over 5%; or
//!    an open loop's dispatch ran over 10 ms late at p99. Every other
//!    conclusion is then marked unreliable (Schroeder, Wierman and
//!    Harchol-Balter, *Open versus closed*, NSDI 2006, on what a generator
//!    that sets the pace does to the figures).
//! 2. **software contention first** when throughput falls past its peak
//!    to under 85% of it while the database's sessions wait on something
//!    other than CPU or the client in ≥ 30% of samples, or operations are
//!    retried (≥ 0.05 per operation): a saturated resource holds
//!    throughput level, it does not make it fall away.
//! 3. **a hardware resource** — at the peak step a resource is ≥ 90% busy
//!    per server while its demand per operation stayed within 1.5× of the
//!    low-load fit (the utilisation law; USE method: utilisation first). One
//!    CPU saturated while the host has room is named `cpu` with that CPU as
//!    evidence. A busy disk while the host faults pages in is
//!    `memory → disk reads`.
//! 4. **network loss** — from the knee on, TCP retransmits are ≥ 1% of
//!    segments sent, at least twice the lowest load's rate, with a latency
//!    tail (≥ 0.5% over 200 ms, or a slow group).
//! 5. **software contention** — throughput stopped growing with load (a
//!    knee, or a peak before the last step) and no resource's bound
//!    explains it; the database's dominant wait class or the retries name
//!    the contention when reported.
//! 6. **not reached** — throughput kept pace with load and nothing was
//!    saturated: the next load to try is given.

use super::capacity::{load_text, Knee};
use super::demands::Demands;
use super::points::{ResourceKind, StepPoint};
use crate::units::{OpsPerSec, Percent};
use serde::Serialize;

/// The verdict's classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BottleneckKind {
    LoadGenerator,
    Resource,
    NetworkLoss,
    SoftwareContention,
    NotReached,
}

/// The bottleneck and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    pub kind: BottleneckKind,
    /// `cpu`, `disk vda`, `software contention (Lock waits)`, …
    pub name: String,
    pub evidence: Vec<String>,
    pub ruled_out: Vec<String>,
    /// True when the generator set the pace: nothing else can be trusted.
    pub unreliable: bool,
    /// What to try next, when the sweep did not reach a limit.
    pub next: Option<String>,
    /// The saturated resource as the probes name it (`cpu0` for a server
    /// held to one CPU, named `cpu`), when more of it is the cure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// What the analysis must know of the run beyond its points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunShape {
    /// Users (closed loop) rather than a rate.
    pub closed: bool,
    /// The target runs inside perflab (embedded SQLite, the null target):
    /// perflab's CPU is the server's too.
    pub embedded: bool,
    /// perflab's worker threads.
    pub threads: u32,
    /// The target is a single-writer engine (SQLite).
    pub single_writer: bool,
}

/// Decides the bottleneck of complete points ordered by load.
pub fn bottleneck(
    points: &[StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&Knee>,
    demands: &Demands,
) -> Bottleneck {
    let mut generator = generator_evidence(points, shape);
    generator.extend(little_breaches(demands));
    if !generator.is_empty() {
        return Bottleneck {
            kind: BottleneckKind::LoadGenerator,
            resource: None,
            name: "load generator".to_string(),
            evidence: generator,
            ruled_out: vec![
                "every other conclusion: the generator, not the server, set the pace".to_string(),
            ],
            unreliable: true,
            next: Some(
                "give perflab more CPU (another host, fewer competing processes, no CPU quota) and run again"
                    .to_string(),
            ),
        };
    }
    let p = &points[peak];
    // Each resource at its busiest step from the peak on, kept when it
    // was ≥ 90% busy there without working harder per operation than at
    // low load (more than 1.5× its fitted demand means spinning, retries).
    let mut saturated: Vec<(usize, &super::points::ResourceUse)> = Vec::new();
    for r in &p.resources {
        let Some((at, busiest)) = (peak..points.len())
            .filter_map(|i| Some((i, points[i].resource(&r.name)?)))
            .max_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation))
        else {
            continue;
        };
        let q = &points[at];
        let growth = demands
            .resources
            .iter()
            .find(|d| d.resource == r.name)
            .filter(|_| q.throughput > 0.0)
            .map(|d| busiest.servers * busiest.utilisation / q.throughput / d.seconds);
        if busiest.utilisation >= 0.9 && growth.is_none_or(|g| g <= 1.5) {
            saturated.push((at, busiest));
        }
    }
    // The busiest first; the whole host's CPUs before a single CPU unless
    // that one is busier by more than 2 points (a server held to it).
    let rank = |r: &super::points::ResourceUse| {
        r.utilisation
            + if r.kind == ResourceKind::Cpu {
                0.02
            } else {
                0.0
            }
    };
    saturated.sort_by(|a, b| rank(b.1).total_cmp(&rank(a.1)));
    let plateau = knee.is_some() || peak + 1 < points.len();
    // A saturated resource holds throughput level past the peak; a curve
    // that falls away while sessions wait on each other is contention.
    let last = &points[points.len() - 1];
    let retrograde = peak + 1 < points.len() && last.throughput < 0.85 * p.throughput;
    if retrograde && contention_signal(points, knee.map_or(peak, |k| k.at)) {
        return contention_verdict(points, shape, peak, knee, demands);
    }
    if let Some((at, r)) = saturated.first() {
        return resource_verdict(points, peak, *at, r, demands);
    }
    if let Some(loss) = network_loss(points, knee) {
        return loss;
    }
    if plateau {
        return contention_verdict(points, shape, peak, knee, demands);
    }
    not_reached(points, shape, demands)
}

fn generator_evidence(points: &[StepPoint], shape: RunShape) -> Vec<String> {
    let mut out = Vec::new();
    for p in points {
        let g = &p.generator;
        if let Some(t) = g.throttled_share.filter(|t| *t > 0.05) {
            out.push(format!(
                "at {} perflab's cgroup CPU quota held it back for {} of the step",
                load_text(p),
                Percent(t)
            ));
        }
        if !shape.embedded {
            let usable = if shape.closed {
                f64::from(shape.threads).min(p.load.max(1.0))
            } else {
                f64::from(shape.threads)
            };
            let capacity = g.capacity.map_or(usable, |c| c.min(usable));
            if capacity > 0.0 && g.cpus >= 0.9 * capacity {
                out.push(format!(
                    "at {} perflab used {:.2} of the {:.2} CPUs it could use",
                    load_text(p),
                    g.cpus,
                    capacity
                ));
            }
        }
        if let Some(lag) = g.lag_p99_s.filter(|l| *l > 0.010) {
            out.push(format!(
                "at {} arrivals were dispatched up to {} late (p99)",
                load_text(p),
                crate::units::Latency(std::time::Duration::from_secs_f64(lag))
            ));
        }
    }
    out
}

/// Little's law breaches, from the demands' per-step checks.
pub fn little_breaches(demands: &Demands) -> Vec<String> {
    demands
        .steps
        .iter()
        .filter_map(|s| {
            let l = s.little?;
            (l.deviation > 0.05).then(|| {
                format!(
                    "Little's law broken at {:.0} users: X·(R+Z) = {:.2} ({:.0}% off): time passed outside the measured cycle",
                    l.users,
                    l.implied,
                    l.deviation * 100.0
                )
            })
        })
        .collect()
}

fn resource_verdict(
    points: &[StepPoint],
    peak: usize,
    at: usize,
    r: &super::points::ResourceUse,
    demands: &Demands,
) -> Bottleneck {
    let p = &points[peak];
    let mut evidence = Vec::new();
    let mut line = format!(
        "{} {} busy at {}",
        r.name,
        Percent(r.utilisation),
        load_text(&points[at])
    );
    if let Some((name, v)) = &r.saturation {
        line.push_str(&format!(" ({name} {v:.2})"));
    }
    evidence.push(line);
    let trend: Vec<String> = points
        .iter()
        .filter_map(|q| {
            q.resource(&r.name)
                .map(|u| Percent(u.utilisation).to_string())
        })
        .collect();
    evidence.push(format!("{} by step: {}", r.name, trend.join(" → ")));
    if let Some(d) = demands
        .resources
        .iter()
        .find(|d| d.resource == r.name)
        .filter(|d| p.throughput <= 1.05 * d.bound)
    {
        evidence.push(format!(
            "demand {} per operation → X ≤ {}/s; the peak {}/s is {} of that bound",
            crate::units::Latency(std::time::Duration::from_secs_f64(d.seconds)),
            OpsPerSec(d.bound),
            OpsPerSec(p.throughput),
            Percent(p.throughput / d.bound)
        ));
    }
    let mut name = r.name.clone();
    let q = &points[at];
    if r.kind == ResourceKind::OneCpu {
        let total = q.resource("cpu").map_or(0.0, |c| c.utilisation);
        evidence.push(if total < 0.8 {
            format!(
                "the host's CPUs were {} busy overall: the server is held to one CPU (pinned, or single-threaded)",
                Percent(total)
            )
        } else {
            format!("the host's CPUs together were {} busy", Percent(total))
        });
        name = "cpu".to_string();
    }
    if r.name == "cpu" || r.kind == ResourceKind::OneCpu {
        if let Some(isr) = q.extras.cpu_isr.filter(|i| *i >= 0.1) {
            evidence.push(format!(
                "{} of CPU time went to interrupts (%ISR)",
                Percent(isr)
            ));
        }
        let g = &q.generator;
        if g.cpus > 0.0 {
            evidence.push(format!("perflab itself used {:.2} CPUs of it", g.cpus));
        }
    }
    if r.kind == ResourceKind::Disk {
        let faults = q.extras.major_faults_per_s.unwrap_or(0.0);
        let swap = q.extras.swap_in_per_s.unwrap_or(0.0);
        if faults >= 50.0 || swap > 0.0 {
            evidence.push(format!(
                "the host faulted {faults:.0} pages/s in from disk and swapped in {swap:.0} pages/s: memory is short"
            ));
            name = "memory → disk reads".to_string();
        }
    }
    let ruled_out = demands
        .resources
        .iter()
        .filter(|d| {
            let cpu = |k: ResourceKind| matches!(k, ResourceKind::Cpu | ResourceKind::OneCpu);
            d.resource != r.name && !(cpu(d.kind) && cpu(r.kind))
        })
        .take(1)
        .filter_map(|d| {
            let u = p.resource(&d.resource)?.utilisation;
            Some(format!(
                "{}: {} busy at the peak; its bound {}/s is {:.1}× the peak",
                d.resource,
                Percent(u),
                OpsPerSec(d.bound),
                d.bound / p.throughput.max(f64::MIN_POSITIVE)
            ))
        })
        .collect();
    // Short memory shows as disk reads: a faster disk is not the cure.
    let resource = (!name.starts_with("memory")).then(|| r.name.clone());
    Bottleneck {
        kind: BottleneckKind::Resource,
        name,
        evidence,
        ruled_out,
        unreliable: false,
        next: None,
        resource,
    }
}

fn network_loss(points: &[StepPoint], knee: Option<&Knee>) -> Option<Bottleneck> {
    let from = knee.map_or(0, |k| k.at);
    let share = |p: &StepPoint| {
        let segs = p.extras.segments_out_per_s?;
        (segs > 0.0).then(|| p.extras.retransmits_per_s.unwrap_or(0.0) / segs)
    };
    let base = points.first().and_then(|p| p.extras.retransmits_per_s)?;
    let hit = points[from..].iter().find(|p| {
        share(p).is_some_and(|s| s >= 0.01)
            && p.extras.retransmits_per_s.unwrap_or(0.0) >= 2.0 * base.max(0.5)
            && (p.over_200ms >= 0.005 || p.far_tail >= 0.002)
    })?;
    Some(Bottleneck {
        kind: BottleneckKind::NetworkLoss,
        resource: None,
        name: "network loss".to_string(),
        evidence: vec![
            format!(
                "at {} {:.1} TCP segments/s were retransmitted ({} of those sent), against {:.1}/s at the lowest load",
                load_text(hit),
                hit.extras.retransmits_per_s.unwrap_or(0.0),
                Percent(share(hit).unwrap_or(0.0)),
                base
            ),
            format!(
                "{} of operations took over 200 ms ({} over 1 s) while the median was {}",
                Percent(hit.over_200ms),
                Percent(hit.over_1s),
                crate::units::Latency(hit.response.p50)
            ),
        ],
        ruled_out: vec![
            "a busy resource: none was ≥ 90% busy at the peak".to_string(),
        ],
        unreliable: false,
        next: Some(
            "check the link's duplex and errors (perflab doctor, ethtool) on both ends".to_string(),
        ),
    })
}

/// The database's sessions mostly waiting on something other than CPU, or
/// operations retried, from point `from` on.
fn contention_signal(points: &[StepPoint], from: usize) -> bool {
    let (mut waiting, mut total) = (0u64, 0u64);
    for q in &points[from..] {
        for (class, n) in &q.waits {
            total += n;
            if class != "CPU" && class != "Client" {
                waiting += n;
            }
        }
    }
    let retried = points[from..]
        .iter()
        .any(|q| q.retries as f64 >= 0.05 * q.completed.max(1) as f64);
    (total > 0 && waiting as f64 >= 0.3 * total as f64) || retried
}

fn contention_verdict(
    points: &[StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&Knee>,
    demands: &Demands,
) -> Bottleneck {
    let p = &points[peak];
    let last = &points[points.len() - 1];
    let mut evidence = vec![if peak + 1 < points.len() {
        format!(
            "throughput peaked at {}/s at {} and fell to {}/s at {}",
            OpsPerSec(p.throughput),
            load_text(p),
            OpsPerSec(last.throughput),
            load_text(last)
        )
    } else {
        format!(
            "throughput stopped keeping pace with load: {}",
            knee.map_or(String::new(), |k| k.because.clone())
        )
    }];
    let from = knee.map_or(peak, |k| k.at);
    let mut waits = std::collections::BTreeMap::new();
    for q in &points[from..] {
        for (k, v) in &q.waits {
            *waits.entry(k.as_str()).or_insert(0u64) += v;
        }
    }
    let total: u64 = waits.values().sum();
    let top = waits
        .iter()
        .filter(|(k, _)| **k != "CPU" && **k != "Client")
        .max_by_key(|(_, v)| **v)
        .filter(|(_, v)| total > 0 && **v as f64 / total as f64 >= 0.2);
    let mut name = "software contention".to_string();
    if let Some((class, n)) = top {
        let share = *n as f64 / total as f64;
        evidence.push(format!(
            "the database's sessions were waiting on {class} in {} of samples from {} on",
            Percent(share),
            load_text(&points[from])
        ));
        name = format!("software contention ({class} waits)");
    }
    let retries_per_op = last.retries as f64 / (last.completed.max(1)) as f64;
    if retries_per_op >= 0.05 {
        evidence.push(format!(
            "{:.1} retries per operation at {} ({} in the step)",
            retries_per_op,
            load_text(last),
            last.retries
        ));
        if shape.single_writer && top.is_none() {
            name = "software contention (single writer)".to_string();
        }
    }
    // Each resource judged where it was busiest, past the peak.
    let mut ruled_out = Vec::new();
    for d in demands
        .resources
        .iter()
        .filter(|d| d.kind != ResourceKind::OneCpu)
        .take(2)
    {
        let Some((q, r)) = points[peak..]
            .iter()
            .filter_map(|q| Some((q, q.resource(&d.resource)?)))
            .max_by(|a, b| a.1.utilisation.total_cmp(&b.1.utilisation))
        else {
            continue;
        };
        let per_op = r.servers * r.utilisation / q.throughput.max(f64::MIN_POSITIVE);
        let growth = per_op / d.seconds;
        if growth > 1.5 && r.utilisation >= 0.5 {
            ruled_out.push(format!(
                "{}: {} busy at {}, but its work per operation grew from {} to {} ({:.1}×) — the extra went to contention (spinning, retries), not to serving",
                d.resource,
                Percent(r.utilisation),
                load_text(q),
                crate::units::Latency(std::time::Duration::from_secs_f64(d.seconds)),
                crate::units::Latency(std::time::Duration::from_secs_f64(per_op)),
                growth
            ));
        } else {
            ruled_out.push(format!(
                "{}: at most {} busy (at {}); its bound {}/s is {:.1}× the peak",
                d.resource,
                Percent(r.utilisation),
                load_text(q),
                OpsPerSec(d.bound),
                d.bound / p.throughput.max(f64::MIN_POSITIVE)
            ));
        }
    }
    if ruled_out.is_empty() {
        ruled_out.push("a hardware resource: no probe samples to judge by".to_string());
    }
    Bottleneck {
        kind: BottleneckKind::SoftwareContention,
        resource: None,
        name,
        evidence,
        ruled_out,
        unreliable: false,
        next: None,
    }
}

fn not_reached(points: &[StepPoint], shape: RunShape, demands: &Demands) -> Bottleneck {
    let last = &points[points.len() - 1];
    let mut evidence = vec![format!(
        "throughput kept pace with load up to {} ({}/s)",
        load_text(last),
        OpsPerSec(last.throughput)
    )];
    if let Some(d) = demands.tightest() {
        let u = last.resource(&d.resource).map_or(0.0, |r| r.utilisation);
        evidence.push(format!(
            "the busiest resource, {}, was {} busy; its bound is {}/s",
            d.resource,
            Percent(u),
            OpsPerSec(d.bound)
        ));
    }
    let next = if shape.closed {
        let n = demands
            .n_star
            .map_or(last.load * 4.0, |n| (2.0 * n).max(last.load * 2.0));
        format!("sweep further, up to --users {:.0}", n.ceil())
    } else {
        let rate = demands
            .tightest()
            .map_or(last.load * 4.0, |d| (1.2 * d.bound).max(last.load * 2.0));
        format!("sweep further, up to --rate {:.0}", rate.ceil())
    };
    Bottleneck {
        kind: BottleneckKind::NotReached,
        resource: None,
        name: "not reached".to_string(),
        evidence,
        ruled_out: Vec::new(),
        unreliable: false,
        next: Some(next),
    }
}
