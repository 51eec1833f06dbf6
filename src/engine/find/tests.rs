//! The search's tests: against noiseless judges (a single-server queue,
//! four servers' exact ratios), and at the states where a rule decides.

use super::*;

/// A single-server queue's p95 over a limit: ln(20)/(μ − λ) against
/// `limit`, the capacity within it λ* = μ − ln(20)/limit.
fn mm1_ratio(load: f64, mu: f64, limit: f64) -> f64 {
    if load >= mu {
        1e6
    } else {
        (20f64).ln() / (mu - load) / limit
    }
}

/// Records each (load, decision, latency ratio) in `s`, in order.
fn record_all(s: &mut Search, probes: impl IntoIterator<Item = (f64, Decision, Option<f64>)>) {
    for (load, decision, ratio) in probes {
        s.record(Probe {
            load,
            decision,
            ratio,
        });
    }
}

/// Runs a search against a noiseless judge; gives the steps it took
/// and the bracket it ended with.
fn search(start: Level, precision: f64, ratio: impl Fn(f64) -> f64) -> (usize, f64, f64) {
    let mut s = Search::new(start, precision);
    let mut steps = 0;
    while let Some(level) = s.next() {
        steps += 1;
        assert!(steps < 40, "the search does not end");
        let r = ratio(level.value());
        let decision = if r < 1.0 {
            Decision::Meets
        } else {
            Decision::Breaks
        };
        s.record(Probe {
            load: level.value(),
            decision,
            ratio: Some(r),
        });
    }
    let (lo, hi) = s.bracket();
    (
        steps,
        lo.map_or(0.0, |p| p.load),
        hi.map_or(f64::INFINITY, |p| p.load),
    )
}

#[test]
fn the_search_brackets_a_queue_to_the_precision_in_few_steps() {
    // μ = 1000/s, p95 < 10 ms: λ* = 1000 − 299.6 = 700.4/s.
    let truth = 1000.0 - (20f64).ln() / 0.01;
    let (steps, lo, hi) = search(Level::Rate(100.0), 0.05, |l| mm1_ratio(l, 1000.0, 0.01));
    assert!(lo < truth && truth < hi, "{lo} {truth} {hi}");
    assert!(hi <= lo * 1.05 + 1e-9, "{lo} {hi}");
    // Doubling 100 → 800 takes four, the bracket two or three more. A
    // linear sweep at 5% of the answer would need 20.
    assert!(steps <= 7, "{steps} steps");
}

#[test]
fn without_a_latency_ratio_the_search_bisects() {
    let (steps, lo, hi) = search(Level::Users(1), 0.05, |l| if l <= 37.0 { 0.5 } else { 2.0 });
    // Doubling 1 → 64, then bisecting [32, 64] to one user apart.
    let (steps_b, lo_b, hi_b) = {
        let mut s = Search::new(Level::Users(1), 0.05);
        let mut steps = 0;
        while let Some(level) = s.next() {
            steps += 1;
            let meets = level.value() <= 37.0;
            s.record(Probe {
                load: level.value(),
                decision: if meets {
                    Decision::Meets
                } else {
                    Decision::Breaks
                },
                ratio: None,
            });
        }
        let (lo, hi) = s.bracket();
        (steps, lo.unwrap().load, hi.unwrap().load)
    };
    assert_eq!((lo_b, hi_b), (37.0, 38.0));
    assert!(steps_b <= 12, "{steps_b}");
    assert!(
        lo <= 37.0 && hi >= 38.0 && hi <= lo * 1.05 + 1.0,
        "{lo} {hi} {steps}"
    );
}

#[test]
fn a_first_level_that_breaks_searches_down() {
    let (_, lo, hi) = search(Level::Rate(1000.0), 0.05, |l| mm1_ratio(l, 1000.0, 0.01));
    assert!(lo < 700.4 && 700.4 < hi, "{lo} {hi}");
    // One user that breaks: nothing lower to try.
    let mut s = Search::new(Level::Users(1), 0.05);
    s.record(Probe {
        load: 1.0,
        decision: Decision::Breaks,
        ratio: Some(3.0),
    });
    assert_eq!(s.next(), None);
}

