//! Where the response time went, from the server's threads: at the
//! verdict's step, the share of its serving threads' time on a CPU,
//! waiting for one, in I/O (with its path), on locks, on their clients or
//! the network, and asleep — ranked the way Oracle's ADDM ranks findings
//! by their share of database time, split as Brendan Gregg's thread-state
//! analysis splits a thread's time. Every verdict whose run followed the
//! server's threads carries the line; it needs no cooperation from the
//! server, so it holds for nginx, MariaDB, Redis or a JVM alike.

use super::super::capacity::load_text;
use super::super::points::StepPoint;
use crate::probe::counters::threads::{ThreadSplit, ThreadStates};
use crate::units::Percent;

/// Mean threads in a flush (journal, fsync/writeback, block layer) from
/// which lock waiters are said to queue behind it: a flush in progress
/// more than half the time.
pub(crate) const FLUSH_IN_PROGRESS: f64 = 0.5;

/// Share of the serving threads' time on locks from which a flush in
/// progress is offered as what they queue behind.
const LOCKS_BEHIND: f64 = 0.3;

/// The evidence line of step `k`: where the server's threads spent their
/// time, and the caveats of how it was read; none when they were not
/// followed.
pub(crate) fn evidence(points: &[StepPoint], k: usize) -> Option<String> {
    let p = points.get(k)?;
    let states = p.threads.server.as_ref()?;
    let shares = points.get(k)?.threads.server_shares()?;
    let ranked: Vec<String> = shares
        .iter()
        .map(|(name, s)| format!("{name} {}", Percent(*s)))
        .collect();
    let mut line = format!(
        "where the server's threads spent their time at {}: {} ({:.1} threads serving of {})",
        load_text(p),
        ranked.join(", "),
        states.active_threads,
        states.threads
    );
    let channels: Vec<String> = states
        .channels
        .iter()
        .take(3)
        .map(|(name, t)| format!("{name} {t:.1}"))
        .collect();
    if !channels.is_empty() {
        line.push_str(&format!(
            "; busiest waits (mean threads): {}",
            channels.join(", ")
        ));
    }
    if let Some(behind) = locks_behind_a_flush(states) {
        line.push_str(&format!("; {behind}"));
    }
    if states.wchan_unreadable {
        line.push_str(
            "; some wait channels were unreadable (no ptrace access to the server: run perflab as root or as the server's user), so their off-CPU time counts as other",
        );
    }
    Some(line)
}

/// Mean threads blocked in a flush: the journal, fsync/writeback and the
/// block layer.
pub(crate) fn flushing(split: &ThreadSplit) -> f64 {
    split.io_journal + split.io_flush + split.io_block
}

/// Lock waiters that queue behind a flush: the serving threads mostly
/// wait on locks while some thread of the server is in a flush most of
/// the time (a group commit: one thread flushes, the others wait for it).
pub(crate) fn locks_behind_a_flush(states: &ThreadStates) -> Option<String> {
    let serving = states.serving();
    let total = serving.total();
    let flush = flushing(&states.all);
    (total > 0.0 && serving.lock / total >= LOCKS_BEHIND && flush >= FLUSH_IN_PROGRESS).then(|| {
        format!(
            "a flush was in progress {:.1} threads on average while the others waited on locks: they likely queue behind it (a group commit)",
            flush
        )
    })
}

/// What an operation's time mostly went to, in words (`the commit flush —
/// I/O (journal commit)`, `the round trip to the clients`), from the
/// server's threads at step `k`; none when not followed or nothing stands
/// out.
pub(crate) fn dominant(points: &[StepPoint], k: usize) -> Option<String> {
    let states = points.get(k)?.threads.server.as_ref()?;
    let serving = states.serving();
    let total = serving.total();
    if total <= 0.0 {
        return None;
    }
    let io = serving.io() / total;
    let flush_behind = locks_behind_a_flush(states).is_some();
    let shares = serving.shares();
    let (top, share) = shares.first()?;
    if flush_behind || (io >= 0.3 && top.starts_with("I/O")) {
        let path = shares
            .iter()
            .find(|(n, _)| n.starts_with("I/O"))
            .map_or("I/O".to_string(), |(n, _)| n.clone());
        return Some(format!(
            "the commit flush — {path}{}",
            if flush_behind {
                ", the lock waiters queued behind it"
            } else {
                ""
            }
        ));
    }
    Some(match top.as_str() {
        "clients/network" => format!(
            "the round trip to the clients ({} of the serving threads' time waiting on them)",
            Percent(*share)
        ),
        "locks" => format!("waits on locks ({})", Percent(*share)),
        "sleep" => format!("timed sleeps in the server ({})", Percent(*share)),
        "on CPU" => format!("running on a CPU ({})", Percent(*share)),
        other => format!("{other} ({})", Percent(*share)),
    })
}
