//! Parsing and printing of the units perflab speaks: durations (`250ms`,
//! `1.5s`), percentages (`5%`), operation rates and byte sizes. Every flag and
//! every table goes through this one module so that a number never means
//! seconds in one place and milliseconds in another.

use std::fmt;
use std::time::Duration;

/// Why a unit string could not be read; the caller adds the flag name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("'{0}' is not a duration; write it like 500ms, 1s, 1.5s or 2m")]
    Duration(String),
    #[error("'{0}' is negative; a duration must be zero or more")]
    NegativeDuration(String),
    #[error("'{0}' is too long; a duration must be at most 1000000000s (about 31 years)")]
    LongDuration(String),
    #[error("'{0}' is not a percentage; write it like 5% or 0.5%")]
    Percent(String),
}

/// Parses `0`, `750us`, `250ms`, `1s`, `1.5s`, `2m`, `1h`. A bare number is
/// only accepted when it is zero (a bare `5` could mean anything).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let s = text.trim();
    if s.starts_with('-') {
        return Err(UnitError::NegativeDuration(text.to_string()));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| UnitError::Duration(text.to_string()))?;
    let seconds_per_unit = match unit {
        "" if value == 0.0 => 0.0,
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(UnitError::Duration(text.to_string())),
    };
    let seconds = value * seconds_per_unit;
    if !seconds.is_finite() || seconds > MAX_DURATION_S {
        return Err(UnitError::LongDuration(text.to_string()));
    }
    Ok(saturating_secs(seconds))
}

/// The longest duration a flag takes, seconds.
const MAX_DURATION_S: f64 = 1e9;

/// A duration from seconds that were computed, or read from outside (a
/// store, a probe): negative or NaN is zero, and past what a `Duration`
/// holds is its maximum. Never panics, unlike `Duration::from_secs_f64`.
pub(crate) fn saturating_secs(seconds: f64) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    }
}

/// Parses `5%` or `0.5%` into a fraction (0.05, 0.005).
pub fn parse_percent(text: &str) -> Result<f64, UnitError> {
    let s = text.trim();
    let number = s
        .strip_suffix('%')
        .ok_or_else(|| UnitError::Percent(text.to_string()))?;
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| UnitError::Percent(text.to_string()))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(UnitError::Percent(text.to_string()));
    }
    Ok(value / 100.0)
}

/// A latency or duration printed with three significant figures and the
/// unit that keeps it readable: `850µs`, `1.24ms`, `12.5ms`, `1.20s`.
pub(crate) struct Latency(pub Duration);

impl Latency {
    /// A latency of `seconds`, however they were come by
    /// ([`saturating_secs`]).
    pub(crate) fn secs(seconds: f64) -> Self {
        Latency(saturating_secs(seconds))
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos() as f64;
        let (value, unit) = if ns < 1e3 {
            (ns, "ns")
        } else if ns < 1e6 {
            (ns / 1e3, "µs")
        } else if ns < 1e9 {
            (ns / 1e6, "ms")
        } else {
            (ns / 1e9, "s")
        };
        let text = if value >= 100.0 {
            format!("{value:.0}{unit}")
        } else if value >= 10.0 {
            format!("{value:.1}{unit}")
        } else {
            format!("{value:.2}{unit}")
        };
        f.pad(&text)
    }
}

/// The unit a workload's throughput is counted in: what one of its
/// operations is to a user of that kind of server. The bank's are
/// transactions (`tps`, the column pgbench and TPC-B print), the web's
/// requests (`req/s`, as WebBench's tables had them), a disk's I/Os
/// (`IOPS`, as Iometer and fio print them); anything else counts
/// operations (`ops/s`). Each workload names its own
/// (`WorkloadKind::RATE_UNIT`); a stored run reads it back from its
/// workload's name, so a report names it without the run having stored it.
/// A net run's bulk tests (`stream`, `maerts`) count messages (`msg/s`),
/// found by the run's operation's name ([`crate::workload::run_rate_unit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RateUnit {
    /// Transactions per second.
    #[serde(rename = "tps")]
    Transactions,
    /// Requests per second.
    #[serde(rename = "req/s")]
    Requests,
    /// I/Os per second.
    #[serde(rename = "IOPS")]
    Iops,
    /// Operations per second.
    #[default]
    #[serde(rename = "ops/s")]
    Operations,
    /// Messages per second: a bulk transfer's writes or reads, each of
    /// the run's message size.
    #[serde(rename = "msg/s")]
    Messages,
}

