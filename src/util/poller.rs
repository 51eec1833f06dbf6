//! A worker thread that polls its users' sockets itself, as a client with
//! a few connections per thread does: the users' futures are polled by
//! the thread's own loop (in the engine), and a socket that would block
//! says so here ([`want`]) instead of registering with the runtime's
//! driver. The loop then waits for every such socket in one system call
//! ([`Watch`]), up to the earliest deadline, and polls again only the
//! users whose socket had news: no driver registration, no task to
//! schedule, no waker to clone on the way from a reply to the next
//! statement.
//!
//! One thread, one loop: what a user wants is kept in a thread-local cell
//! that the loop empties after each poll of a user ([`Polling::take`]).
//! Off that loop (no [`Polling`] on the thread), [`want`] says so and the
//! caller blocks on its socket itself ([`block`]), and [`sleep`] and
//! [`yield_now`] are the runtime's.

use std::cell::Cell;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// What a user waits for once its future returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Its socket `fd` readable (or writable, when `write`), until
    /// `deadline`; `conn` names the connection (a number never given
    /// twice in the process), so that a loop watching the sockets it was
    /// shown tells a new connection on a reused descriptor from the old.
    Socket {
        fd: RawFd,
        conn: u64,
        write: bool,
        deadline: Instant,
    },
    /// Nothing before `deadline` (a script's `\sleep`).
    Until(Instant),
    /// Another turn, after the thread's other users have had theirs.
    Again,
}

thread_local! {
    /// Whether the thread's loop is polling a user now.
    static POLLING: Cell<bool> = const { Cell::new(false) };
    /// What the user being polled waits for.
    static WANTED: Cell<Option<Want>> = const { Cell::new(None) };
    /// Whether the user being polled tries its socket straight after a
    /// request ([`tries_first`]).
    static TRIES_FIRST: Cell<bool> = const { Cell::new(false) };
}

/// The most users a thread's loop may have for each to try its socket
/// straight after a request, before it waits (see `Polled::read_buf` in
/// `sut::stream`).
pub(crate) const TRY_FIRST_UP_TO: usize = 2;

/// Whether the user being polled tries its socket for the reply straight
/// after its request: false off the loop, and on a loop of more than
/// [`TRY_FIRST_UP_TO`] users.
#[inline]
pub(crate) fn tries_first() -> bool {
    POLLING.with(Cell::get) && TRIES_FIRST.with(Cell::get)
}

/// The user being polled waits for `want`; false when no loop polls this
/// thread's users (the caller then waits by itself).
#[inline]
pub(crate) fn want(want: Want) -> bool {
    if !POLLING.with(Cell::get) {
        return false;
    }
    WANTED.with(|w| w.set(Some(want)));
    true
}

/// Whether the user being polled waits on its socket with a deadline no
/// later than `by`: the loop then ends that wait by the deadline itself,
/// and a runtime timer for the same deadline need not be polled. False off
/// the loop.
#[inline]
pub(crate) fn socket_waits_by(by: Instant) -> bool {
    matches!(
        WANTED.with(Cell::get),
        Some(Want::Socket { deadline, .. }) if deadline <= by
    )
}

/// The thread's loop polling its users: while it lives, [`want`] is heard.
/// One per thread at a time.
pub(crate) struct Polling(());

impl Polling {
    /// The loop starts polling a user (nothing wanted yet), one of
    /// `users` on the thread.
    #[inline]
    pub(crate) fn enter(users: usize) -> Polling {
        TRIES_FIRST.with(|t| t.set(users <= TRY_FIRST_UP_TO));
        POLLING.with(|p| p.set(true));
        WANTED.with(|w| w.set(None));
        Polling(())
    }

    /// What the polled user said it waits for (none: something of the
    /// runtime's, a timer or a task, which wakes it by its waker).
    #[inline]
    pub(crate) fn take(self) -> Option<Want> {
        WANTED.with(Cell::take)
    }
}

impl Drop for Polling {
    fn drop(&mut self) {
        POLLING.with(|p| p.set(false));
        // Nothing a user wanted outlives its poll: a task the runtime
        // polls next on this thread must not see it.
        WANTED.with(|w| w.set(None));
    }
}

