//! The null target's service time: fixed (`1ms`), exponential (`exp:1ms`)
//! or uniform (`uniform:0.5ms..1.5ms`), written as `--think` is
//! ([`ThinkTime::parse`]) and drawn with the same code, from each
//! session's own seeded RNG.
//!
//! A fixed service time is stored as a bare number of seconds, as every
//! null run stored it before the service time could be drawn, so old plans
//! and generator forms read as fixed.

use crate::plan::load::exponential;
use crate::plan::{ThinkTime, MAX_WAIT};
use crate::units::format_duration;
use crate::util::serde_duration;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// How long the null target takes to serve one operation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "ServiceForm", into = "ServiceForm")]
pub enum ServiceDist {
    /// Always this long (M/D/c with servers; zero answers at once).
    Fixed(Duration),
    /// Exponentially distributed with this mean (M/M/c with servers).
    Exponential { mean: Duration },
    /// Uniform between `min` and `max` (`min` < `max`).
    Uniform { min: Duration, max: Duration },
}

impl Default for ServiceDist {
    fn default() -> Self {
        ServiceDist::Fixed(Duration::ZERO)
    }
}

/// The fix every refusal of `--service` suggests.
pub(crate) const SERVICE_FIX: &str =
    "give a time (1ms), exp:MEAN (exp:1ms) or uniform:MIN..MAX (uniform:0.5ms..1.5ms)";

impl ServiceDist {
    /// Parses `1ms`, `exp:1ms` or `uniform:0.5ms..1.5ms`; a time of 0 answers
    /// at once, but an exponential mean of 0 is refused (it is no
    /// distribution), and so is any time above [`MAX_WAIT`].
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let dist = match ThinkTime::parse(text)? {
            ThinkTime::Zero if text.trim().starts_with("exp:") => {
                return Err(format!(
                    "'{text}' has a mean of 0; an exponential needs one above 0"
                ))
            }
            ThinkTime::Zero => ServiceDist::Fixed(Duration::ZERO),
            ThinkTime::Fixed { wait } => ServiceDist::Fixed(wait),
            ThinkTime::Exponential { mean } => ServiceDist::Exponential { mean },
            ThinkTime::Uniform { min, max } if min == max => ServiceDist::Fixed(min),
            ThinkTime::Uniform { min, max } => ServiceDist::Uniform { min, max },
        };
        dist.check().map_err(|e| format!("'{text}': {e}"))?;
        Ok(dist)
    }

    /// Whether the distribution can be drawn: every bound at most
    /// [`MAX_WAIT`], a uniform range in order, an exponential mean above 0.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (low, high) = match *self {
            ServiceDist::Fixed(time) => (time, time),
            ServiceDist::Exponential { mean } if mean.is_zero() => {
                return Err("an exponential service time needs a mean above 0".to_string())
            }
            ServiceDist::Exponential { mean } => (mean, mean),
            ServiceDist::Uniform { min, max } => (min, max),
        };
        if low > high {
            return Err(format!(
                "the range runs from {} down to {}; the lower bound comes first",
                format_duration(low),
                format_duration(high)
            ));
        }
        if high > MAX_WAIT {
            return Err(format!(
                "{} is longer than the {} a plan waits at most",
                format_duration(high),
                format_duration(MAX_WAIT)
            ));
        }
        Ok(())
    }

    /// Draws one service time.
    pub(crate) fn sample(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            ServiceDist::Fixed(time) => time,
            ServiceDist::Exponential { mean } => exponential(mean, rng),
            ServiceDist::Uniform { min, max } => rng.gen_range(min..=max),
        }
    }

    /// The mean service time, 1/μ.
    pub fn mean(&self) -> Duration {
        match *self {
            ServiceDist::Fixed(time) => time,
            ServiceDist::Exponential { mean } => mean,
            ServiceDist::Uniform { min, max } => (min + max) / 2,
        }
    }

    /// Whether every operation is answered at once.
    pub(crate) fn is_zero(&self) -> bool {
        *self == ServiceDist::Fixed(Duration::ZERO)
    }
}

