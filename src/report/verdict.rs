//! The verdict as text: capacity and knee, objectives, the bottleneck with
//! its evidence and what was ruled out, what a faster bottleneck would
//! give, each resource's use per step, the
//! demands and bounds with Little's law, the latency anatomy and tail
//! anomalies, the scalability fit, and each step's stability.

use crate::analyze::capacity::load_text;
use crate::analyze::points::ResourceUse;
use crate::analyze::whatif::{Scenario, WhatIf};
use crate::analyze::{Bottleneck, StepPoint, UslFit, Verdict};
use crate::units::{Latency, OpsPerSec, Percent, Rate, RateUnit};
use std::fmt::Write;

fn secs(s: f64) -> Latency {
    Latency::secs(s)
}

/// The what-if predictions in words: how well the model reproduces the
/// run, then a line per change; throughputs in `unit`.
pub(crate) fn what_if_lines(w: &WhatIf, unit: RateUnit) -> (String, Vec<String>) {
    let head = if w.credible {
        format!(
            "the measured demands in a queueing model (exact MVA) reproduce the measured throughput within {} up to the peak",
            Percent(w.model_error)
        )
    } else {
        format!(
            "the measured demands in a queueing model (exact MVA) miss the measured throughput by up to {} (over {}): rough figures",
            Percent(w.model_error),
            Percent(crate::analyze::whatif::CREDIBLE)
        )
    };
    let basis = format!(
        "predicted from {}; each figure within ±{} (95%: the noise of the throughput it starts from, ±{}, and the model's miss on this run, {}, combined)",
        w.basis,
        Percent(w.width),
        Percent(w.noise),
        Percent(w.model_error)
    );
    let lines = std::iter::once(basis)
        .chain(w.scenarios.iter().map(|s| scenario_line(w, s, unit)))
        .collect();
    (head, lines)
}

/// A prediction's 95% interval, ` [lo–hi]`; nothing without one.
fn band(interval: Option<[f64; 2]>) -> String {
    interval.map_or(String::new(), |[lo, hi]| {
        format!(" [{}–{}]", OpsPerSec(lo), OpsPerSec(hi))
    })
}

/// One change's prediction in words: at the highest load with its
/// interval, at the peak's, and what limits after it.
fn scenario_line(w: &WhatIf, s: &Scenario, unit: RateUnit) -> String {
    let rate = |x: f64| Rate(x, unit);
    let load = if s.response_s.is_some() {
        crate::plan::Level::Users(s.load.round() as u32).to_string()
    } else {
        format!("{} offered", rate(s.load))
    };
    if !s.throughput.is_finite() || !s.gain.is_finite() {
        // Nothing measured is left to queue on: the model's
        // throughput has no bound, which is no figure to print.
        return format!(
            "{}: no figure at {load}, as no demand on any other resource was measured (nothing the run saw would limit it)",
            s.change
        );
    }
    let (from, what) = if w.scaled {
        (w.measured, "measured there, the model's gain")
    } else {
        (w.baseline, "as measured")
    };
    let of = if w.scaled { "the" } else { "the model's" };
    let least = if s.at_least { "at least " } else { "" };
    let mut line = format!(
        "{}: {least}{}{} at {load} (×{:.2} {of} {} {what})",
        s.change,
        rate(s.throughput),
        band(s.interval),
        s.gain,
        rate(from)
    );
    if let Some(r) = s.response_s {
        let _ = write!(line, ", mean response {}", secs(r));
    }
    if let Some(p) = s.at_peak.filter(|p| p.throughput.is_finite()) {
        let _ = write!(
            line,
            "; {}{}{} at {} (the peak's load)",
            if p.at_least { "at least " } else { "" },
            rate(p.throughput),
            band(p.interval),
            crate::plan::Level::Users(p.load.round() as u32)
        );
    }
    match (&s.limited_by, s.bound.filter(|b| b.is_finite())) {
        (Some(name), Some(bound)) if s.still => {
            let _ = write!(line, "; {name} still limits, at {}", rate(bound));
        }
        (Some(name), Some(bound)) => {
            let _ = write!(line, "; then {name} limits, at {}", rate(bound));
        }
        _ => {}
    }
    line
}

