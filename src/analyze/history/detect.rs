//! Change points of one series (a metric at one load level, one value a
//! run, oldest first): PELT's objective, the least sum of the segments'
//! costs plus a penalty per change, found exactly by dynamic programming
//! (optimal partitioning; PELT's pruning only makes it faster, and a
//! history of runs is short). The values are
//! taken as logarithms, so a change is a ratio and the noise relative; a
//! segment's cost is its squared deviations from its own mean in units
//! of the series' noise, σ, estimated from the differences of
//! neighbouring runs (see [`noise`]: a step moves one difference, and the
//! largest are left out). So one penalty serves every series:
//! splitting pays when the step explains more than the penalty in σ².

/// The fewest runs between two change points (and before the first,
/// after the last): one odd run is an outlier, not a change.
pub(crate) const MIN_SEGMENT: usize = 2;

/// The smallest relative noise assumed, so that a series of identical
/// values does not see a change in a rounding: 0.1%.
pub(crate) const NOISE_FLOOR: f64 = 0.001;

/// The default penalty's factor: `PENALTY_PER_LN_N × ln n` in units of
/// σ² (see [`penalty`]).
pub(crate) const PENALTY_PER_LN_N: f64 = 3.0;

/// The penalty of one change in a series of `n` runs: `factor × ln n`,
/// growing with n as the number of places a change could be does.
pub(crate) fn penalty(n: usize, factor: f64) -> f64 {
    factor * (n.max(2) as f64).ln()
}

/// The relative noise of a series of logarithms, from the differences of
/// neighbouring runs (a step moves one of them, not the spread): the
/// mean of their squares with the largest tenth left out (a step's, an
/// outlier's), corrected for that cut as for normal noise, then halved
/// (a difference holds two runs' noise).
pub(crate) fn noise(logs: &[f64]) -> f64 {
    let mut squares: Vec<f64> = logs.windows(2).map(|w| (w[1] - w[0]).powi(2)).collect();
    if squares.is_empty() {
        return NOISE_FLOOR;
    }
    squares.sort_by(f64::total_cmp);
    let cut = squares.len().div_ceil(10);
    let kept = &squares[..squares.len() - cut];
    if kept.is_empty() {
        return NOISE_FLOOR;
    }
    let mean = kept.iter().sum::<f64>() / kept.len() as f64;
    let share = cut as f64 / squares.len() as f64;
    (mean / trimmed_square(share) / 2.0).sqrt().max(NOISE_FLOOR)
}

/// E[Z² | Z² below its quantile 1 − `share`] for a standard normal Z:
/// 1 − 2cφ(c)/(1 − share), where P(|Z| > c) = share.
fn trimmed_square(share: f64) -> f64 {
    if share <= 0.0 {
        return 1.0;
    }
    // c by bisection on the normal tail.
    let (mut lo, mut hi) = (0.0f64, 10.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if two_tail(mid) > share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let c = (lo + hi) / 2.0;
    let density = (-c * c / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (1.0 - 2.0 * c * density / (1.0 - share)).max(1e-6)
}

/// P(|Z| > c) for a standard normal Z: erfc(c/√2), by the rational
/// approximation of Abramowitz and Stegun 7.1.26 (error below 1.5e-7).
fn two_tail(c: f64) -> f64 {
    let x = c / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    poly * (-x * x).exp()
}

/// Where a series' new segments start (indices into `values`), by PELT
/// at `factor` × ln n. Values that are not positive and finite are not
/// judged: such a series has none.
pub(crate) fn change_points(values: &[f64], factor: f64) -> Vec<usize> {
    let n = values.len();
    if n < 2 * MIN_SEGMENT || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Vec::new();
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let sigma = noise(&logs);
    let (mut sum, mut squares) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, x) in logs.iter().enumerate() {
        let z = x / sigma;
        sum[i + 1] = sum[i] + z;
        squares[i + 1] = squares[i] + z * z;
    }
    // Squared deviations of values s..t from their mean, in σ².
    let cost = |s: usize, t: usize| {
        let (k, total) = ((t - s) as f64, sum[t] - sum[s]);
        (squares[t] - squares[s] - total * total / k).max(0.0)
    };
    let beta = penalty(n, factor);
    // best[t]: the least cost of values 0..t cut anywhere; from[t]: where
    // its last segment starts.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = -beta;
    for t in MIN_SEGMENT..=n {
        // The last segment starts at 0 or after a whole first segment.
        let starts = std::iter::once(0).chain(MIN_SEGMENT..=t - MIN_SEGMENT);
        let (mut low, mut at) = (f64::INFINITY, 0);
        for s in starts {
            let c = best[s] + cost(s, t) + beta;
            if c < low {
                (low, at) = (c, s);
            }
        }
        best[t] = low;
        from[t] = at;
    }
    let mut cuts = Vec::new();
    let mut t = n;
    while t > 0 {
        let s = from[t];
        if s > 0 {
            cuts.push(s);
        }
        t = s;
    }
    cuts.reverse();
    cuts
}
