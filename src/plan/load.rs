//! Load models (closed loop with think time, open loop with an arrival
//! process) and sweeps of load levels, with the parsers for their flags.

use super::serde_duration;
use crate::units::{format_duration, parse_duration};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Time a virtual user waits between the end of one operation and the
/// intended start of the next.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ThinkTime {
    /// No think time: the next operation starts as soon as the last ends.
    Zero,
    /// Always the same wait.
    Fixed {
        #[serde(with = "serde_duration")]
        wait: Duration,
    },
    /// Exponentially distributed waits with this mean (a Poisson user).
    Exponential {
        #[serde(with = "serde_duration")]
        mean: Duration,
    },
    /// Waits uniform between `min` and `max`.
    Uniform {
        #[serde(with = "serde_duration")]
        min: Duration,
        #[serde(with = "serde_duration")]
        max: Duration,
    },
}

impl ThinkTime {
    /// Parses `0`, `1s`, `exp:1s`, `uniform:0.5s..1.5s`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(mean) = text.strip_prefix("exp:") {
            let mean = parse_duration(mean).map_err(|e| e.to_string())?;
            return Ok(if mean.is_zero() {
                ThinkTime::Zero
            } else {
                ThinkTime::Exponential { mean }
            });
        }
        if let Some(range) = text.strip_prefix("uniform:") {
            let (lo, hi) = range
                .split_once("..")
                .ok_or_else(|| format!("'{text}' needs a range like uniform:0.5s..1.5s"))?;
            let min = parse_duration(lo).map_err(|e| e.to_string())?;
            let max = parse_duration(hi).map_err(|e| e.to_string())?;
            if min > max {
                return Err(format!("'{text}': the lower bound is above the upper one"));
            }
            return Ok(ThinkTime::Uniform { min, max });
        }
        let wait = parse_duration(text).map_err(|e| e.to_string())?;
        Ok(if wait.is_zero() {
            ThinkTime::Zero
        } else {
            ThinkTime::Fixed { wait }
        })
    }

    /// Draws one think time.
    pub(crate) fn sample(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            ThinkTime::Zero => Duration::ZERO,
            ThinkTime::Fixed { wait } => wait,
            ThinkTime::Exponential { mean } => exponential(mean, rng),
            ThinkTime::Uniform { min, max } => {
                if min == max {
                    min
                } else {
                    rng.gen_range(min..=max)
                }
            }
        }
    }

    /// The mean of the distribution, Z in N = X·(R+Z).
    pub(crate) fn mean(&self) -> Duration {
        match *self {
            ThinkTime::Zero => Duration::ZERO,
            ThinkTime::Fixed { wait } => wait,
            ThinkTime::Exponential { mean } => mean,
            ThinkTime::Uniform { min, max } => (min + max) / 2,
        }
    }
}

/// An exponentially distributed duration with the given mean (inverse transform).
pub(crate) fn exponential(mean: Duration, rng: &mut impl Rng) -> Duration {
    // 1 - u lies in (0, 1], so the logarithm is finite.
    let u: f64 = rng.gen::<f64>();
    Duration::from_secs_f64(-(1.0 - u).ln() * mean.as_secs_f64())
}

/// How arrivals are spaced in an open-loop step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exponential gaps: a Poisson process, as independent users produce.
    Poisson,
    /// Equal gaps.
    Uniform,
}

/// How load is offered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadModel {
    /// N users, each issuing its next operation after the last one ended
    /// plus a think time.
    Closed { think: ThinkTime },
    /// Operations arrive at a rate regardless of how the server copes;
    /// latency counts from each operation's intended start.
    Open {
        arrivals: Arrivals,
        /// Sessions (connections) that serve arrivals.
        connections: u32,
        /// Arrivals beyond this many queued or running operations are dropped.
        max_outstanding: u32,
        /// How far from its time the pacer may send an arrival to send
        /// several from one wake-up. A window of 0 in runs stored before
        /// it existed, which woke for every arrival.
        #[serde(default)]
        slack: super::Slack,
    },
}

