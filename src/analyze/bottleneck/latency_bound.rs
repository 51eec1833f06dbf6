//! Latency-bound is not saturated. In a closed loop, Little's law gives
//! `X = N / (R + Z)`: while the response time R holds flat, throughput
//! grows in proportion to the users, whatever R is made of. A run whose
//! every operation waits ~100 ms for a throttled log flush, and whose
//! commits share that flush (group commit), serves 16 times as much at
//! 16 times the users: nothing is saturated, capacity is not reached, and
//! the answer is more users — not `inconclusive` because one step's
//! growth fell under the knee's 80% in the noise.
//!
//! The test is on the whole sweep, in log–log terms (elasticities): over
//! at least a fourfold range of users the response time grew at most
//! [`FLAT_R`] as fast as the load (a saturated centre past its knee gives
//! 1: R ∝ N), throughput at least [`PROPORTIONAL_X`] as fast, and it still
//! grew at the last step. Where the time of each operation went comes
//! from the server's threads (see [`super::time_spent`]).
//!
//! A commit that waits on its flush is `commit I/O` whichever server
//! shows it (PostgreSQL's wait events, MariaDB's threads or counters),
//! with its property beside it: `latency-bound: not reached` when this
//! rule holds, else `saturated` (throughput stopped growing) or
//! `approaching saturation`. The flush's limit on the server's cgroup,
//! when its writes reached one, is named with its value ([`super::server_cgroup`]).

use super::super::capacity::{growth_efficiency, load_text};
use super::super::points::StepPoint;
use super::{growth, io, server_cgroup, time_spent, Bottleneck, BottleneckKind, RunShape};
use crate::units::Latency;
use std::time::Duration;

/// The largest elasticity of the response time in the load that is still
/// flat.
pub(crate) const FLAT_R: f64 = 0.35;

/// The smallest elasticity of throughput in the load that is still in
/// proportion.
pub(crate) const PROPORTIONAL_X: f64 = 0.65;

/// The smallest growth efficiency of the last step: throughput still
/// growing where the sweep ended.
pub(crate) const STILL_GROWING: f64 = 0.5;

/// The not-reached verdict `reached` made latency-bound, when throughput
/// grew in proportion to the users at a flat response time; `reached`
/// as it was otherwise. Its own evidence (a device still scaling, the
/// busiest resource's bound) is kept after the rule's.
pub(crate) fn verdict(points: &[StepPoint], shape: RunShape, reached: Bottleneck) -> Bottleneck {
    let Some(mut evidence) = evidence(points, shape) else {
        return reached;
    };
    let last = &points[points.len() - 1];
    let flush = time_spent::dominant(points, points.len() - 1)
        .is_some_and(|d| d.starts_with("the commit flush"));
    let limit = server_cgroup::write_limit(last);
    evidence.extend(limit.as_ref().map(|l| l.evidence(last)));
    // Its first line, that throughput kept pace, the rule says with numbers.
    evidence.extend(reached.evidence.into_iter().skip(1));
    let (name, next) = if flush {
        let cure = limit.map_or_else(
            || "or shorten each flush (a faster log device, one without a throttle)".to_string(),
            |l| format!("or {}", l.next()),
        );
        (
            format!("{}, {LATENCY_BOUND}", io::commit_name(last)),
            Some(format!(
                "more users give more commits per flush: {}; {cure}",
                reached.next.unwrap_or_default()
            )),
        )
    } else {
        (
            "not reached (latency-bound)".to_string(),
            reached.next.map(|n| format!("more users: {n}")),
        )
    };
    Bottleneck {
        kind: BottleneckKind::NotReached,
        name,
        evidence,
        next,
        ..reached
    }
}

/// The property of a commit I/O verdict that rests on a latency-bound run.
const LATENCY_BOUND: &str = "latency-bound: not reached";

/// A commit I/O verdict `found` with its property beside its name:
/// latency-bound when throughput grew in proportion to the users at a
/// flat response (the kind becomes not reached), saturated when it
/// stopped growing, approaching saturation while it still rose. Any
/// other verdict as it was.
pub(crate) fn commit_io(points: &[StepPoint], shape: RunShape, found: Bottleneck) -> Bottleneck {
    if !found.name.starts_with("commit I/O") {
        return found;
    }
    if let Some(mut evidence) = evidence(points, shape) {
        evidence.extend(found.evidence);
        return Bottleneck {
            kind: BottleneckKind::NotReached,
            name: format!("{}, {LATENCY_BOUND}", found.name),
            evidence,
            next: found.next.map(|n| {
                format!("more users give more commits per flush; to raise the rate per user: {n}")
            }),
            ..found
        };
    }
    let property = if growth::still_rising(points).is_some() {
        "approaching saturation"
    } else {
        "saturated"
    };
    Bottleneck {
        name: format!("{}, {property}", found.name),
        ..found
    }
}

