//! What stops the server, with the numbers that show it and the strongest
//! alternative ruled out. A performance engineer's order of reasoning, each
//! step stated in its own module:
//!
//! 1. **load generator** ([`generator`]) — when the generator set the
//!    pace, every other conclusion is marked unreliable. For a target the
//!    kernel serves in perflab's own threads, only when perflab's own
//!    work, not the served work, is what kept its CPUs busy
//!    ([`in_process`]): otherwise the CPU is the target's limit.
//! 2. **a caching accelerator** ([`cache`]) — a run through one: a cache
//!    too small for the working set, the origin, the accelerator's CPU or
//!    the link, told apart by the cache's own accounting.
//! 3. **a hardware resource** ([`hardware`]) — at the peak or after it a
//!    resource is ≥ 90% busy without working harder per operation. A CPU
//!    the server is confined to (one CPU, its cgroup's quota) comes first:
//!    lock waits on a saturated CPU are its symptom, said as such.
//! 3. **a rate limit above the device** ([`limit`]) — throughput flat
//!    from the first step on while latency grows with concurrency, no
//!    device busy, no CPU or lock to blame: a throttle or a volume's cap,
//!    named with its value where a cgroup says it.
//! 4. **storage waits** ([`io`]) — the sessions wait on the commit log or
//!    on reading data, whether or not the device looks busy: `commit I/O`,
//!    `memory → disk reads` or `disk reads (the I/O path)`.
//! 5. **the server's workers** ([`workers`]) — a fixed pool of the
//!    server's threads or processes never waited for a request past the
//!    knee while the users outnumbered it: an admission limit of its
//!    configuration. Then a full listen queue that turned clients away
//!    while the server had room for them ([`backlog`]).
//! 5. **network loss** ([`network`]) — retransmissions or a dropping qdisc
//!    with a latency tail.
//! 6. **one single-threaded server process** ([`hardware::one_process`])
//!    — throughput stopped growing while one process of the server ran
//!    out of its one CPU and the host had CPU to spare.
//! 7. **software contention** ([`contention`]) — throughput stopped
//!    growing with load and the sessions waited on each other's locks, or
//!    operations were retried.
//! 8. **the network round trip** ([`network`]) — throughput stopped growing
//!    while the server waited on its client.
//! 9. **inconclusive** — throughput stopped growing and nothing above
//!    explains it, or the only explanation is weak (no retries, lock waits
//!    under half the samples) and rests on steps that never stabilised:
//!    the candidates, and the run that would decide between them. A
//!    confident wrong answer is worse than none.
//! 10. **not reached** — throughput kept pace with load and nothing was
//!     saturated: the next load to try is given. A closed loop whose
//!     throughput grew in proportion to its users at a flat response time
//!     is latency-bound ([`latency_bound`]), checked before the knee is
//!     believed: a noisy knee does not make it a plateau. Nor does a
//!     curve whose last step still grew beyond the noise ([`rising`]):
//!     with its latency growing it is approaching a limit, named with
//!     the bound its demand sets, and the next step is deeper queues or
//!     more users.
//!
//! Every verdict whose run followed the server's threads says where their
//! time went at its step ([`time_spent`]).

pub(crate) mod backlog;
pub(crate) mod cache;
pub(crate) mod contention;
pub(crate) mod device;
pub(crate) mod generator;
pub(crate) mod growth;
pub(crate) mod hardware;
pub(crate) mod in_process;
pub(crate) mod io;
pub(crate) mod latency_bound;
pub(crate) mod limit;
pub(crate) mod network;
pub(crate) mod rising;
pub(crate) mod server_cgroup;
pub(crate) mod status;
pub(crate) mod time_spent;
pub(crate) mod waits;
pub(crate) mod workers;

use super::capacity::{load_text, Knee};
use super::demands::Demands;
use super::points::StepPoint;
use crate::units::{Bytes, Percent};
use serde::Serialize;
use waits::Waits;

/// The verdict's classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BottleneckKind {
    LoadGenerator,
    Resource,
    NetworkLoss,
    SoftwareContention,
    /// A caching accelerator's cache misses because the working set does
    /// not fit in it.
    CacheTooSmall,
    /// The origin behind a caching accelerator sets the pace.
    Origin,
    /// The evidence conflicts or does not decide: the candidates are
    /// listed with what would decide between them.
    Inconclusive,
    NotReached,
    /// The server refused sessions past a setting of its own
    /// (`max_connections`): the sweep could not load it further.
    AdmissionLimit,
}

