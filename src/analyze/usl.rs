//! The Universal Scalability Law (N. J. Gunther, *Guerrilla Capacity
//! Planning*, 2007): `X(N) = λN / (1 + σ(N−1) + κN(N−1))`, with contention
//! σ and coherency κ. Fitted by non-linear least squares with σ, κ ≥ 0
//! enforced by fitting their square roots, started from the linear fit of
//! N/X on (N−1) and N(N−1). The least squares are Levenberg–Marquardt's
//! (K. Levenberg 1944, D. W. Marquardt 1963) with Moré's scaling of each
//! parameter by its column of the Jacobian (J. J. Moré, "The
//! Levenberg–Marquardt algorithm: implementation and theory", 1978) and
//! Nielsen's update of the damping (H. B. Nielsen, IMM-REP-1999-05): each
//! damped step is the least-squares solution of `[J; √μ·D] δ = −[r; 0]`,
//! solved by Householder QR so that JᵀJ's squared condition is never
//! formed. Three parameters need no linear-algebra library. Confidence
//! intervals come from a residual bootstrap (200 refits, 2.5th and 97.5th
//! percentiles). Amdahl's law is the case κ = 0.
//!
//! N is the concurrency inside the system: the users of a closed loop
//! without think time, else `N_in = X·R` (Little's law), which is what the
//! law describes when users think or arrivals are open.

use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Fewest points a fit is attempted on.
pub(crate) const MIN_POINTS: usize = 6;

/// A fitted model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct UslFit {
    pub(crate) lambda: f64,
    pub(crate) sigma: f64,
    pub(crate) kappa: f64,
    /// 95% intervals from the bootstrap.
    pub(crate) lambda_ci: (f64, f64),
    pub(crate) sigma_ci: (f64, f64),
    pub(crate) kappa_ci: (f64, f64),
    pub(crate) r_squared: f64,
    /// `√((1−σ)/κ)`, when κ > 0.
    pub(crate) peak_n: Option<f64>,
    /// X at the peak (or λ/σ, the asymptote, when κ = 0).
    pub(crate) max_throughput: Option<f64>,
    /// Whether N was the users or X·R.
    pub(crate) concurrency: &'static str,
}

impl UslFit {
    /// The model's throughput at N.
    pub(crate) fn at(&self, n: f64) -> f64 {
        usl(self.lambda, self.sigma, self.kappa, n)
    }
}

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// The residuals `X_model − X` at the square-root parameters `q`
/// (√λ, √σ, √κ).
fn residuals(n: &[f64], x: &[f64], q: [f64; 3], out: &mut Vec<f64>) {
    let [l, s, k] = q.map(|v| v * v);
    out.clear();
    out.extend(n.iter().zip(x).map(|(n, x)| usl(l, s, k, *n) - x));
}

/// The Jacobian of the residuals in the square-root parameters, a row per
/// point.
fn jacobian(n: &[f64], q: [f64; 3], out: &mut Vec<[f64; 3]>) {
    let [l, s, k] = q.map(|v| v * v);
    out.clear();
    out.extend(n.iter().map(|n| {
        let den = 1.0 + s * (n - 1.0) + k * n * (n - 1.0);
        let d_l = n / den;
        let d_s = -l * n * (n - 1.0) / (den * den);
        let d_k = -l * n * n * (n - 1.0) / (den * den);
        [d_l * 2.0 * q[0], d_s * 2.0 * q[1], d_k * 2.0 * q[2]]
    }));
}

fn sum_of_squares(r: &[f64]) -> f64 {
    r.iter().map(|r| r * r).sum()
}

