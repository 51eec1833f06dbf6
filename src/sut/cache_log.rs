//! A caching proxy's own accounting of its requests, read from the access
//! log it writes in its managed directory: one line per request, fields
//! apart by `|` (no value a proxy writes holds one), `pc1` first so that a
//! line of another format is told apart:
//!
//! ```text
//! pc1|CACHE STATUS|ORIGIN BYTES|ORIGIN SECONDS|REQUEST SECONDS|BODY BYTES
//! pc1|HIT|-|-|0.000|4096
//! pc1|MISS|4362|0.002|0.003|4096
//! ```
//!
//! A proxy that logs its fetches from the origin apart from its replies
//! (Varnish's `varnishncsa`, one line per transaction of either side)
//! marks a reply's line `pc1c` and a fetch's `pc1b` ([`MARK_REPLY`],
//! [`MARK_FETCH`]): a reply's line is a request as `pc1`'s is, its origin
//! fields `-`; a fetch's line is one request to the origin (its bytes and
//! time) and no request to the cache, its status and request fields `-`.
//!
//! ```text
//! pc1b|-|100204|0.007473|-|100000
//! pc1c|miss|-|-|0.007752|100000
//! pc1c|hit|-|-|0.000096|100000
//! ```
//!
//! nginx writes it with `$upstream_cache_status`,
//! `$upstream_bytes_received`, `$upstream_response_time`, `$request_time`
//! and `$body_bytes_sent` ([`NGINX_FORMAT`]); an origin tried twice gives
//! `123, 456` (or `123 : 456` across an internal redirect), each part
//! counted as a request to the origin. The log is read from where the
//! last read stopped, at most [`READ_PER_TAKE`] at a time, with at most
//! [`LONGEST_LINE`] of a line held: a longer line, or one that is not in
//! the format, is counted (`cache_log_bad_lines`), never fatal. The part
//! read is given back to the file system (a hole punched), so the log
//! takes no room however long the run.

use crate::probe::DbStatsSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// The first field of every line.
pub(crate) const MARK: &str = "pc1";

/// The first field of a reply's line, its fetch from the origin logged
/// apart.
pub(crate) const MARK_REPLY: &str = "pc1c";

/// The first field of a fetch from the origin logged apart from the
/// reply it served.
pub(crate) const MARK_FETCH: &str = "pc1b";

/// varnishncsa's format of the accounting (`-c -b`, both sides), marked
/// by its side (`c` or `b`). A reply's: how Varnish handled it (`hit`,
/// `miss`, `pass`, `synth`, …), its time from the client's request to
/// the reply's end (the `Resp` timestamp's time since the start) and
/// its body's bytes; a fetch's: the bytes received from the origin,
/// headers included (`BereqAcct`'s sixth field), its time until the
/// body was fetched (the `BerespBody` timestamp's) and the body's bytes.
/// Fields a side does not have print `-`.
pub(crate) const VARNISHNCSA_FORMAT: &str = "pc1%{Varnish:side}x|%{Varnish:handling}x|%{VSL:BereqAcct[6]}x|%{VSL:Timestamp:BerespBody[2]}x|%{VSL:Timestamp:Resp[2]}x|%b";

/// nginx's `log_format` of the accounting.
pub(crate) const NGINX_FORMAT: &str = "pc1|$upstream_cache_status|$upstream_bytes_received|$upstream_response_time|$request_time|$body_bytes_sent";

/// The longest line kept; a longer one is counted bad and skipped.
pub(crate) const LONGEST_LINE: usize = 4096;

/// The most of the log read at one interval's end (the rest is read at
/// the next).
pub(crate) const READ_PER_TAKE: u64 = 256 << 20;

/// The cache statuses a proxy logs, each counted as `cache_NAME`; any
/// other is `cache_other`, a request that did not use the cache (`-`)
/// `cache_none`.
pub(crate) const STATUSES: &[&str] = &[
    "hit",
    "miss",
    "expired",
    "stale",
    "updating",
    "revalidated",
    "bypass",
    "none",
    "other",
];

/// Where a caching proxy's accounting is, and the most its cache holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CacheAccounting {
    /// The access log in the module's format ([`NGINX_FORMAT`],
    /// [`VARNISHNCSA_FORMAT`]).
    pub(crate) log: PathBuf,
    /// The cache's size limit, bytes, when known.
    pub(crate) max_bytes: Option<u64>,
}

