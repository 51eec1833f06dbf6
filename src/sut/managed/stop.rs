//! How managed servers are stopped whatever signals perflab gets, and
//! however many: a server and everything it forks are stopped, its files
//! removed and its ledger entry cleared before perflab exits.
//!
//! - Each server runs in a session (and so a process group) of its own
//!   (`setsid` between fork and exec): a Ctrl-C at the terminal, or
//!   `timeout`'s signal to perflab's process group, reaches perflab alone,
//!   which then stops the server in order — never a server shut down
//!   under a run that is still talking to it.
//! - A stopped server's group is killed as a whole once its main process
//!   has ended (nginx's workers, whatever its master left), and its
//!   cgroup, when perflab is root, likewise ([`super::cgroup`]): the
//!   server's own children that started sessions of their own
//!   (PostgreSQL's backends) are in it too.
//! - While a managed server lives in this process ([`Live`]), a second
//!   Ctrl-C or SIGTERM does not end the process at once, as it does
//!   otherwise ([`register_second_signal`]): it hurries the stop (no
//!   polite wait, SIGKILL at once) and the command ends as after the
//!   first, its run marked, with nothing left behind.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Managed servers' ledger entries open in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Ctrl-C and SIGTERM seen by the actions [`register_second_signal`] set.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
/// The exit code of the first of them: a second signal of another kind
/// (SIGTERM, then Ctrl-C) ends the process as the first would have.
static FIRST_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Counts a managed server as alive until dropped (held by its ledger
/// entry, which is struck off last).
pub(crate) struct Live(());

impl Live {
    pub(crate) fn new() -> Self {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Live(())
    }
}

impl Default for Live {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a stop should not wait for the server to stop politely: a
/// second signal came.
pub(crate) fn hurry() -> bool {
    SIGNALS.load(Ordering::SeqCst) >= 2
}

/// What a second `signal` does to a command that stops on the first
/// (which sets `stopping`): with no managed server alive, the process
/// ends at once with the first signal's `code` (the user insists); with one, its stop is
/// hurried and the command ends as after the first signal, its server
/// stopped and removed and its run marked. Registered before the action
/// that sets `stopping`, so that the first signal finds it unset.
pub(crate) fn register_second_signal(
    signal: libc::c_int,
    code: i32,
    stopping: Arc<AtomicBool>,
) -> std::io::Result<()> {
    // SAFETY: the action only reads and writes atomics and calls _exit,
    // all async-signal-safe.
    unsafe {
        signal_hook::low_level::register(signal, move || {
            SIGNALS.fetch_add(1, Ordering::SeqCst);
            let _ = FIRST_CODE.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
            if stopping.load(Ordering::SeqCst) && LIVE.load(Ordering::SeqCst) == 0 {
                signal_hook::low_level::exit(FIRST_CODE.load(Ordering::SeqCst));
            }
        })
    }?;
    Ok(())
}

/// Sends `signal` to every process of the session `sid` (a server's, made
/// by `setsid`): its process group and any group its processes made
/// inside the session. Read from /proc: a session id is a pid that stays
/// reserved while any process of the session lives.
pub(crate) fn signal_session(sid: u32, signal: libc::c_int) {
    // SAFETY: kill on the group the server leads; ESRCH when it is empty.
    unsafe { libc::kill(-(sid as libc::pid_t), signal) };
    for pid in session_members(sid) {
        // SAFETY: a process of the server's own session.
        unsafe { libc::kill(pid as libc::pid_t, signal) };
    }
}

/// The processes of session `sid`, from /proc.
pub(crate) fn session_members(sid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| session_of(*pid) == Some(sid))
        .collect()
}

/// The session id of process `pid` (`/proc/PID/stat` field 6), none for
/// a zombie or a process that is gone.
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: state, ppid,
    // pgrp, session.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that started a session of its own, and its own child,
    /// are found as the session's members and killed with it.
    #[test]
    fn a_session_is_found_and_killed_whole() {
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sh");
        leader.args(["-c", "sleep 60 & sleep 60"]);
        // SAFETY: setsid between fork and exec is async-signal-safe.
        unsafe {
            leader.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = leader.spawn().unwrap();
        let sid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while session_members(sid).len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(session_members(sid).len(), 3, "sh and its two sleeps");
        signal_session(sid, libc::SIGKILL);
        child.wait().unwrap();
        while !session_members(sid).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            session_members(sid).is_empty(),
            "{:?}",
            session_members(sid)
        );
    }
}