impl RateUnit {
    /// The unit as a table column and after a number: `tps`, `req/s`,
    /// `IOPS`, `ops/s`, `msg/s`.
    pub fn label(self) -> &'static str {
        match self {
            RateUnit::Transactions => "tps",
            RateUnit::Requests => "req/s",
            RateUnit::Iops => "IOPS",
            RateUnit::Operations => "ops/s",
            RateUnit::Messages => "msg/s",
        }
    }
}

impl fmt::Display for RateUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.label())
    }
}

/// A throughput with its workload's unit: `1250 tps`, `88.5 req/s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate(pub f64, pub RateUnit);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{} {}", OpsPerSec(self.0), self.1))
    }
}

/// Operations per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, serde::Serialize, serde::Deserialize)]
pub(crate) struct OpsPerSec(pub f64);

impl fmt::Display for OpsPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An unbounded or undefined rate is no figure: the tables' `-`.
        let text = if !self.0.is_finite() {
            "-".to_string()
        } else if self.0 >= 100.0 {
            format!("{:.0}", self.0)
        } else {
            format!("{:.1}", self.0)
        };
        f.pad(&text)
    }
}

/// A transfer rate, bytes per second, printed in decimal megabytes as
/// lab tables and the host's `net MB/s` give it (`12.30`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, serde::Serialize, serde::Deserialize)]
pub(crate) struct BytesPerSec(pub f64);

impl fmt::Display for BytesPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{:.2}", self.0 / 1e6))
    }
}

/// A size in bytes, printed in binary units (`12.3 MiB`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Reads a size: a count of bytes with an optional binary unit, `512`,
    /// `4k`, `64KiB`, `1M`, `8GiB` (k, M, G and T are powers of 1024
    /// whatever their spelling, as fio and Iometer read them).
    pub(crate) fn parse(text: &str) -> Result<Bytes, String> {
        let t = text.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let bad = || format!("'{text}' is not a size; give bytes or a unit, e.g. 4k, 64KiB, 8GiB");
        let count: u64 = t[..digits].parse().map_err(|_| bad())?;
        let shift = match t[digits..].trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kb" | "kib" => 10,
            "m" | "mb" | "mib" => 20,
            "g" | "gb" | "gib" => 30,
            "t" | "tb" | "tib" => 40,
            _ => return Err(bad()),
        };
        count
            .checked_mul(1u64 << shift)
            .map(Bytes)
            .ok_or_else(|| format!("'{text}' is larger than perflab can address"))
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        let text = if unit == 0 {
            format!("{} B", self.0)
        } else {
            format!("{value:.1} {}", UNITS[unit])
        };
        f.pad(&text)
    }
}

impl Bytes {
    /// Two sizes as a refusal sets them side by side ("need A, has B"):
    /// each with its exact count of bytes too when the rounded figures
    /// read the same, so that the two never look equal.
    pub(crate) fn apart(a: Bytes, b: Bytes) -> (String, String) {
        let (ta, tb) = (a.to_string(), b.to_string());
        if ta == tb && a != b {
            (format!("{ta} ({} B)", a.0), format!("{tb} ({} B)", b.0))
        } else {
            (ta, tb)
        }
    }
}

/// A link's rate in bits per second, as tc(8) writes it: `1mbit`,
/// `500kbit`, `10gbit` (decimal: a kbit is 1000 bits). perflab never
/// writes tc's `bps`, which tc reads as bytes per second.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub(crate) struct BitsPerSec(pub u64);

impl BitsPerSec {
    /// Reads `2000bit`, `500kbit`, `1mbit`, `1.5mbit` or `10gbit`.
    pub(crate) fn parse(text: &str) -> Result<BitsPerSec, String> {
        let t = text.trim().to_ascii_lowercase();
        let bad = || format!("'{text}' is not a link rate; write it like 500kbit, 1mbit or 10gbit");
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let value: f64 = t[..split].parse().map_err(|_| bad())?;
        let scale = match &t[split..] {
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            _ => return Err(bad()),
        };
        let bits = value * scale;
        if !(8_000.0..=100e9).contains(&bits) {
            return Err(format!(
                "'{text}' is outside the rates a shaper holds to (8kbit to 100gbit)"
            ));
        }
        Ok(BitsPerSec(bits.round() as u64))
    }
}

