//! The random draws and hashes of a script's expressions, with the bounds
//! and parameters real scripts rely on:
//!
//! - `random(lb, ub)`: uniform over `[lb, ub]`.
//! - `random_exponential(lb, ub, p)`: an exponential cut to the range,
//!   `p > 0`; the larger `p`, the more often values near `lb` come.
//! - `random_gaussian(lb, ub, p)`: a normal centred on the range's middle
//!   with `p` standard deviations to each bound, `p ≥ 2`, drawn by
//!   Box–Muller and redrawn outside the bounds.
//! - `random_zipfian(lb, ub, s)`: a bounded Zipf law, `1.001 ≤ s ≤ 1000`,
//!   drawn by Devroye's rejection method (the probability of `k` against
//!   `k+1` is `((k+1)/k)^s`).
//! - `hash_murmur2` (64-bit MurmurHash2 of the 8-byte value) and
//!   `hash_fnv1a` (FNV-1a over its 8 bytes), each mixed with a seed.
//!
//! Every bound is checked: a range wider than bigint holds is an error.

use super::value::EvalError;
use rand::rngs::SmallRng;
use rand::Rng;

/// `random(lb, ub)`.
pub(crate) fn uniform(rng: &mut SmallRng, lb: i64, ub: i64) -> Result<i64, EvalError> {
    if lb > ub {
        return Err(EvalError::BadArgument);
    }
    Ok(rng.gen_range(lb..=ub))
}

/// The number of values in `[lb, ub]`, as a double (it may exceed bigint).
fn width(lb: i64, ub: i64) -> Result<f64, EvalError> {
    if lb > ub {
        return Err(EvalError::BadArgument);
    }
    Ok((i128::from(ub) - i128::from(lb) + 1) as f64)
}

/// `lb` plus the offset `fraction` of the range's width, kept inside it.
fn place(lb: i64, ub: i64, fraction: f64) -> i64 {
    let span = i128::from(ub) - i128::from(lb);
    let offset = (fraction * (span + 1) as f64) as i128;
    (i128::from(lb) + offset.clamp(0, span)) as i64
}

/// Checks an exponential's parameter.
pub(crate) fn check_exponential(p: f64) -> Result<(), String> {
    if p > 0.0 && p.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "random_exponential's parameter must be above 0, not {p}"
        ))
    }
}

/// `random_exponential(lb, ub, p)`.
pub(crate) fn exponential(rng: &mut SmallRng, lb: i64, ub: i64, p: f64) -> Result<i64, EvalError> {
    width(lb, ub)?;
    check_exponential(p).map_err(|_| EvalError::BadArgument)?;
    let cut = (-p).exp();
    // u in (0, 1]: 1 - [0, 1).
    let u = 1.0 - rng.gen::<f64>();
    let fraction = -(cut + (1.0 - cut) * u).ln() / p;
    Ok(place(lb, ub, fraction))
}

/// The smallest Gaussian parameter: bounds at two standard deviations.
const MIN_GAUSSIAN: f64 = 2.0;

/// Checks a Gaussian's parameter.
pub(crate) fn check_gaussian(p: f64) -> Result<(), String> {
    if p >= MIN_GAUSSIAN && p.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "random_gaussian's parameter must be at least {MIN_GAUSSIAN:.1}, not {p}"
        ))
    }
}

/// `random_gaussian(lb, ub, p)`.
pub(crate) fn gaussian(rng: &mut SmallRng, lb: i64, ub: i64, p: f64) -> Result<i64, EvalError> {
    width(lb, ub)?;
    check_gaussian(p).map_err(|_| EvalError::BadArgument)?;
    let stdev = loop {
        let r1 = 1.0 - rng.gen::<f64>();
        let r2 = rng.gen::<f64>();
        let z = (-2.0 * r1.ln()).sqrt() * (2.0 * std::f64::consts::PI * r2).sin();
        if (-p..p).contains(&z) {
            break z;
        }
    };
    Ok(place(lb, ub, (stdev + p) / (2.0 * p)))
}

/// The Zipfian parameter's bounds.
const ZIPF_MIN: f64 = 1.001;
const ZIPF_MAX: f64 = 1000.0;

/// Checks a Zipfian's parameter.
pub(crate) fn check_zipfian(s: f64) -> Result<(), String> {
    if (ZIPF_MIN..=ZIPF_MAX).contains(&s) {
        Ok(())
    } else {
        Err(format!(
            "random_zipfian's parameter must be from {ZIPF_MIN} to {ZIPF_MAX}, not {s}"
        ))
    }
}

/// `random_zipfian(lb, ub, s)`.
pub(crate) fn zipfian(rng: &mut SmallRng, lb: i64, ub: i64, s: f64) -> Result<i64, EvalError> {
    let n = width(lb, ub)?;
    check_zipfian(s).map_err(|_| EvalError::BadArgument)?;
    let b = 2f64.powf(s - 1.0);
    let x = loop {
        let u = 1.0 - rng.gen::<f64>();
        let v = rng.gen::<f64>();
        let x = u.powf(-1.0 / (s - 1.0)).floor();
        let t = (1.0 + 1.0 / x).powf(s - 1.0);
        if v * x * (t - 1.0) / (b - 1.0) <= t / b && x <= n {
            break x;
        }
    };
    Ok(place(lb, ub, (x - 1.0) / n))
}