/// The verdict section printed after a run and by `perflab analyze`.
pub(crate) fn render_verdict(v: &Verdict, run: i64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "verdict (perflab analyze {run}; server resources from {}):",
        v.server_host
    );
    // The answer to the objectives closes the verdict on a line of its
    // own, at the start, for scripts to find (`holds …`).
    let answer = v.slo.as_ref().map(|s| format!("{}\n", s.answer));
    if v.points.is_empty() {
        let _ = writeln!(out, "  no complete step to analyse");
        // A limit that turned the first step's work away is still said.
        if let Some(b) = &v.bottleneck {
            bottleneck(&mut out, b);
        }
        if let Some(none) = &v.no_what_if {
            let _ = writeln!(out, "  what if     {none}");
        }
        out.extend(answer);
        return out;
    }
    capacity_and_knee(&mut out, v);
    objectives(&mut out, v);
    if let Some(b) = &v.bottleneck {
        bottleneck(&mut out, b);
    }
    if let Some(w) = &v.what_if {
        let (head, lines) = what_if_lines(w, v.rate_unit);
        let _ = writeln!(out, "  what if     {head}");
        for line in lines {
            let _ = writeln!(out, "              > {line}");
        }
        // A change asked for that could not be predicted beside the rest
        // (`analyze --log-flush` of a run its log did not limit).
        if let Some(none) = &v.no_what_if {
            let _ = writeln!(out, "              > {none}");
        }
    } else if let Some(none) = &v.no_what_if {
        let _ = writeln!(out, "  what if     {none}");
    }
    out.push_str(&use_table(&v.points));
    out.push_str(&threads_table(&v.points));
    demands(&mut out, v);
    latency_table(&mut out, &v.points);
    tail(&mut out, v);
    usl(&mut out, v);
    stability(&mut out, v);
    caveats_and_left_out(&mut out, v);
    out.extend(answer);
    out
}

/// The peak and the knee, or why there is no knee.
fn capacity_and_knee(out: &mut String, v: &Verdict) {
    let p = |i: usize| &v.points[i];
    if let Some(peak) = v.peak {
        let _ = writeln!(
            out,
            "  capacity    peak {} at {}",
            Rate(p(peak).throughput, v.rate_unit),
            load_text(p(peak))
        );
    }
    match &v.knee {
        Some(k) => {
            let _ = writeln!(
                out,
                "  knee        at {} ({}): {}",
                load_text(p(k.at)),
                Rate(k.throughput, v.rate_unit),
                k.because
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  knee        none: throughput grew ≥ 80% as fast as load and p95 stayed under 2× its first value"
            );
        }
    }
}

/// The objectives (`--slo`): the answer, each level's judgement, and what
/// stops the server at the boundary.
fn objectives(out: &mut String, v: &Verdict) {
    if let Some(slo) = &v.slo {
        super::objectives::outcome_lines(out, slo);
    }
}

/// What stops the server: its evidence, what was ruled out, whether the
/// generator set the pace, and what to look at next.
fn bottleneck(out: &mut String, b: &Bottleneck) {
    let _ = writeln!(out, "  bottleneck  {}", b.name);
    for e in &b.evidence {
        let _ = writeln!(out, "              + {e}");
    }
    for r in &b.ruled_out {
        let _ = writeln!(out, "              - ruled out: {r}");
    }
    if b.unreliable {
        let _ = writeln!(
            out,
            "              ! unreliable: the generator set the pace; the figures below describe perflab, not the server"
        );
    }
    if let Some(next) = &b.next {
        let _ = writeln!(out, "  next        {next}");
    }
}

