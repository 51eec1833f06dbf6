//! The known answers of the null queue (`--servers C`): response-time
//! quantiles and means of an M/M/c and an M/D/c queue served first come
//! first served, and the inverse a capacity search is judged against —
//! the highest arrival rate at which a quantile (or the mean) of the
//! response time stays under a limit.
//!
//! M/M/c (exponential service, rate μ each, arrivals λ): the chance an
//! arrival waits is Erlang's C formula, computed through Erlang B's
//! recursion B(k) = a·B(k−1)/(k + a·B(k−1)), C = B/(1 − ρ(1 − B)) with
//! a = λ/μ, ρ = a/c (stable for any c). The wait is 0 with probability
//! 1 − C and otherwise Exp(cμ − λ); the response adds an independent
//! Exp(μ) service (Kleinrock, *Queueing Systems* vol. 1, §3.5; Gross &
//! Harris, *Fundamentals of Queueing Theory*, §2.3).
//!
//! M/D/c (every service exactly D) is solved exactly, numerically, after
//! Crommelin (1932, "Delay probability formulae when the holding times
//! are constant", P.O.E.E. Journal 25): the customers waiting at any time
//! t + D are those waiting at t beyond the c served meanwhile plus the
//! arrivals in between, V' = (V + A − c)⁺ with A ~ Poisson(λD). Its
//! stationary law is found by iterating that map until it no longer
//! moves. A customer arriving at τ has started by τ + kD + y (0 ≤ y < D)
//! exactly when fewer than c customers ahead of it remain then, which
//! works out as P(W ≤ kD + y) = P(V + A' ≤ (k+1)c − 1) with
//! A' ~ Poisson(λ(D − y)) independent of V (the form of Franx 2001, "A
//! simple solution for the M/D/c waiting time distribution", Oper. Res.
//! Letters 29). The mean wait is E[V]/λ by Little's law. The answers are
//! exact up to the iteration's stopping rule (a change below 1e-12 in
//! total probability, extrapolated by the observed rate of convergence)
//! and the dropped tail (below 1e-18): well inside 1e-6 relative.

use super::service::ServiceDist;
use std::time::Duration;

/// The chance that an arrival at an M/M/c queue of `servers` with an
/// offered load of `load` = λ/μ Erlangs has to wait (Erlang C); 1 when
/// the load is at or above the servers.
pub fn erlang_c(servers: u32, load: f64) -> f64 {
    let c = f64::from(servers.max(1));
    if load >= c {
        return 1.0;
    }
    if load <= 0.0 {
        return 0.0;
    }
    let mut blocking = 1.0;
    for k in 1..=servers.max(1) {
        blocking = load * blocking / (f64::from(k) + load * blocking);
    }
    let rho = load / c;
    blocking / (1.0 - rho * (1.0 - blocking))
}

/// P(X + Y > t) for independent exponentials of rates `a` and `b`
/// (a hypoexponential), without cancellation when the rates are close.
fn two_phase_survival(a: f64, b: f64, t: f64) -> f64 {
    let (slow, fast) = if a <= b { (a, b) } else { (b, a) };
    let d = (fast - slow) * t;
    // (1 − e^{−d})/d, which tends to 1 as the rates meet.
    let spread = if d < 1e-12 { 1.0 } else { -(-d).exp_m1() / d };
    (-slow * t).exp() * (1.0 + slow * t * spread)
}

/// P(T > t) for the response time T of an M/M/c queue of `servers` of
/// rate `mu` each, arrivals at `rate` (both per second; rate < c·μ).
pub fn mmc_response_survival(servers: u32, mu: f64, rate: f64, t: f64) -> f64 {
    let wait_chance = erlang_c(servers, rate / mu);
    let drain = f64::from(servers) * mu - rate;
    (1.0 - wait_chance) * (-mu * t).exp() + wait_chance * two_phase_survival(drain, mu, t)
}

