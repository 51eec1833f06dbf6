//! The doctor's finding of a directory's flush latency (`perflab doctor
//! --flush-latency DIR`), timed by [`crate::probe::flush`]: information,
//! or a warning when the median flush is slow.

use super::{Finding, Severity};
use crate::probe::flush::{FlushLatency, PAGE};
use crate::units::Latency;
use std::time::Duration;

/// A median flush above this is a slow log device (a disk without a
/// write cache it may trust, a network volume): a warning.
const SLOW_FLUSH: Duration = Duration::from_millis(2);

/// The finding the doctor prints for `flush`.
pub(crate) fn finding(flush: &FlushLatency) -> Finding {
    let l = |s: f64| Latency::secs(s).to_string();
    let per_second = if flush.p50 > 0.0 {
        1.0 / flush.p50
    } else {
        0.0
    };
    Finding {
        severity: if flush.p50 > SLOW_FLUSH.as_secs_f64() {
            Severity::Warning
        } else {
            Severity::Info
        },
        area: "storage".to_string(),
        title: format!(
            "flush latency of {}: p50 {}, p99 {}",
            flush.dir,
            l(flush.p50),
            l(flush.p99)
        ),
        evidence: vec![
            format!(
                "{} flushes of {} KiB (a write and fdatasync, one writer) in {:.1} s",
                flush.flushes,
                PAGE / 1024,
                flush.seconds
            ),
            format!(
                "mean {}, p50 {}, p95 {}, p99 {}, max {}",
                l(flush.mean),
                l(flush.p50),
                l(flush.p95),
                l(flush.p99),
                l(flush.max)
            ),
        ],
        why: format!(
            "a commit waits for its log's flush: one session commits at most about {per_second:.0} times a second with its log here, more sessions only as group commit shares a flush"
        ),
        fix: "for a log that must be durable, a device whose write cache survives a power loss flushes in microseconds; else group commits (commit_delay, innodb_flush_log_at_trx_commit) or accept losing the last ones (synchronous_commit=off)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_median_flush_is_a_warning_naming_the_commits_it_allows() {
        let m = FlushLatency {
            dir: "/var/lib/log".into(),
            flushes: 200,
            seconds: 2.0,
            mean: 0.010,
            p50: 0.008,
            p95: 0.020,
            p99: 0.030,
            max: 0.050,
        };
        let f = finding(&m);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "flush latency of /var/lib/log: p50 8.00ms, p99 30.0ms"
        );
        assert!(
            f.why.contains("at most about 125 times a second"),
            "{}",
            f.why
        );
        let fast = FlushLatency { p50: 0.0002, ..m };
        assert_eq!(finding(&fast).severity, Severity::Info);
    }
}