/// The service demands and the bound they set, then per step the
/// throughput against the bound (both in the workload's unit) and
/// Little's law.
fn demands(out: &mut String, v: &Verdict) {
    let Some(d) = &v.demands else {
        return;
    };
    let shown: Vec<String> = d
        .resources
        .iter()
        .filter(|r| r.kind != crate::analyze::points::ResourceKind::OneCpu)
        .map(|r| {
            format!(
                "{} {} → X ≤ {}",
                r.resource,
                secs(r.seconds),
                Rate(r.bound, v.rate_unit)
            )
        })
        .collect();
    let fitted = if d.unqueued {
        let loads: Vec<String> = d
            .fitted_on
            .iter()
            .map(|&i| load_text(&v.points[i]))
            .collect();
        format!("fitted on {}", loads.join(", "))
    } else {
        format!(
            "no step under {} busy: each the least of one step up to the peak",
            crate::units::Percent(crate::analyze::demands::UNSATURATED)
        )
    };
    let _ = writeln!(
        out,
        "  demands     {} ({}); D = {}, Z = {}{}",
        if shown.is_empty() {
            "no resource samples".to_string()
        } else {
            shown.join("; ")
        },
        fitted,
        secs(d.total_s),
        if d.think_s > 0.0 {
            secs(d.think_s).to_string()
        } else {
            "0".to_string()
        },
        d.n_star
            .map_or(String::new(), |n| format!(", N* = (D+Z)/D_max = {n:.1}"))
    );
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>10} {:>8} {:>18}",
        "load",
        format!("X {}", v.rate_unit),
        "bound",
        "X/bound",
        "Little N vs X(R+Z)"
    );
    for (s, q) in d.steps.iter().zip(&v.points) {
        let _ = writeln!(
            out,
            "  {:>10} {:>10} {:>10} {:>8} {:>18}",
            load_text(q),
            OpsPerSec(s.throughput),
            s.bound
                .map_or("-".to_string(), |b| OpsPerSec(b).to_string()),
            s.bound
                .filter(|b| *b > 0.0)
                .map_or("-".to_string(), |b| Percent(s.throughput / b).to_string()),
            s.little.map_or("-".to_string(), |l| format!(
                "{:.0} vs {:.2}",
                l.users, l.implied
            )),
        );
    }
}

/// Response time percentiles per step, and the shares over 200 ms and 1 s.
fn latency_table(out: &mut String, points: &[StepPoint]) {
    let _ = writeln!(
        out,
        "  {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "latency", "mean", "p50", "p95", "p99", "p99.9", "max", ">200ms", ">1s"
    );
    for q in points {
        let r = &q.response;
        let _ = writeln!(
            out,
            "  {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
            load_text(q),
            Latency(r.mean),
            Latency(r.p50),
            Latency(r.p95),
            Latency(r.p99),
            Latency(r.p999),
            Latency(r.max),
            Percent(q.over_200ms).to_string(),
            Percent(q.over_1s).to_string()
        );
    }
}

/// The tail anomalies and what moved with them, or that there was none.
fn tail(out: &mut String, v: &Verdict) {
    if v.tail.is_empty() {
        let _ = writeln!(
            out,
            "  tail        no anomaly (no slow group, no tail jump)"
        );
    }
    for t in &v.tail {
        let _ = write!(out, "  tail        {}: {}", t.kind, t.detail);
        if !t.moved.is_empty() {
            let _ = write!(out, "; at the same time {}", t.moved.join(", "));
        }
        out.push('\n');
    }
}

/// The scalability fit with its intervals and what it says, or why it
/// was not fitted.
fn usl(out: &mut String, v: &Verdict) {
    match (&v.usl, &v.usl_not_fitted) {
        (Some(f), _) => {
            let _ = write!(
                out,
                "  usl         on N = {}: σ = {} [{}, {}], κ = {} [{}, {}], λ = {}, R² = {:.3}",
                f.concurrency,
                coefficient(f.sigma, 4),
                coefficient(f.sigma_ci.0, 4),
                coefficient(f.sigma_ci.1, 4),
                coefficient(f.kappa, 6),
                coefficient(f.kappa_ci.0, 6),
                coefficient(f.kappa_ci.1, 6),
                Rate(f.lambda, v.rate_unit),
                f.r_squared
            );
            usl_reading(out, f, v.rate_unit);
            out.push('\n');
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "  usl         not fitted: {why}");
        }
        _ => {}
    }
}

/// A fitted coefficient to `decimals` places, or in scientific notation
/// where that would run to more than a dozen digits: a fit that barely
/// bounds a coefficient gave an interval end of 4.9e190, printed whole.
fn coefficient(x: f64, decimals: usize) -> String {
    if x.is_finite() && x.abs() >= 1e6 {
        format!("{x:.2e}")
    } else {
        format!("{x:.decimals$}")
    }
}