/// The bottleneck and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Bottleneck {
    pub(crate) kind: BottleneckKind,
    /// `cpu`, `disk vda`, `software contention (Lock waits)`, …
    pub(crate) name: String,
    pub(crate) evidence: Vec<String>,
    pub(crate) ruled_out: Vec<String>,
    /// True when the generator set the pace: nothing else can be trusted.
    pub(crate) unreliable: bool,
    /// What to try next, when the sweep did not reach a limit.
    pub(crate) next: Option<String>,
    /// The saturated resource as the probes name it (`cpu0` for a server
    /// held to one CPU, named `cpu`), when more of it is the cure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resource: Option<String>,
}

impl Bottleneck {
    /// A limit of the server's own configuration (`admission limit (…)`):
    /// no resource to add, nothing ruled out.
    pub(crate) fn admission_limit(name: String, evidence: Vec<String>, next: String) -> Self {
        Bottleneck {
            kind: BottleneckKind::AdmissionLimit,
            name,
            evidence,
            ruled_out: Vec::new(),
            unreliable: false,
            next: Some(next),
            resource: None,
        }
    }
}

/// What the analysis must know of the run beyond its points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunShape {
    /// Users (closed loop) rather than a rate.
    pub(crate) closed: bool,
    /// The target runs inside perflab (embedded SQLite, the null target):
    /// perflab's CPU is the server's too.
    pub(crate) embedded: bool,
    /// perflab's worker threads.
    pub(crate) threads: u32,
    /// The target is a single-writer engine (SQLite).
    pub(crate) single_writer: bool,
    /// No server process: the kernel serves the target (a file, a device),
    /// so there are no server waits to sample.
    pub(crate) kernel_served: bool,
}

