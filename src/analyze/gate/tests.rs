use super::*;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// An exported run of the bank at 1, 4 and 8 users: 20 measured intervals
/// a level, throughput around `x(level)` and p95 around `p95(level)`
/// seconds, each with `noise` relative spread.
fn run(
    x: impl Fn(f64) -> f64,
    p95: impl Fn(f64) -> f64,
    noise: f64,
    seed: u64,
    bottleneck: &str,
) -> Value {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut jitter = move || 1.0 + noise * (rng.gen::<f64>() * 2.0 - 1.0) * 3f64.sqrt();
    let steps: Vec<Value> = [1.0, 4.0, 8.0]
        .iter()
        .map(|&users| {
            let intervals: Vec<Value> = (0..20)
                .map(|_| {
                    json!({
                        "phase": "measured",
                        "length": 0.25,
                        "throughput": x(users) * jitter(),
                        "response": {"count": 100, "p50": p95(users) / 2.0, "p95": p95(users) * jitter()},
                    })
                })
                .collect();
            json!({"load": {"kind": "users", "value": users}, "status": "ok", "intervals": intervals})
        })
        .collect();
    json!({
        "run": {"workload": "bank", "plan": {"workload": {"mix": {"kind": "tpcb"}, "scale": 1}, "target": {"kind": "postgres"}, "load": {"kind": "closed"}}},
        "steps": steps,
        "verdict": {"bottleneck": {"name": bottleneck}},
    })
}

fn gate(text: &str, base: &Value, new: &Value) -> Gate {
    judge(
        base,
        new,
        ("run 1", "run 2"),
        &parse_thresholds(text).unwrap(),
        7,
    )
}

#[test]
fn thresholds_parse_and_bad_ones_say_why() {
    let t = parse_thresholds("throughput<-5%, p95>+10%,p99.9>20%").unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t[0].to_string(), "throughput<-5%");
    assert_eq!(t[1].to_string(), "p95>+10%");
    assert_eq!(t[2].metric, GateMetric::Latency("p999"));
    for (bad, why) in [
        ("throughput", "no < or >"),
        ("tps<-5%", "not a metric"),
        ("throughput<-5", "not a change in percent"),
        ("throughput<+5%", "no change at all"),
        ("p95>-10%", "no change at all"),
        ("p95>0%", "not a change in percent"),
        ("p95>+10%,p95>+20%", "two thresholds"),
        ("", "no threshold"),
    ] {
        let e = parse_thresholds(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn a_significant_drop_beyond_the_threshold_fails_and_noise_passes() {
    let base = run(|u| 1000.0 * u, |_| 0.01, 0.02, 1, "cpu");
    // 12% fewer at 8 users alone.
    let slower = run(
        |u| if u == 8.0 { 7040.0 } else { 1000.0 * u },
        |_| 0.01,
        0.02,
        2,
        "cpu",
    );
    let g = gate("throughput<-5%", &base, &slower);
    assert!(g.failed, "{g:?}");
    let line = &g.lines[0];
    assert_eq!(line.at.as_deref(), Some("8 users"), "{line:?}");
    let change = line.change.unwrap();
    assert!((change + 0.12).abs() < 0.02, "{line:?}");
    assert!(
        line.said.starts_with("FAIL throughput<-5%: -1"),
        "{}",
        line.said
    );
    // The same run again, only its noise differs: no failure.
    let again = run(|u| 1000.0 * u, |_| 0.01, 0.02, 3, "cpu");
    let g = gate("throughput<-5%", &base, &again);
    assert!(!g.failed, "{g:?}");
    assert!(g.lines[0].said.starts_with("pass "), "{}", g.lines[0].said);
    assert_eq!(g.moved, None);
}

/// Over 100 seeds: pure noise (10% per interval, no change) fails the
/// gate at most 8 times (it is built for 5%); at 2% noise a drop of half
/// the threshold fails at most 8 times and a drop of twice the threshold
/// is found every time.
#[test]
fn the_gate_fails_on_noise_rarely_and_on_a_real_drop_always() {
    let gate = |base: &Value, new: &Value, t: &str, seed: u64| {
        judge(base, new, ("a", "b"), &parse_thresholds(t).unwrap(), seed).failed
    };
    let (mut alarms, mut within, mut found) = (0, 0, 0);
    for seed in 0..100 {
        let noisy = run(|u| 1000.0 * u, |_| 0.01, 0.10, seed, "cpu");
        let same = run(|u| 1000.0 * u, |_| 0.01, 0.10, seed + 1000, "cpu");
        alarms += usize::from(gate(&noisy, &same, "throughput<-2%", seed));
        let base = run(|u| 1000.0 * u, |_| 0.01, 0.02, seed + 2000, "cpu");
        let half = run(|u| 975.0 * u, |_| 0.01, 0.02, seed + 3000, "cpu");
        within += usize::from(gate(&base, &half, "throughput<-5%", seed));
        let twice = run(|u| 900.0 * u, |_| 0.01, 0.02, seed + 4000, "cpu");
        found += usize::from(gate(&base, &twice, "throughput<-5%", seed));
    }
    assert!(alarms <= 8, "{alarms} false alarms in 100");
    assert!(within <= 8, "a 2.5% drop failed -5% in {within} of 100");
    assert_eq!(found, 100, "a 10% drop failed -5% in {found} of 100");
}

#[test]
fn a_rise_in_p95_alone_fails_its_threshold_and_the_moved_bottleneck_is_said() {
    let base = run(|u| 1000.0 * u, |_| 0.010, 0.02, 6, "cpu");
    let new = run(
        |u| 1000.0 * u,
        |u| if u >= 4.0 { 0.013 } else { 0.010 },
        0.02,
        7,
        "software contention (row locks)",
    );
    let g = gate("throughput<-5%,p95>+10%", &base, &new);
    assert!(g.failed);
    assert!(!g.lines[0].failed, "{:?}", g.lines[0]);
    assert!(g.lines[1].failed, "{:?}", g.lines[1]);
    assert!(
        g.lines[1].said.starts_with("FAIL p95>+10%: +3"),
        "{}",
        g.lines[1].said
    );
    assert_eq!(
        g.moved.as_deref(),
        Some("the bottleneck moved from cpu to software contention (row locks)")
    );
}

#[test]
fn runs_of_different_plans_are_named_apart() {
    let base = run(|u| 1000.0 * u, |_| 0.01, 0.02, 1, "cpu");
    let mut other = base.clone();
    other["run"]["plan"]["workload"]["mix"] = json!({"kind": "atm"});
    let why = plan_difference(&base, &other).unwrap();
    assert!(why.contains("mix"), "{why}");
    assert_eq!(plan_difference(&base, &base), None);
    let mut rate = base.clone();
    for s in rate["steps"].as_array_mut().unwrap() {
        s["load"] = json!({"kind": "rate", "value": 100.0});
    }
    let why = plan_difference(&base, &rate).unwrap();
    assert!(why.contains("no load level in common"), "{why}");
}
