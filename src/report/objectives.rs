//! The objectives' judgements in words: a step's (`meets p95<5ms`,
//! `breaks p95<5ms: 7.9% over [6.1–9.8%]`), and the run's answer with what
//! stops the server at its boundary.

use crate::analyze::SloOutcome;
use crate::engine::{Decision, Judgement, LevelJudgement};
use crate::units::{Latency, Percent};
use std::fmt::Write;

/// A step's or level's judgement: the decision, then each objective that
/// did not simply meet, with its estimate and 95% interval.
pub(crate) fn judgement_words(j: &LevelJudgement) -> String {
    let mut out = j.decision.as_str().to_string();
    let mut first = true;
    for o in &j.objectives {
        out.push_str(if first { " " } else { ", " });
        first = false;
        out.push_str(&o.objective);
        if o.decision != Decision::Meets || j.decision == Decision::Meets {
            let _ = write!(out, " {}", figures(o));
            if o.decision != j.decision {
                let _ = write!(out, " ({})", o.decision.as_str());
            }
        }
    }
    out
}

/// An objective's estimate and interval: `1.2% over [0.8–1.7%]` for a
/// percentile, `0.4% [0.1–0.9%]` for a share, `3.1ms [2.9ms–3.3ms]` for a
/// time.
fn figures(o: &Judgement) -> String {
    let over = if o.objective.starts_with('p') {
        " over"
    } else {
        ""
    };
    if o.unit == "share" {
        let bounded = |v: f64| Percent(v.clamp(0.0, 1.0));
        if o.low == o.high {
            return format!("{}{over}", bounded(o.estimate));
        }
        format!(
            "{}{over} [{}–{}]",
            bounded(o.estimate),
            bounded(o.low),
            bounded(o.high)
        )
    } else {
        let time = |v: f64| Latency::secs(v.max(0.0));
        if o.low == o.high || !o.low.is_finite() || !o.high.is_finite() {
            return time(o.estimate).to_string();
        }
        format!("{} [{}–{}]", time(o.estimate), time(o.low), time(o.high))
    }
}

/// The verdict's lines on the objectives: the answer, each level's
/// judgement, and what stops the server at the boundary.
pub(crate) fn outcome_lines(out: &mut String, slo: &SloOutcome) {
    let _ = writeln!(out, "  objectives  {}", slo.objectives.join(", "));
    for level in &slo.levels {
        let _ = writeln!(
            out,
            "              {:>9}  {}",
            if level.load.fract() == 0.0 {
                format!("{:.0}", level.load)
            } else {
                crate::units::OpsPerSec(level.load).to_string()
            },
            judgement_words(&level.judgement)
        );
    }
    if let Some(at) = &slo.at_max {
        let _ = writeln!(out, "  within      {at}");
    }
    if let Some(at) = &slo.at_limit {
        let _ = writeln!(out, "  beyond      {at}");
    }
}
