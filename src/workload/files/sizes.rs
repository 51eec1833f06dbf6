//! File sizes: fixed (`16k`), exponential around a mean (`exp:16k`, cut at
//! 16 times the mean so one file cannot hold the run), or uniform in a
//! range (`uniform:4k..64k`).

use crate::units::Bytes;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The largest file a user writes.
pub(crate) const MAX_FILE: u64 = 1 << 30;

/// How big each file a user writes is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum FileSizes {
    Fixed { bytes: u64 },
    Exp { mean: u64 },
    Uniform { low: u64, high: u64 },
}

impl FileSizes {
    /// Parses `16k`, `exp:16k` or `uniform:4k..64k`.
    pub(crate) fn parse(text: &str) -> Result<FileSizes, String> {
        let sizes = if let Some(mean) = text.strip_prefix("exp:") {
            FileSizes::Exp {
                mean: Bytes::parse(mean)?.0,
            }
        } else if let Some(range) = text.strip_prefix("uniform:") {
            let (low, high) = range
                .split_once("..")
                .ok_or_else(|| format!("'{text}' needs the form uniform:LOW..HIGH"))?;
            let (low, high) = (Bytes::parse(low)?.0, Bytes::parse(high)?.0);
            if low > high {
                return Err(format!("'{text}': {low} is above {high}"));
            }
            FileSizes::Uniform { low, high }
        } else {
            FileSizes::Fixed {
                bytes: Bytes::parse(text)?.0,
            }
        };
        let largest = match sizes {
            FileSizes::Fixed { bytes } => bytes,
            FileSizes::Exp { mean } => mean.saturating_mul(16),
            FileSizes::Uniform { high, .. } => high,
        };
        if largest > MAX_FILE {
            return Err(format!("'{text}' allows files over {}", Bytes(MAX_FILE)));
        }
        if let FileSizes::Exp { mean: 0 } = sizes {
            return Err(format!(
                "'{text}': an exponential size needs a mean above 0"
            ));
        }
        Ok(sizes)
    }

    /// A size drawn from the distribution.
    pub(crate) fn draw(&self, rng: &mut impl Rng) -> u64 {
        match *self {
            FileSizes::Fixed { bytes } => bytes,
            FileSizes::Exp { mean } => {
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                ((-u.ln() * mean as f64) as u64).min(mean * 16)
            }
            FileSizes::Uniform { low, high } => rng.gen_range(low..=high),
        }
    }

    /// The mean size of a file, bytes (a file system block at least: an
    /// empty or tiny file still takes one).
    pub(crate) fn mean(&self) -> u64 {
        let mean = match *self {
            FileSizes::Fixed { bytes } => bytes,
            FileSizes::Exp { mean } => mean,
            FileSizes::Uniform { low, high } => low / 2 + high / 2,
        };
        mean.max(4096)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sizes_parse_and_draw_as_asked() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        assert_eq!(FileSizes::parse("16k").unwrap().draw(&mut rng), 16384);
        let exp = FileSizes::parse("exp:16k").unwrap();
        let n = 100_000;
        let mean = (0..n).map(|_| exp.draw(&mut rng)).sum::<u64>() as f64 / n as f64;
        assert!((mean / 16384.0 - 1.0).abs() < 0.02, "{mean}");
        let uni = FileSizes::parse("uniform:4k..64k").unwrap();
        assert!((0..1000)
            .map(|_| uni.draw(&mut rng))
            .all(|s| (4096..=65536).contains(&s)));
        for bad in [
            "",
            "exp:",
            "exp:0",
            "uniform:64k..4k",
            "uniform:4k",
            "2G",
            "fast",
        ] {
            assert!(FileSizes::parse(bad).is_err(), "{bad}");
        }
    }
}
