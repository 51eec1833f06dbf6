use super::*;
use crate::workload::null::queue::Ledger;
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn ms(n: f64) -> Duration {
    Duration::from_secs_f64(n / 1000.0)
}

fn close(got: f64, want: f64, relative: f64) -> bool {
    (got - want).abs() <= relative * want.abs()
}

#[test]
fn erlang_c_matches_the_tables() {
    assert!(close(erlang_c(2, 1.0), 1.0 / 3.0, 1e-12));
    assert!(close(erlang_c(1, 0.5), 0.5, 1e-12));
    // From the direct formula a^c/c!/(1−ρ) / (Σ a^k/k! + a^c/c!/(1−ρ)).
    assert!(close(erlang_c(10, 8.0), 0.409_180_150_796_443_5, 1e-9));
    assert!(close(erlang_c(4, 3.4), 0.689_316_221_681_178_5, 1e-9));
    assert_eq!(erlang_c(4, 4.0), 1.0);
    // Thousands of servers: no factorial overflows.
    let big = erlang_c(5000, 4900.0);
    assert!(big > 0.0 && big < 1.0, "{big}");
}

#[test]
fn mm1_response_is_exponential_at_mu_minus_lambda() {
    let (mu, rate) = (1000.0, 700.0);
    for t in [0.0f64, 0.001, 0.004, 0.02] {
        let want = (-(mu - rate) * t).exp();
        assert!(
            close(mmc_response_survival(1, mu, rate, t), want, 1e-9),
            "{t}"
        );
    }
    let exp_1ms = ServiceDist::Exponential { mean: ms(1.0) };
    let p95 = response_quantile(1, exp_1ms, rate, 0.95).unwrap();
    // Durations are whole nanoseconds.
    assert!(
        close(p95.as_secs_f64(), 20f64.ln() / 300.0, 1e-6),
        "{p95:?}"
    );
    let mean = mean_response(1, exp_1ms, rate).unwrap();
    assert!(close(mean.as_secs_f64(), 1.0 / 300.0, 1e-6), "{mean:?}");
}

/// When cμ − λ equals μ the wait and the service have one rate: the
/// response is Erlang-2 there, and continuous on either side.
#[test]
fn equal_rates_of_wait_and_service_are_no_special_case_for_the_caller() {
    let (mu, rate) = (1.0, 1.0);
    for t in [0.1f64, 1.0, 5.0] {
        let c = erlang_c(2, 1.0);
        let want = (1.0 - c) * (-t).exp() + c * (1.0 + t) * (-t).exp();
        let got = mmc_response_survival(2, mu, rate, t);
        assert!(close(got, want, 1e-12), "{t}");
        for nudge in [1e-7, -1e-7] {
            let near = mmc_response_survival(2, mu, rate + nudge, t);
            assert!(close(near, got, 1e-5), "{t} {nudge}");
        }
    }
}

#[test]
fn md1_meets_its_closed_forms() {
    let fixed = ServiceDist::Fixed(ms(1.0));
    for rho in [0.3, 0.7, 0.9, 0.95] {
        let rate = rho * 1000.0;
        let mu = 1000.0;
        let wait = mean_response(1, fixed, rate).unwrap().as_secs_f64() - 0.001;
        let want = rho / (2.0 * mu * (1.0 - rho));
        // The response is a Duration, whole nanoseconds: 1e-5 of 0.2 ms.
        assert!(close(wait, want, 1e-5), "ρ {rho}: {wait} against {want}");
        // An arrival finds the server free with probability 1 − ρ.
        let solved = Mdc::solve(1, rate, 0.001).unwrap();
        assert!(close(solved.wait_cdf(0.0), 1.0 - rho, 1e-6), "ρ {rho}");
    }
}

/// Simulates `count` Poisson arrivals at `rate` through the queue's own
/// ledger in virtual time (no sleeping), and returns the responses'
/// p50, p95 and mean, in seconds.
fn simulate(servers: u32, service: ServiceDist, rate: f64, count: usize) -> (f64, f64, f64) {
    let mut rng = SmallRng::seed_from_u64(11);
    let t0 = tokio::time::Instant::now();
    let ledger = Ledger::new(servers, t0);
    let gap = Duration::from_secs_f64(1.0 / rate);
    let mut now = t0;
    let mut responses: Vec<f64> = (0..count)
        .map(|_| {
            now += crate::plan::load::exponential(gap, &mut rng);
            let end = ledger.book(now, service.sample(&mut rng), None);
            (end - now).as_secs_f64()
        })
        .collect();
    let mean = responses.iter().sum::<f64>() / count as f64;
    responses.sort_by(f64::total_cmp);
    (responses[count / 2], responses[count * 95 / 100], mean)
}

