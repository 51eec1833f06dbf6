//! The judgement's tests: decisions on synthetic intervals, the clump
//! and Poisson intervals, and the sums read from real tallies.

use super::*;

fn slo(text: &str) -> Slo {
    Slo::parse(text).unwrap()
}

/// Batches of `n` operations each with `over` of them over the limit.
fn shares(rows: &[(f64, f64)]) -> Vec<Batch> {
    rows.iter()
        .map(|&(x, n)| Batch { sums: vec![(x, n)] })
        .collect()
}

#[test]
fn another_run_is_spent_only_where_it_may_decide() {
    let undecided = |estimate: f64, low: f64, high: f64| LevelJudgement {
        decision: Decision::Undecided,
        objectives: vec![Judgement {
            objective: "p95<5ms".to_string(),
            decision: Decision::Undecided,
            estimate,
            low,
            high,
            bound: 0.05,
            unit: "share",
        }],
    };
    // On the bound: twice the intervals still straddle it.
    assert!(!undecided(0.051, 0.03, 0.072).another_run_may_decide(false));
    // 1.5 points over with a half-width of 2: the half-width with
    // twice the intervals, about 1.41, would exclude the bound, and
    // the level break; not meet.
    assert!(undecided(0.065, 0.045, 0.085).another_run_may_decide(false));
    assert!(!undecided(0.065, 0.045, 0.085).another_run_may_decide(true));
    // As far under: it may meet.
    assert!(undecided(0.035, 0.015, 0.055).another_run_may_decide(true));
    // Two undecided objectives, one leaning each way: the level may
    // be decided (broken), but meets only if both do.
    let mut both = undecided(0.035, 0.015, 0.055);
    both.objectives
        .extend(undecided(0.065, 0.045, 0.085).objectives);
    assert!(both.another_run_may_decide(false));
    assert!(!both.another_run_may_decide(true));
    // One interval's count alone: nothing to scale.
    let unknown = undecided(0.05, f64::NEG_INFINITY, f64::INFINITY);
    assert!(unknown.another_run_may_decide(false) && unknown.another_run_may_decide(true));
    // Decided by less than two half-widths: a narrow meet may not
    // hold, a narrow break is not run again; decided by more, neither
    // is.
    let decided = |decision: Decision, estimate: f64, low: f64, high: f64| {
        let mut j = undecided(estimate, low, high);
        j.decision = decision;
        j.objectives[0].decision = decision;
        j
    };
    assert!(decided(Decision::Meets, 0.04, 0.032, 0.048).another_run_may_decide(false));
    assert!(!decided(Decision::Breaks, 0.06, 0.052, 0.068).another_run_may_decide(false));
    assert!(!decided(Decision::Meets, 0.02, 0.015, 0.025).another_run_may_decide(false));
}

#[test]
fn a_share_far_under_or_over_its_bound_is_decided() {
    let p95 = [slo("p95<200ms")];
    // 1% over, ten intervals of 1000: meets.
    let j = judge(&p95, &shares(&[(10.0, 1000.0); 10]));
    assert_eq!(j.decision, Decision::Meets, "{j:?}");
    // 12% over: breaks.
    let j = judge(&p95, &shares(&[(120.0, 1000.0); 10]));
    assert_eq!(j.decision, Decision::Breaks, "{j:?}");
}

#[test]
fn a_share_near_its_bound_or_from_few_operations_is_undecided() {
    let p95 = [slo("p95<200ms")];
    // 5.1% over on average, intervals scattered 3–7%: the bound is
    // inside the interval.
    let rows: Vec<(f64, f64)> = (0..10)
        .map(|i| (if i % 2 == 0 { 31.0 } else { 71.0 }, 1000.0))
        .collect();
    assert_eq!(judge(&p95, &shares(&rows)).decision, Decision::Undecided);
    // None of 20 operations over: the Wilson floor keeps it open (its
    // upper end is about 16%).
    let j = judge(&p95, &shares(&[(0.0, 10.0), (0.0, 10.0)]));
    assert_eq!(j.decision, Decision::Undecided, "{j:?}");
    assert!(j.objectives[0].high > 0.1);
    // One interval only: no batch interval; a mean is undecided, a
    // share has its binomial interval.
    let j = judge(&[slo("mean<5ms")], &shares(&[(0.004 * 100.0, 100.0)]));
    assert_eq!(j.decision, Decision::Undecided);
    let j = judge(&[slo("p95<5ms")], &shares(&[(0.0, 5000.0)]));
    assert_eq!(j.decision, Decision::Meets, "{j:?}");
}