const MURMUR_MUL: u64 = 0xc6a4_a793_5bd1_e995;
const MURMUR_ROT: u32 = 47;

/// 64-bit MurmurHash2 of the value's 8 bytes, with `seed`.
pub(crate) fn murmur2(value: i64, seed: i64) -> i64 {
    let mut h = (seed as u64) ^ MURMUR_MUL.wrapping_mul(8);
    let mut k = value as u64;
    k = k.wrapping_mul(MURMUR_MUL);
    k ^= k >> MURMUR_ROT;
    k = k.wrapping_mul(MURMUR_MUL);
    h ^= k;
    h = h.wrapping_mul(MURMUR_MUL);
    h ^= h >> MURMUR_ROT;
    h = h.wrapping_mul(MURMUR_MUL);
    h ^= h >> MURMUR_ROT;
    h as i64
}

const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over the value's 8 bytes (lowest first), its basis mixed with `seed`.
pub(crate) fn fnv1a(value: i64, seed: i64) -> i64 {
    let mut h = FNV_BASIS ^ (seed as u64);
    for byte in (value as u64).to_le_bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn draws(f: impl Fn(&mut SmallRng) -> i64) -> Vec<i64> {
        let mut rng = SmallRng::seed_from_u64(11);
        (0..50_000).map(|_| f(&mut rng)).collect()
    }

    fn share(v: &[i64], pred: impl Fn(i64) -> bool) -> f64 {
        v.iter().filter(|x| pred(**x)).count() as f64 / v.len() as f64
    }

    #[test]
    fn every_draw_stays_in_its_bounds_even_at_bigints_edges() {
        let mut rng = SmallRng::seed_from_u64(5);
        for (lb, ub) in [
            (1, 1),
            (1, 10),
            (-5, 5),
            (i64::MIN, i64::MAX),
            (i64::MAX - 1, i64::MAX),
        ] {
            for _ in 0..2_000 {
                for x in [
                    uniform(&mut rng, lb, ub).unwrap(),
                    exponential(&mut rng, lb, ub, 3.0).unwrap(),
                    gaussian(&mut rng, lb, ub, 2.5).unwrap(),
                    zipfian(&mut rng, lb, ub, 1.07).unwrap(),
                ] {
                    assert!((lb..=ub).contains(&x), "{x} outside {lb}..={ub}");
                }
            }
        }
        assert_eq!(uniform(&mut rng, 2, 1), Err(EvalError::BadArgument));
        assert_eq!(zipfian(&mut rng, 1, 10, 0.5), Err(EvalError::BadArgument));
    }

    #[test]
    fn the_distributions_have_their_known_shapes() {
        // Uniform over 1..=10: each value a tenth.
        let u = draws(|r| uniform(r, 1, 10).unwrap());
        assert!((share(&u, |x| x == 3) - 0.1).abs() < 0.01);
        // Exponential with p: the first tenth of the range holds
        // (1 - e^{-p/10}) / (1 - e^{-p}) of the draws.
        let p: f64 = 5.0;
        let e = draws(|r| exponential(r, 1, 1000, p).unwrap());
        let want = (1.0 - (-p / 10.0).exp()) / (1.0 - (-p).exp());
        assert!((share(&e, |x| x <= 100) - want).abs() < 0.01, "{want}");
        // Gaussian with p = 2.5: the middle fifth is within ±0.5σ... of
        // 2.5σ each side: P(|z| < 0.5) / P(|z| < 2.5) = 0.3829 / 0.9876.
        let g = draws(|r| gaussian(r, 1, 1000, 2.5).unwrap());
        assert!((share(&g, |x| (401..=600).contains(&x)) - 0.3877).abs() < 0.015);
        // Zipf with s = 2 over 1..=1000: P(1)/P(2) = 2^2 = 4.
        let z = draws(|r| zipfian(r, 1, 1000, 2.0).unwrap());
        let ratio = share(&z, |x| x == 1) / share(&z, |x| x == 2);
        assert!((ratio - 4.0).abs() < 0.3, "{ratio}");
    }

    #[test]
    fn hashes_are_stable_spread_and_seeded() {
        assert_eq!(murmur2(1, 0), murmur2(1, 0));
        assert_ne!(murmur2(1, 0), murmur2(2, 0));
        assert_ne!(murmur2(1, 0), murmur2(1, 1));
        assert_ne!(fnv1a(1, 0), fnv1a(1, 7));
        // Consecutive keys land in distinct buckets of 100 most of the time.
        let buckets: std::collections::HashSet<i64> =
            (0..100).map(|i| murmur2(i, 0).rem_euclid(100)).collect();
        assert!(buckets.len() > 50, "{}", buckets.len());
    }
}
