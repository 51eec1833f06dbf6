//! The loop of a worker thread whose closed-loop users poll their own
//! sockets (database sessions sharing the thread; `util::poller`): one
//! task polls every user's future itself. A socket that would block says
//! so instead of registering with the runtime's driver, and when no user
//! can go on the loop waits for all those sockets in one system call, up
//! to the earliest operation deadline and the ticker's next boundary. The
//! sockets are handed to the kernel once per connection, not at every
//! wait ([`poller::Watch`], `epoll`), and the bound is a timer beside them
//! ([`poller::Alarm`]), so the wait has no timeout to arm each time it
//! sleeps; then the loop polls again only the users whose socket had
//! news. From a reply to the next statement there is no driver event to
//! dispatch, no task to schedule and no waker to clone: the cost a client
//! with a few connections per thread pays, and no more.
//!
//! A user that waits on the runtime instead (a reconnection, a timer) is
//! woken by its own waker, which also wakes the loop's task; while one
//! does, the loop waits in the kernel at most [`RUNTIME_WAIT`] before it
//! gives the runtime a turn. The runtime also gets one at every boundary
//! of the ticker (which runs on it), at least every [`LONGEST_WAIT`], and
//! after [`ROUNDS`] rounds in which users were always ready.

use super::state::WorkerState;
use crate::util::poller::{self, Polling, Want};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The longest one wait in the kernel lasts: how late the runtime's timers
/// (an operation's own timeout, beside its socket's deadline) may be seen.
const LONGEST_WAIT: Duration = Duration::from_millis(50);
/// The wait once the ticker's boundary has passed and it has not run yet.
const TICKER_WAIT: Duration = Duration::from_millis(1);
/// The longest wait while a user waits on the runtime.
const RUNTIME_WAIT: Duration = Duration::from_millis(1);
/// Rounds in a row before the runtime gets a turn.
const ROUNDS: usize = 64;
/// How long the loop goes without asking the kernel about its sockets
/// while a user asks for turns, one after another: an operation whose
/// reply was there at once gives the others a turn (`engine::closed`), and
/// a wait that does not wait, after every such one, was a system call for
/// one transaction in five at 4 users of `select-only` (0.20 a
/// transaction of 3.49 calls in all; 0.013 of 3.29 with this bound).
/// Another user's reply that came meanwhile is seen this much later at
/// most; a user that then waits on its socket looks at once.
const LOOK_EVERY: Duration = Duration::from_millis(1);

/// Which users their wakers marked ready, and the loop's task to wake.
struct Wakes {
    ready: Box<[AtomicBool]>,
    any: AtomicBool,
    task: Mutex<Option<Waker>>,
}

/// One user's waker: marks it ready and wakes the loop's task.
struct UserWaker {
    user: usize,
    wakes: Arc<Wakes>,
}

impl Wake for UserWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(ready) = self.wakes.ready.get(self.user) {
            ready.store(true, Ordering::Release);
        }
        self.wakes.any.store(true, Ordering::Release);
        if let Ok(task) = self.wakes.task.lock() {
            if let Some(task) = task.as_ref() {
                task.wake_by_ref();
            }
        }
    }
}

/// Where one user stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stand {
    /// To be polled.
    Ready,
    /// Waiting for what it said.
    Waits(Want),
    /// Waiting on the runtime: its waker will say.
    Runtime,
    /// Its future ended.
    Done,
}

/// What the loop's task does next.
enum Next {
    Done,
    Yield,
}

/// The thread's users and what the loop keeps of them, made once before
/// the first operation (nothing here allocates per operation).
struct Loop<F> {
    users: Vec<Pin<Box<F>>>,
    wakers: Vec<Waker>,
    wakes: Arc<Wakes>,
    stands: Vec<Stand>,
    /// Users whose future has not ended.
    left: usize,
    /// The sockets of this round's wait, and whose each is.
    fds: Vec<libc::pollfd>,
    owners: Vec<usize>,
    /// Users this round's gathering found past their deadline.
    overdue: usize,
    /// The end of this round's wait, when it waits (from the gathering).
    wake_at: Instant,
    /// Whether this round asks the kernel about the sockets (from the
    /// gathering), and when a round last did.
    look: bool,
    looked_at: Instant,
    /// The sockets handed to the kernel once, and the alarm that bounds a
    /// wait (none when the kernel gave neither: each wait then hands over
    /// `fds` with a timeout).
    watch: Option<poller::Watch>,
    /// The connection of each user's that the watch was shown (0: none),
    /// and whether for room to write.
    watched: Vec<(u64, bool)>,
    /// Users whose socket had news while they waited on something else.
    news: Vec<bool>,
}