/// One load level: a number of users or an arrival rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Level {
    Users(u32),
    /// Arrivals per second.
    Rate(f64),
}

impl Level {
    /// The level as a number, for tables and the store.
    pub fn value(&self) -> f64 {
        match *self {
            Level::Users(n) => f64::from(n),
            Level::Rate(r) => r,
        }
    }

    /// `users` or `rate`, the name of the level's dimension.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Level::Users(_) => "users",
            Level::Rate(_) => "rate",
        }
    }

    /// The level whose [`Level::kind`] is `kind` at `value` (as the store
    /// keeps it); none for a kind no perflab writes.
    pub(crate) fn of_kind(kind: &str, value: f64) -> Option<Self> {
        match kind {
            "users" => Some(Level::Users(value as u32)),
            "rate" => Some(Level::Rate(value)),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Users(1) => write!(f, "1 user"),
            Level::Users(n) => write!(f, "{n} users"),
            Level::Rate(r) => write!(f, "{r}/s"),
        }
    }
}

/// The most users (or open-loop connections) a step takes.
pub(crate) const MAX_USERS: u32 = 1_000_000;

/// The lowest rate a sweep takes, per second (one operation in 1000 s):
/// below it the gap between arrivals is no length of time worth running.
pub(crate) const MIN_RATE: f64 = 0.001;
/// The highest rate, per second.
pub(crate) const MAX_RATE: f64 = 10_000_000.0;

/// The ordered load levels of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub levels: Vec<Level>,
}

impl Sweep {
    /// Parses a users sweep: `8`, `1,2,4,8` or `10..150/10`.
    pub fn parse_users(text: &str) -> Result<Self, String> {
        let values = parse_series(text)?;
        let mut levels = Vec::with_capacity(values.len());
        for v in values {
            if v < 1.0 || v.fract() != 0.0 || v > f64::from(MAX_USERS) {
                return Err(format!(
                    "'{text}': users must be whole numbers from 1 to {MAX_USERS}"
                ));
            }
            levels.push(Level::Users(v as u32));
        }
        Ok(Sweep { levels })
    }

    /// Parses a rate sweep in operations per second: `500`, `100..1000/100`.
    pub fn parse_rates(text: &str) -> Result<Self, String> {
        let values = parse_series(text)?;
        if values.iter().any(|&v| !(MIN_RATE..=MAX_RATE).contains(&v)) {
            return Err(format!(
                "'{text}': rates must be from {MIN_RATE} to {MAX_RATE} per second"
            ));
        }
        Ok(Sweep {
            levels: values.into_iter().map(Level::Rate).collect(),
        })
    }
}

/// The most steps a sweep may have.
const MAX_STEPS: usize = 10_000;

