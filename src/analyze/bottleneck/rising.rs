//! A curve still rising is no plateau ([`super::growth`] says when the
//! last step still grew). A knee (growth under 80% of the load's) says the
//! curve bends; it does not say it has flattened.
//!
//! Throughput still growing while the response time grows is a system
//! approaching a limit it has not reached: queues lengthen as a centre
//! nears saturation (the utilisation law `U = X·D`: the resource with the
//! largest demand bounds throughput at `1/D_max`). That bound is evidence
//! of where the curve heads, never the verdict by itself: a device that
//! serves several I/Os at once, or a demand fitted at low load, can put it
//! anywhere near the last step without having run out.

use super::super::capacity::{growth_efficiency, load_text, KNEE_EFFICIENCY};
use super::super::demands::{Demand, Demands};
use super::super::points::StepPoint;
use super::growth::{Rise, MIN_GROWTH};
use super::{device, hardware, Bottleneck, BottleneckKind, RunShape};
use crate::units::{Latency, Percent};

/// p95 grown by more than this share at the last step: queues lengthen.
const LATENCY_GREW: f64 = 0.10;

/// Whether the p95 response time grew at the last step.
fn latency_grew(points: &[StepPoint]) -> bool {
    let [.., before, last] = points else {
        return false;
    };
    let (a, b) = (before.response.p95, last.response.p95);
    !a.is_zero() && b.as_secs_f64() > a.as_secs_f64() * (1.0 + LATENCY_GREW)
}

/// The resource with the tightest bound that the run's own work kept
/// busy at the `last` step: not a disk busy with others' I/O, nor the
/// host's CPUs busy mostly with other processes.
fn approached<'a>(demands: &'a Demands, last: &StepPoint, embedded: bool) -> Option<&'a Demand> {
    demands.resources.iter().find(|d| {
        let Some(r) = last.resource(&d.resource) else {
            return false;
        };
        let others = if r.kind.is_cpu() {
            hardware::others_dominate(last, embedded)
        } else {
            device::others_io(last, r)
        };
        !others && d.bound > 0.0
    })
}

/// The last step's gain in words: how much throughput grew for how much
/// more load, beyond the noise.
fn still_grew(before: &StepPoint, last: &StepPoint, rise: Rise) -> String {
    format!(
        "throughput still grew at the last step: {}, beyond what noise could make of it (±{}: the two steps' 95% intervals combined, at least {}): the curve had not flattened",
        super::growth::gain_text(before, last, rise),
        Percent(rise.noise.max(MIN_GROWTH)),
        Percent(MIN_GROWTH),
    )
}

/// The verdict of a run whose throughput still rose at its last step
/// while its latency grew: not reached, approaching the tightest bound's
/// resource. When the latency held, `reached` (the plain not-reached
/// verdict), its next step kept — but where the last step grew less
/// than the load did (the knee's bend), its first line says how much it
/// grew rather than that it kept pace.
pub(crate) fn verdict(
    points: &[StepPoint],
    shape: RunShape,
    demands: &Demands,
    rise: Rise,
    mut reached: Bottleneck,
) -> Bottleneck {
    let [.., before, last] = points else {
        return reached;
    };
    if !latency_grew(points) {
        let bent = growth_efficiency(before, last).is_some_and(|e| e < KNEE_EFFICIENCY);
        if let Some(first) = reached.evidence.first_mut().filter(|_| bent) {
            *first = still_grew(before, last, rise);
        }
        return reached;
    }
    let mut evidence = vec![still_grew(before, last, rise)];
    evidence.push(format!(
        "while p95 grew {} → {}: operations queue longer as the load nears a limit",
        Latency(before.response.p95),
        Latency(last.response.p95)
    ));
    let limit = approached(demands, last, shape.embedded);
    if let Some(d) = limit {
        let u = last.resource(&d.resource).map_or(0.0, |r| r.utilisation);
        evidence.push(format!(
            "{} was {} busy at {}; its demand {} per operation bounds throughput at {}, and the last step reached {} of that bound: the limit it approaches, not yet reached",
            d.resource,
            Percent(u),
            load_text(last),
            Latency::secs(d.seconds),
            last.rate(d.bound),
            Percent(last.throughput / d.bound)
        ));
    }
    evidence.extend(device::not_saturated(points, hardware::SATURATED));
    let name = limit.map_or_else(
        || "not reached".to_string(),
        |d| format!("not reached (approaching {}'s limit)", d.resource),
    );
    let deeper = if shape.kernel_served {
        "deeper queues"
    } else if shape.closed {
        "more users"
    } else {
        "a higher rate"
    };
    Bottleneck {
        kind: BottleneckKind::NotReached,
        name,
        evidence,
        next: reached.next.map(|n| format!("{deeper}: {n}")),
        ..reached
    }
}