/// Runs the thread's users until every one has ended (the ticker stops
/// them), polling their sockets itself.
pub(super) async fn run<F: Future<Output = ()>>(users: Vec<F>, state: std::rc::Rc<WorkerState>) {
    let mut users = Loop::new(users);
    loop {
        match std::future::poll_fn(|cx| users.poll(cx, &state)).await {
            Next::Done => return,
            Next::Yield => tokio::task::yield_now().await,
        }
    }
}

impl<F: Future<Output = ()>> Loop<F> {
    fn new(users: Vec<F>) -> Self {
        let n = users.len();
        let wakes = Arc::new(Wakes {
            ready: (0..n).map(|_| AtomicBool::new(false)).collect(),
            any: AtomicBool::new(false),
            task: Mutex::new(None),
        });
        let wakers = (0..n)
            .map(|user| {
                Waker::from(Arc::new(UserWaker {
                    user,
                    wakes: Arc::clone(&wakes),
                }))
            })
            .collect();
        Loop {
            users: users.into_iter().map(Box::pin).collect(),
            wakers,
            wakes,
            stands: vec![Stand::Ready; n],
            left: n,
            fds: Vec::with_capacity(n + 1),
            owners: Vec::with_capacity(n),
            overdue: 0,
            wake_at: Instant::now(),
            look: true,
            looked_at: Instant::now(),
            watch: poller::Watch::new(n).ok(),
            watched: vec![(0, false); n],
            news: vec![false; n],
        }
    }