/// What a USL fit says: where throughput peaks, or what it approaches.
fn usl_reading(out: &mut String, f: &UslFit, unit: RateUnit) {
    let rate = |x: f64| Rate(x, unit);
    match (f.peak_n, f.max_throughput) {
        (Some(_), Some(x)) if f.sigma >= 1.0 => {
            let _ = write!(
                out,
                "; σ ≥ 1: concurrency gains nothing, throughput is highest at N = 1 ({}) and falls beyond it",
                rate(x)
            );
        }
        (Some(n), Some(x)) => {
            let _ = write!(
                out,
                "; peak at N = {n:.1} ({}): coherency-limited (throughput falls beyond it)",
                rate(x)
            );
        }
        (None, Some(x)) if f.kappa > 0.0 => {
            let _ = write!(
                out,
                "; no peak within ten times the loads measured (κ too small to tell from 0): contention-limited, approaching {}",
                rate(x)
            );
        }
        (None, Some(x)) => {
            let _ = write!(
                out,
                "; κ = 0 (Amdahl): contention-limited, approaching {}",
                rate(x)
            );
        }
        _ => {}
    }
    if f.kappa > 0.0 && f.kappa_ci.0 <= 0.0 {
        let _ = write!(out, "; κ's interval reaches 0: Amdahl's law fits as well");
    }
}

/// The coefficient of variation of throughput per level, and the levels
/// that never stabilised.
fn stability(out: &mut String, v: &Verdict) {
    let cvs: Vec<String> = v
        .stability
        .iter()
        .zip(&v.points)
        .map(|(s, q)| {
            format!(
                "{} {}{}{}",
                load_text(q),
                s.cv.map_or("-".to_string(), |c| Percent(c).to_string()),
                if s.across == "runs" {
                    format!(" over {} runs", s.runs)
                } else {
                    String::new()
                },
                if s.unstable { " (!)" } else { "" }
            )
        })
        .collect();
    let unstable = v.stability.iter().filter(|s| s.unstable).count();
    let _ = writeln!(
        out,
        "  stability   CV of throughput (between intervals, or between runs of a level): {}; {}",
        cvs.join(", "),
        if unstable == 0 {
            format!("every step within {}", Percent(v.max_cv))
        } else {
            format!(
                "{unstable} level(s) over {}: never stabilised",
                Percent(v.max_cv)
            )
        }
    );
}

/// The caveats, and the steps left out of the analysis.
fn caveats_and_left_out(out: &mut String, v: &Verdict) {
    for c in &v.caveats {
        let _ = writeln!(out, "  caveat      {c}");
    }
    if !v.left_out.is_empty() {
        let loads: Vec<String> = v.left_out.iter().map(|l| format!("{l}")).collect();
        let _ = writeln!(
            out,
            "  left out    steps that failed or were cut short, at load {}",
            loads.join(", ")
        );
    }
}

/// Each resource's use per step, by the USE method.
fn use_table(points: &[StepPoint]) -> String {
    let mut out = String::new();
    if points.iter().all(|q| q.resources.is_empty()) {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:>10} {:>22} {:>22} {:>16} {:>14} {:>12} {:>9} {:>14}",
        "use",
        "cpu U (isr) S runq",
        "busiest disk U S q",
        "busiest link U",
        "mem S majflt/s",
        "E retrans/s",
        "perflab",
        "top db wait"
    );
    for q in points {
        let _ = writeln!(
            out,
            "  {:>10} {:>22} {:>22} {:>16} {:>14} {:>12} {:>9} {:>14}",
            load_text(q),
            use_cpu(q),
            use_disk(q),
            use_link(q),
            q.extras
                .major_faults_per_s
                .map_or("-".to_string(), |f| format!("{f:.1}")),
            q.extras
                .retransmits_per_s
                .map_or("-".to_string(), |r| format!("{r:.1}")),
            format!("{:.2} cpu", q.generator.cpus),
            top_wait(q)
        );
    }
    out
}

/// Where the server's and perflab's serving threads spent each step, as
/// their largest shares; nothing when no step read their threads.
fn threads_table(points: &[StepPoint]) -> String {
    let mut out = String::new();
    if points.iter().all(|q| q.threads.is_empty()) {
        return out;
    }
    let cell = |s: Option<&crate::probe::counters::threads::ThreadStates>| {
        s.map_or("-".to_string(), |s| {
            format!(
                "{} ({:.1}/{} serving)",
                crate::analyze::threads::shares_text(s, 3),
                s.active_threads,
                s.threads
            )
        })
    };
    let _ = writeln!(
        out,
        "  {:>10}  {:<64} perflab threads",
        "threads", "server threads"
    );
    for q in points {
        let _ = writeln!(
            out,
            "  {:>10}  {:<64} {}",
            load_text(q),
            cell(q.threads.server.as_ref()),
            cell(q.threads.perflab.as_ref())
        );
    }
    out
}

