//! Value parsers for typed flags: each turns one flag's text into its type
//! or a message that says what is wrong and what would do (clap prints it
//! after the flag's name).

use crate::plan::{Sweep, ThinkTime};
use crate::units::{parse_duration, parse_percent};
use std::time::Duration;

/// A duration: `500ms`, `5s`, `1m`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    // The unit's error already shows how to write one.
    parse_duration(text).map_err(|e| e.to_string())
}

/// A percentage: `5%` or a fraction `0.05`.
pub(crate) fn percent(text: &str) -> Result<f64, String> {
    parse_percent(text).map_err(|e| e.to_string())
}

/// A percentage above 0.
pub(crate) fn positive_percent(text: &str) -> Result<f64, String> {
    percent(text)?;
    parse_percent(text)
        .ok()
        .filter(|v| *v > 0.0)
        .ok_or_else(|| format!("'{text}' is not a percentage above 0; e.g. 5%"))
}

/// A throughput needed: `2000` or `2000/s`, above 0.
pub(crate) fn need(text: &str) -> Result<f64, String> {
    let number = text.trim().strip_suffix("/s").unwrap_or(text.trim());
    number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
        .ok_or_else(|| format!("'{text}' is not a throughput above 0; e.g. 2000/s"))
}

/// A users sweep: `8`, `1,2,4,8` or `10..150/10`.
pub(crate) fn users(text: &str) -> Result<Sweep, String> {
    Sweep::parse_users(text).map_err(|e| format!("{e}; e.g. 8, 1,2,4,8 or 10..150/10"))
}

/// A rate sweep: `500` or `100..1000/100` per second.
pub(crate) fn rates(text: &str) -> Result<Sweep, String> {
    Sweep::parse_rates(text).map_err(|e| format!("{e}; e.g. 500 or 100..1000/100"))
}

/// A think time: `0`, `1s`, `exp:1s` or `uniform:0.5s..1.5s`.
pub(crate) fn think(text: &str) -> Result<ThinkTime, String> {
    ThinkTime::parse(text).map_err(|e| format!("{e}; e.g. 0, 1s, exp:1s or uniform:0.5s..1.5s"))
}