    /// Polls the ready users and waits for the others, round after round,
    /// until every user has ended or the runtime is owed a turn; pending
    /// when every user still running waits on the runtime.
    fn poll(&mut self, cx: &mut Context<'_>, state: &WorkerState) -> Poll<Next> {
        if let Ok(mut task) = self.wakes.task.lock() {
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        for _ in 0..ROUNDS {
            self.poll_ready();
            if self.left == 0 {
                return Poll::Ready(Next::Done);
            }
            let Some(timeout) = self.gather(state) else {
                return Poll::Pending;
            };
            let ready = if self.look { self.wait(timeout) } else { 0 };
            if self.mark_ready(ready) == 0 && !timeout.is_zero() {
                // The wait ran its bound out: a boundary, a runtime timer.
                return Poll::Ready(Next::Yield);
            }
        }
        Poll::Ready(Next::Yield)
    }

    /// Polls every user that is ready, or that its waker marked so.
    fn poll_ready(&mut self) {
        if self.wakes.any.swap(false, Ordering::AcqRel) {
            for (stand, ready) in self.stands.iter_mut().zip(self.wakes.ready.iter()) {
                if ready.swap(false, Ordering::AcqRel) && *stand != Stand::Done {
                    *stand = Stand::Ready;
                }
            }
        }
        let users = self.users.len();
        for (u, stand) in self.stands.iter_mut().enumerate() {
            if *stand != Stand::Ready {
                continue;
            }
            let (Some(user), Some(waker)) = (self.users.get_mut(u), self.wakers.get(u)) else {
                continue;
            };
            let polling = Polling::enter(users);
            match user.as_mut().poll(&mut Context::from_waker(waker)) {
                Poll::Ready(()) => {
                    *stand = Stand::Done;
                    self.left -= 1;
                }
                Poll::Pending => {
                    *stand = polling.take().map_or(Stand::Runtime, Stand::Waits);
                }
            }
        }
    }

    /// This round's sockets to wait for, and how long to wait: none when
    /// no user waits on anything but the runtime (the loop's task then
    /// waits for a waker). A user whose deadline has passed is marked
    /// ready, its socket left out, and the wait does not wait. A round
    /// that only gives users the turns they asked for skips the wait
    /// (`look` false) when a round looked less than [`LOOK_EVERY`] ago.
    fn gather(&mut self, state: &WorkerState) -> Option<Duration> {
        self.fds.clear();
        self.owners.clear();
        let now = Instant::now();
        let boundary = state.next_boundary.get().into_std();
        let mut timeout = if boundary > now {
            (boundary - now).min(LONGEST_WAIT)
        } else {
            TICKER_WAIT
        };
        let (mut waits, mut on_runtime) = (false, false);
        self.overdue = 0;
        for (u, stand) in self.stands.iter_mut().enumerate() {
            let news = matches!(*stand, Stand::Waits(Want::Socket { .. }))
                && self.news.get_mut(u).is_some_and(std::mem::take);
            let deadline = match *stand {
                Stand::Waits(Want::Socket { deadline, .. } | Want::Until(deadline))
                    if news || deadline <= now =>
                {
                    *stand = Stand::Ready;
                    self.overdue += 1;
                    now
                }
                Stand::Waits(Want::Socket {
                    fd,
                    conn,
                    write,
                    deadline,
                }) => {
                    self.fds.push(poller::pollfd(fd, write));
                    self.owners.push(u);
                    if let (Some(watch), Some(watched)) = (&self.watch, self.watched.get_mut(u)) {
                        if *watched != (conn, write) {
                            *watched = (conn, write);
                            if watch.add(fd, u, write).is_err() {
                                self.watch = None;
                            }
                        }
                    }
                    deadline
                }
                Stand::Waits(Want::Until(deadline)) => deadline,
                Stand::Waits(Want::Again) => now,
                Stand::Runtime => {
                    on_runtime = true;
                    continue;
                }
                Stand::Ready | Stand::Done => continue,
            };
            waits = true;
            timeout = timeout.min(deadline.saturating_duration_since(now));
        }
        if !waits {
            return None;
        }
        if on_runtime {
            timeout = timeout.min(RUNTIME_WAIT);
        }
        let woken = self.wakes.any.load(Ordering::Acquire);
        if woken {
            timeout = Duration::ZERO;
        }
        // A zero timeout with no one overdue or woken: only turns asked for.
        let turns_only = timeout.is_zero() && self.overdue == 0 && !woken;
        self.look = !turns_only || now.saturating_duration_since(self.looked_at) >= LOOK_EVERY;
        if self.look {
            self.looked_at = now;
        }
        self.wake_at = now + timeout;
        Some(timeout)
    }

    /// Waits for this round's sockets up to `timeout` (by the watch when
    /// there is one, else by `poll(2)`) and marks ready every user whose
    /// socket had news (every one that waits on a socket when the wait
    /// failed); how many.
    fn wait(&mut self, timeout: Duration) -> usize {
        let mut ready = 0;
        let failed = match self.watch.as_mut() {
            Some(watch) => {
                let at = (!timeout.is_zero()).then_some(self.wake_at);
                let (stands, news) = (&mut self.stands, &mut self.news);
                watch
                    .wait(at, |u| match stands.get_mut(u) {
                        Some(stand @ Stand::Waits(Want::Socket { .. })) => {
                            *stand = Stand::Ready;
                            ready += 1;
                        }
                        _ => {
                            if let Some(news) = news.get_mut(u) {
                                *news = true;
                            }
                        }
                    })
                    .is_err()
            }
            None => poller::wait(&mut self.fds, timeout).is_err(),
        };
        // `revents` is set by `poll(2)` only.
        for (fd, &u) in self.fds.iter().zip(&self.owners) {
            if failed || fd.revents != 0 {
                if let Some(stand) = self.stands.get_mut(u) {
                    *stand = Stand::Ready;
                    ready += 1;
                }
            }
        }
        ready
    }

    /// Marks ready, beside the `ready` the wait found, every user who
    /// asked for another turn, was marked by [`Self::gather`], or — when
    /// nothing was ready, so the wait may have run to a deadline — whose
    /// deadline has passed; how many, wakers' included. With sockets ready
    /// the clock is not read: the next round's gathering sees the
    /// deadlines.
    fn mark_ready(&mut self, ready: usize) -> usize {
        let mut ready = ready + self.overdue;
        let now = (ready == 0).then(Instant::now);
        for stand in &mut self.stands {
            let due = match (*stand, now) {
                (
                    Stand::Waits(Want::Socket { deadline, .. } | Want::Until(deadline)),
                    Some(now),
                ) => deadline <= now,
                (Stand::Waits(Want::Again), _) => true,
                _ => false,
            };
            if due {
                *stand = Stand::Ready;
                ready += 1;
            }
        }
        if self.wakes.any.load(Ordering::Acquire) {
            ready += 1;
        }
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Recorder;
    use crate::sut::stream::{Drive, Stream};
    use crate::util::counting_alloc::allocations;
    use bytes::BytesMut;
    use std::cell::Cell;
    use std::io::{self, Read, Write};
    use std::rc::Rc;

    const MS: Duration = Duration::from_millis(1);

    fn on_local<F: Future>(f: F) -> F::Output {
        let rt = crate::util::test_runtime();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// A worker's state whose next boundary is a minute away.
    fn state(users: usize) -> Rc<WorkerState> {
        let state = WorkerState::new(Recorder::new(1), Duration::from_secs(10), users);
        state
            .next_boundary
            .set(tokio::time::Instant::now() + Duration::from_secs(60));
        Rc::new(state)
    }

    /// A loopback server of `conns` connections, each answering `pong` to
    /// every `ping`, `rounds` times; with `together`, only once every
    /// connection has asked: clients that do not wait together are never
    /// answered.
    fn peer(conns: usize, rounds: usize, together: bool) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(conns));
        std::thread::spawn(move || {
            for _ in 0..conns {
                let Ok((mut conn, _)) = listener.accept() else {
                    return;
                };
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let mut ask = [0u8; 4];
                    for _ in 0..rounds {
                        if conn.read_exact(&mut ask).is_err() {
                            return;
                        }
                        if together {
                            barrier.wait();
                        }
                        if conn.write_all(b"pong").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        port
    }

    async fn polled(port: u16, timeout: Duration) -> Stream {
        let stream = Stream::tcp("127.0.0.1", port).await.unwrap();
        stream.drive(Drive::Polled(timeout)).unwrap()
    }

    /// One operation: a ping and its pong.
    async fn exchange(stream: &mut Stream, buf: &mut BytesMut) -> io::Result<()> {
        stream.begin_operation();
        stream.write_all(b"ping").await?;
        while buf.len() < 4 {
            if stream.read_buf(buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        buf.clear();
        Ok(())
    }

    /// Users that each do `rounds` exchanges on their own connection to
    /// `port`, counting them in `done`.
    async fn users(
        port: u16,
        n: usize,
        rounds: usize,
        done: &Rc<Cell<usize>>,
    ) -> Vec<impl Future<Output = ()>> {
        let mut users = Vec::new();
        for _ in 0..n {
            let mut stream = polled(port, Duration::from_secs(5)).await;
            let done = done.clone();
            users.push(async move {
                let mut buf = BytesMut::new();
                for _ in 0..rounds {
                    exchange(&mut stream, &mut buf).await.unwrap();
                    done.set(done.get() + 1);
                }
            });
        }
        users
    }

    #[test]
    fn users_sharing_a_thread_wait_for_their_sockets_together() {
        // Each reply comes only once all three users have asked: a user
        // that blocked on its own socket would keep the others from asking
        // and time out (5 s) instead.
        on_local(async {
            let done = Rc::new(Cell::new(0));
            let users = users(peer(3, 20, true), 3, 20, &done).await;
            run(users, state(3)).await;
            assert_eq!(done.get(), 60);
        });
    }

    #[test]
    fn a_polled_operation_allocates_nothing_once_warm() {
        on_local(async {
            let done = Rc::new(Cell::new(0));
            let users = users(peer(2, 3_000, false), 2, 3_000, &done).await;
            let counted = Rc::new(Cell::new((0, 0, 0, 0)));
            let watch = {
                let (done, counted) = (done.clone(), counted.clone());
                async move {
                    let until = async |n: usize| {
                        while done.get() < n {
                            crate::util::poller::yield_now().await;
                        }
                    };
                    until(1_000).await;
                    let (before, from) = (allocations(), done.get());
                    until(5_000).await;
                    counted.set((before, from, allocations(), done.get()));
                }
            };
            // The watcher is one more user of the loop: it asks for a
            // turn after the others' (no socket, no runtime).
            let mut all: Vec<Pin<Box<dyn Future<Output = ()>>>> = vec![Box::pin(watch)];
            all.extend(
                users
                    .into_iter()
                    .map(|u| Box::pin(u) as Pin<Box<dyn Future<Output = ()>>>),
            );
            run(all, state(3)).await;
            let (before, from, after, to) = counted.get();
            assert!(to > from, "no operation between the counts");
            assert_eq!(
                after - before,
                0,
                "{} allocations in {} operations",
                after - before,
                to - from
            );
        });
    }

    #[test]
    fn users_waiting_on_the_runtime_or_a_sleep_are_woken_beside_the_sockets() {
        on_local(async {
            let done = Rc::new(Cell::new(0));
            let mut all: Vec<Pin<Box<dyn Future<Output = ()>>>> = Vec::new();
            for u in users(peer(1, 50, false), 1, 50, &done).await {
                all.push(Box::pin(u));
            }
            let timers = done.clone();
            all.push(Box::pin(async move {
                for _ in 0..3 {
                    tokio::time::sleep(5 * MS).await;
                    crate::util::poller::sleep(5 * MS).await;
                    crate::util::poller::yield_now().await;
                    timers.set(timers.get() + 100);
                }
            }));
            run(all, state(2)).await;
            assert_eq!(done.get(), 350);
        });
    }

    #[test]
    fn a_silent_server_times_out_at_the_operation_deadline_not_before() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (keep, hold) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _conn = listener.accept();
            let _ = hold.recv();
        });
        on_local(async {
            let mut stream = polled(port, 150 * MS).await;
            let took = Rc::new(Cell::new(None));
            let out = took.clone();
            let user = async move {
                let began = Instant::now();
                let e = exchange(&mut stream, &mut BytesMut::new())
                    .await
                    .unwrap_err();
                out.set(Some((e.kind(), began.elapsed())));
            };
            run(vec![user], state(1)).await;
            let (kind, took) = took.get().unwrap();
            assert_eq!(kind, io::ErrorKind::TimedOut);
            assert!(took >= 150 * MS, "{took:?}");
        });
        drop(keep);
    }

    /// Connects to `port` on loopback, a nonblocking socket of the std.
    fn connect(port: u16) -> std::net::TcpStream {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nonblocking(true).unwrap();
        s
    }

    /// `socket` polled by the loop, operations of 5 s.
    fn polled_std(socket: std::net::TcpStream) -> Stream {
        let socket = tokio::net::TcpStream::from_std(socket).unwrap();
        Stream::Tcp(socket)
            .drive(Drive::Polled(Duration::from_secs(5)))
            .unwrap()
    }

    /// Users that wait `for_` on the loop and end: they make a loop of
    /// more than a few users, whose users wait before they try a socket.
    fn idle(n: usize, for_: Duration) -> Vec<Pin<Box<dyn Future<Output = ()>>>> {
        (0..n)
            .map(|_| {
                Box::pin(crate::util::poller::sleep(for_)) as Pin<Box<dyn Future<Output = ()>>>
            })
            .collect()
    }

    /// Runs the user `make` gives, counting in the cell it is handed, on a
    /// loop beside two [`idle`] users (waiting `idle_for`); its count.
    fn counted_beside_idle<U: Future<Output = ()> + 'static>(
        idle_for: Duration,
        make: impl FnOnce(Rc<Cell<usize>>) -> U,
    ) -> usize {
        on_local(async move {
            let done = Rc::new(Cell::new(0));
            let mut all = idle(2, idle_for);
            all.push(Box::pin(make(done.clone())));
            run(all, state(3)).await;
            done.get()
        })
    }

    /// A user that reconnects may be given the descriptor its old
    /// connection had: the loop watches the new connection all the same
    /// (a loop that knew sockets by their number would wait for news of
    /// a socket it never watched, and the exchange would time out).
    #[test]
    fn a_new_connection_on_a_reused_descriptor_is_watched() {
        use std::os::fd::{AsRawFd, FromRawFd};
        let port = peer(2, 10, false);
        let done = counted_beside_idle(30 * MS, |count| async move {
            let first = connect(port);
            let fd = first.as_raw_fd();
            let mut stream = polled_std(first);
            let mut buf = BytesMut::new();
            for _ in 0..10 {
                exchange(&mut stream, &mut buf).await.unwrap();
                count.set(count.get() + 1);
            }
            // The second connection takes the first one's number, as
            // the kernel gives a freed number to the next socket
            // (dup2 closes the first connection's file).
            let second = connect(port);
            // SAFETY: both descriptors are open; `fd` is then the
            // second connection's, owned by the new stream alone (the
            // old stream is forgotten, not dropped).
            let moved = unsafe { libc::dup2(second.as_raw_fd(), fd) };
            assert_eq!(moved, fd);
            drop(second);
            std::mem::forget(stream);
            let mut stream = polled_std(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            for _ in 0..10 {
                exchange(&mut stream, &mut buf).await.unwrap();
                count.set(count.get() + 1);
            }
        });
        assert_eq!(done, 20);
    }

    /// A reply that arrives while its user waits on something else (here
    /// a sleep between its request and its read) is news kept for the
    /// user's next wait on its socket: told once (edge-triggered) and
    /// dropped, it would leave the user waiting to its deadline.
    #[test]
    fn a_reply_that_comes_while_its_user_sleeps_is_not_lost() {
        let port = peer(1, 3, false);
        let done = counted_beside_idle(100 * MS, |count| async move {
            let mut stream = polled(port, Duration::from_secs(5)).await;
            let mut buf = BytesMut::new();
            for _ in 0..3 {
                stream.begin_operation();
                stream.write_all(b"ping").await.unwrap();
                crate::util::poller::sleep(20 * MS).await;
                while buf.len() < 4 {
                    assert_ne!(stream.read_buf(&mut buf).await.unwrap(), 0);
                }
                buf.clear();
                count.set(count.get() + 1);
            }
        });
        assert_eq!(done, 3);
    }

    /// A request larger than the socket's buffers waits for room by the
    /// loop, and the peer's reply to it comes after.
    #[test]
    fn a_user_waits_by_the_loop_for_room_to_write() {
        const SIZE: usize = 8 << 20;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            // Late to read: the user's writes fill the buffers first.
            std::thread::sleep(100 * MS);
            let mut all = vec![0u8; SIZE];
            if conn.read_exact(&mut all).is_ok() {
                let _ = conn.write_all(b"done");
            }
        });
        on_local(async move {
            let got = Rc::new(Cell::new(false));
            let out = got.clone();
            let user = async move {
                let mut stream = polled(port, Duration::from_secs(10)).await;
                stream.begin_operation();
                stream.write_all(&vec![7u8; SIZE]).await.unwrap();
                let mut buf = BytesMut::new();
                while buf.len() < 4 {
                    assert_ne!(stream.read_buf(&mut buf).await.unwrap(), 0);
                }
                out.set(&buf[..] == b"done");
            };
            run(vec![user], state(1)).await;
            assert!(got.get());
        });
    }

    /// A loop of users that never end, standing as given.
    fn standing(stands: &[Stand]) -> Loop<std::future::Pending<()>> {
        let mut l = Loop::new(stands.iter().map(|_| std::future::pending()).collect());
        l.stands = stands.to_vec();
        // The sockets here are numbers only: nothing to hand the kernel.
        l.watch = None;
        l
    }

    #[test]
    fn the_wait_is_bounded_by_the_first_deadline_a_boundary_and_the_runtime() {
        let now = Instant::now();
        let socket = |fd, after| {
            Stand::Waits(Want::Socket {
                fd,
                conn: 1,
                write: false,
                deadline: now + after,
            })
        };
        let far = state(4);
        // Only the runtime to wait for: the loop's task waits for a waker.
        assert_eq!(standing(&[Stand::Runtime, Stand::Done]).gather(&far), None);
        // A socket whose operation ends in 5 ms and a sleep of 2 ms: at
        // most 2 ms, with the one socket to watch.
        let mut l = standing(&[socket(7, 5 * MS), Stand::Waits(Want::Until(now + 2 * MS))]);
        assert!(l.gather(&far).unwrap() <= 2 * MS);
        assert_eq!((l.fds.len(), l.owners.as_slice()), (1, &[0][..]));
        // Far deadlines: the longest wait, or less beside a user on the
        // runtime, or none beside one that asked for another turn.
        let hour = Duration::from_secs(3600);
        assert_eq!(
            standing(&[socket(7, hour)]).gather(&far),
            Some(LONGEST_WAIT)
        );
        assert_eq!(
            standing(&[socket(7, hour), Stand::Runtime]).gather(&far),
            Some(RUNTIME_WAIT)
        );
        assert_eq!(
            standing(&[socket(7, hour), Stand::Waits(Want::Again)]).gather(&far),
            Some(Duration::ZERO)
        );
        // The ticker's boundary passed: it gets its turn soon.
        let passed = state(1);
        passed.next_boundary.set(tokio::time::Instant::now());
        assert_eq!(
            standing(&[socket(7, hour)]).gather(&passed),
            Some(TICKER_WAIT)
        );
    }

    #[test]
    fn a_round_of_turns_only_asks_the_kernel_at_most_every_so_often() {
        let now = Instant::now();
        let far = state(2);
        let socket = Stand::Waits(Want::Socket {
            fd: 7,
            conn: 1,
            write: false,
            deadline: now + Duration::from_secs(3600),
        });
        let turn = Stand::Waits(Want::Again);
        // Looked long ago: this round looks, and says when.
        let mut l = standing(&[socket, turn]);
        l.looked_at = now - LOOK_EVERY;
        assert_eq!(l.gather(&far), Some(Duration::ZERO));
        assert!(l.look && l.looked_at >= now);
        // Looked just now (as far as the round can tell): it does not.
        l.stands = vec![socket, turn];
        l.looked_at = now + Duration::from_secs(3600);
        assert_eq!(l.gather(&far), Some(Duration::ZERO));
        assert!(!l.look);
        // A user past its deadline, or woken, is more than a turn: it looks.
        l.stands = vec![socket, Stand::Waits(Want::Until(now))];
        assert_eq!(l.gather(&far), Some(Duration::ZERO));
        assert!(l.look);
        l.stands = vec![socket, turn];
        l.wakes.any.store(true, Ordering::Release);
        assert_eq!(l.gather(&far), Some(Duration::ZERO));
        assert!(l.look);
        // A socket waited for: it looks.
        l.wakes.any.store(false, Ordering::Release);
        l.stands = vec![socket];
        assert!(l.gather(&far).is_some_and(|t| !t.is_zero()));
        assert!(l.look);
    }

    /// A user that keeps asking for turns (an operation after another
    /// whose reply is there at once) does not keep another user's reply
    /// waiting: the loop still looks at the sockets now and then.
    #[test]
    fn a_user_taking_turn_after_turn_leaves_the_others_their_replies() {
        const EXCHANGES: usize = 50;
        let port = peer(1, EXCHANGES, false);
        on_local(async move {
            let done = Rc::new(Cell::new(0));
            let spun_out = Rc::new(Cell::new(false));
            let mut all: Vec<Pin<Box<dyn Future<Output = ()>>>> = Vec::new();
            for u in users(port, 1, EXCHANGES, &done).await {
                all.push(Box::pin(u));
            }
            let (seen, out) = (done.clone(), spun_out.clone());
            all.push(Box::pin(async move {
                let mut turns = 0u32;
                while seen.get() < EXCHANGES {
                    if turns == 20_000_000 {
                        out.set(true);
                        return;
                    }
                    turns += 1;
                    crate::util::poller::yield_now().await;
                }
            }));
            run(all, state(2)).await;
            assert!(!spun_out.get(), "{} exchanges only", done.get());
            assert_eq!(done.get(), EXCHANGES);
        });
    }
}