impl fmt::Display for ServiceDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ServiceDist::Fixed(time) => write!(f, "{}", format_duration(time)),
            ServiceDist::Exponential { mean } => write!(f, "exp:{}", format_duration(mean)),
            ServiceDist::Uniform { min, max } => write!(
                f,
                "uniform:{}..{}",
                format_duration(min),
                format_duration(max)
            ),
        }
    }
}

/// How a service time is stored: a fixed one as its seconds (as before
/// it could be drawn), a drawn one tagged with its kind.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ServiceForm {
    Fixed(#[serde(with = "serde_duration")] Duration),
    Drawn(Drawn),
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Drawn {
    Exponential {
        #[serde(with = "serde_duration")]
        mean: Duration,
    },
    Uniform {
        #[serde(with = "serde_duration")]
        min: Duration,
        #[serde(with = "serde_duration")]
        max: Duration,
    },
}

impl From<ServiceForm> for ServiceDist {
    fn from(form: ServiceForm) -> Self {
        let dist = match form {
            ServiceForm::Fixed(time) => ServiceDist::Fixed(time),
            ServiceForm::Drawn(Drawn::Exponential { mean }) => ServiceDist::Exponential { mean },
            ServiceForm::Drawn(Drawn::Uniform { min, max }) => ServiceDist::Uniform { min, max },
        };
        // Whether it can be drawn is for its reader to say, naming its
        // field (a generator's form): the type is only read here.
        dist
    }
}

impl From<ServiceDist> for ServiceForm {
    fn from(dist: ServiceDist) -> Self {
        match dist {
            ServiceDist::Fixed(time) => ServiceForm::Fixed(time),
            ServiceDist::Exponential { mean } => ServiceForm::Drawn(Drawn::Exponential { mean }),
            ServiceDist::Uniform { min, max } => ServiceForm::Drawn(Drawn::Uniform { min, max }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn service_times_parse_as_think_times_do() {
        let ms = Duration::from_millis(1);
        assert_eq!(ServiceDist::parse("1ms").unwrap(), ServiceDist::Fixed(ms));
        assert_eq!(ServiceDist::parse("0").unwrap(), ServiceDist::default());
        assert_eq!(
            ServiceDist::parse("exp:1ms").unwrap(),
            ServiceDist::Exponential { mean: ms }
        );
        assert_eq!(
            ServiceDist::parse("uniform:0.5ms..1.5ms").unwrap(),
            ServiceDist::Uniform {
                min: ms / 2,
                max: ms * 3 / 2
            }
        );
        assert_eq!(
            ServiceDist::parse("uniform:1ms..1ms").unwrap(),
            ServiceDist::Fixed(ms)
        );
        for bad in [
            "exp:0",
            "exp:abc",
            "abc",
            "-1ms",
            "uniform:2ms..1ms",
            "uniform:1ms",
            "1000000h",
        ] {
            assert!(ServiceDist::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_fixed_service_time_stores_as_before_and_drawn_ones_read_back() {
        let old: ServiceDist = serde_json::from_str("0.001").unwrap();
        assert_eq!(old, ServiceDist::Fixed(Duration::from_millis(1)));
        for text in ["2ms", "exp:1ms", "uniform:500us..1500us"] {
            let dist = ServiceDist::parse(text).unwrap();
            let json = serde_json::to_string(&dist).unwrap();
            assert_eq!(
                serde_json::from_str::<ServiceDist>(&json).unwrap(),
                dist,
                "{json}"
            );
            assert_eq!(dist.to_string(), text);
        }
        assert_eq!(
            serde_json::to_string(&ServiceDist::Fixed(Duration::from_millis(2))).unwrap(),
            "0.002"
        );
    }

    #[test]
    fn draws_have_their_mean() {
        let mut rng = SmallRng::seed_from_u64(3);
        for text in ["exp:1ms", "uniform:0.5ms..1.5ms"] {
            let dist = ServiceDist::parse(text).unwrap();
            let n = 40_000;
            let total: Duration = (0..n).map(|_| dist.sample(&mut rng)).sum();
            let mean = total.as_secs_f64() / f64::from(n);
            assert!((mean - 0.001).abs() < 0.00003, "{text}: mean {mean}");
        }
    }
}
