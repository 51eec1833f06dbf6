//! The null target as a queue of C servers (`--servers C --service
//! exp:1ms`): measured in a real open-loop run, its response-time
//! quantiles are the analytic M/M/c ones; without `--servers` it serves
//! every operation at once, as before; and what is no one queue is
//! refused in one line.

use crate::agent::Agent;
use crate::support::{contains, last_export, perflab_expect, perflab_ok, tempdir};
use perflab::workload::null::theory::response_quantile;
use perflab::workload::null::ServiceDist;
use std::time::Duration;

/// One step's measured quantiles of the response time from the intended
/// start, and the p99 of the pacer's lateness, in seconds.
struct Measured {
    rate: f64,
    p50: f64,
    p95: f64,
    lag_p99: f64,
}

fn measured_steps(export: &serde_json::Value) -> Vec<Measured> {
    let steps = export["steps"].as_array().expect("the export has steps");
    steps
        .iter()
        .map(|step| {
            let summary = &step["summary"];
            let seconds = |v: &serde_json::Value| v.as_f64().expect("a number of seconds");
            Measured {
                rate: seconds(&step["load"]["value"]),
                p50: seconds(&summary["response"]["p50"]),
                p95: seconds(&summary["response"]["p95"]),
                lag_p99: seconds(&summary["lag"]["p99"]),
            }
        })
        .collect()
}

/// Asserts `got` within `[want·(1 − below), want·(1 + above) + late]`.
fn within(what: &str, got: f64, want: f64, (below, above): (f64, f64), late: f64) {
    let (low, high) = (want * (1.0 - below), want * (1.0 + above) + late);
    assert!(
        (low..=high).contains(&got),
        "{what}: measured {:.3} ms, analytic {:.3} ms, allowed {:.3}..{:.3} ms",
        got * 1e3,
        want * 1e3,
        low * 1e3,
        high * 1e3
    );
}

/// Four servers of exp:1 ms at ρ = 0.5, 0.75 and 0.85 (3 s steps, each
/// 6,000 to 10,000 operations). The tolerances are the finite sample's:
/// 150 simulated 3 s steps of M/M/4 put the 1st to 99th percentile of the
/// measured p50 and p95 within −5/+6 % of the analytic value at ρ 0.5,
/// −12/+15 % at 0.75 and −20/+44 % at 0.85 (near saturation the queue's
/// length is correlated over many operations, so a short step samples
/// few independent stretches of it); each bound below is wider than
/// that. Above, the step's own p99 lag of the pacer is added: an arrival
/// released late counts its lateness in its response, and a late burst
/// queues more than Poisson arrivals would — how much is this machine's
/// load, not the queue's. The timer resolution (tens of µs, spun to the
/// deadline) is within the percentages. Below, nothing is added: a
/// queue cannot answer faster than its analysis, and without the queue
/// (every operation served at once) p50 would be 0.69 ms and p95 3.0 ms,
/// under each lower bound at 0.75 and 0.85.
#[test]
fn the_null_queue_answers_as_m_m_4() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        "run null --servers 4 --service exp:1ms --rate 2000,3000,3400 --warmup 0.3s --duration 3s --seed 42",
    );
    let service = ServiceDist::Exponential {
        mean: Duration::from_millis(1),
    };
    let tolerances = [(0.12, 0.15), (0.25, 0.30), (0.30, 0.70)];
    let steps = measured_steps(&last_export(dir.path()));
    assert_eq!(steps.len(), 3);
    for (step, tolerance) in steps.iter().zip(tolerances) {
        let analytic = |q| {
            response_quantile(4, service, step.rate, q)
                .unwrap()
                .as_secs_f64()
        };
        let at = format!("{}/s", step.rate);
        within(
            &format!("p50 at {at}"),
            step.p50,
            analytic(0.5),
            tolerance,
            step.lag_p99,
        );
        within(
            &format!("p95 at {at}"),
            step.p95,
            analytic(0.95),
            tolerance,
            step.lag_p99,
        );
    }
}

/// Without `--servers` every operation is served at once, whatever the
/// rate: at 3,400/s of exp:1 ms the p95 is the service time's own
/// (ln 20 ms = 3.0 ms), where the queue of four would make it 5.8 ms.
#[test]
fn the_null_target_without_servers_queues_nothing() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        "run null --service exp:1ms --rate 3400 --warmup 0.3s --duration 3s --seed 42",
    );
    let steps = measured_steps(&last_export(dir.path()));
    let step = &steps[0];
    let service_p95 = 20f64.ln() / 1000.0;
    within(
        "p95 unqueued",
        step.p95,
        service_p95,
        (0.12, 0.15),
        step.lag_p99,
    );
    let queued = response_quantile(
        4,
        ServiceDist::Exponential {
            mean: Duration::from_millis(1),
        },
        3400.0,
        0.95,
    )
    .unwrap();
    assert!(step.p95 < queued.as_secs_f64() * 0.7 + step.lag_p99);
}

/// Bad input is one line naming the flag and the fix, exit 2.
#[test]
fn the_null_queue_refuses_what_is_no_one_queue() {
    let dir = tempdir();
    let quick = "--rate 100 --warmup 0s --duration 1s";
    for (flags, says) in [
        ("--servers 0", "--servers: 0 servers"),
        ("--servers 100001", "give 1 to 100000"),
        ("--service exp:0", "a mean of 0"),
        ("--service exp:abc", "'abc' is not a duration"),
        ("--service uniform:2ms..1ms", "the lower bound"),
        (
            "--servers 80 --connections 64",
            "give --connections 80 or more",
        ),
        (
            "--servers 4 --threads 2",
            "--threads: 2 worker threads would each book their own arrivals",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), &format!("run null {flags} {quick}"), 2);
        contains(&err, says);
        assert_eq!(err.trim_end().lines().count(), 1, "{flags}: {err}");
    }
    // A closed loop's users book their next operation from their last
    // reply: two threads disorder it just the same.
    let (_, err) = perflab_expect(
        dir.path(),
        "run null --servers 4 --users 4 --threads 2 --warmup 0s --duration 1s",
        2,
    );
    contains(&err, "--threads: 2 worker threads would each book");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d-generators\n").unwrap();
    let generator = Agent::start_with(dir.path(), &token, &["--generate"], "127.0.0.1");
    let flags = format!(
        "run null --servers 4 {quick} --generators agent://127.0.0.1:{} --token-file {}",
        generator.port,
        token.display()
    );
    let (_, err) = perflab_expect(dir.path(), &flags, 2);
    contains(
        &err,
        "--servers: a queue split across generators is not one queue",
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