/// Waits until `fd` is readable (or writable), `deadline` passes or a
/// signal arrives: for a socket used off the thread's loop. `TimedOut`
/// when it waited to the deadline (at once when that had passed).
pub(crate) fn block(fd: RawFd, write: bool, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut one = [pollfd(fd, write)];
    match wait(&mut one, left)? {
        0 if Instant::now() >= deadline => Err(io::ErrorKind::TimedOut.into()),
        _ => Ok(()),
    }
}

/// A `pollfd` asking whether `fd` is readable (or writable).
#[inline]
pub(crate) fn pollfd(fd: RawFd, write: bool) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: if write { libc::POLLOUT } else { libc::POLLIN },
        revents: 0,
    }
}

/// Waits up to `timeout` (rounded up to a whole millisecond) until one of
/// `fds` is ready; how many are (0 at the timeout or a signal).
pub(crate) fn wait(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    poll(fds, ms)
}

/// `poll(2)` on `fds` for up to `ms` milliseconds (-1: no timeout); how
/// many are ready (0 at the timeout or a signal).
fn poll(fds: &mut [libc::pollfd], ms: libc::c_int) -> io::Result<usize> {
    let n = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
    // SAFETY: `fds` is a valid, writable array of `n` pollfd structs for
    // the duration of the call.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), n, ms) };
    if ready < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(ready as usize)
}

/// A timer the thread's loop waits on beside its sockets, so that its
/// wait needs no timeout: a wait with one arms and cancels a kernel
/// timer, and reads the clock twice, every time it sleeps (once or more
/// per statement), where this timer is set about once per bound of the
/// loop's waits (the longest wait, the ticker's boundary), not per wait.
/// It may ring before the bound a wait asked for (an earlier bound it
/// was set for still stands): the loop then goes round once more.
pub(crate) struct Alarm {
    fd: std::os::fd::OwnedFd,
    /// When it is set to ring; none once it rang (or before it is set).
    set_for: Option<Instant>,
}

impl Alarm {
    /// A new timer, not set.
    pub(crate) fn new() -> io::Result<Alarm> {
        use std::os::fd::FromRawFd;
        // SAFETY: a system call with constant arguments; the descriptor it
        // returns is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor just opened, owned by nothing else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        Ok(Alarm { fd, set_for: None })
    }

    /// Makes it ring by `at`: set again only when it is set for later than
    /// `at`, or not set.
    fn ring_by(&mut self, at: Instant) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.set_for.is_some_and(|set| set <= at) {
            return Ok(());
        }
        // A zero time would disarm it: the earliest it rings is 1 µs on.
        let left = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_micros(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(left.subsec_nanos()),
            },
        };
        // SAFETY: `spec` is a valid itimerspec for the duration of the
        // call, and the old value is not asked for.
        let set =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        self.set_for = Some(at);
        Ok(())
    }

    /// It rang: emptied, so that it is not ready again until set and rung.
    fn rang(&mut self) {
        use std::os::fd::AsRawFd;
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a buffer of 8.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        self.set_for = None;
    }
}

/// The token of the alarm among what a [`Watch`] watches.
const ALARM: u64 = u64::MAX;

/// What a thread's loop waits on: its users' sockets, each handed to the
/// kernel once (`epoll`, edge-triggered) rather than at every wait as
/// `poll(2)` takes them, and its [`Alarm`]. A `poll` that sleeps looks at
/// every socket twice and hooks itself onto each and off again; a wait
/// here looks only at the sockets that had news. Edge-triggered, a socket
/// is told of once per arrival: the loop keeps the news of a user not
/// waiting on its socket then for its next wait.
pub(crate) struct Watch {
    ep: std::os::fd::OwnedFd,
    alarm: Alarm,
    events: Vec<libc::epoll_event>,
}

