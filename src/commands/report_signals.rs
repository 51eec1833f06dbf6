//! The signals of the commands that only read the store and write what
//! they make of it (`report`, `show`, `runs`, `diff-hosts`, `analyze`,
//! `compare`): their work is reading and rendering, with nothing of their own to
//! undo, so the first SIGINT, SIGTERM or SIGHUP ends the process from a
//! watching thread within a tick, with the code every command exits with
//! at a signal (130 for Ctrl-C, 143 for SIGTERM and SIGHUP, a closed
//! terminal) and one line. A file being written is finished first (a
//! rename's moment; at most [`FILE_GRACE`]), so that the file the user
//! named is the old one or the whole new one and no temporary is left
//! beside it. A SIGHUP that `nohup` ignores stays ignored.

use super::{signal_exit, Exit, StopSignals};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the watch looks for a signal.
const TICK: Duration = Duration::from_millis(20);

/// The longest an exit waits for a file being written to be whole.
const FILE_GRACE: Duration = Duration::from_millis(1500);

/// The first stop signal's number, 0 while none came: a command that
/// ends its work before the watch has ended it still ends as at the
/// signal.
pub(super) struct SignalEnd {
    seen: Arc<AtomicUsize>,
    what: &'static str,
}

impl SignalEnd {
    /// `done`, the code to exit with, when no signal came; otherwise the
    /// process ends here as the watch would end it.
    pub(super) fn exit(&self, done: Exit) -> Exit {
        match self.seen.load(Ordering::SeqCst) {
            0 => done,
            n => ended(n, self.what),
        }
    }
}

/// Ends the process at stop signal `signal` (its number), once whichever
/// thread comes first: the file being written finished, one line, the
/// signal's code.
fn ended(signal: usize, what: &'static str) -> ! {
    static ENDING: std::sync::Once = std::sync::Once::new();
    ENDING.call_once(|| {
        let _hold = crate::util::end_at_signal_hold(FILE_GRACE);
        let (by, exit) = signal_exit(signal);
        crate::util::err(format_args!("interrupted ({by}) while {what}\n"));
        std::process::exit(exit as i32);
    });
    // The other thread is ending the process.
    loop {
        std::thread::park();
    }
}

/// Ends the process at the first stop signal, saying it was `what` (`making
/// the report`) that was stopped.
pub(super) fn end_at_signal(what: &'static str) -> anyhow::Result<SignalEnd> {
    // A flag of its own, not the process's interrupt flag: nothing in
    // this command's work is to see the signal and end otherwise.
    let stop = Arc::new(AtomicBool::new(false));
    let signals = StopSignals::register(&stop)?;
    let seen = signals.shared();
    std::thread::Builder::new()
        .name("signal-exit".to_string())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(TICK);
            }
            ended(signals.first(), what)
        })?;
    Ok(SignalEnd { seen, what })
}