#[test]
fn correlated_intervals_widen_the_interval_beyond_the_binomial() {
    // 4.5% over overall, but in bursts: 0% in half the intervals, 9% in
    // the others. A binomial interval over 20,000 operations would call
    // it (±0.3%); the batch means do not.
    let rows: Vec<(f64, f64)> = (0..20)
        .map(|i| (if i % 2 == 0 { 0.0 } else { 90.0 }, 1000.0))
        .collect();
    let j = judge(&[slo("p95<200ms")], &shares(&rows));
    assert_eq!(j.decision, Decision::Undecided, "{j:?}");
    let (lo, hi) = wilson(0.045, 20_000.0);
    assert!(hi < 0.05 && lo > 0.04, "the binomial alone would say meets");
}

#[test]
fn hits_in_one_clump_widen_the_interval_to_the_clumps_count() {
    let p99 = [slo("p99<10ms")];
    // A calm window of a queue near saturation: 21 of 10,500 over the
    // limit (0.2%), all in one excursion inside one of 12 intervals.
    // The batch means put the upper end near 0.6% and would meet; one
    // excursion cannot rule out a window that expects five.
    let mut rows = vec![(0.0, 875.0); 12];
    rows[5].0 = 21.0;
    let j = judge(&p99, &shares(&rows));
    assert_eq!(j.decision, Decision::Undecided, "{j:?}");
    let (_, hi, _) = batch_interval(&rows);
    assert!(hi < 0.01, "the batch means alone would meet ({hi})");
    // Two operations over in the one clump: far under, still meets.
    rows[5].0 = 2.0;
    assert_eq!(judge(&p99, &shares(&rows)).decision, Decision::Meets);
    // Hits in every interval: the batch means see them; no clumps read.
    assert_eq!(clump_interval(&[(3.0, 875.0); 12]), None);
    assert_eq!(clump_interval(&[(0.0, 875.0); 12]), None);
}

#[test]
fn the_poisson_interval_is_within_a_percent_of_the_exact_one() {
    // Exact 95% bounds for 1 and 10 events: 0.0253–5.572, 4.795–18.39.
    let (lo, hi) = poisson_interval(1.0);
    assert!((hi / 5.572 - 1.0).abs() < 0.01 && lo < 0.03, "{lo} {hi}");
    let (lo, hi) = poisson_interval(10.0);
    assert!((hi / 18.39 - 1.0).abs() < 0.01 && (lo / 4.795 - 1.0).abs() < 0.01);
}

#[test]
fn one_breaking_objective_breaks_the_step() {
    let both = [slo("p95<200ms"), slo("errors<1%")];
    let batches: Vec<Batch> = (0..5)
        .map(|_| Batch {
            sums: vec![(1.0, 1000.0), (100.0, 1000.0)],
        })
        .collect();
    let j = judge(&both, &batches);
    assert_eq!(j.objectives[0].decision, Decision::Meets);
    assert_eq!(j.objectives[1].decision, Decision::Breaks);
    assert_eq!(j.decision, Decision::Breaks);
    assert_eq!(
        Decision::all([Decision::Meets, Decision::Undecided]),
        Decision::Undecided
    );
}

#[test]
fn real_tallies_give_the_sums() {
    use crate::measure::Outcome;
    let mut t = Tally::new(1);
    for ms in [1, 2, 3, 250, 300] {
        let d = Duration::from_millis(ms);
        t.ops[0].record(&Outcome::ok(), d, d);
    }
    t.ops[0].record(
        &Outcome::error(crate::measure::ErrorKind::Timeout),
        Duration::from_secs(1),
        Duration::from_secs(1),
    );
    t.record_unfinished(Duration::from_millis(900));
    let slos = [
        slo("p95<200ms"),
        slo("errors<1%"),
        slo("lag<5%"),
        slo("max<1s"),
    ];
    let b = Batch::of(&slos, &t, Duration::from_secs(1), Some(10.0));
    // Three of six responses (the unfinished one among them) over 200 ms.
    assert_eq!(b.sums[0], (3.0, 6.0));
    assert_eq!(b.sums[1], (1.0, 6.0));
    // Ten offered, five served.
    assert_eq!(b.sums[2], (5.0, 10.0));
    assert!((b.sums[3].0 - 0.9).abs() < 0.01);
    let mut late = b.clone();
    late.add_late_errors(&slos, 2);
    assert_eq!(late.sums[1], (3.0, 8.0));
}