#[test]
fn an_undecided_level_is_not_claimed() {
    let mut s = Search::new(Level::Users(8), 0.05);
    record_all(
        &mut s,
        [
            (8.0, Decision::Meets),
            (16.0, Decision::Undecided),
            (32.0, Decision::Breaks),
        ]
        .map(|(load, decision)| (load, decision, None)),
    );
    let (lo, hi) = s.bracket();
    assert_eq!((lo.unwrap().load, hi.unwrap().load), (8.0, 16.0));
    assert_eq!(s.next(), Some(Level::Users(11)));
}

#[test]
fn a_level_too_close_to_call_is_approached_from_just_below() {
    let mut s = Search::new(Level::Rate(2000.0), 0.05);
    record_all(
        &mut s,
        [
            (2000.0, Decision::Meets, 0.7),
            (4000.0, Decision::Breaks, 9.0),
            (3310.0, Decision::Undecided, 1.02),
        ]
        .map(|(load, decision, ratio)| (load, decision, Some(ratio))),
    );
    // 3310 / 1.05 = 3152.4, rounded up to three figures: meeting
    // there closes the bracket.
    assert_eq!(s.next(), Some(Level::Rate(3160.0)));
    s.record(Probe {
        load: 3160.0,
        decision: Decision::Meets,
        ratio: Some(0.9),
    });
    assert_eq!(s.next(), None);
}

/// A bracket from 3430/s to 3680/s (7.3%) closes in one probe at any
/// level from 3510 (meeting there leaves 4.8%) to 3600 (missing there
/// leaves 5.0%): the probe goes there, not where the ratios point
/// (3605/s, and 2% beyond after a level that met).
#[test]
fn a_bracket_one_probe_can_close_is_closed_by_it() {
    let mut s = Search::new(Level::Rate(2000.0), 0.05);
    record_all(
        &mut s,
        [
            (2000.0, Decision::Meets, 0.35),
            (4000.0, Decision::Breaks, 8.0),
            (3170.0, Decision::Meets, 0.7),
            (3680.0, Decision::Breaks, 1.05),
            (3430.0, Decision::Meets, 0.9),
        ]
        .map(|(load, decision, ratio)| (load, decision, Some(ratio))),
    );
    let next = s.next().unwrap().value();
    assert!((3510.0..=3600.0).contains(&next), "{next}");
    for decision in [Decision::Meets, Decision::Breaks, Decision::Undecided] {
        let mut after = s.clone();
        after.record(Probe {
            load: next,
            decision,
            ratio: Some(1.0),
        });
        assert_eq!(after.next(), None, "{decision:?} at {next}");
    }
    // Twice the precision or more: no one probe closes it.
    assert_eq!(s.closing(3000.0, 3400.0), None);
}

#[test]
fn the_estimate_follows_the_reciprocal_ratio_to_one() {
    // M/M/1, μ = 1000/s, p95 < 10 ms: the reciprocal ratio is linear
    // in the load, so two loads give λ* = 700.4/s exactly, from
    // either side of it or both below.
    let truth = 1000.0 - (20f64).ln() / 0.01;
    let probe = |load: f64| Probe {
        load,
        decision: Decision::Meets,
        ratio: Some(mm1_ratio(load, 1000.0, 0.01)),
    };
    for (lo, hi) in [(600.0, 800.0), (500.0, 650.0)] {
        let at = estimate(probe(lo), probe(hi)).unwrap();
        assert!((at - truth).abs() < 1e-6, "{lo}..{hi}: {at}");
    }
    // A ratio that does not rise says nothing of where it reaches 1.
    let flat = |load| Probe {
        load,
        decision: Decision::Meets,
        ratio: Some(0.5),
    };
    assert_eq!(estimate(flat(100.0), flat(200.0)), None);
}