/// Whether the run is latency-bound, and its evidence: over the widest
/// range of steps ending at the last one that spans a fourfold load and
/// holds the rule. A first step the limit did not yet hold back (a
/// throttle's budget that one user's commits stay under answers them at
/// once) is left out of the range rather than hiding a flat response
/// from the steps past it.
pub(crate) fn evidence(points: &[StepPoint], shape: RunShape) -> Option<Vec<String>> {
    if !shape.closed || points.len() < 3 {
        return None;
    }
    let last = &points[points.len() - 1];
    // Each start from the first on, while at least two steps follow it.
    let (from, range) = (0..points.len() - 2).find_map(|i| {
        let range = in_proportion(&points[i..])?;
        Some((i, range))
    })?;
    let first = &points[from];
    Some(vec![
        format!(
            "capacity not reached up to {}: throughput grew in proportion to the users ({} at {} → {} at {}, ×{:.1} for ×{:.0} the users) at a flat response time ({} → {})",
            load_text(last),
            first.rate(first.throughput),
            load_text(first),
            last.rate(last.throughput),
            load_text(last),
            last.throughput / first.throughput,
            range,
            Latency(first.response.mean),
            Latency(last.response.mean),
        ),
        spent(points, last),
        "latency-bound, not saturated: by Little's law X = N/(R+Z), more users give more throughput until a resource saturates".to_string(),
    ])
}

/// The load's range over `steps` when throughput grew in proportion to it
/// at a flat response time, still grew at the last step, and fell at no
/// step beyond its noise; none otherwise or under a fourfold range.
fn in_proportion(steps: &[StepPoint]) -> Option<f64> {
    let (first, last) = (steps.first()?, steps.last()?);
    let range = last.load / first.load;
    if !(first.load > 0.0 && range >= 4.0 && first.throughput > 0.0 && last.throughput > 0.0) {
        return None;
    }
    let (r0, r1) = (first.response_s(), last.response_s());
    if r0 <= 0.0 || r1 <= 0.0 {
        return None;
    }
    let elasticity = |a: f64, b: f64| (b / a).ln() / range.ln();
    let e_r = elasticity(r0, r1);
    let e_x = elasticity(first.throughput, last.throughput);
    let pair = &steps[steps.len().checked_sub(2)?..];
    let growing = growth_efficiency(&pair[0], &pair[1]).is_some_and(|e| e >= STILL_GROWING);
    // No step fell below the one before it beyond its own noise.
    let steady = steps.windows(2).all(|w| {
        let noise = w[1].interval_cv().unwrap_or(0.0).max(0.05);
        w[1].throughput >= w[0].throughput * (1.0 - 2.0 * noise)
    });
    (e_r <= FLAT_R && e_x >= PROPORTIONAL_X && growing && steady).then_some(range)
}