/// The `q`-quantile of the response time of the null queue: `servers`
/// servers, service times `service`, Poisson arrivals at `rate` per
/// second. None when it is not known: the queue is unstable (rate at or
/// above servers/mean), no service time, a uniform service time (M/G/c
/// has no exact answer here), or `q` outside (0, 1).
pub fn response_quantile(
    servers: u32,
    service: ServiceDist,
    rate: f64,
    q: f64,
) -> Option<Duration> {
    let mean = service.mean().as_secs_f64();
    if !((0.0..1.0).contains(&q) && q > 0.0 && stable(servers, mean, rate)) {
        return None;
    }
    let seconds = match service {
        ServiceDist::Exponential { .. } => {
            let mu = 1.0 / mean;
            quantile_of(|t| mmc_response_survival(servers, mu, rate, t), q, mean)
        }
        ServiceDist::Fixed(_) => {
            let waiting = Mdc::solve(servers, rate, mean)?;
            mean + quantile_of(|t| 1.0 - waiting.wait_cdf(t), q, mean)
        }
        ServiceDist::Uniform { .. } => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// The mean response time of the null queue (as [`response_quantile`]).
pub fn mean_response(servers: u32, service: ServiceDist, rate: f64) -> Option<Duration> {
    let mean = service.mean().as_secs_f64();
    if !stable(servers, mean, rate) {
        return None;
    }
    let wait = match service {
        ServiceDist::Exponential { .. } => {
            erlang_c(servers, rate * mean) / (f64::from(servers) / mean - rate)
        }
        ServiceDist::Fixed(_) => Mdc::solve(servers, rate, mean)?.mean_waiting() / rate,
        ServiceDist::Uniform { .. } => return None,
    };
    Some(Duration::from_secs_f64(wait + mean))
}

/// Whether a queue of `servers` with mean service `mean` seconds holds
/// arrivals at `rate` per second in a steady state.
fn stable(servers: u32, mean: f64, rate: f64) -> bool {
    servers > 0 && mean > 0.0 && rate > 0.0 && rate * mean < f64::from(servers)
}

/// The highest arrival rate (per second) at which the `quantile` (e.g.
/// 0.95 for p95) of the null queue's response time stays under `limit`:
/// the answer a capacity search on `perflab run null --servers C
/// --service …` should find. None when no rate holds it (the service
/// time alone reaches the limit) or the answer is not known (see
/// [`response_quantile`]). Found by bisection on the rate in (0, c·μ),
/// to a billionth of c·μ.
pub fn max_rate(servers: u32, service: ServiceDist, quantile: f64, limit: Duration) -> Option<f64> {
    highest_rate(servers, service, |rate| {
        response_quantile(servers, service, rate, quantile).is_some_and(|response| response < limit)
    })
}

/// The highest arrival rate at which the mean response time stays under
/// `limit` (as [`max_rate`]).
pub fn max_rate_for_mean(servers: u32, service: ServiceDist, limit: Duration) -> Option<f64> {
    highest_rate(servers, service, |rate| {
        mean_response(servers, service, rate).is_some_and(|response| response < limit)
    })
}

/// The highest rate in (0, c·μ) at which `holds` is true, `holds` being
/// true below some rate and false above it.
fn highest_rate(servers: u32, service: ServiceDist, holds: impl Fn(f64) -> bool) -> Option<f64> {
    let mean = service.mean().as_secs_f64();
    if servers == 0 || mean <= 0.0 || matches!(service, ServiceDist::Uniform { .. }) {
        return None;
    }
    let capacity = f64::from(servers) / mean;
    let (mut low, mut high) = (capacity * 1e-9, capacity);
    if !holds(low) {
        return None;
    }
    while high - low > capacity * 1e-9 {
        let mid = 0.5 * (low + high);
        if holds(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    Some(low)
}

/// The t at which a decreasing survival function falls to 1 − q, by
/// bisection from a bracket grown from `scale`.
fn quantile_of(survival: impl Fn(f64) -> f64, q: f64, scale: f64) -> f64 {
    let tail = 1.0 - q;
    if survival(0.0) <= tail {
        return 0.0;
    }
    let mut high = scale;
    for _ in 0..200 {
        if survival(high) <= tail {
            break;
        }
        high *= 2.0;
    }
    let mut low = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (low + high);
        if survival(mid) > tail {
            low = mid;
        } else {
            high = mid;
        }
        if high - low <= high * 1e-12 {
            break;
        }
    }
    high
}

/// The M/D/c queue's number waiting at an arbitrary time, solved.
struct Mdc {
    servers: usize,
    rate: f64,
    service: f64,
    /// P(V ≤ n): the number waiting, cumulative.
    waiting_cdf: Vec<f64>,
}

/// Probability below which the tail of the number waiting is dropped.
const TAIL: f64 = 1e-18;

impl Mdc {
    /// Solves the queue; None when the iteration does not settle within
    /// its budget (a load within a hair of the servers).
    fn solve(servers: u32, rate: f64, service: f64) -> Option<Self> {
        let c = servers as usize;
        let arrivals = poisson_pmf(rate * service, usize::MAX);
        let mut pmf = vec![1.0];
        let mut next = Vec::new();
        let mut last_change = f64::INFINITY;
        for step in 0..200_000 {
            step_waiting(&pmf, &arrivals, c, &mut next);
            let change: f64 = (0..pmf.len().max(next.len()))
                .map(|i| (pmf.get(i).unwrap_or(&0.0) - next.get(i).unwrap_or(&0.0)).abs())
                .sum();
            std::mem::swap(&mut pmf, &mut next);
            // The error left is about change·r/(1 − r), r the observed
            // ratio of successive changes.
            let ratio = (change / last_change).min(0.999_999);
            last_change = change;
            if step > 8 && change * ratio / (1.0 - ratio) < 1e-12 {
                let mut cdf = pmf;
                let mut sum = 0.0;
                for p in &mut cdf {
                    sum += *p;
                    *p = sum;
                }
                return Some(Mdc {
                    servers: c,
                    rate,
                    service,
                    waiting_cdf: cdf,
                });
            }
        }
        None
    }

    /// P(V ≤ n).
    fn cdf(&self, n: usize) -> f64 {
        self.waiting_cdf
            .get(n)
            .or(self.waiting_cdf.last())
            .copied()
            .unwrap_or(1.0)
    }

    /// E[V], the mean number waiting.
    fn mean_waiting(&self) -> f64 {
        (0..self.waiting_cdf.len()).map(|n| 1.0 - self.cdf(n)).sum()
    }

    /// P(W ≤ t) for the wait of an arrival, t in seconds.
    fn wait_cdf(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 0.0;
        }
        let periods = (t / self.service).floor();
        let into = t - periods * self.service;
        let Some(last) = ((periods as usize).saturating_add(1))
            .checked_mul(self.servers)
            .and_then(|n| n.checked_sub(1))
        else {
            return 1.0;
        };
        // Arrivals over a part of D number fewer than c on average: more
        // than 2c + 100 of them has no probability worth summing.
        if last > self.waiting_cdf.len() + 2 * self.servers + 100 {
            return 1.0;
        }
        let arrivals = poisson_pmf(self.rate * (self.service - into), last);
        arrivals
            .iter()
            .enumerate()
            .map(|(j, p)| p * self.cdf(last - j))
            .sum()
    }
}

/// One period D of the number waiting: V' = (V + A − c)⁺, into `out`,
/// dropping a tail below [`TAIL`].
fn step_waiting(pmf: &[f64], arrivals: &[f64], servers: usize, out: &mut Vec<f64>) {
    out.clear();
    out.resize(
        (pmf.len() + arrivals.len()).saturating_sub(servers).max(1),
        0.0,
    );
    for (v, pv) in pmf.iter().enumerate() {
        for (a, pa) in arrivals.iter().enumerate() {
            let after = (v + a).saturating_sub(servers);
            out[after] += pv * pa;
        }
    }
    while out.len() > 1 && out.last().is_some_and(|&p| p < TAIL) {
        out.pop();
    }
}

/// The Poisson(`mean`) probabilities of 0, 1, … up to `most` or until
/// the rest is below 1e-17, computed in logarithms (a mean of
/// thousands underflows e^−mean).
fn poisson_pmf(mean: f64, most: usize) -> Vec<f64> {
    let mut out = Vec::new();
    let mut log_p = -mean;
    let mut total = 0.0;
    let ln_mean = mean.ln();
    for k in 0..=most {
        if k > 0 {
            log_p += ln_mean - (k as f64).ln();
        }
        let p = log_p.exp();
        out.push(p);
        total += p;
        if k as f64 > mean && (1.0 - total < 1e-17 || p < 1e-300) {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests;