/// The least-squares solution `z` of `A z ≈ b` for a tall `A` of three
/// columns, by Householder QR; none when `A`'s columns are dependent.
fn least_squares3(a: &mut [[f64; 3]], b: &mut [f64]) -> Option<[f64; 3]> {
    let mut diagonal = [0.0; 3];
    for col in 0..3 {
        let norm = a[col..].iter().map(|r| r[col] * r[col]).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return None;
        }
        // The reflection sends the column to −sign(a_cc)·‖column‖, the
        // choice that cancels nothing.
        let alpha = if a[col][col] > 0.0 { -norm } else { norm };
        a[col][col] -= alpha;
        let v_norm2: f64 = a[col..].iter().map(|r| r[col] * r[col]).sum();
        for other in col + 1..3 {
            let dot: f64 = a[col..].iter().map(|r| r[col] * r[other]).sum();
            let f = 2.0 * dot / v_norm2;
            for row in a[col..].iter_mut() {
                let v = row[col];
                row[other] -= f * v;
            }
        }
        let dot: f64 = a[col..]
            .iter()
            .zip(&b[col..])
            .map(|(row, b)| row[col] * b)
            .sum();
        let f = 2.0 * dot / v_norm2;
        for (row, b) in a[col..].iter().zip(b[col..].iter_mut()) {
            *b -= f * row[col];
        }
        diagonal[col] = alpha;
    }
    let mut z = [0.0; 3];
    for col in (0..3).rev() {
        let above: f64 = (col + 1..3).map(|c| a[col][c] * z[c]).sum();
        z[col] = (b[col] - above) / diagonal[col];
    }
    z.iter().all(|v| v.is_finite()).then_some(z)
}

/// Levenberg–Marquardt from `start` (square-root parameters) to a point
/// where no step lowers the sum of squares by more than rounding: the
/// parameters there and that sum.
fn minimize(n: &[f64], x: &[f64], start: [f64; 3]) -> ([f64; 3], f64) {
    // As MINPACK's lmder stops: relative changes of 30 machine epsilons.
    const TOLERANCE: f64 = 30.0 * f64::EPSILON;
    const MAX_ITERATIONS: usize = 400;
    let mut q = start;
    let mut r = Vec::with_capacity(n.len());
    let mut j = Vec::with_capacity(n.len());
    let mut trial_r = Vec::with_capacity(n.len());
    let mut augmented = Vec::with_capacity(n.len() + 3);
    let mut rhs = Vec::with_capacity(n.len() + 3);
    residuals(n, x, q, &mut r);
    let mut cost = sum_of_squares(&r);
    if !cost.is_finite() {
        return (q, cost);
    }
    let mut scale = [0.0_f64; 3];
    let mut mu = f64::NAN;
    let mut nu = 2.0;
    let mut fresh_jacobian = true;
    for _ in 0..MAX_ITERATIONS {
        if fresh_jacobian {
            jacobian(n, q, &mut j);
            for (c, d) in scale.iter_mut().enumerate() {
                let norm = j.iter().map(|row| row[c] * row[c]).sum::<f64>().sqrt();
                *d = d.max(norm).max(f64::MIN_POSITIVE.sqrt());
            }
            if mu.is_nan() {
                mu = 1e-3;
            }
            let gradient: [f64; 3] =
                std::array::from_fn(|c| j.iter().zip(&r).map(|(row, r)| row[c] * r).sum());
            if gradient.iter().all(|g| *g == 0.0) {
                break;
            }
            fresh_jacobian = false;
        }
        let Some(step) = damped_step(&j, &r, scale, mu, &mut augmented, &mut rhs) else {
            break;
        };
        let trial: [f64; 3] = std::array::from_fn(|c| q[c] + step[c]);
        residuals(n, x, trial, &mut trial_r);
        let trial_cost = sum_of_squares(&trial_r);
        // The reduction the linear model promised: ‖r‖² − ‖r + Jδ‖².
        let predicted = cost - linear_sum_of_squares(&j, &r, step);
        let scaled_step = scaled_norm(scale, step);
        let scaled_q = scaled_norm(scale, q);
        if trial_cost.is_finite() && trial_cost < cost {
            let gain = (cost - trial_cost) / predicted.max(f64::MIN_POSITIVE);
            let reduction = (cost - trial_cost) / cost;
            q = trial;
            std::mem::swap(&mut r, &mut trial_r);
            cost = trial_cost;
            mu *= (1.0 - (2.0 * gain - 1.0).powi(3)).max(1.0 / 3.0);
            nu = 2.0;
            fresh_jacobian = true;
            if reduction <= TOLERANCE || cost == 0.0 {
                break;
            }
        } else {
            mu *= nu;
            nu *= 2.0;
            if !mu.is_finite() {
                break;
            }
        }
        if scaled_step <= TOLERANCE * scaled_q {
            break;
        }
    }
    (q, cost)
}

