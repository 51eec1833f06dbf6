//! The limits on the server's own cgroup, in the verdict's words: a
//! block-I/O write limit (v1 `blkio.throttle.write_*_device`, v2
//! `io.max` `wiops`/`wbps`) the server's writes reached names the commit
//! flush's cause with its value, its device and the cgroup's directory;
//! a `memory.high` it went over and a `pids.max` it sat at are said
//! wherever they bind. A commit waiting on its flush is `commit I/O` on
//! every server, latency-bound or saturated said beside it.

use super::super::capacity::load_text;
use super::super::iopath::LimitUse;
use super::super::points::StepPoint;
use crate::units::Bytes;

/// Whose cgroup the server's is, as `LimitUse::owner` says it.
pub(crate) const SERVER: &str = "the server's cgroup";

/// Share of a limit the server's writes must reach for it to be named.
const REACHED: f64 = 0.8;

/// A write limit of the server's cgroup its writes reached at a step.
pub(crate) struct WriteLimit<'a> {
    pub(crate) limit: &'a LimitUse,
    /// `write IOPS` or `write bytes/s`.
    pub(crate) what: &'static str,
    /// The limit's value, in the kind's unit.
    pub(crate) value: u64,
    /// The share of it the server used.
    pub(crate) share: f64,
}

/// The write limit of the server's cgroup that its writes came nearest
/// at step `p`, when they reached it.
pub(crate) fn write_limit(p: &StepPoint) -> Option<WriteLimit<'_>> {
    p.io_path
        .limits
        .iter()
        .filter(|l| l.owner == SERVER)
        .flat_map(|l| {
            l.shares()
                .into_iter()
                .filter(|(what, _, share)| what.starts_with("write") && *share >= REACHED)
                .map(move |(what, value, share)| WriteLimit {
                    limit: l,
                    what,
                    value,
                    share,
                })
        })
        .max_by(|a, b| a.share.total_cmp(&b.share))
}

impl WriteLimit<'_> {
    /// The limit in the verdict's name: `a blkio throttle of 100 write
    /// IOPS on the server's cgroup, device vda`.
    pub(crate) fn name(&self) -> String {
        format!(
            "{}, device {}",
            self.limit.described(&self.value_text()),
            self.limit.limit.device
        )
    }

    /// `100 write IOPS` or `2.0 MiB/s written`.
    fn value_text(&self) -> String {
        if self.what == "write IOPS" {
            format!("{} write IOPS", self.value)
        } else {
            format!("{}/s written", Bytes(self.value))
        }
    }

    /// The evidence line: the limit, where it is set, and what the server
    /// wrote against it at step `p`.
    pub(crate) fn evidence(&self, p: &StepPoint) -> String {
        let l = &self.limit.limit;
        let device = if l.number.is_empty() || l.number == l.device {
            l.device.clone()
        } else {
            format!("{} ({})", l.device, l.number)
        };
        let cgroup = if l.dir.is_empty() { &l.cgroup } else { &l.dir };
        let (limit, wrote) = if self.what == "write IOPS" {
            (
                format!("write IOPS limited to {}", self.value),
                format!("{:.0}/s", self.limit.writes_per_s),
            )
        } else {
            (
                format!("writes limited to {}/s", Bytes(self.value)),
                format!("{}/s", Bytes(self.limit.write_bytes_per_s as u64)),
            )
        };
        format!(
            "{limit} on {device} by {SERVER} {cgroup} ({}); the server wrote {wrote} against it at {}, {:.0}% of the limit: each flush waits its turn there",
            l.interface,
            load_text(p),
            100.0 * self.share
        )
    }

    /// What to do: raise or lift it.
    pub(crate) fn next(&self) -> String {
        let l = &self.limit.limit;
        let cgroup = if l.dir.is_empty() { &l.cgroup } else { &l.dir };
        format!(
            "raise or lift the {} of {} on {SERVER} ({cgroup}), or group more commits per flush",
            l.interface,
            self.value_text()
        )
    }
}

/// The server cgroup's memory.high where it bound at step `p`: the
/// cgroup went over it.
pub(crate) fn memory_high(p: &StepPoint) -> Option<String> {
    let s = &p.io_path.server_limits;
    let (high, hits) = (s.memory_high_bytes?, s.memory_high_hits?);
    (hits > 0.0).then(|| {
        let reclaimed = s
            .reclaimed_pages_per_s
            .map(|r| format!(", {r:.0} pages/s reclaimed from it"))
            .unwrap_or_default();
        format!(
            "{SERVER} went over its memory.high of {} {hits:.0} times at {}{reclaimed}: the kernel reclaimed its memory and held its allocations back",
            Bytes(high),
            load_text(p)
        )
    })
}

/// The server cgroup's pids.max where it bound at step `p`: its tasks at
/// the limit, or forks refused.
pub(crate) fn pids(p: &StepPoint) -> Option<String> {
    let s = &p.io_path.server_limits;
    let max = s.pids_max?;
    let refused = s.pids_limit_hits.unwrap_or(0.0);
    let at_max = s.pids_current.is_some_and(|c| c >= max as f64);
    (at_max || refused > 0.0).then(|| {
        format!(
            "{SERVER} held {:.0} tasks at its pids.max of {max} at {} ({refused:.0} forks refused): it could start no more processes or threads",
            s.pids_current.unwrap_or(max as f64),
            load_text(p)
        )
    })
}