/// `a..b/step` (inclusive) or a comma list of numbers.
fn parse_series(text: &str) -> Result<Vec<f64>, String> {
    let text = text.trim();
    let number = |s: &str| -> Result<f64, String> {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a number"))?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("'{s}' is not a finite number"))
        }
    };
    if let Some((range, step)) = text.split_once('/') {
        let (lo, hi) = range
            .split_once("..")
            .ok_or_else(|| format!("'{text}' needs the form FROM..TO/STEP, e.g. 10..150/10"))?;
        let (lo, hi, step) = (number(lo)?, number(hi)?, number(step)?);
        if step <= 0.0 {
            return Err(format!("'{text}': the step after '/' must be above 0"));
        }
        if hi < lo {
            return Err(format!(
                "'{text}': the range ends below where it starts; write FROM..TO with FROM <= TO"
            ));
        }
        // Counted in floating point before any cast: a tiny step makes a
        // count no integer holds.
        let count = ((hi - lo) / step + 1e-9).floor() + 1.0;
        if count > MAX_STEPS as f64 {
            return Err(format!(
                "'{text}' has {count:.0} steps; at most {MAX_STEPS}: widen the step after '/'"
            ));
        }
        let count = count as usize;
        return Ok((0..count).map(|i| lo + step * i as f64).collect());
    }
    if text.contains("..") {
        return Err(format!(
            "'{text}' needs a step: FROM..TO/STEP, e.g. 10..150/10"
        ));
    }
    let values: Vec<f64> = text.split(',').map(number).collect::<Result<_, _>>()?;
    if values.is_empty() {
        return Err("an empty list".to_string());
    }
    if values.len() > MAX_STEPS {
        return Err(format!(
            "'{}…' has {} steps; at most {MAX_STEPS}",
            text.chars().take(20).collect::<String>(),
            values.len()
        ));
    }
    Ok(values)
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ThinkTime::Zero => write!(f, "0"),
            ThinkTime::Fixed { wait } => write!(f, "{}", format_duration(wait)),
            ThinkTime::Exponential { mean } => write!(f, "exp:{}", format_duration(mean)),
            ThinkTime::Uniform { min, max } => write!(
                f,
                "uniform:{}..{}",
                format_duration(min),
                format_duration(max)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn a_level_reads_back_from_its_kind() {
        for level in [Level::Users(7), Level::Rate(2.5)] {
            assert_eq!(Level::of_kind(level.kind(), level.value()), Some(level));
        }
        assert_eq!(Level::of_kind("connections", 3.0), None);
    }

    #[test]
    fn users_sweeps_parse() {
        let s = Sweep::parse_users("10..150/10").unwrap();
        assert_eq!(s.levels.len(), 15);
        assert_eq!(s.levels[0], Level::Users(10));
        assert_eq!(s.levels[14], Level::Users(150));
        assert_eq!(
            Sweep::parse_users("1,2,4,8").unwrap().levels,
            vec![
                Level::Users(1),
                Level::Users(2),
                Level::Users(4),
                Level::Users(8)
            ]
        );
        assert!(Sweep::parse_users("0").is_err());
        assert!(Sweep::parse_users("10..5/1").is_err());
        assert!(Sweep::parse_users("1..5").is_err());
        assert!(Sweep::parse_users("1.5").is_err());
    }

    /// Absurd numbers are refused before any arithmetic on them: a step
    /// so small that the count overflows, a rate whose gap is no duration.
    #[test]
    fn absurd_sweeps_and_rates_are_refused() {
        let e = Sweep::parse_users("1..2/0.0000000000000000000001").unwrap_err();
        assert!(e.contains("at most 10000"), "{e}");
        assert!(Sweep::parse_users("1..1000000/1e-300").is_err());
        assert!(Sweep::parse_users("1..10001/1").is_err());
        assert_eq!(
            Sweep::parse_users("1..10000/1").unwrap().levels.len(),
            10_000
        );
        let many = vec!["1"; 10_001].join(",");
        assert!(Sweep::parse_users(&many).is_err());
        for bad in [
            "1e-300", "0", "-5", "0.0009", "1e308", "20000000", "NaN", "inf",
        ] {
            assert!(Sweep::parse_rates(bad).is_err(), "{bad}");
        }
        assert!(Sweep::parse_rates("0.001,10000000").is_ok());
    }

    #[test]
    fn think_times_parse_and_sample() {
        assert_eq!(ThinkTime::parse("0").unwrap(), ThinkTime::Zero);
        assert_eq!(
            ThinkTime::parse("1s").unwrap(),
            ThinkTime::Fixed {
                wait: Duration::from_secs(1)
            }
        );
        assert!(ThinkTime::parse("exp:-1s").is_err());
        assert!(ThinkTime::parse("uniform:2s..1s").is_err());
        let think = ThinkTime::parse("exp:10ms").unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 20_000;
        let total: Duration = (0..n).map(|_| think.sample(&mut rng)).sum();
        let mean = total.as_secs_f64() / n as f64;
        assert!((mean - 0.010).abs() < 0.0005, "mean {mean}");
        let u = ThinkTime::parse("uniform:0.5s..1.5s").unwrap();
        assert_eq!(u.mean(), Duration::from_secs(1));
        assert_eq!(u.to_string(), "uniform:500ms..1500ms");
    }
}
