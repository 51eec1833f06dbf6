//! The Universal Scalability Law (N. J. Gunther, *Guerrilla Capacity
//! Planning*, 2007): `X(N) = λN / (1 + σ(N−1) + κN(N−1))`, with contention
//! σ and coherency κ. Fitted by non-linear least squares
//! (Levenberg–Marquardt, the levenberg-marquardt crate) with σ, κ ≥ 0
//! enforced by fitting their square roots, started from the linear fit of
//! N/X on (N−1) and N(N−1). Confidence intervals come from a residual
//! bootstrap (200 refits, 2.5th and 97.5th percentiles). Amdahl's law is
//! the case κ = 0.
//!
//! N is the concurrency inside the system: the users of a closed loop
//! without think time, else `N_in = X·R` (Little's law), which is what the
//! law describes when users think or arrivals are open.

use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt};
use nalgebra::{storage::Owned, Dyn, OMatrix, OVector, U3};
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

struct Problem<'a> {
    n: &'a [f64],
    x: &'a [f64],
    /// √λ, √σ, √κ.
    p: OVector<f64, U3>,
}

impl Problem<'_> {
    fn params(&self) -> (f64, f64, f64) {
        (
            self.p[0] * self.p[0],
            self.p[1] * self.p[1],
            self.p[2] * self.p[2],
        )
    }
}

impl LeastSquaresProblem<f64, Dyn, U3> for Problem<'_> {
    type ResidualStorage = Owned<f64, Dyn>;
    type JacobianStorage = Owned<f64, Dyn, U3>;
    type ParameterStorage = Owned<f64, U3>;

    fn set_params(&mut self, p: &OVector<f64, U3>) {
        self.p.copy_from(p);
    }

    fn params(&self) -> OVector<f64, U3> {
        self.p
    }

    fn residuals(&self) -> Option<OVector<f64, Dyn>> {
        let (l, s, k) = Problem::params(self);
        Some(OVector::<f64, Dyn>::from_iterator(
            self.n.len(),
            self.n.iter().zip(self.x).map(|(n, x)| usl(l, s, k, *n) - x),
        ))
    }

    fn jacobian(&self) -> Option<OMatrix<f64, Dyn, U3>> {
        let (l, s, k) = Problem::params(self);
        let mut j = OMatrix::<f64, Dyn, U3>::zeros(self.n.len());
        for (row, n) in self.n.iter().enumerate() {
            let den = 1.0 + s * (n - 1.0) + k * n * (n - 1.0);
            let d_l = n / den;
            let d_s = -l * n * (n - 1.0) / (den * den);
            let d_k = -l * n * n * (n - 1.0) / (den * den);
            j[(row, 0)] = d_l * 2.0 * self.p[0];
            j[(row, 1)] = d_s * 2.0 * self.p[1];
            j[(row, 2)] = d_k * 2.0 * self.p[2];
        }
        Some(j)
    }
}

/// The linear start: N/X = a + b(N−1) + cN(N−1), so λ = 1/a, σ = b/a, κ = c/a.
fn linear_start(n: &[f64], x: &[f64]) -> (f64, f64, f64) {
    let rows: Vec<[f64; 3]> = n.iter().map(|n| [1.0, n - 1.0, n * (n - 1.0)]).collect();
    let y: Vec<f64> = n.iter().zip(x).map(|(n, x)| n / x).collect();
    let a = nalgebra::DMatrix::from_fn(rows.len(), 3, |r, c| rows[r][c]);
    let b = nalgebra::DVector::from_vec(y);
    let fallback = (x[0] / n[0], 0.01, 0.0001);
    let Ok(solution) = a.clone().svd(true, true).solve(&b, 1e-12) else {
        return fallback;
    };
    let (a0, b0, c0) = (solution[0], solution[1], solution[2]);
    if a0 <= 0.0 {
        return fallback;
    }
    (1.0 / a0, (b0 / a0).max(0.0), (c0 / a0).max(0.0))
}

/// One least-squares fit; none when it does not converge to finite values.
fn fit_once(n: &[f64], x: &[f64]) -> Option<(f64, f64, f64)> {
    let (l, s, k) = linear_start(n, x);
    // A start exactly at zero would have zero gradient in √σ or √κ.
    let start = OVector::<f64, U3>::new(l.sqrt(), s.max(1e-4).sqrt(), k.max(1e-7).sqrt());
    let (solved, report) = LevenbergMarquardt::new().minimize(Problem { n, x, p: start });
    let (l, s, k) = solved.params();
    (report.termination.was_successful() || report.objective_function.is_finite())
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