/// The CPUs' use: busy, %ISR and run queue.
fn use_cpu(q: &StepPoint) -> String {
    q.resource("cpu").map_or("-".to_string(), |c| {
        format!(
            "{} ({}) {}",
            Percent(c.utilisation),
            q.extras
                .cpu_isr
                .map_or("-".to_string(), |i| Percent(i).to_string()),
            c.saturation
                .as_ref()
                .map_or("-".to_string(), |(_, v)| format!("{v:.1}"))
        )
    })
}

/// The busiest resource whose name starts with `prefix`.
fn busiest<'a>(q: &'a StepPoint, prefix: &str) -> Option<&'a ResourceUse> {
    q.resources
        .iter()
        .filter(|r| r.name.starts_with(prefix))
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
}

/// The busiest disk: its name, busy share and queue.
fn use_disk(q: &StepPoint) -> String {
    busiest(q, "disk ").map_or("-".to_string(), |d| {
        format!(
            "{} {} {}",
            d.name.trim_start_matches("disk "),
            Percent(d.utilisation),
            d.saturation
                .as_ref()
                .map_or("-".to_string(), |(_, v)| format!("{v:.2}"))
        )
    })
}

/// The busiest link direction: its name and busy share.
fn use_link(q: &StepPoint) -> String {
    busiest(q, "link ").map_or("-".to_string(), |l| {
        format!(
            "{} {}",
            l.name.trim_start_matches("link "),
            Percent(l.utilisation)
        )
    })
}

/// The database's commonest wait class and its share of samples.
fn top_wait(q: &StepPoint) -> String {
    let total: u64 = q.waits.values().sum();
    q.waits
        .iter()
        .max_by_key(|(_, n)| **n)
        .filter(|_| total > 0)
        .map_or("-".to_string(), |(k, n)| {
            format!("{k} {}", Percent(*n as f64 / total as f64))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::points::ResourceKind;
    use crate::analyze::whatif::Changed;

    /// A coefficient the fit barely bounds is printed in a few
    /// characters, not in its hundreds of digits.
    #[test]
    fn a_huge_coefficient_is_printed_in_scientific_notation() {
        assert_eq!(coefficient(0.047, 4), "0.0470");
        assert_eq!(coefficient(4.9112e190, 4), "4.91e190");
        assert_eq!(coefficient(-2.5e7, 6), "-2.50e7");
        assert_eq!(coefficient(999_999.0, 4), "999999.0000");
    }

    /// A run whose only measured demand is the CPU (the null target):
    /// with the CPU out of the way the model's throughput has no bound,
    /// said in words, never printed as `inf` or `NaN`.
    #[test]
    fn an_unbounded_prediction_is_said_in_words() {
        let gone = Scenario {
            change: "cpu out of the way".to_string(),
            load: 2.0,
            throughput: f64::INFINITY,
            response_s: Some(0.0),
            gain: f64::INFINITY,
            limited_by: None,
            bound: None,
            still: false,
            server_cpus: None,
            server_memory: None,
            ends: None,
            sharing: 0.0,
            at_least: false,
            changed: Changed {
                kind: ResourceKind::Cpu,
                factor: None,
            },
            at_peak: None,
            interval: None,
        };
        let w = WhatIf {
            model_error: 0.01,
            baseline: 1e6,
            measured: 1e6,
            scaled: false,
            credible: true,
            noise: 0.02,
            width: 0.0224,
            basis: "the demands measured up to the peak".to_string(),
            scenarios: vec![gone],
        };
        let (_, lines) = what_if_lines(&w, RateUnit::default());
        let text = lines.join("\n");
        for word in ["inf", "NaN"] {
            assert!(!text.contains(word), "{text}");
        }
        assert!(
            text.contains("cpu out of the way: no figure at 2 users, as no demand on any other resource was measured"),
            "{text}"
        );
    }
}