/// The log, read on: what was counted so far (cumulative, as a server's
/// counters are).
pub(crate) struct CacheLog {
    at: CacheAccounting,
    offset: u64,
    /// The start of a line not ended yet.
    partial: Vec<u8>,
    /// The line being read is too long: skipped to its end.
    skipping: bool,
    counts: BTreeMap<String, f64>,
}

impl CacheLog {
    /// Reads `at` from its start (the proxy made it empty).
    pub(crate) fn new(at: CacheAccounting) -> CacheLog {
        let mut counts: BTreeMap<String, f64> = [
            "cache_requests",
            "cache_log_bad_lines",
            "origin_requests",
            "origin_bytes",
            "origin_seconds",
            "request_seconds",
            "miss_request_seconds",
            "served_bytes",
        ]
        .iter()
        .map(|k| (k.to_string(), 0.0))
        .collect();
        for s in STATUSES {
            counts.insert(format!("cache_{s}"), 0.0);
        }
        CacheLog {
            at,
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            counts,
        }
    }

    /// Reads what was written since the last read and counts it.
    fn read_on(&mut self) -> std::io::Result<()> {
        // Writable to punch the part read out of it (nothing is written);
        // a log perflab may only read is read and kept whole.
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.at.log)
            .or_else(|_| std::fs::File::open(&self.at.log));
        let mut file = match opened {
            Ok(f) => f,
            // Not written yet: nothing to count.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            // Made anew: read from its start.
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut chunk = vec![0u8; 64 << 10];
        let mut read = 0u64;
        while read < READ_PER_TAKE {
            let n = file.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            self.feed(&chunk[..n]);
            read += n as u64;
        }
        let start = self.offset;
        self.offset += read;
        give_back(&file, start, self.offset);
        Ok(())
    }

    /// Counts the whole lines of `bytes`, keeping an unfinished one.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (line, rest, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.skipping {
                self.skipping = !ended;
                continue;
            }
            if self.partial.len() + line.len() > LONGEST_LINE {
                self.bad();
                self.partial.clear();
                self.skipping = !ended;
                continue;
            }
            self.partial.extend_from_slice(line);
            if ended {
                let whole = std::mem::take(&mut self.partial);
                self.line(&whole);
                self.partial = whole;
                self.partial.clear();
            }
        }
    }

    fn bad(&mut self) {
        self.add("cache_log_bad_lines", 1.0);
    }

    fn add(&mut self, key: &str, value: f64) {
        *self.counts.entry(key.to_string()).or_insert(0.0) += value;
    }

    /// One line of the log, counted.
    fn line(&mut self, line: &[u8]) {
        let Some((side, fields)) = std::str::from_utf8(line).ok().and_then(parse_line) else {
            if !line.is_empty() {
                self.bad();
            }
            return;
        };
        if side == Side::Fetch {
            self.add("origin_requests", 1.0);
            self.add("origin_bytes", fields.origin_bytes as f64);
            self.add("origin_seconds", fields.origin_seconds);
            return;
        }
        self.add("cache_requests", 1.0);
        self.add(&format!("cache_{}", fields.status), 1.0);
        self.add("origin_requests", fields.origin_requests as f64);
        self.add("origin_bytes", fields.origin_bytes as f64);
        self.add("origin_seconds", fields.origin_seconds);
        self.add("request_seconds", fields.request_seconds);
        // A reply whose fetch is logged apart waited for the origin when
        // it missed.
        if fields.origin_requests > 0 || (side == Side::Reply && fields.status == "miss") {
            self.add("miss_request_seconds", fields.request_seconds);
        }
        self.add("served_bytes", fields.served_bytes as f64);
    }

    /// The counts so far, and the cache's size as a gauge.
    pub(crate) fn counts(&self) -> BTreeMap<String, f64> {
        let mut out = self.counts.clone();
        if let Some(max) = self.at.max_bytes {
            out.insert("now_cache_max_bytes".to_string(), max as f64);
        }
        out
    }
}