/// One simulated 3 s window of an M/M/4 queue (1 ms mean service) at
/// `rate` arrivals per second, after 0.3 s to fill: twelve 250 ms
/// intervals of (operations over `limit`, operations) by completion.
fn mm4_window(rate: f64, limit: f64, rng: &mut rand::rngs::SmallRng) -> Vec<Batch> {
    use rand::Rng;
    let mut draw = |per_s: f64| -(1.0 - rng.gen::<f64>()).ln() / per_s;
    let mut free = [0.0f64; 4];
    let mut rows = [(0.0, 0.0); 12];
    let mut t = 0.0;
    loop {
        t += draw(rate);
        if t > 3.3 {
            break;
        }
        let server = (0..4).fold(0, |b, i| if free[i] < free[b] { i } else { b });
        let done = free[server].max(t) + draw(1000.0);
        free[server] = done;
        let slot = ((done - 0.3) / 0.25).floor();
        if (0.0..12.0).contains(&slot) {
            let row = &mut rows[slot as usize];
            row.1 += 1.0;
            if done - t > limit {
                row.0 += 1.0;
            }
        }
    }
    shares(&rows)
}

/// How many of `windows` simulated windows of the queue at `rate` meet
/// and break `objective` (a percentile under a limit in milliseconds).
fn decisions_at(objective: &str, rate: f64, windows: u64) -> (u64, u64) {
    use rand::SeedableRng;
    let objective = [slo(objective)];
    let limit = objective[0].limit;
    (0..windows).fold((0, 0), |(meets, breaks), seed| {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        match judge(&objective, &mm4_window(rate, limit, &mut rng)).decision {
            Decision::Meets => (meets + 1, breaks),
            Decision::Breaks => (meets, breaks + 1),
            Decision::Undecided => (meets, breaks),
        }
    })
}

/// The rate at which the M/M/4 queue's `quantile` is `limit_ms`.
fn answer(quantile: f64, limit_ms: u64) -> f64 {
    use crate::workload::null::{theory::max_rate, ServiceDist};
    let exp_1ms = ServiceDist::Exponential {
        mean: Duration::from_millis(1),
    };
    max_rate(4, exp_1ms, quantile, Duration::from_millis(limit_ms)).expect("an answer")
}

/// Windows of a queue at its known answer are calm or stormy as a whole,
/// and a calm one's intervals agree: read at face value they claimed p95
/// met in one window of seven at the answer. A 95% interval may meet
/// there in one window of forty; below and above it, most windows decide.
#[test]
fn windows_of_a_queue_at_its_answer_rarely_claim_it_met() {
    let truth = answer(0.95, 5);
    let (meets, breaks) = decisions_at("p95<5ms", truth, 400);
    eprintln!("p95 at the answer {truth:.0}/s: {meets} of 400 meet, {breaks} break");
    assert!(meets <= 32 && breaks <= 32, "{meets} meet, {breaks} break");
    let (below, _) = decisions_at("p95<5ms", 0.85 * truth, 200);
    let (_, above) = decisions_at("p95<5ms", 1.15 * truth, 200);
    eprintln!("at 0.85 of it {below} of 200 meet; at 1.15, {above} break");
    assert!(
        below >= 150 && above >= 180,
        "{below} meet under, {above} break over"
    );
    // p99 at 0.6 of its answer: a few hits a window, often in a few
    // intervals; the window meets as it did.
    let truth = answer(0.99, 10);
    let (light, _) = decisions_at("p99<10ms", 0.6 * truth, 100);
    eprintln!(
        "p99 at 0.6 of its answer {:.0}/s: {light} of 100 meet",
        0.6 * truth
    );
    assert!(light >= 95, "{light} meet at 0.6 of the p99 answer");
}