/// The ledger is the queue the theory describes: a simulation through it
/// lands on the analytic p50, p95 and mean, for M/M/c and M/D/c.
#[test]
fn the_ledger_queues_as_the_theory_says() {
    let cases = [
        (4, ServiceDist::Exponential { mean: ms(1.0) }, 3400.0),
        (1, ServiceDist::Exponential { mean: ms(1.0) }, 800.0),
        (4, ServiceDist::Fixed(ms(1.0)), 3400.0),
        (2, ServiceDist::Fixed(ms(1.0)), 1500.0),
    ];
    for (servers, service, rate) in cases {
        let (p50, p95, mean) = simulate(servers, service, rate, 400_000);
        let want50 = response_quantile(servers, service, rate, 0.5).unwrap();
        let want95 = response_quantile(servers, service, rate, 0.95).unwrap();
        let want_mean = mean_response(servers, service, rate).unwrap();
        let what = format!("{servers} × {service} at {rate}/s");
        assert!(
            close(p50, want50.as_secs_f64(), 0.03),
            "{what}: p50 {p50} {want50:?}"
        );
        assert!(
            close(p95, want95.as_secs_f64(), 0.03),
            "{what}: p95 {p95} {want95:?}"
        );
        assert!(
            close(mean, want_mean.as_secs_f64(), 0.03),
            "{what}: mean {mean} {want_mean:?}"
        );
    }
}

#[test]
fn the_highest_rate_inverts_the_quantile() {
    let exp_1ms = ServiceDist::Exponential { mean: ms(1.0) };
    // M/M/1: e^{−(μ−λ)T} = 0.05 at λ = μ − ln 20 / T.
    let rate = max_rate(1, exp_1ms, 0.95, ms(5.0)).unwrap();
    assert!(close(rate, 1000.0 - 20f64.ln() / 0.005, 1e-6), "{rate}");
    let rate = max_rate_for_mean(1, exp_1ms, ms(4.0)).unwrap();
    assert!(close(rate, 750.0, 1e-6), "{rate}");
    // Four servers: at the answer the quantile is the limit.
    for (q, limit) in [(0.95, 5.0), (0.99, 10.0), (0.5, 2.0)] {
        let rate = max_rate(4, exp_1ms, q, ms(limit)).unwrap();
        assert!(rate > 2000.0 && rate < 4000.0, "{q}: {rate}");
        let at = response_quantile(4, exp_1ms, rate, q).unwrap();
        assert!(close(at.as_secs_f64(), limit / 1000.0, 1e-5), "{q}: {at:?}");
    }
    let fixed = ServiceDist::Fixed(ms(1.0));
    let rate = max_rate(4, fixed, 0.95, ms(5.0)).unwrap();
    let at = response_quantile(4, fixed, rate, 0.95).unwrap();
    assert!(close(at.as_secs_f64(), 0.005, 1e-4), "{rate}: {at:?}");
    // Deterministic service queues less than exponential at the same limit.
    assert!(rate > max_rate(4, exp_1ms, 0.95, ms(5.0)).unwrap());
}

#[test]
fn no_rate_is_an_answer_where_none_holds_or_none_is_known() {
    let exp_1ms = ServiceDist::Exponential { mean: ms(1.0) };
    // The service alone has a p95 of 3 ms.
    assert_eq!(max_rate(4, exp_1ms, 0.95, ms(2.9)), None);
    assert_eq!(max_rate(4, ServiceDist::Fixed(ms(1.0)), 0.5, ms(1.0)), None);
    assert_eq!(max_rate(0, exp_1ms, 0.95, ms(5.0)), None);
    assert_eq!(max_rate(4, ServiceDist::default(), 0.95, ms(5.0)), None);
    let uniform = ServiceDist::Uniform {
        min: ms(0.5),
        max: ms(1.5),
    };
    assert_eq!(max_rate(4, uniform, 0.95, ms(5.0)), None);
    assert_eq!(response_quantile(4, exp_1ms, 4000.0, 0.95), None);
    assert_eq!(response_quantile(4, exp_1ms, 1000.0, 1.0), None);
}