/// Four servers of exp:1ms: the levels a search ran, their ratios the
/// queue's own, then each off by 5% of its value in turn. The fit
/// through the levels near the answer lands closer to it than the
/// line through the bracket's two ends.
#[test]
fn the_levels_near_the_answer_place_it_better_than_the_bracket_alone() {
    use crate::workload::null::{theory, ServiceDist};
    let service = ServiceDist::Exponential {
        mean: std::time::Duration::from_millis(1),
    };
    let limit = 0.002;
    let truth =
        theory::max_rate(4, service, 0.5, std::time::Duration::from_secs_f64(limit)).unwrap();
    let ratio = |load: f64| {
        theory::response_quantile(4, service, load, 0.5).map_or(1e6, |t| t.as_secs_f64() / limit)
    };
    let loads = [2000.0, 3160.0, 3370.0, 3530.0, 4000.0];
    let probes = |skew: &dyn Fn(usize) -> f64| -> Vec<Probe> {
        loads
            .iter()
            .enumerate()
            .map(|(i, &load)| Probe {
                load,
                decision: Decision::Meets,
                ratio: Some(ratio(load) * skew(i)),
            })
            .collect()
    };
    let exact = fitted_estimate(&probes(&|_| 1.0)).unwrap();
    assert!(
        (exact / truth - 1.0).abs() < 0.01,
        "{exact} against {truth}"
    );
    for off in [0.95, 1.05] {
        for i in 1..4 {
            let p = probes(&|j| if j == i { off } else { 1.0 });
            let fitted = fitted_estimate(&p).unwrap();
            let (lo, hi) = (p[2], p[3]);
            let ends = estimate(lo, hi).unwrap_or(f64::NAN);
            assert!(
                (fitted / truth - 1.0).abs() < 0.05,
                "level {i} off by {off}: {fitted} against {truth}"
            );
            assert!(
                (fitted - truth).abs() <= (ends - truth).abs() + 1.0 || i == 1,
                "level {i} off by {off}: fitted {fitted}, ends {ends}, truth {truth}"
            );
        }
    }
    // Fewer than two levels near the answer, or none falling: none.
    assert_eq!(fitted_estimate(&probes(&|_| 1.0)[..2]), None);
}

/// A narrow meet is taken without another run where the levels
/// before it place the answer a precision above it, and not where
/// they place it nearer, past the level that did not meet, or nowhere.
#[test]
fn a_narrow_meet_well_under_the_fitted_answer_is_borne_out() {
    let mut s = Search::new(Level::Rate(2000.0), 0.05);
    assert!(!s.borne_out(2900.0), "no level judged yet");
    // Reciprocal ratios on a line that crosses 1 at 3,200/s.
    let ratio = |load: f64| 1.0 / (1.0 + (3200.0 - load) / 2000.0);
    record_all(
        &mut s,
        [
            (2000.0, Decision::Meets),
            (4000.0, Decision::Breaks),
            (2820.0, Decision::Meets),
            (3210.0, Decision::Undecided),
        ]
        .map(|(load, decision)| (load, decision, Some(ratio(load)))),
    );
    assert!(s.borne_out(3040.0), "3,040 is over 5% under 3,200");
    assert!(!s.borne_out(3060.0), "3,060 is within 5% of 3,200");
    // A fit past the lowest level that did not meet is not taken.
    let mut far = Search::new(Level::Rate(2000.0), 0.05);
    record_all(
        &mut far,
        [(2300.0, Decision::Meets), (2500.0, Decision::Undecided)]
            .map(|(load, decision)| (load, decision, Some(ratio(load)))),
    );
    assert!(!far.borne_out(2200.0), "fitted 3,200, over 2,500 × 1.05");
}