impl fmt::Display for BitsPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scale, unit) = match self.0 {
            b if b >= 1_000_000_000 && b % 1_000_000 == 0 => (1e9, "gbit"),
            b if b >= 1_000_000 && b % 1_000 == 0 => (1e6, "mbit"),
            b if b >= 1_000 => (1e3, "kbit"),
            _ => (1.0, "bit"),
        };
        f.pad(&format!("{}{unit}", self.0 as f64 / scale))
    }
}

/// A fraction printed as a percentage with one decimal (`2.5%`).
pub(crate) struct Percent(pub f64);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_finite() {
            f.pad(&format!("{:.1}%", self.0 * 100.0))
        } else {
            f.pad("-")
        }
    }
}

/// Formats a duration the way a user would type it back (`5s`, `250ms`).
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else if us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No rate or percentage is ever printed as `inf` or `NaN`.
    #[test]
    fn a_rate_or_share_that_is_no_number_prints_as_no_figure() {
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert_eq!(OpsPerSec(x).to_string(), "-");
            assert_eq!(Percent(x).to_string(), "-");
            assert_eq!(Rate(x, RateUnit::default()).to_string(), "- ops/s");
        }
        assert_eq!(OpsPerSec(1234.4).to_string(), "1234");
    }

    #[test]
    fn sizes_set_apart_never_read_the_same() {
        let (need, has) = Bytes::apart(Bytes(2_101_248), Bytes(2_097_152));
        assert_eq!(need, "2.0 MiB (2101248 B)");
        assert_eq!(has, "2.0 MiB (2097152 B)");
        let (need, has) = Bytes::apart(Bytes(4 << 20), Bytes(2 << 20));
        assert_eq!((need.as_str(), has.as_str()), ("4.0 MiB", "2.0 MiB"));
    }

    #[test]
    fn link_rates_read_and_print_as_tc_writes_them() {
        assert_eq!(BitsPerSec::parse("1mbit"), Ok(BitsPerSec(1_000_000)));
        assert_eq!(BitsPerSec::parse("1.5Mbit"), Ok(BitsPerSec(1_500_000)));
        assert_eq!(BitsPerSec::parse("500kbit").unwrap().to_string(), "500kbit");
        assert_eq!(BitsPerSec(2_500_000).to_string(), "2.5mbit");
        assert_eq!(BitsPerSec(10_000_000_000).to_string(), "10gbit");
        for bad in ["1mbps", "fast", "", "1", "-1mbit", "1kbit", "1000gbit"] {
            assert!(BitsPerSec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(Bytes::parse("512"), Ok(Bytes(512)));
        assert_eq!(Bytes::parse("4k"), Ok(Bytes(4096)));
        assert_eq!(Bytes::parse("64KiB"), Ok(Bytes(65536)));
        assert_eq!(Bytes::parse("1M"), Ok(Bytes(1 << 20)));
        assert_eq!(Bytes::parse("8GiB"), Ok(Bytes(8 << 30)));
        for bad in ["", "k", "4x", "-4k", "4.5k", "99999999999T"] {
            assert!(Bytes::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("750us"), Ok(Duration::from_micros(750)));
        assert!(matches!(
            parse_duration("-1s"),
            Err(UnitError::NegativeDuration(_))
        ));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn percentages_become_fractions() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("0.5%"), Ok(0.005));
        assert!(parse_percent("5").is_err());
        assert!(parse_percent("120%").is_err());
    }

    #[test]
    fn latencies_print_with_three_figures() {
        assert_eq!(Latency(Duration::from_micros(850)).to_string(), "850µs");
        assert_eq!(Latency(Duration::from_micros(1240)).to_string(), "1.24ms");
        assert_eq!(Latency(Duration::from_micros(12_500)).to_string(), "12.5ms");
        assert_eq!(Latency(Duration::from_millis(1200)).to_string(), "1.20s");
        assert_eq!(Bytes(3 * 1024 * 1024).to_string(), "3.0 MiB");
    }

    #[test]
    fn durations_print_as_typed() {
        assert_eq!(format_duration(Duration::from_secs(5)), "5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