impl Watch {
    /// A new watch, with room for the news of `sockets` at a time (more
    /// come at the next wait).
    pub(crate) fn new(sockets: usize) -> io::Result<Watch> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a system call with a constant argument; the descriptor
        // it returns is checked before use.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ep` is a descriptor just opened, owned by nothing else.
        let ep = unsafe { std::os::fd::OwnedFd::from_raw_fd(ep) };
        let watch = Watch {
            ep,
            alarm: Alarm::new()?,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; sockets.saturating_add(1)],
        };
        watch.control(
            libc::EPOLL_CTL_ADD,
            watch.alarm.fd.as_raw_fd(),
            libc::EPOLLIN,
            ALARM,
        )?;
        Ok(watch)
    }

    /// Watches `fd`, a connection of user `token`'s, until it is closed,
    /// for what arrives (or, with `write`, for room to write too: a socket
    /// has room nearly always, and a wait that heard of it would end at
    /// once). Watched already, it is watched as asked from now on.
    pub(crate) fn add(&self, fd: RawFd, token: usize, write: bool) -> io::Result<()> {
        let mut events = libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET;
        if write {
            events |= libc::EPOLLOUT;
        }
        let token = token as u64;
        match self.control(libc::EPOLL_CTL_ADD, fd, events, token) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.control(libc::EPOLL_CTL_MOD, fd, events, token)
            }
            added => added,
        }
    }

    fn control(
        &self,
        op: libc::c_int,
        fd: RawFd,
        events: libc::c_int,
        token: u64,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut event = libc::epoll_event {
            events: events as u32,
            u64: token,
        };
        // SAFETY: `event` is a valid epoll_event for the duration of the
        // call; the kernel checks both descriptors.
        let done = unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), op, fd, &mut event) };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until a watched socket has news, a signal arrives or the
    /// alarm rings (by `at`, or earlier; with no `at`, does not wait);
    /// calls `news` with the token of each socket that had some, and says
    /// how many did.
    pub(crate) fn wait(
        &mut self,
        at: Option<Instant>,
        mut news: impl FnMut(usize),
    ) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let timeout = match at {
            Some(at) => {
                self.alarm.ring_by(at)?;
                -1
            }
            None => 0,
        };
        let room = libc::c_int::try_from(self.events.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `events` is a valid, writable array of at least `room`
        // epoll_event structs for the duration of the call.
        let got = unsafe {
            libc::epoll_wait(self.ep.as_raw_fd(), self.events.as_mut_ptr(), room, timeout)
        };
        let Ok(got) = usize::try_from(got) else {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        };
        let mut sockets = 0;
        for event in self.events.iter().take(got) {
            let token = event.u64;
            if token == ALARM {
                self.alarm.rang();
            } else {
                news(usize::try_from(token).unwrap_or(usize::MAX));
                sockets += 1;
            }
        }
        Ok(sockets)
    }
}

