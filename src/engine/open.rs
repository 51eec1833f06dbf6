//! Open-loop load: each worker's dispatcher draws arrival times (Poisson
//! or evenly spaced) and releases each at its time into the worker's
//! queue; idle sessions take them in order. Latency counts from each
//! arrival's intended time, so a slow server cannot slow the generator down
//! and hide its own queueing (no coordinated omission). Arrivals beyond
//! `max_outstanding` queued or running are dropped and counted, never
//! delayed.
//!
//! The dispatcher waits on a timerfd(2) of its own, registered with the
//! worker's event loop, rather than on tokio's timer: tokio's ticks are
//! whole milliseconds, and paced by them every arrival would start up to
//! 1 ms late (a 60 µs operation would read as a 1 ms one). A timerfd fires
//! on the kernel's high-resolution timer without timer slack, on the
//! worker's own thread: no pacer thread, no channel and no cross-thread
//! wake-up per arrival. Every arrival already due when it wakes is released
//! at once; the `lag` column reports how late each was.

use super::state::WorkerState;
use crate::plan::load::exponential;
use crate::plan::Arrivals;
use crate::workload::Session;
use rand::rngs::SmallRng;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// The arrival process of one worker.
pub(super) struct ArrivalProcess {
    /// Arrivals per second.
    pub(crate) rate: f64,
    pub(crate) arrivals: Arrivals,
    pub(crate) max_outstanding: u32,
    /// Intended time of the first arrival.
    pub(crate) first: Instant,
}

/// The longest the dispatcher sleeps before looking whether the step is over.
const POLL: Duration = Duration::from_millis(10);

/// A one-shot monotonic timer the worker's event loop can wait on.
pub(super) struct Timer {
    fd: AsyncFd<OwnedFd>,
}

impl Timer {
    /// A disarmed timer; must be made inside the worker's runtime.
    pub(crate) fn new() -> std::io::Result<Self> {
        // SAFETY: timerfd_create has no memory preconditions; the result is checked.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd returns the one descriptor it owns, open until
        // the AsyncFd (which owns it) is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Timer { fd })
    }

    /// Waits `delay` (at least 1 ns).
    async fn sleep(&self, delay: Duration) -> std::io::Result<()> {
        let delay = delay.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: delay.as_secs() as libc::time_t,
                tv_nsec: delay.subsec_nanos() as libc::c_long,
            },
        };
        let fd = self.fd.get_ref().as_raw_fd();
        // SAFETY: fd is our timerfd; spec is a valid itimerspec; no old value is asked for.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = 0u64;
            // SAFETY: reads 8 bytes into a u64 we own, from our timerfd.
            let n = unsafe {
                libc::read(
                    fd,
                    (&mut expirations as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n == 8 {
                return Ok(());
            }
            guard.clear_ready();
        }
    }
}

/// Releases the worker's arrivals at their intended times until the step
/// stops.
pub(super) async fn dispatcher(
    state: Rc<WorkerState>,
    process: ArrivalProcess,
    timer: Timer,
    mut rng: SmallRng,
) {
    let mean_gap = crate::units::saturating_secs(1.0 / process.rate);
    let mut next = process.first;
    loop {
        if state.stop.get() {
            return;
        }
        let now = Instant::now();
        if next > now {
            if timer.sleep((next - now).min(POLL)).await.is_err() {
                // A timer that fails ends the arrivals; the step's counts show it.
                return;
            }
            continue;
        }
        let outstanding = state.pending.borrow().len() as u64 + u64::from(state.in_flight.get());
        {
            let mut recorder = state.recorder.borrow_mut();
            recorder.record_lag(now.saturating_duration_since(next));
            if outstanding >= u64::from(process.max_outstanding) {
                recorder.record_drop();
            } else {
                state.pending.borrow_mut().push_back(next);
                state.arrival.notify_one();
            }
        }
        next += match process.arrivals {
            Arrivals::Poisson => exponential(mean_gap, &mut rng),
            Arrivals::Uniform => mean_gap,
        };
        if next <= Instant::now() {
            // Due already: let the sessions this one woke run first.
            tokio::task::yield_now().await;
        }
    }
}

/// One session serving queued arrivals, one at a time.
pub(super) async fn server<S: Session>(mut session: S, state: Rc<WorkerState>) {
    let mut timer = std::pin::pin!(state.timer(Instant::now()));
    loop {
        let intended = loop {
            if state.stop.get() {
                return;
            }
            let next = state.pending.borrow_mut().pop_front();
            if let Some(t) = next {
                break t;
            }
            state.arrival.notified().await;
        };
        state.run_op(&mut session, intended, timer.as_mut()).await;
    }
}