/// A level runs again only where its second run may change the
/// answer.
#[test]
fn a_level_runs_again_only_where_that_may_move_the_answer() {
    use super::super::judge::Judgement;
    let judged = |decision: Decision, estimate: f64| LevelJudgement {
        decision,
        objectives: vec![Judgement {
            objective: "p95<5ms".to_string(),
            decision,
            estimate,
            low: estimate - 0.02,
            high: estimate + 0.02,
            bound: 0.05,
            unit: "share",
        }],
    };
    let (over, under) = (
        judged(Decision::Undecided, 0.065),
        judged(Decision::Undecided, 0.035),
    );
    let record = |s: &mut Search, load: f64, decision: Decision| {
        s.record(Probe {
            load,
            decision,
            ratio: None,
        });
    };
    // No level met yet: a break halves on, two undecided levels stop
    // the search; either decision is worth a run.
    let mut s = Search::new(Level::Rate(1000.0), 0.05);
    assert!(s.runs_again(1000.0, &over) && s.runs_again(1000.0, &under));
    // Above a level that met: only a meet moves the answer up.
    record(&mut s, 1000.0, Decision::Meets);
    assert!(!s.runs_again(2000.0, &over));
    assert!(s.runs_again(2000.0, &under));
    // ... and none is needed where not meeting closes the bracket.
    assert!(!s.runs_again(1050.0, &under));
    // A narrow meet runs again (no level bears it out), a narrow
    // break does not.
    assert!(s.runs_again(1500.0, &judged(Decision::Meets, 0.04)));
    assert!(!s.runs_again(1500.0, &judged(Decision::Breaks, 0.06)));
}

/// Levels are rates at three figures: a bracket from 3,170/s to
/// 3,330/s is within 5% (3,328.5/s is no level), and no probe is
/// spent on 3,180/s to close it.
#[test]
fn a_bracket_within_the_precision_at_the_levels_resolution_is_narrow() {
    let mut s = Search::new(Level::Rate(2000.0), 0.05);
    record_all(
        &mut s,
        [
            (2000.0, Decision::Meets),
            (4000.0, Decision::Breaks),
            (3170.0, Decision::Meets),
            (3330.0, Decision::Undecided),
        ]
        .map(|(load, decision)| (load, decision, Some(1.0))),
    );
    assert_eq!(s.next(), None);
    assert!(!s.narrow(3170.0, 3340.0));
}

#[test]
fn a_search_down_stops_at_two_levels_too_close_to_call() {
    let s = undecided_going_down(1000.0, &[1000.0, 500.0], 1.0);
    assert_eq!(s.next(), None);
}

/// A search from `start` that probes each of `loads` in turn (asserted)
/// and finds each too close to call with the latency ratio `ratio`.
fn undecided_going_down(start: f64, loads: &[f64], ratio: f64) -> Search {
    let mut s = Search::new(Level::Rate(start), 0.05);
    for &load in loads {
        assert_eq!(s.next(), Some(Level::Rate(load)));
        s.record(Probe {
            load,
            decision: Decision::Undecided,
            ratio: Some(ratio),
        });
    }
    s
}

/// Two levels too close to call whose lowest read under the limit: the
/// search goes on down, as less load is likely to meet; a third such
/// level stops it.
#[test]
fn a_search_down_goes_on_below_a_level_that_leaned_to_meet() {
    let s = undecided_going_down(2000.0, &[2000.0, 1000.0, 500.0], 0.83);
    assert_eq!(s.next(), None);
    // The lowest read over the limit: two stop it.
    let mut s = Search::new(Level::Rate(2000.0), 0.05);
    record_all(
        &mut s,
        [
            (2000.0, Decision::Undecided, Some(0.9)),
            (1000.0, Decision::Undecided, Some(1.1)),
        ],
    );
    assert_eq!(s.next(), None);
}

#[test]
fn rates_are_probed_at_three_figures() {
    let s = Search::new(Level::Rate(1.0), 0.05);
    assert_eq!(s.level(3314.7), Level::Rate(3310.0));
    assert_eq!(s.level(0.123456), Level::Rate(0.123));
}
