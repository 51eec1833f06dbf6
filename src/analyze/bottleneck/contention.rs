//! Software contention, named only on evidence of it: the database's
//! sessions waited on each other's locks (row locks, heavier locks, the
//! server's internal locks) in ≥ 30% of samples from the knee on, or
//! operations were retried (≥ 0.05 per operation: serialisation
//! failures, deadlocks, a single writer's busy database) — with
//! throughput that stopped growing with load. Retries per operation that
//! rise with load are contention evidence in themselves. Where the
//! sessions' waits show no locks (MariaDB without the PROCESS privilege),
//! the server's own row-lock time ≥ 30% of the response time
//! ([`super::status::row_lock_evidence`]) is that evidence.
//!
//! A fall of throughput past its peak counts only when it is larger than
//! the steps' own interval-to-interval variation: twice the combined
//! coefficient of variation of the two steps, and at least 5%.

use super::super::capacity::{load_text, Knee};
use super::super::demands::Demands;
use super::super::points::{ResourceKind, StepPoint};
use super::waits::{WaitMeaning, Waits};
use super::{Bottleneck, BottleneckKind, RunShape};
use crate::units::{Latency, Percent};

/// Share of samples waiting on locks that names contention.
const LOCK_BOUND: f64 = 0.3;
/// Retries per operation that name contention.
const RETRY_BOUND: f64 = 0.05;

/// A fall of throughput from the peak to the last step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fall {
    /// 1 − X_last / X_peak.
    pub(crate) drop: f64,
    /// The two steps' combined interval variation (relative).
    pub(crate) noise: f64,
    pub(crate) significant: bool,
}

/// The fall past the peak, when the peak is not the last step.
pub(crate) fn fall(points: &[StepPoint], peak: usize) -> Option<Fall> {
    let last = points.last()?;
    if peak + 1 >= points.len() {
        return None;
    }
    let p = &points[peak];
    let drop = 1.0 - last.throughput / p.throughput.max(f64::MIN_POSITIVE);
    let cv = |q: &StepPoint| q.interval_cv().unwrap_or(0.0);
    let noise = (cv(p).powi(2) + cv(last).powi(2)).sqrt();
    Some(Fall {
        drop,
        noise,
        significant: drop > (2.0 * noise).max(0.05),
    })
}

/// Operations retried at a step: at least [`RETRY_BOUND`] per operation.
pub(crate) fn retried(p: &StepPoint) -> bool {
    retries_per_op(p) >= RETRY_BOUND
}

fn retries_per_op(p: &StepPoint) -> f64 {
    p.retries as f64 / p.completed.max(1) as f64
}

/// The positive evidence of contention from point `from` on: lock waits
/// or retries.
pub(crate) fn evident(points: &[StepPoint], from: usize, waits: &Waits, shape: RunShape) -> bool {
    let retried = points[from..].iter().any(retried);
    let row_locks = || {
        points[from..]
            .iter()
            .any(|q| super::status::row_lock_evidence(q).is_some())
    };
    waits.share(WaitMeaning::is_contention) >= LOCK_BOUND
        || retried
        || (shape.single_writer && points[from..].iter().any(|q| q.retries > 0))
        || row_locks()
}

/// Evidence that needs no curve to stand on: half the samples on locks,
/// or every other operation retried at some step.
pub(crate) fn strong(points: &[StepPoint], from: usize, waits: &Waits) -> bool {
    waits.share(WaitMeaning::is_contention) >= 0.5
        || points[from..].iter().any(|q| retries_per_op(q) >= 0.5)
}

/// The contention verdict of a curve still rising at its last step past
/// a knee, with half the sessions' samples on locks (or every other
/// operation retried, [`strong`]): each user added less than the one
/// before because more sessions queue on the same locks, which, not a
/// resource the curve approaches, set its pace. Said beside the curve.
pub(super) fn still_rising(
    run: &super::Judged<'_>,
    waits: &Waits,
    rise: super::growth::Rise,
) -> Bottleneck {
    let mut b = verdict(
        run.points,
        run.shape,
        run.peak,
        run.knee,
        run.demands,
        waits,
    );
    let [.., before, last] = run.points else {
        return b;
    };
    b.evidence.insert(
        1,
        format!(
            "throughput still grew at the last step, {}: each user added less, queueing on the same locks",
            super::growth::gain_text(before, last, rise)
        ),
    );
    b
}

