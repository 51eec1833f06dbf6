//! Latency anatomy: each step's percentiles and its share of operations
//! over 200 ms and over 1 s — the thresholds at which lab engineers saw
//! throughput die while the mean still looked fine — and the tail
//! anomalies a mean hides:
//!
//! - **slow group**: at least 0.2% of operations took over ten times the
//!   90th percentile, a group apart from the body (a retransmission timeout,
//!   a lock wait, a stall), where a single-humped distribution leaves far
//!   under 0.1% there; or, whatever its share, a group the histogram
//!   separates from the body by an empty stretch of at least a factor of
//!   four (a fifth of operations at TCP's 200 ms retransmission timeout
//!   while the median is under a millisecond sits beyond p90 itself);
//! - **tail jump**: from one step to the next the p99.9/p50 ratio grew at
//!   least threefold while the mean moved by under 30%.
//!
//! Each anomaly lists what moved on the server host at the same step.

use super::capacity::load_text;
use super::points::StepPoint;
use serde::Serialize;

/// A tail the mean does not show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TailAnomaly {
    pub(crate) load: f64,
    /// `slow group` or `tail jump`.
    pub(crate) kind: &'static str,
    pub(crate) detail: String,
    /// What moved on the host at the same step.
    pub(crate) moved: Vec<String>,
}

/// The tail anomalies of points ordered by load.
pub(crate) fn tail_anomalies(points: &[StepPoint]) -> Vec<TailAnomaly> {
    let mut out = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| &points[j]);
        if let Some(g) = p.slow_group.filter(|g| g.share > p.far_tail) {
            out.push(TailAnomaly {
                load: p.load,
                kind: "slow group",
                detail: format!(
                    "{:.2}% of operations at {} formed a group apart from the body, from {} up (its median {}; the median of all {})",
                    g.share * 100.0,
                    load_text(p),
                    crate::units::Latency::secs(g.from_s),
                    crate::units::Latency::secs(g.median_s),
                    crate::units::Latency(p.response.p50),
                ),
                moved: before.map(|b| moved(b, p)).unwrap_or_default(),
            });
        } else if p.far_tail >= 0.002 {
            out.push(TailAnomaly {
                load: p.load,
                kind: "slow group",
                detail: format!(
                    "{:.2}% of operations at {} took over 10× the p90 of {} (p99.9 {}, mean {})",
                    p.far_tail * 100.0,
                    load_text(p),
                    crate::units::Latency(p.response.p90),
                    crate::units::Latency(p.response.p999),
                    crate::units::Latency(p.response.mean),
                ),
                moved: before.map(|b| moved(b, p)).unwrap_or_default(),
            });
        }
        let Some(b) = before else { continue };
        let ratio = |q: &StepPoint| {
            let p50 = q.response.p50.as_secs_f64();
            (p50 > 0.0).then(|| q.response.p999.as_secs_f64() / p50)
        };
        let (Some(r0), Some(r1)) = (ratio(b), ratio(p)) else {
            continue;
        };
        let mean_change = (p.response_s() - b.response_s()).abs() / b.response_s().max(1e-12);
        if r1 >= 3.0 * r0 && mean_change < 0.3 {
            out.push(TailAnomaly {
                load: p.load,
                kind: "tail jump",
                detail: format!(
                    "p99.9/p50 went from {r0:.1} to {r1:.1} between {} and {} while the mean moved {:.0}%",
                    load_text(b),
                    load_text(p),
                    mean_change * 100.0
                ),
                moved: moved(b, p),
            });
        }
    }
    out
}

/// What changed markedly on the host from step `a` to step `b`.
fn moved(a: &StepPoint, b: &StepPoint) -> Vec<String> {
    let mut out = Vec::new();
    for r in &b.resources {
        let Some(before) = a.resource(&r.name) else {
            continue;
        };
        if r.utilisation - before.utilisation >= 0.2 {
            out.push(format!(
                "{} busy {} → {}",
                r.name,
                crate::units::Percent(before.utilisation),
                crate::units::Percent(r.utilisation)
            ));
        }
        if let (Some((name, q0)), Some((_, q1))) = (&before.saturation, &r.saturation) {
            if *q1 >= 2.0 * q0.max(0.5) {
                out.push(format!("{} {name} {q0:.2} → {q1:.2}", r.name));
            }
        }
        if let (Some((name, e0)), Some((_, e1))) = (&before.errors, &r.errors) {
            if e1 > e0 {
                out.push(format!("{} {name} {e0:.0} → {e1:.0}", r.name));
            }
        }
    }
    let pairs = [
        (
            "tcp retransmits/s",
            a.extras.retransmits_per_s,
            b.extras.retransmits_per_s,
        ),
        ("tcp timeouts", a.extras.tcp_timeouts, b.extras.tcp_timeouts),
        (
            "listen queue overflows",
            a.extras.listen_overflows,
            b.extras.listen_overflows,
        ),
        (
            "major faults/s",
            a.extras.major_faults_per_s,
            b.extras.major_faults_per_s,
        ),
        (
            "pages scanned/s",
            a.extras.pages_scanned_per_s,
            b.extras.pages_scanned_per_s,
        ),
    ];
    for (name, x, y) in pairs {
        if let (Some(x), Some(y)) = (x, y) {
            if y >= 2.0 * x.max(1.0) {
                out.push(format!("{name} {x:.1} → {y:.1}"));
            }
        }
    }
    out
}

/// Listen-queue overflows on the server's host from which a step's slow
/// connections are named: fewer are a passing burst.
const OVERFLOWS_SEEN: f64 = 10.0;

/// The caveat for connections a full listen (accept) queue on the
/// server's host turned away, once, at the step where most were: each
/// such connection waits for the client's SYN retransmit (1 s, then
/// 3 s), which is a tail no resource of the server shows.
pub(crate) fn listen_overflows(points: &[StepPoint], host: &str) -> Option<String> {
    let (p, overflows) = points
        .iter()
        .filter_map(|p| {
            Some((
                p,
                p.extras.listen_overflows.filter(|n| *n >= OVERFLOWS_SEEN)?,
            ))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "at {} a full listen queue on {host} turned away {overflows:.0} connection attempts (TCP ListenOverflows): each waits for the client's SYN retransmit, 1 s and then 3 s, and {} of operations there took over 1 s; a longer listen backlog (the server's listen() backlog, which net.core.somaxconn caps) or a server that accepts sooner removes that wait",
        load_text(p),
        crate::units::Percent(p.over_1s)
    ))
}

#[cfg(test)]
mod overflow_tests {
    use super::*;
    use crate::analyze::fixture::mva_points;

    /// The step with the most overflows is named with its count and its
    /// share over 1 s; a handful of overflows, or none counted, is not.
    #[test]
    fn a_full_listen_queue_is_named_at_the_step_where_it_turned_most_away() {
        let mut points = mva_points(0.0004, 0.0002, 0.0, &[1, 8, 32]);
        for (p, n) in points.iter_mut().zip([Some(0.0), Some(12.0), Some(240.0)]) {
            p.extras.listen_overflows = n;
            p.over_1s = 0.003;
        }
        let said = listen_overflows(&points, "this host").unwrap();
        assert!(
            said.starts_with(
                "at 32 users a full listen queue on this host turned away 240 connection attempts"
            ),
            "{said}"
        );
        assert!(
            said.contains("0.3% of operations there took over 1 s"),
            "{said}"
        );
        points[2].extras.listen_overflows = Some(9.0);
        points[1].extras.listen_overflows = None;
        assert_eq!(listen_overflows(&points, "this host"), None);
    }
}
