//! Whether the generator, not the server, set the pace: perflab's cgroup
//! quota throttled it for over 5% of a step; for a target outside
//! perflab's process, perflab used ≥ 90% of the CPUs it could use
//! (affinity, quota, worker threads); a closed-loop step broke Little's
//! law `N = X·(R+Z)` by over 5%; an open loop's dispatch ran over 10 ms
//! late at p99 (Schroeder, Wierman and Harchol-Balter, *Open versus
//! closed*, NSDI 2006, on what a generator that sets the pace does to the
//! figures).
//!
//! Little's law counts every operation a user spent time on: a retried
//! operation's retries are inside its response time, but failed
//! operations keep no latency, so a step with failures is checked on the
//! operations attempted, and a shortfall it can explain — time spent in
//! failures longer than successes — is not laid at the generator's door.
//! The window's edges move the sum either way: an operation that
//! straddles its start is counted whole, one still running at its end not
//! at all, and with a slow tail (a retransmission timeout, a serialisation
//! retry's back-off) those few operations weigh. An excess or a shortfall
//! of up to twice the p99 over the window's length is theirs. (A closed
//! loop's response time runs from the intended start, so a generator that
//! wakes late shows in R, inside the law; what breaks it beyond the edges
//! is time spent neither in an operation nor in thinking.)

use super::super::capacity::load_text;
use super::super::demands::Demands;
use super::super::points::StepPoint;
use super::RunShape;
use crate::units::Percent;

/// Failures above this share of attempts may hold the time Little's law
/// misses.
const FAILURES_EXPLAIN: f64 = 0.01;

/// Evidence that the generator set the pace; empty when it did not.
pub fn evidence(points: &[StepPoint], shape: RunShape, demands: &Demands) -> Vec<String> {
    let mut out = Vec::new();
    for p in points {
        let g = &p.generator;
        // On generators, the busiest one's use is the step's.
        let who = p
            .busiest_generator
            .as_ref()
            .map_or_else(|| "perflab".to_string(), |name| format!("generator {name}"));
        if let Some(t) = g.throttled_share.filter(|t| *t > 0.05) {
            out.push(format!(
                "at {} {who}'s cgroup CPU quota held it back for {} of the step",
                load_text(p),
                // Throttled time adds up over CPUs: it can exceed the wall.
                Percent(t.min(1.0))
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
                    "at {} {who} used {:.2} of the {:.2} CPUs it could use",
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
                crate::units::Latency::secs(lag)
            ));
        }
    }
    out.extend(little_breaches(points, demands));
    out
}

/// Little's law breaches that failures cannot explain.
pub fn little_breaches(points: &[StepPoint], demands: &Demands) -> Vec<String> {
    demands
        .steps
        .iter()
        .filter_map(|s| {
            let l = s.little?;
            if l.deviation <= 0.05 {
                return None;
            }
            let p = points.iter().find(|p| p.load == s.load)?;
            let window = p.completed as f64 / p.throughput.max(f64::MIN_POSITIVE);
            let edges = 2.0 * p.response.p99.as_secs_f64() / window.max(f64::MIN_POSITIVE);
            if l.deviation <= 0.05 + edges {
                return None;
            }
            // Users' time in failures is not in R: counted on attempts,
            // a shortfall failures can hold is theirs.
            let attempted = p.attempts_per_s() * (p.response_s() + p.think_s);
            if p.error_rate >= FAILURES_EXPLAIN && attempted <= l.users * 1.05 {
                return None;
            }
            Some(format!(
                "Little's law broken at {:.0} users: X·(R+Z) = {:.2} ({:.0}% off): time passed outside the measured cycle",
                l.users,
                l.implied,
                l.deviation * 100.0
            ))
        })
        .collect()
}