/// Gives the part of the log read back to the file system: a hole
/// punched from `from` to `to`, the file's length and the proxy's
/// appends untouched. A file system that cannot punch keeps the bytes.
fn give_back(file: &std::fs::File, from: u64, to: u64) {
    use std::os::unix::io::AsRawFd;
    if to <= from {
        return;
    }
    let (Ok(start), Ok(len)) = (
        libc::off_t::try_from(from),
        libc::off_t::try_from(to - from),
    ) else {
        return;
    };
    // SAFETY: fallocate on a descriptor this function's caller holds open.
    unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            start,
            len,
        );
    }
}

/// One line's fields.
#[derive(Debug, PartialEq)]
struct Fields {
    /// `hit`, `miss`, … one of [`STATUSES`].
    status: &'static str,
    origin_requests: u64,
    origin_bytes: u64,
    origin_seconds: f64,
    request_seconds: f64,
    served_bytes: u64,
}

/// Which part of a request a line accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The reply to the client, with its fetch from the origin if any
    /// (`pc1`).
    Whole,
    /// The reply to the client, its fetch logged apart (`pc1c`).
    Reply,
    /// A fetch from the origin logged apart (`pc1b`).
    Fetch,
}

/// A line in the format, or `None`.
fn parse_line(line: &str) -> Option<(Side, Fields)> {
    let mut parts = line.trim_end_matches('\r').split('|');
    let side = match parts.next()? {
        MARK => Side::Whole,
        MARK_REPLY => Side::Reply,
        MARK_FETCH => Side::Fetch,
        _ => return None,
    };
    let status = parts.next()?;
    let bytes = parts.next()?;
    let origin_time = parts.next()?;
    let request_time = parts.next()?;
    let served = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    let status = match status.to_ascii_lowercase().as_str() {
        "-" | "" => "none",
        s => STATUSES
            .iter()
            .copied()
            .find(|k| *k == s && *k != "none" && *k != "other")
            .unwrap_or("other"),
    };
    let (origin_requests, origin_bytes) = several(bytes, |p| p.parse::<u64>().ok())?;
    let (_, origin_seconds) = several(origin_time, |p| p.parse::<f64>().ok())?;
    let request_seconds = number(request_time)?;
    let served_bytes = if served == "-" {
        0
    } else {
        served.parse().ok()?
    };
    Some((
        side,
        Fields {
            status,
            origin_requests,
            origin_bytes,
            origin_seconds,
            request_seconds,
            served_bytes,
        },
    ))
}

