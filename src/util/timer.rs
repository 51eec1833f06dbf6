//! A one-shot timer on the kernel's high-resolution clock, for the tasks of
//! a worker's current-thread runtime.
//!
//! tokio's own timer rounds every wait up to a whole millisecond: a wait of
//! 100 µs takes about 1.1 ms. A timerfd(2) registered with the runtime fires
//! on the high-resolution timer without timer slack, and its wake-up comes
//! through the same event loop as the sockets', on the worker's own thread.
//!
//! [`Timer::sleep_until_exact`] also takes out the wake-up's own latency
//! (the time from the timer firing to the task running again, tens of
//! microseconds on a virtual machine): it arms the timer that much early,
//! as learned from its own past wake-ups, and spins the remainder. It never
//! returns before its deadline.

use std::cell::Cell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// The longest [`Timer::sleep_until_exact`] arms early, and so spins: the
/// CPU it may spend per wait.
const MAX_LEAD: Duration = Duration::from_micros(200);

/// What the early arming adds to the learned wake-up latency, so that most
/// wake-ups come before the deadline rather than just after it.
const MARGIN: Duration = Duration::from_micros(5);

/// A one-shot monotonic timer a worker's event loop can wait on.
pub(crate) struct Timer {
    fd: AsyncFd<OwnedFd>,
    /// The mean wake-up latency seen so far (exponentially weighted).
    latency: Cell<Duration>,
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
        Ok(Timer {
            fd,
            latency: Cell::new(Duration::from_micros(30)),
        })
    }

    /// Waits until `deadline`; returns at once when it has passed. Wakes
    /// up some microseconds after it (the event loop's latency).
    pub(crate) async fn sleep_until(&self, deadline: Instant) -> std::io::Result<()> {
        let now = Instant::now();
        if deadline <= now {
            return Ok(());
        }
        self.arm(deadline - now)?;
        loop {
            let mut guard = self.fd.readable().await?;
            // Arming again resets the timer's expiration count, so the
            // count need not be read: one system call less per wake-up.
            // Readiness left from an earlier expiry is told apart by the
            // clock.
            guard.clear_ready();
            if Instant::now() >= deadline {
                return Ok(());
            }
        }
    }

    /// Waits until `deadline` and returns as close after it as the clock
    /// allows: armed early by the wake-up latency learned so far (at most
    /// [`MAX_LEAD`]), the rest spun.
    pub(crate) async fn sleep_until_exact(&self, deadline: Instant) -> std::io::Result<()> {
        let lead = (self.latency.get() + MARGIN).min(MAX_LEAD);
        let now = Instant::now();
        if deadline > now + lead {
            let armed = deadline - lead;
            self.sleep_until(armed).await?;
            let late = Instant::now().saturating_duration_since(armed);
            self.latency.set(learned(self.latency.get(), late));
        }
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Sets the timer to fire once, `delay` from now (at least 1 ns).
    fn arm(&self, delay: Duration) -> std::io::Result<()> {
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
        // SAFETY: the descriptor is our timerfd; spec is a valid itimerspec;
        // no old value is asked for.
        let set = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if set != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The mean latency after one more wake-up `late`: weighted 1/8, and no
/// single wake-up counted as more than [`MAX_LEAD`] (a runtime busy with
/// other tasks for a while must not make every later wait spin).
fn learned(mean: Duration, late: Duration) -> Duration {
    let late = late.min(MAX_LEAD);
    (mean * 7 + late) / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        crate::util::test_runtime()
    }

    /// Neither wait returns before its deadline, however short, and a
    /// deadline already past returns at once.
    #[test]
    fn waits_never_end_before_their_deadline() {
        runtime().block_on(async {
            let timer = Timer::new().unwrap();
            for micros in [0u64, 1, 20, 100, 250, 1000, 100, 30] {
                let deadline = Instant::now() + Duration::from_micros(micros);
                timer.sleep_until(deadline).await.unwrap();
                assert!(Instant::now() >= deadline, "sleep_until {micros} µs");
                let deadline = Instant::now() + Duration::from_micros(micros);
                timer.sleep_until_exact(deadline).await.unwrap();
                assert!(Instant::now() >= deadline, "sleep_until_exact {micros} µs");
            }
            timer
                .sleep_until(Instant::now() - Duration::from_millis(1))
                .await
                .unwrap();
        });
    }

    /// The learned latency moves an eighth of the way to each wake-up's, and
    /// a long stall counts as no more than the lead's bound.
    #[test]
    fn the_latency_learned_is_a_bounded_moving_mean() {
        let mean = Duration::from_micros(80);
        assert_eq!(
            learned(mean, Duration::from_micros(0)),
            Duration::from_micros(70)
        );
        assert_eq!(
            learned(mean, Duration::from_micros(160)),
            Duration::from_micros(90)
        );
        assert_eq!(
            learned(mean, Duration::from_secs(1)),
            learned(mean, MAX_LEAD)
        );
    }
}