/// What each operation spends and where, at the `last` step.
fn spent(points: &[StepPoint], last: &StepPoint) -> String {
    let r = last.response.mean;
    let think = (last.think_s > 0.0)
        .then(|| Duration::try_from_secs_f64(last.think_s).ok())
        .flatten();
    let mut line = format!("each operation spends {} in its response", Latency(r));
    if let Some(z) = think {
        line.push_str(&format!(" and {} in think time", Latency(z)));
    }
    let at = points.len() - 1;
    match time_spent::dominant(points, at) {
        Some(where_) => line.push_str(&format!("; it went mostly to {where_}")),
        None if think.is_some_and(|z| z > r) => {
            line.push_str("; think time is most of each cycle");
        }
        None => line.push_str(
            "; where it went is not known: the server's threads were not followed (--server-pid or a managed server)",
        ),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::super::super::fixture::{mva_points, SHAPE};
    use super::super::super::{verdict_of, DEFAULT_MAX_CV};
    use super::*;
    use crate::probe::counters::threads::{ThreadSplit, ThreadStates};

    /// A closed loop at users 2…32 whose response time is `r` seconds at
    /// each step (Little's law gives the throughput), resources idle.
    fn sweep(r: &[f64]) -> Vec<StepPoint> {
        let users = [2, 4, 8, 16, 32];
        let mut points = mva_points(0.0004, 0.0006, 0.0, &users);
        for (p, r) in points.iter_mut().zip(r) {
            p.throughput = p.load / r;
            let d = Duration::from_secs_f64(*r);
            p.response.mean = d;
            p.response.p50 = d;
            p.response.p95 = d * 2;
            p.interval_throughputs = vec![p.throughput; 10];
            for res in &mut p.resources {
                res.utilisation = p.throughput * 0.0003;
            }
        }
        points
    }

    /// Commits that wait ~100 ms on a throttled flush: the connection
    /// threads wait on the group commit's lock while one flushes.
    fn flushing() -> ThreadStates {
        let split = ThreadSplit {
            on_cpu: 0.3,
            io_journal: 0.9,
            lock: 6.0,
            clients: 0.4,
            ..ThreadSplit::default()
        };
        ThreadStates {
            threads: 40,
            active_threads: 8.0,
            all: ThreadSplit {
                sleep: 20.0,
                ..split
            },
            active: split,
            channels: vec![("futex_do_wait".to_string(), 6.0)],
            ..ThreadStates::default()
        }
    }

    /// The failure this rule is for: 35/s at 2 users to 318/s at 32 at a
    /// flat ~100 ms, with a step whose growth fell under 80% (a noisy
    /// knee). Before it, the verdict was `inconclusive`.
    #[test]
    fn throughput_in_proportion_to_users_at_a_flat_response_is_latency_bound() {
        let mut points = sweep(&[0.057, 0.075, 0.11, 0.098, 0.10]);
        for p in &mut points {
            p.threads.server = Some(flushing());
        }
        let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
        assert!(v.knee.is_some(), "the noisy knee is there: {:?}", v.knee);
        let b = v.bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
        assert_eq!(
            b.name, "commit I/O (the log's device), latency-bound: not reached",
            "the commit flush in the same words as on PostgreSQL: {b:?}"
        );
        let all = b.evidence.join("\n");
        assert!(all.contains("capacity not reached up to 32 users"), "{all}");
        assert!(all.contains("each operation spends 100"), "{all}");
        assert!(all.contains("commit flush"), "{all}");
        assert!(all.contains("queued behind it"), "{all}");
        assert!(
            all.contains("where the server's threads spent their time at 32 users: locks"),
            "{all}"
        );
        assert!(b.next.unwrap().contains("more users"));
    }

    /// The same flush under a throttle whose budget one user's commits
    /// stayed under: 21 ms at the first step (most commits answered at
    /// once), 50–90 ms from the next on. The first step is left out of
    /// the range, not counted against the flat response past it.
    #[test]
    fn a_first_step_under_the_limit_leaves_the_rest_latency_bound() {
        let mut points = sweep(&[0.021, 0.05, 0.07, 0.085, 0.09]);
        for p in &mut points {
            p.threads.server = Some(flushing());
        }
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
        assert!(b.name.ends_with("latency-bound: not reached"), "{b:?}");
        let all = b.evidence.join("\n");
        assert!(all.contains("at 4 users → "), "{all}");
        assert!(all.contains("for ×8 the users"), "{all}");
    }

    /// A response that grew with the load all the way is not latency-bound
    /// over any range.
    #[test]
    fn a_response_growing_with_the_load_is_latency_bound_over_no_range() {
        let points = sweep(&[0.01, 0.02, 0.04, 0.08, 0.16]);
        assert_eq!(evidence(&points, SHAPE), None);
    }

    /// The same flush held by a write throttle on the server's cgroup,
    /// found through its threads alone: the throttle is named with its
    /// value, and what the server wrote against it.
    #[test]
    fn a_flush_held_by_the_servers_throttle_names_it() {
        use super::super::super::iopath::LimitUse;
        use crate::probe::cgroup::IoLimit;
        let mut points = sweep(&[0.1, 0.1, 0.11, 0.1, 0.1]);
        for p in &mut points {
            p.threads.server = Some(flushing());
            p.io_path.limits.push(LimitUse {
                owner: "the server's cgroup".to_string(),
                limit: IoLimit {
                    device: "vda".to_string(),
                    number: "254:0".to_string(),
                    cgroup: "/db".to_string(),
                    dir: "/sys/fs/cgroup/unified/db".to_string(),
                    write_iops: Some(10),
                    interface: "io.max".to_string(),
                    ..IoLimit::default()
                },
                writes_per_s: 10.0,
                ..LimitUse::default_for_tests()
            });
        }
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(
            b.name,
            "commit I/O (an io.max of 10 write IOPS on the server's cgroup, device vda), latency-bound: not reached",
            "{b:?}"
        );
        let all = b.evidence.join("\n");
        assert!(all.contains("write IOPS limited to 10 on vda (254:0) by the server's cgroup /sys/fs/cgroup/unified/db (io.max); the server wrote 10/s against it at 32 users"), "{all}");
        assert!(b
            .next
            .unwrap()
            .contains("raise or lift the io.max of 10 write IOPS"));
    }

    /// Without the server's threads the rule still holds on the curve,
    /// and says where the time went is not known.
    #[test]
    fn without_the_threads_where_the_time_went_is_not_known() {
        let points = sweep(&[0.05, 0.052, 0.049, 0.051, 0.05]);
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
        assert!(
            b.evidence.iter().any(|e| e.contains("not followed")),
            "{b:?}"
        );
        assert!(!b
            .evidence
            .iter()
            .any(|e| e.contains("where the server's threads")));
    }

    /// A response time that grows with the users is a queue, not a
    /// latency: a plateau with nothing to explain it stays inconclusive.
    #[test]
    fn a_response_growing_with_the_users_is_no_latency_bound() {
        let points = sweep(&[0.01, 0.012, 0.02, 0.04, 0.08]);
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::Inconclusive, "{b:?}");
        assert!(!b.name.contains("latency-bound"));
    }

    /// A wait channel the probe could not read is said to be so.
    #[test]
    fn unreadable_wait_channels_are_a_caveat() {
        let mut points = sweep(&[0.1; 5]);
        let mut states = flushing();
        states.wchan_unreadable = true;
        points[4].threads.server = Some(states);
        let line = time_spent::evidence(&points, 4).unwrap();
        assert!(line.contains("unreadable"), "{line}");
        assert!(time_spent::evidence(&points, 3).is_none());
    }
}
