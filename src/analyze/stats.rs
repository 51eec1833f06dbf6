//! Two-sample statistics for comparing runs: the Mann–Whitney U test
//! (two-sided; the exact distribution of U for small samples without
//! ties, the normal approximation with tie correction otherwise — Mann and
//! Whitney, 1947) and a bootstrap percentile interval for the ratio of two
//! means (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993);
//! and Student's t interval for one sample's mean (two-sided 97.5%
//! quantiles of t with 1–30 degrees of freedom, from the standard table).

use rand::{Rng, SeedableRng};

/// The two-sided p-value of the Mann–Whitney U test of `a` against `b`;
/// none when either sample is empty.
pub(crate) fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    // Ranks of the pooled sample, ties given their mean rank.
    let mut pooled: Vec<(f64, usize)> = a
        .iter()
        .map(|x| (*x, 0))
        .chain(b.iter().map(|x| (*x, 1)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut ranks = vec![0.0; n];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for r in &mut ranks[i..=j] {
            *r = rank;
        }
        if j > i {
            ties.push((j - i + 1) as f64);
        }
        i = j + 1;
    }
    let r1: f64 = pooled
        .iter()
        .zip(&ranks)
        .filter(|(p, _)| p.1 == 0)
        .map(|(_, r)| r)
        .sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u = u1.min(f1 * f2 - u1);
    if ties.is_empty() && n1 * n2 <= 2_500 {
        return Some(exact_p(n1, n2, u));
    }
    let mean = f1 * f2 / 2.0;
    let tie_term: f64 = ties.iter().map(|t| t * t * t - t).sum::<f64>() / ((n * (n - 1)) as f64);
    let var = f1 * f2 / 12.0 * ((n + 1) as f64 - tie_term);
    if var <= 0.0 {
        return Some(1.0);
    }
    // Continuity correction towards the mean.
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some((2.0 * normal_upper_tail(z)).min(1.0))
}

/// P(U ≤ u) doubled, from the exact distribution of U with no ties: the
/// number of arrangements giving each U, by the recurrence
/// c(n1, n2, u) = c(n1 − 1, n2, u − n2) + c(n1, n2 − 1, u).
fn exact_p(n1: usize, n2: usize, u: f64) -> f64 {
    let max_u = n1 * n2;
    // counts[j][k]: arrangements of i first-sample and j second-sample
    // values giving U = k, built up over i.
    let mut counts: Vec<Vec<f64>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0.0; max_u + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for _i in 1..=n1 {
        let mut next: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        next[0][0] = 1.0;
        for j in 1..=n2 {
            for k in 0..=max_u {
                let from_a = if k >= j { counts[j][k - j] } else { 0.0 };
                next[j][k] = from_a + next[j - 1][k];
            }
        }
        counts = next;
    }
    let all: f64 = counts[n2].iter().sum();
    let at_most: f64 = counts[n2].iter().take(u.floor() as usize + 1).sum();
    (2.0 * at_most / all).min(1.0)
}

/// The upper tail of the standard normal distribution (Abramowitz and
/// Stegun 7.1.26 for erfc, |error| < 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

/// The mean of `v`, 0 for none.
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The ratio of means `mean(b)/mean(a)` and its 95% bootstrap percentile
/// interval (2,000 resamples of each sample, seeded).
pub(crate) fn ratio_interval(a: &[f64], b: &[f64], seed: u64) -> Option<(f64, f64, f64)> {
    ratio_interval_at(a, b, seed, 0.95)
}

/// [`ratio_interval`] at `confidence` (a fraction under 1).
pub(crate) fn ratio_interval_at(
    a: &[f64],
    b: &[f64],
    seed: u64,
    confidence: f64,
) -> Option<(f64, f64, f64)> {
    if a.is_empty() || b.is_empty() || mean(a) <= 0.0 {
        return None;
    }
    let ratio = mean(b) / mean(a);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut draw = |v: &[f64]| -> f64 {
        (0..v.len())
            .map(|_| v[rng.gen_range(0..v.len())])
            .sum::<f64>()
            / v.len() as f64
    };
    let mut ratios: Vec<f64> = (0..2_000)
        .filter_map(|_| {
            let (x, y) = (draw(a), draw(b));
            (x > 0.0).then(|| y / x)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let last = ratios.len().checked_sub(1)?;
    let pick = |q: f64| ratios[((last as f64 * q).round() as usize).min(last)];
    let tail = ((1.0 - confidence) / 2.0).clamp(0.0, 0.5);
    Some((ratio, pick(tail), pick(1.0 - tail)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Textbook cases: fully separated samples of 5 and 5 have the smallest
    /// two-sided exact p, 2/252; identical distributions are not significant.
    #[test]
    fn mann_whitney_matches_the_exact_distribution() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        let p = mann_whitney_p(&a, &b).unwrap();
        assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
        let c = [1.5, 2.5, 6.5, 7.5, 3.5];
        assert!(mann_whitney_p(&a, &c).unwrap() > 0.3);
        // Ties take the normal approximation; all equal → no difference.
        assert!(mann_whitney_p(&[1.0; 8], &[1.0; 8]).unwrap() > 0.99);
        // Large separated samples: tiny p.
        let x: Vec<f64> = (0..60).map(f64::from).collect();
        let y: Vec<f64> = (100..160).map(f64::from).collect();
        assert!(mann_whitney_p(&x, &y).unwrap() < 1e-10);
    }

    #[test]
    fn the_ratio_interval_holds_the_ratio() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0];
        let b = [200.0, 204.0, 196.0, 202.0, 198.0, 200.0];
        let (r, lo, hi) = ratio_interval(&a, &b, 1).unwrap();
        assert!((r - 2.0).abs() < 1e-12);
        assert!(lo < 2.0 && 2.0 < hi && hi - lo < 0.1, "{lo} {hi}");
    }
}

/// The mean of `values` and its 95% interval (Student's t); none for
/// fewer than two values.
pub(crate) fn mean_interval(values: &[f64]) -> Option<(f64, f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let m = mean(values);
    let variance = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = crate::util::t_975(n - 1);
    let half = t * (variance / n as f64).sqrt();
    Some((m, m - half, m + half))
}

#[cfg(test)]
mod interval_tests {
    use super::mean_interval;

    #[test]
    fn the_t_interval_of_a_small_sample() {
        // 10, 12, 14: mean 12, s = 2, t(2) = 4.303: 12 ± 4.969.
        let (m, lo, hi) = mean_interval(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(m, 12.0);
        assert!((hi - m - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!((m - lo - (hi - m)).abs() < 1e-9);
        assert_eq!(mean_interval(&[5.0]), None);
    }
}
