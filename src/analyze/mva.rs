//! Exact mean value analysis of a closed, single-class network of
//! queueing centres with a think (delay) centre — Reiser and Lavenberg's
//! recursion as given in Lazowska et al., *Quantitative System
//! Performance*, chapter 6: for n = 1…N, `R_k(n) = D_k·(1 + Q_k(n−1))`,
//! `X(n) = n / (Z + Σ R_k(n))`, `Q_k(n) = X(n)·R_k(n)`.

/// The network's figures at one population.
#[derive(Debug, Clone, PartialEq)]
pub struct MvaPoint {
    pub(crate) users: u32,
    /// Operations per second.
    pub throughput: f64,
    /// Response time (think excluded), seconds.
    pub response_s: f64,
    /// Utilisation of each centre, in the order of the demands.
    pub utilisation: Vec<f64>,
}

/// Solves the network with `demands` (seconds per operation at each
/// single-server centre) and think time `think_s` for 1…`users`.
pub fn solve(demands: &[f64], think_s: f64, users: u32) -> Vec<MvaPoint> {
    let mut queue = vec![0.0; demands.len()];
    let mut out = Vec::with_capacity(users as usize);
    for n in 1..=users {
        let residence: Vec<f64> = demands
            .iter()
            .zip(&queue)
            .map(|(d, q)| d * (1.0 + q))
            .collect();
        let response_s: f64 = residence.iter().sum();
        let throughput = f64::from(n) / (think_s + response_s);
        for (q, r) in queue.iter_mut().zip(&residence) {
            *q = throughput * r;
        }
        out.push(MvaPoint {
            users: n,
            throughput,
            response_s,
            utilisation: demands.iter().map(|d| throughput * d).collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_user_sees_no_queue_and_many_reach_the_bottleneck() {
        let points = solve(&[0.004, 0.006], 0.0, 64);
        assert!((points[0].response_s - 0.010).abs() < 1e-12);
        assert!((points[0].throughput - 100.0).abs() < 1e-9);
        let last = points.last().unwrap();
        assert!(last.throughput < 1.0 / 0.006 && last.throughput > 0.99 / 0.006);
        assert!(last.utilisation[1] > 0.99 && last.utilisation[1] < 1.0);
        // Little's law holds at every population.
        for p in &points {
            assert!((p.throughput * p.response_s - f64::from(p.users)).abs() < 1e-9);
        }
    }
}