/// The damped Gauss–Newton step: least squares of `[J; √μ·D] δ = [−r; 0]`
/// (`augmented` and `rhs` are reused buffers); none when it is singular.
fn damped_step(
    j: &[[f64; 3]],
    r: &[f64],
    scale: [f64; 3],
    mu: f64,
    augmented: &mut Vec<[f64; 3]>,
    rhs: &mut Vec<f64>,
) -> Option<[f64; 3]> {
    augmented.clear();
    augmented.extend_from_slice(j);
    let damping = mu.sqrt();
    augmented.extend((0..3).map(|c| {
        let mut row = [0.0; 3];
        row[c] = damping * scale[c];
        row
    }));
    rhs.clear();
    rhs.extend(r.iter().map(|r| -r));
    rhs.extend([0.0; 3]);
    least_squares3(augmented, rhs)
}

/// ‖r + Jδ‖², the sum of squares the linear model predicts after `step`.
fn linear_sum_of_squares(j: &[[f64; 3]], r: &[f64], step: [f64; 3]) -> f64 {
    j.iter()
        .zip(r)
        .map(|(row, r)| {
            let fitted = r + row[0] * step[0] + row[1] * step[1] + row[2] * step[2];
            fitted * fitted
        })
        .sum::<f64>()
}

/// The length of `v` with each parameter scaled by `scale`.
fn scaled_norm(scale: [f64; 3], v: [f64; 3]) -> f64 {
    (0..3)
        .map(|c| (scale[c] * v[c]).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The linear start: N/X = a + b(N−1) + cN(N−1), so λ = 1/a, σ = b/a, κ = c/a.
fn linear_start(n: &[f64], x: &[f64]) -> (f64, f64, f64) {
    let mut rows: Vec<[f64; 3]> = n.iter().map(|n| [1.0, n - 1.0, n * (n - 1.0)]).collect();
    let mut y: Vec<f64> = n.iter().zip(x).map(|(n, x)| n / x).collect();
    let fallback = (x[0] / n[0], 0.01, 0.0001);
    let Some([a0, b0, c0]) = least_squares3(&mut rows, &mut y) else {
        return fallback;
    };
    if a0 <= 0.0 {
        return fallback;
    }
    (1.0 / a0, (b0 / a0).max(0.0), (c0 / a0).max(0.0))
}

/// One least-squares fit; none when it does not reach finite values.
fn fit_once(n: &[f64], x: &[f64]) -> Option<(f64, f64, f64)> {
    let (l, s, k) = linear_start(n, x);
    // A start exactly at zero would have zero gradient in √σ or √κ.
    let start = [l.sqrt(), s.max(1e-4).sqrt(), k.max(1e-7).sqrt()];
    let (q, cost) = minimize(n, x, start);
    let [l, s, k] = q.map(|v| v * v);
    cost.is_finite()
        .then_some((l, s, k))
        .filter(|(l, s, k)| l.is_finite() && s.is_finite() && k.is_finite() && *l > 0.0)
}

/// Fits the USL to (N, X) points; `Err` says why not.
pub(crate) fn fit(
    n: &[f64],
    x: &[f64],
    concurrency: &'static str,
    seed: u64,
) -> Result<UslFit, String> {
    let mut distinct: Vec<f64> = n.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    if distinct.len() < MIN_POINTS {
        return Err(format!(
            "{} load levels; the fit needs at least {MIN_POINTS}",
            distinct.len()
        ));
    }
    if x.iter().any(|x| *x <= 0.0) || n.iter().any(|n| *n <= 0.0) {
        return Err("a step with no throughput or no concurrency".to_string());
    }
    let (lambda, sigma, kappa) =
        fit_once(n, x).ok_or_else(|| "the least-squares fit did not converge".to_string())?;
    let fitted: Vec<f64> = n.iter().map(|n| usl(lambda, sigma, kappa, *n)).collect();
    let residuals: Vec<f64> = x.iter().zip(&fitted).map(|(x, f)| x - f).collect();
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let ss_tot: f64 = x.iter().map(|x| (x - mean).powi(2)).sum();
    let ss_res: f64 = residuals.iter().map(|r| r * r).sum();
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        0.0
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut draws: [Vec<f64>; 3] = Default::default();
    for _ in 0..200 {
        let resampled: Vec<f64> = fitted
            .iter()
            .map(|f| (f + residuals[rng.gen_range(0..residuals.len())]).max(f64::MIN_POSITIVE))
            .collect();
        if let Some((l, s, k)) = fit_once(n, &resampled) {
            draws[0].push(l);
            draws[1].push(s);
            draws[2].push(k);
        }
    }
    let ci = |v: &mut Vec<f64>, at: f64| -> (f64, f64) {
        if v.is_empty() {
            return (at, at);
        }
        v.sort_by(f64::total_cmp);
        let pick = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        (pick(0.025).min(at), pick(0.975).max(at))
    };
    let [mut dl, mut ds, mut dk] = draws;
    let kappa_ci = ci(&mut dk, kappa);
    // With σ ≥ 1 every added unit of concurrency costs more than it brings:
    // X(N) is highest at N = 1 whatever κ is. A peak needs a coherency
    // term the data tell from zero, within reach of the loads measured:
    // κ's interval clear of zero, the peak under ten times the highest N
    // (a vanishing κ puts it at absurd populations — Amdahl's asymptote).
    let n_max = n.iter().copied().fold(0.0, f64::max);
    let peak_n = if sigma >= 1.0 {
        Some(1.0)
    } else {
        (kappa > 0.0 && kappa_ci.0 > 0.0)
            .then(|| ((1.0 - sigma) / kappa).sqrt())
            .filter(|p| *p <= 10.0 * n_max)
    };
    let max_throughput = match peak_n {
        Some(p) => Some(usl(lambda, sigma, kappa, p)),
        None => (sigma > 0.0).then(|| lambda / sigma),
    };
    Ok(UslFit {
        lambda,
        sigma,
        kappa,
        lambda_ci: ci(&mut dl, lambda),
        sigma_ci: ci(&mut ds, sigma),
        kappa_ci,
        r_squared,
        peak_n,
        max_throughput,
        concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data from known σ = 0.05, κ = 0.002, λ = 1000 with ±2% noise:
    /// the fit's intervals hold the truth and the peak is where it should be.
    #[test]
    fn known_parameters_are_recovered_within_their_intervals() {
        let n: Vec<f64> = [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0].to_vec();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let x: Vec<f64> = n
            .iter()
            .map(|n| usl(1000.0, 0.05, 0.002, *n) * (1.0 + rng.gen_range(-0.02..0.02)))
            .collect();
        let f = fit(&n, &x, "users", 1).unwrap();
        assert!(f.sigma_ci.0 <= 0.05 && 0.05 <= f.sigma_ci.1, "{f:?}");
        assert!(f.kappa_ci.0 <= 0.002 && 0.002 <= f.kappa_ci.1, "{f:?}");
        assert!(f.lambda_ci.0 <= 1000.0 && 1000.0 <= f.lambda_ci.1, "{f:?}");
        assert!(f.r_squared > 0.95);
        let true_peak = ((1.0 - 0.05) / 0.002_f64).sqrt();
        assert!(
            (f.peak_n.unwrap() - true_peak).abs() / true_peak < 0.15,
            "{f:?}"
        );
    }

    /// Amdahl data (κ = 0): κ's interval reaches down to zero.
    #[test]
    fn amdahl_data_fits_with_no_coherency() {
        let n: Vec<f64> = (1..=8).map(|i| f64::from(i) * 4.0).collect();
        let x: Vec<f64> = n.iter().map(|n| usl(500.0, 0.1, 0.0, *n)).collect();
        let f = fit(&n, &x, "users", 1).unwrap();
        assert!((f.sigma - 0.1).abs() < 0.01, "{f:?}");
        assert!(f.kappa < 1e-5, "{f:?}");
        assert!(f.kappa_ci.0 < 1e-5);
    }

    /// σ ≥ 1 (a single writer's retries): the curve falls from N = 1, so
    /// the peak is there, not an Amdahl asymptote.
    #[test]
    fn a_curve_falling_from_one_user_peaks_at_one() {
        let n = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        let x: Vec<f64> = n.iter().map(|n| usl(14000.0, 1.1, 0.01, *n)).collect();
        let f = fit(&n, &x, "users", 1).unwrap();
        assert!(f.sigma >= 1.0, "{f:?}");
        assert_eq!(f.peak_n, Some(1.0));
        let top = f.max_throughput.unwrap();
        assert!((top - 14000.0).abs() / 14000.0 < 0.02, "{f:?}");
    }

    #[test]
    fn too_few_levels_are_refused_with_the_reason() {
        let e = fit(&[1.0, 2.0, 4.0], &[1.0, 2.0, 3.0], "users", 1).unwrap_err();
        assert!(e.contains("3 load levels"), "{e}");
    }
}
