//! A caching accelerator's own accounting over each step's measured
//! window, as its access log said it (see `sut::cache_log`): its hit
//! ratio by requests and by bytes, each cache status's count, and what
//! reached the origin. One grid, written for the terminal, Markdown and
//! HTML, and the same figures in the JSON export.

use super::grid::Grid;
use crate::engine::StepResult;
use crate::units::{BytesPerSec, Latency, Percent};
use serde::Serialize;
use std::collections::BTreeMap;

/// A step's cache figures over its measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CacheFigures {
    /// Requests the accelerator logged.
    pub(crate) requests: u64,
    /// Requests answered from the cache (HIT) over all logged.
    pub(crate) hit_ratio: f64,
    /// Bytes served that did not come from the origin, over all served.
    pub(crate) byte_hit_ratio: f64,
    /// Requests of each cache status (`hit`, `miss`, `expired`, …).
    pub(crate) statuses: BTreeMap<String, u64>,
    /// Requests sent to the origin per second.
    pub(crate) origin_requests_per_s: f64,
    /// Bytes received from the origin per second.
    pub(crate) origin_bytes_per_s: f64,
    /// The origin's mean response time per request sent to it, seconds.
    pub(crate) origin_seconds_per_request: Option<f64>,
    /// Lines of the log that were not in its format, or too long.
    pub(crate) bad_lines: u64,
}

/// The step's figures, when its server kept a cache log.
pub(crate) fn cache_figures(step: &StepResult) -> Option<CacheFigures> {
    let db = step.measured_db()?;
    let c = &db.counters;
    let requests = *c.get("cache_requests")?;
    let get = |k: &str| c.get(k).copied().unwrap_or(0.0);
    let seconds = step.measured().1.as_secs_f64().max(f64::MIN_POSITIVE);
    let statuses = crate::sut::cache_log::STATUSES
        .iter()
        .map(|s| (s.to_string(), get(&format!("cache_{s}")) as u64))
        .filter(|(_, n)| *n > 0)
        .collect();
    let served = get("served_bytes");
    let origin_requests = get("origin_requests");
    Some(CacheFigures {
        requests: requests as u64,
        hit_ratio: if requests > 0.0 {
            get("cache_hit") / requests
        } else {
            0.0
        },
        byte_hit_ratio: if served > 0.0 {
            (1.0 - get("origin_bytes") / served).clamp(0.0, 1.0)
        } else {
            0.0
        },
        statuses,
        origin_requests_per_s: origin_requests / seconds,
        origin_bytes_per_s: get("origin_bytes") / seconds,
        origin_seconds_per_request: (origin_requests > 0.0)
            .then(|| get("origin_seconds") / origin_requests),
        bad_lines: get("cache_log_bad_lines") as u64,
    })
}

/// The cache's grid, one row per step; none when no step kept a log.
pub(crate) fn cache_grid(steps: &[StepResult]) -> Option<Grid> {
    let rows: Vec<(&StepResult, CacheFigures)> = steps
        .iter()
        .filter_map(|s| Some((s, cache_figures(s)?)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut grid = Grid::new([
        "load",
        "requests",
        "hit ratio",
        "byte hit",
        "hit",
        "miss",
        "expired",
        "other",
        "origin req/s",
        "origin MB/s",
        "origin time",
        "bad lines",
    ]);
    for (step, f) in rows {
        let count = |k: &str| f.statuses.get(k).copied().unwrap_or(0);
        let other: u64 = f
            .statuses
            .iter()
            .filter(|(k, _)| !["hit", "miss", "expired"].contains(&k.as_str()))
            .map(|(_, n)| n)
            .sum();
        grid.rows.push(vec![
            step.level.to_string(),
            f.requests.to_string(),
            Percent(f.hit_ratio).to_string(),
            Percent(f.byte_hit_ratio).to_string(),
            count("hit").to_string(),
            count("miss").to_string(),
            count("expired").to_string(),
            other.to_string(),
            format!("{:.1}", f.origin_requests_per_s),
            BytesPerSec(f.origin_bytes_per_s).to_string(),
            f.origin_seconds_per_request
                .map_or("-".to_string(), |s| Latency::secs(s).to_string()),
            f.bad_lines.to_string(),
        ]);
    }
    Some(grid)
}

/// The terminal's section: a title and the grid, or nothing.
pub(crate) fn cache_table(steps: &[StepResult]) -> String {
    match cache_grid(steps) {
        Some(grid) => format!(
            "\nthe cache during each step (the accelerator's own log):\n{}",
            grid.terminal("")
        ),
        None => String::new(),
    }
}
