//! A caching accelerator's own accounting over each step's measured
//! window, as its access log said it (see `sut::cache_log`): its hit
//! ratio by requests and by bytes, each cache status's count, and what
//! reached the origin: the web workload's own figures
//! ([`crate::workload::figures`]), shown in every report format and kept
//! in the JSON export under `steps[].cache`.

use crate::record::StepResult;
use crate::units::{BytesPerSec, Latency, Percent};
use crate::workload::figures::{Figures, StepFigures};
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

/// The columns after the load.
const HEADS: [&str; 11] = [
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
];

/// The cache's figures for every step; none when no step kept a log (a
/// web server with no cache in front). A step without a log has dashes.
pub(super) fn figures(steps: &[StepResult]) -> Option<Figures> {
    let each: Vec<Option<CacheFigures>> = steps.iter().map(cache_figures).collect();
    if each.iter().all(Option::is_none) {
        return None;
    }
    Some(Figures {
        title: "the cache during each step".to_string(),
        about: "the accelerator's own log".to_string(),
        heads: HEADS.map(String::from).into(),
        key: "cache",
        cost: None,
        legend: Vec::new(),
        steps: each.into_iter().map(step_figures).collect(),
    })
}

/// One step's cells and export, dashes and nothing when it kept no log.
fn step_figures(f: Option<CacheFigures>) -> StepFigures {
    let Some(f) = f else {
        return StepFigures {
            cells: vec!["-".to_string(); HEADS.len()],
            export: serde_json::Value::Null,
            evidence: Vec::new(),
            server_cpus: None,
            cost: None,
        };
    };
    let count = |k: &str| f.statuses.get(k).copied().unwrap_or(0);
    let other: u64 = f
        .statuses
        .iter()
        .filter(|(k, _)| !["hit", "miss", "expired"].contains(&k.as_str()))
        .map(|(_, n)| n)
        .sum();
    let cells = vec![
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
    ];
    StepFigures {
        cells,
        export: serde_json::to_value(&f).unwrap_or_default(),
        evidence: Vec::new(),
        server_cpus: None,
        cost: None,
    }
}