/// The contention verdict: its name, what shows it, what was ruled out.
pub(crate) fn verdict(
    points: &[StepPoint],
    shape: RunShape,
    peak: usize,
    knee: Option<&Knee>,
    demands: &Demands,
    waits: &Waits,
) -> Bottleneck {
    let p = &points[peak];
    let last = &points[points.len() - 1];
    let from = knee.map_or(peak, |k| k.at);
    let mut evidence = vec![curve(points, peak, knee)];
    let mut name = "software contention".to_string();
    let top = waits
        .top(WaitMeaning::is_contention)
        .filter(|(_, share)| *share >= 0.2);
    if let Some((key, share)) = top {
        let meaning = WaitMeaning::of(key);
        let (what, label) = if !key.contains(':') {
            (key.to_string(), format!("{key} waits"))
        } else if meaning == WaitMeaning::RowLock {
            let all = waits.share(|m| m == WaitMeaning::RowLock);
            evidence.push(format!(
                "the database's sessions were waiting on row locks ({key} most) in {} of samples from {} on",
                Percent(all),
                load_text(&points[from])
            ));
            (String::new(), "row locks".to_string())
        } else {
            (key.to_string(), format!("{key} waits"))
        };
        if !what.is_empty() {
            evidence.push(format!(
                "the database's sessions were waiting on {what} in {} of samples from {} on",
                Percent(share),
                load_text(&points[from])
            ));
        }
        name = format!("software contention ({label})");
    }
    if top.is_none() {
        if let Some(rows) = super::status::row_lock_evidence(last) {
            evidence.push(rows);
            name = "software contention (row locks)".to_string();
        }
    }
    let retries = retries_per_op(last);
    if retries >= RETRY_BOUND {
        evidence.push(format!(
            "{:.1} retries per operation at {} ({} in the step)",
            retries,
            load_text(last),
            last.retries
        ));
        let first = retries_per_op(&points[0]);
        if retries >= 2.0 * first.max(0.01) && points.len() >= 3 {
            evidence.push(format!(
                "retries per operation rose with load, from {first:.2} at {}: the more users, the more of them collide",
                load_text(&points[0])
            ));
        }
        if top.is_none() && !name.contains("row locks") {
            name = if shape.single_writer {
                "software contention (single writer)".to_string()
            } else {
                "software contention (retried transactions)".to_string()
            };
        }
    }
    Bottleneck {
        kind: BottleneckKind::SoftwareContention,
        resource: None,
        name,
        evidence,
        ruled_out: ruled_out(points, peak, demands, p.throughput),
        unreliable: false,
        next: None,
    }
}

/// The curve in words: a fall larger than its noise, a knee, or a level
/// stretch.
fn curve(points: &[StepPoint], peak: usize, knee: Option<&Knee>) -> String {
    let p = &points[peak];
    let last = &points[points.len() - 1];
    match fall(points, peak) {
        Some(f) if f.significant => format!(
            "throughput peaked at {} at {} and fell to {} at {}",
            p.rate(p.throughput),
            load_text(p),
            last.rate(last.throughput),
            load_text(last)
        ),
        Some(f) => format!(
            "throughput levelled off at {} from {} (the {} fall to {} is within the steps' own variation, {})",
            p.rate(p.throughput),
            load_text(p),
            Percent(f.drop),
            load_text(last),
            Percent(f.noise)
        ),
        None => format!(
            "throughput stopped keeping pace with load: {}",
            knee.map_or(String::new(), |k| k.because.clone())
        ),
    }
}

/// Each resource judged where it was busiest, past the peak.
fn ruled_out(points: &[StepPoint], peak: usize, demands: &Demands, x: f64) -> Vec<String> {
    let mut out = Vec::new();
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
            out.push(format!(
                "{}: {} busy at {}, but its work per operation grew from {} to {} ({:.1}×) — the extra went to contention (spinning, retries), not to serving",
                d.resource,
                Percent(r.utilisation),
                load_text(q),
                Latency::secs(d.seconds),
                Latency::secs(per_op),
                growth
            ));
        } else {
            out.push(format!(
                "{}: at most {} busy (at {}); its bound {} is {:.1}× the peak",
                d.resource,
                Percent(r.utilisation),
                load_text(q),
                q.rate(d.bound),
                d.bound / x.max(f64::MIN_POSITIVE)
            ));
        }
    }
    if out.is_empty() {
        out.push("a hardware resource: no probe samples to judge by".to_string());
    }
    out
}