/// Decides the bottleneck of complete points ordered by load; `unstable`
/// says that no level's throughput stabilised within the bound. Where the
/// server's threads spent their time at the verdict's step is added to
/// its evidence.
pub(crate) fn bottleneck(
    points: &[StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&Knee>,
    demands: &Demands,
    unstable: bool,
) -> Bottleneck {
    let mut found = decide(points, shape, peak, knee, demands, unstable);
    let at = if found.kind == BottleneckKind::NotReached {
        points.len().saturating_sub(1)
    } else {
        peak
    };
    found.evidence.extend(time_spent::evidence(points, at));
    // A task limit the server sat at binds whatever the verdict.
    found
        .evidence
        .extend(points.iter().find_map(server_cgroup::pids));
    if found.kind == BottleneckKind::NotReached {
        // Served in perflab's threads, the last step's CPU was partly the
        // target's: how much was perflab's own says how far it can go.
        found
            .evidence
            .extend(in_process::evidence(points, at, shape));
    }
    found
}

fn decide(
    points: &[StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&Knee>,
    demands: &Demands,
    unstable: bool,
) -> Bottleneck {
    let generator = generator::evidence(points, shape);
    if !generator.is_empty() {
        return load_generator(generator);
    }
    if let Some(found) = cache::verdict(points, peak, knee) {
        return found;
    }
    let from = knee.map_or(peak, |k| k.at);
    let waits = Waits::over(&points[from..]);
    let fall = contention::fall(points, peak);
    let run = Judged {
        points,
        shape,
        peak,
        knee,
        demands,
    };
    if let Some(found) = saturated(&run, from, &waits, fall) {
        return found;
    }
    if let Some(limit) = limit::verdict(points, shape, &waits) {
        return limit;
    }
    if let Some(io) = io::verdict(points, from, &waits, demands) {
        return latency_bound::commit_io(points, shape, io);
    }
    if let Some(found) = workers::verdict(points, shape, knee) {
        return found;
    }
    if let Some(found) = backlog::verdict(points, shape, peak) {
        return found;
    }
    if let Some(loss) = network::loss(points, knee) {
        return loss;
    }
    if latency_bound::evidence(points, shape).is_some() {
        return latency_bound::verdict(points, shape, not_reached(points, shape, demands));
    }
    // A curve still rising beyond its noise at the last level is no
    // plateau, whatever a knee before it says.
    if let Some(rise) = growth::still_rising(points) {
        // A process out of its one CPU holds the curve, whatever its last
        // gain: a saturated resource, like the hardware's above.
        if let Some(one) = hardware::one_process(points, peak) {
            return one;
        }
        if knee.is_some() && contention::strong(points, from, &waits) {
            return contention::still_rising(&run, &waits, rise);
        }
        let reached = not_reached(points, shape, demands);
        return rising::verdict(points, shape, demands, rise, reached);
    }
    // A busy disk still serving more at the last level is no plateau,
    // whatever a noisy knee before it says.
    let plateau = (knee.is_some() || fall.is_some_and(|f| f.significant))
        && device::not_saturated(points, hardware::SATURATED).is_empty();
    if !plateau {
        return not_reached(points, shape, demands);
    }
    if let Some(one) = hardware::one_process(points, peak) {
        return one;
    }
    if let Some(device) = device::queued(points) {
        return device;
    }
    let found = if contention::evident(points, from, &waits, shape) {
        contention::verdict(points, shape, peak, knee, demands, &waits)
    } else if let Some(rtt) = network::round_trip(points, from, &waits) {
        rtt
    } else {
        return unexplained(points, peak, demands, &waits, shape);
    };
    if unstable && !contention::strong(points, from, &waits) {
        return never_stabilised(found);
    }
    found
}

/// A run being judged: its points, shape, peak, knee and demands.
struct Judged<'a> {
    points: &'a [StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&'a Knee>,
    demands: &'a Demands,
}

/// The verdict of a saturated resource, when one is: the resource, or
/// contention when the curve fell away past it while the sessions waited
/// on each other or retried.
fn saturated(
    run: &Judged<'_>,
    from: usize,
    waits: &Waits,
    fall: Option<contention::Fall>,
) -> Option<Bottleneck> {
    let Judged {
        points,
        shape,
        peak,
        knee,
        demands,
    } = *run;
    let busiest = hardware::busiest(points, peak, demands);
    let found = *hardware::saturated(points, &busiest, shape.embedded).first()?;
    // A saturated resource holds throughput level; a curve that falls
    // away past it, with the resource no longer saturated and the
    // sessions waiting on each other, is contention.
    let last = &points[points.len() - 1];
    let (eased, growth) = after_saturation(last, &found, demands);
    let retried = contention::retried(last);
    let falls = fall.is_some_and(|f| f.significant);
    let contended = falls
        && ((eased < hardware::SATURATED && contention::evident(points, from, waits, shape))
            || (retried && growth > hardware::GROWN));
    if !contended {
        let b = hardware::verdict(points, peak, found, demands, waits);
        if found.resource.kind.is_cpu() {
            return Some(in_process::cpu_verdict(b, &points[found.at], shape));
        }
        return Some(b);
    }
    let mut b = contention::verdict(points, shape, peak, knee, demands, waits);
    b.ruled_out
        .insert(0, fell_away(&points[found.at], &found, last, eased, growth));
    Some(b)
}

/// The verdict when the generator, not the server, set the pace.
fn load_generator(evidence: Vec<String>) -> Bottleneck {
    Bottleneck {
        kind: BottleneckKind::LoadGenerator,
        resource: None,
        name: "load generator".to_string(),
        evidence,
        ruled_out: vec![
            "every other conclusion: the generator, not the server, set the pace".to_string(),
        ],
        unreliable: true,
        next: Some(
            "give perflab more CPU (another host, fewer competing processes, no CPU quota) and run again"
                .to_string(),
        ),
    }
}

/// How busy a saturated resource still was at the `last` step, and its
/// work per operation there over its fitted demand (1 without one).
fn after_saturation(
    last: &StepPoint,
    found: &hardware::Busiest<'_>,
    demands: &Demands,
) -> (f64, f64) {
    let eased = last
        .resource(&found.resource.name)
        .map_or(0.0, |r| r.utilisation);
    // Work per operation grown past saturation while operations were
    // retried: the resource went on retries, not on serving.
    let growth = demands
        .resources
        .iter()
        .find(|d| d.resource == found.resource.name)
        .filter(|_| last.throughput > 0.0)
        .map_or(1.0, |d| {
            found.resource.servers * eased / last.throughput / d.seconds
        });
    (eased, growth)
}

/// Why a resource saturated at `at` is not the verdict: past it,
/// throughput fell away to the `last` step.
fn fell_away(
    at: &StepPoint,
    found: &hardware::Busiest<'_>,
    last: &StepPoint,
    eased: f64,
    growth: f64,
) -> String {
    format!(
        "{}: {} busy at {}, but past it throughput fell away while the sessions waited on each other or retried (at {}: {} busy, {:.1}× the work per operation)",
        found.resource.name,
        Percent(found.resource.utilisation),
        load_text(at),
        load_text(last),
        Percent(eased),
        growth
    )
}

/// Signs that the server is short of memory at a step: its cgroup at or
/// hitting its limit, stalls on memory, the host faulting pages in.
pub(crate) fn memory_evidence(p: &StepPoint) -> Option<Vec<String>> {
    let e = &p.extras;
    let mut out = Vec::new();
    if let Some(limit) = e.memory_limit_bytes.filter(|l| *l > 0.0) {
        let usage = e.memory_usage_bytes.unwrap_or(0.0);
        let hits = e.memory_limit_hits.unwrap_or(0.0);
        if usage >= 0.9 * limit || hits > 0.0 {
            out.push(format!(
                "the server's cgroup held {} of its {} memory limit at {} ({hits:.0} times at the limit): its working set does not fit",
                Bytes(usage as u64),
                Bytes(limit as u64),
                load_text(p)
            ));
        }
    }
    out.extend(server_cgroup::memory_high(p));
    out.extend(status::pool_evidence(p));
    if let Some(stall) = e.memory_stall_share.filter(|s| *s >= 0.05) {
        out.push(format!(
            "its tasks stalled on memory {} of the time (memory.pressure)",
            Percent(stall)
        ));
    } else if let Some(psi) = e.memory_pressure.filter(|s| *s >= 0.05) {
        out.push(format!(
            "the host's tasks stalled on memory {} of the time (PSI)",
            Percent(psi)
        ));
    }
    if let Some(faults) = e
        .server_major_faults_per_s
        .or(e.major_faults_per_s)
        .filter(|f| *f >= 50.0)
    {
        out.push(format!(
            "{faults:.0} major page faults/s at {}",
            load_text(p)
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// Throughput stopped growing and nothing measured explains it.
fn unexplained(
    points: &[StepPoint],
    peak: usize,
    demands: &Demands,
    waits: &Waits,
    shape: RunShape,
) -> Bottleneck {
    let p = &points[peak];
    let mut evidence = vec![format!(
        "throughput stopped growing at {} from {} with no resource saturated, no lock waits and no retries",
        p.rate(p.throughput),
        load_text(p)
    )];
    let mut next = Vec::new();
    if p.resources.is_empty() {
        evidence.push("candidate: a resource of the server's host — none was sampled".to_string());
        next.push("a probe on the server's host (--probe agent://… or node-exporter://…)");
    } else if let Some(d) = demands.tightest() {
        evidence.push(format!(
            "candidate: {} — the tightest bound, {}, is {:.1}× the peak",
            d.resource,
            p.rate(d.bound),
            d.bound / p.throughput.max(f64::MIN_POSITIVE)
        ));
    }
    if shape.kernel_served {
        evidence.push(
            "candidate: the device's own limit or the path to it (a throttle, a volume's IOPS limit), which its busy share does not show"
                .to_string(),
        );
    } else if waits.total == 0 {
        evidence.push(
            "candidate: software contention — the database's waits were not sampled".to_string(),
        );
        next.push("a target whose waits perflab samples (PostgreSQL, MariaDB)");
    } else {
        evidence.push(
            "candidate: a limit outside the server (the client's path, a pool, the link) — its sessions did not wait on each other"
                .to_string(),
        );
    }
    next.push("more users and longer steps (--duration) to see whether throughput falls or holds");
    Bottleneck {
        kind: BottleneckKind::Inconclusive,
        resource: None,
        name: "inconclusive".to_string(),
        evidence,
        ruled_out: Vec::new(),
        unreliable: false,
        next: Some(format!("to decide, run with {}", next.join("; "))),
    }
}

/// A verdict that rests on a curve whose steps never stabilised.
fn never_stabilised(found: Bottleneck) -> Bottleneck {
    let mut evidence = vec![format!(
        "candidate: {} — {}",
        found.name,
        found.evidence.join("; ")
    )];
    evidence.push(
        "no level's throughput stabilised: the shape of the curve it rests on may be noise"
            .to_string(),
    );
    Bottleneck {
        kind: BottleneckKind::Inconclusive,
        resource: None,
        name: "inconclusive".to_string(),
        evidence,
        ruled_out: found.ruled_out,
        unreliable: false,
        next: Some(
            "run longer steps (--duration) or repeat each level (--repeat) on a quieter host"
                .to_string(),
        ),
    }
}

fn not_reached(points: &[StepPoint], shape: RunShape, demands: &Demands) -> Bottleneck {
    let last = &points[points.len() - 1];
    let mut evidence = vec![format!(
        "throughput kept pace with load up to {} ({})",
        load_text(last),
        last.rate(last.throughput)
    )];
    let device = device::not_saturated(points, hardware::SATURATED);
    // A busy disk that kept scaling has no bound in its busy share, nor
    // a disk or a CPU busy with others' work.
    let others = |name: &str| {
        last.resource(name)
            .is_some_and(|r| hardware::others_kept_busy(last, r, shape.embedded))
    };
    if let Some(d) = demands
        .tightest()
        .filter(|d| (device.is_empty() || !d.resource.starts_with("disk ")) && !others(&d.resource))
    {
        let u = last.resource(&d.resource).map_or(0.0, |r| r.utilisation);
        evidence.push(format!(
            "the busiest resource, {}, was {} busy; its bound is {}",
            d.resource,
            Percent(u),
            last.rate(d.bound)
        ));
    }
    evidence.extend(device);
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

#[cfg(test)]
mod tests;