/// Waits `for_`: by the thread's loop when it polls this user, else on the
/// runtime's timer.
pub(crate) async fn sleep(for_: Duration) {
    let deadline = Instant::now() + for_;
    let done = std::future::poll_fn(|_cx| {
        if Instant::now() >= deadline {
            std::task::Poll::Ready(true)
        } else if want(Want::Until(deadline)) {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(false)
        }
    })
    .await;
    if !done {
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Gives the thread's other users a turn: by its loop when it polls this
/// user, else by the runtime.
pub(crate) async fn yield_now() {
    let mut asked = false;
    let by_loop = std::future::poll_fn(|_cx| {
        if asked {
            return std::task::Poll::Ready(true);
        }
        asked = true;
        if want(Want::Again) {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(false)
        }
    })
    .await;
    if !by_loop {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_want_is_heard_only_while_the_loop_polls() {
        let deadline = Instant::now();
        assert!(!want(Want::Until(deadline)));
        let polling = Polling::enter(1);
        assert!(want(Want::Until(deadline)));
        assert_eq!(polling.take(), Some(Want::Until(deadline)));
        assert!(!want(Want::Again), "the loop is done with that user");
        let polling = Polling::enter(1);
        let socket = Want::Socket {
            fd: 3,
            conn: 1,
            write: false,
            deadline,
        };
        assert!(!socket_waits_by(deadline), "nothing wanted yet");
        assert!(want(socket));
        assert!(socket_waits_by(deadline));
        assert!(!socket_waits_by(deadline - Duration::from_millis(1)));
        assert_eq!(polling.take(), Some(socket));
        let _polling = Polling::enter(1);
        assert!(want(Want::Until(deadline)) && !socket_waits_by(deadline));
        let polling = Polling::enter(1);
        assert_eq!(polling.take(), None, "nothing wanted this time");
    }

    #[test]
    fn only_a_user_of_a_loop_of_few_tries_first() {
        assert!(!tries_first(), "off the loop");
        let polling = Polling::enter(TRY_FIRST_UP_TO);
        assert!(tries_first());
        drop(polling);
        assert!(!tries_first(), "the loop is done with that user");
        let _polling = Polling::enter(TRY_FIRST_UP_TO + 1);
        assert!(!tries_first());
    }

    #[test]
    fn a_wait_ends_when_a_socket_is_ready_or_at_its_timeout() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let mut fds = [pollfd(a.as_raw_fd(), false)];
        let began = Instant::now();
        assert_eq!(wait(&mut fds, Duration::from_millis(30)).unwrap(), 0);
        assert!(began.elapsed() >= Duration::from_millis(30));
        std::io::Write::write_all(&mut b, b"x").unwrap();
        assert_eq!(wait(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert_ne!(fds[0].revents & libc::POLLIN, 0);
        assert!(block(a.as_raw_fd(), true, Instant::now() + Duration::from_secs(5)).is_ok());
    }

    /// A watch's wait with no news ends when its alarm rings, by the time
    /// asked for, and a later bound does not put the alarm off; an arrival
    /// ends it at once and is told once (edge-triggered), the next arrival
    /// again; a socket watched anew is told of what it holds already.
    #[test]
    fn a_watch_bounds_a_wait_by_its_alarm_and_tells_each_arrival_once() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let ms = Duration::from_millis;
        let hour = Duration::from_secs(3600);
        let mut watch = Watch::new(2).unwrap();
        watch.add(a.as_raw_fd(), 5, false).unwrap();
        let mut told = Vec::new();
        let at = Instant::now() + ms(30);
        assert_eq!(watch.wait(Some(at), |t| told.push(t)).unwrap(), 0);
        assert!(Instant::now() >= at);
        let began = Instant::now();
        watch.alarm.ring_by(began + ms(30)).unwrap();
        assert_eq!(watch.wait(Some(began + hour), |t| told.push(t)).unwrap(), 0);
        let took = began.elapsed();
        assert!(took >= ms(30) && took < Duration::from_secs(60), "{took:?}");
        assert!(told.is_empty());
        let began = Instant::now();
        std::io::Write::write_all(&mut b, b"x").unwrap();
        assert_eq!(watch.wait(Some(began + hour), |t| told.push(t)).unwrap(), 1);
        assert_eq!(told, [5]);
        assert_eq!(watch.alarm.set_for, Some(began + hour), "not rung");
        assert_eq!(
            watch.wait(None, |t| told.push(t)).unwrap(),
            0,
            "told already"
        );
        std::io::Write::write_all(&mut b, b"y").unwrap();
        assert_eq!(watch.wait(None, |t| told.push(t)).unwrap(), 1);
        watch.add(a.as_raw_fd(), 6, false).unwrap();
        assert_eq!(watch.wait(None, |t| told.push(t)).unwrap(), 1);
        assert_eq!(told, [5, 5, 6]);
    }

    /// A blocking wait for a socket that stays silent ends at its deadline
    /// as a timeout, and at once when the deadline has passed: a caller
    /// retrying its read never spins.
    #[test]
    fn a_blocking_wait_past_its_deadline_is_a_timeout() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let timed_out = |r: io::Result<()>| r.is_err_and(|e| e.kind() == io::ErrorKind::TimedOut);
        let began = Instant::now();
        assert!(timed_out(block(
            a.as_raw_fd(),
            false,
            began + Duration::from_millis(20)
        )));
        assert!(began.elapsed() >= Duration::from_millis(20));
        assert!(timed_out(block(a.as_raw_fd(), false, began)));
        std::io::Write::write_all(&mut b, b"x").unwrap();
        assert!(block(
            a.as_raw_fd(),
            false,
            Instant::now() + Duration::from_secs(5)
        )
        .is_ok());
    }
}