/// A value an upstream may repeat (`123, 456`, `1 : 2`): how many there
/// are and their sum; `-` alone is none.
fn several<T: std::iter::Sum<T> + Default>(
    text: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<(u64, T)> {
    if text == "-" {
        return Some((0, T::default()));
    }
    let mut count = 0;
    let mut values = Vec::new();
    for part in text.split([',', ':']).map(str::trim) {
        count += 1;
        if part != "-" {
            values.push(parse(part)?);
        }
    }
    Some((count, values.into_iter().sum()))
}

/// A number of seconds, `-` being none.
fn number(text: &str) -> Option<f64> {
    if text == "-" {
        return Some(0.0);
    }
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// A caching proxy's statistics: its status page's counters, when it has
/// one, and its log's.
pub(crate) struct ProxyStats {
    pub(crate) status: Option<super::http::ServerStatus>,
    pub(crate) log: CacheLog,
}

impl DbStatsSource for ProxyStats {
    fn sample_waits(&mut self, _waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        // A log that cannot be read this time is read on next time.
        let _ = self.log.read_on();
        let mut out = self.log.counts();
        if let Some(status) = &mut self.status {
            out.extend(status.counters()?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> CacheLog {
        CacheLog::new(CacheAccounting {
            log: PathBuf::from("/nonexistent/perflab-cache.log"),
            max_bytes: Some(1 << 20),
        })
    }

    #[test]
    fn hits_misses_and_the_origins_share_are_counted() {
        let mut l = log();
        l.feed(b"pc1|HIT|-|-|0.000|4096\npc1|MISS|4362|0.002|0.003|4096\n");
        l.feed(b"pc1|EXPIRED|100, 200|0.001, 0.004|0.006|");
        l.feed(b"90\npc1|-|-|-|0.000|0\n");
        let c = l.counts();
        assert_eq!(c["cache_requests"], 4.0);
        assert_eq!(c["cache_hit"], 1.0);
        assert_eq!(c["cache_miss"], 1.0);
        assert_eq!(c["cache_expired"], 1.0);
        assert_eq!(c["cache_none"], 1.0);
        assert_eq!(c["origin_requests"], 3.0);
        assert_eq!(c["origin_bytes"], 4662.0);
        assert!((c["origin_seconds"] - 0.007).abs() < 1e-9);
        assert!((c["miss_request_seconds"] - 0.009).abs() < 1e-9);
        assert_eq!(c["served_bytes"], 4096.0 * 2.0 + 90.0);
        assert_eq!(c["cache_log_bad_lines"], 0.0);
        assert_eq!(c["now_cache_max_bytes"], (1 << 20) as f64);
    }

    /// varnishncsa's two sides (its own lines, as it wrote them for a
    /// miss and two hits): the fetch is the origin's request and bytes,
    /// the replies the cache's requests.
    #[test]
    fn a_fetch_logged_apart_is_the_origins_and_a_reply_the_caches() {
        let mut l = log();
        l.feed(
            b"pc1b|-|100204|0.007473|-|100000
pc1c|miss|-|-|0.007752|100000
",
        );
        l.feed(
            b"pc1c|hit|-|-|0.001558|100000
pc1c|hit|-|-|0.000096|100000
",
        );
        l.feed(
            b"pc1c|pass|-|-|0.001|3
pc1x|hit|-|-|0|0
",
        );
        let c = l.counts();
        assert_eq!(c["cache_requests"], 4.0);
        assert_eq!((c["cache_hit"], c["cache_miss"]), (2.0, 1.0));
        assert_eq!(c["cache_other"], 1.0);
        assert_eq!(c["origin_requests"], 1.0);
        assert_eq!(c["origin_bytes"], 100204.0);
        assert!((c["origin_seconds"] - 0.007473).abs() < 1e-9);
        assert!((c["request_seconds"] - (0.007752 + 0.001558 + 0.000096 + 0.001)).abs() < 1e-9);
        assert!((c["miss_request_seconds"] - 0.007752).abs() < 1e-9);
        assert_eq!(c["served_bytes"], 300003.0);
        assert_eq!(c["cache_log_bad_lines"], 1.0);
    }

    /// Garbage and a line longer than kept are counted, and the reading
    /// goes on with the next line; memory holds one line at most.
    #[test]
    fn garbage_and_endless_lines_are_counted_not_fatal() {
        let mut l = log();
        l.feed(b"GET / HTTP/1.1 200\npc1|HIT|x|-|0|0\n\xff\xfe\n");
        let long = vec![b'a'; LONGEST_LINE * 3];
        l.feed(&long);
        l.feed(&long);
        assert!(l.partial.len() <= LONGEST_LINE);
        l.feed(b"still the long line\npc1|HIT|-|-|0.000|10\n");
        let c = l.counts();
        assert_eq!(c["cache_log_bad_lines"], 4.0);
        assert_eq!(c["cache_requests"], 1.0);
        assert_eq!(c["cache_hit"], 1.0);
        assert_eq!(c["cache_other"], 0.0);
        l.feed(b"pc1|WEIRD|-|-|0|0\n");
        assert_eq!(l.counts()["cache_other"], 1.0);
    }

    /// The log is read on from where it stopped, a line cut by the read
    /// completed by the next.
    #[test]
    fn the_log_is_read_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.log");
        let mut l = CacheLog::new(CacheAccounting {
            log: path.clone(),
            max_bytes: None,
        });
        l.read_on().unwrap();
        assert_eq!(l.counts()["cache_requests"], 0.0);
        std::fs::write(&path, "pc1|HIT|-|-|0.000|1\npc1|MI").unwrap();
        l.read_on().unwrap();
        assert_eq!(l.counts()["cache_requests"], 1.0);
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"SS|5|0.001|0.001|1\n").unwrap();
        l.read_on().unwrap();
        let c = l.counts();
        assert_eq!((c["cache_requests"], c["cache_miss"]), (2.0, 1.0));
        assert!(!c.contains_key("now_cache_max_bytes"));
        // The part read is given back; the length, and so the proxy's
        // appends, stay where they were.
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(len, l.offset);
        f.write_all(b"pc1|HIT|-|-|0.000|1\n").unwrap();
        l.read_on().unwrap();
        assert_eq!(l.counts()["cache_requests"], 3.0);
    }
}
