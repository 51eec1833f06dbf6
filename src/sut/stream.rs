//! A database session's own socket, TCP or Unix, for the lean sessions
//! that speak a server's protocol themselves (PostgreSQL, MySQL/MariaDB).
//!
//! A socket is driven one of three ways ([`Drive`]):
//! - by the worker's runtime: its reads wait in the runtime's poll of the
//!   driver, beside the thread's other tasks;
//! - **held**: a session alone on its worker thread in a closed loop reads
//!   and writes it with blocking calls. A held read sleeps in the kernel
//!   until the reply comes, as libpq's `recv` does, and saves the
//!   runtime's `epoll_wait` and wake-up around every reply; nothing else
//!   on the thread is kept waiting but the interval ticker, which runs
//!   between operations;
//! - **polled**: a few closed-loop sessions share the thread, and the
//!   worker's own loop polls their sockets together (`util::poller`): a
//!   read that would block says what it waits for and returns, and the
//!   loop waits for every such socket in one `poll(2)`, as a client with a
//!   few connections per thread does. Off that loop, it blocks itself.
//!   The first read after a request waits before it tries: the reply
//!   cannot have come in the microseconds since, and a `recv` that finds
//!   nothing is a system call for nothing.
//!
//! A held or polled socket keeps the operation's deadline itself. A held
//! one keeps its kernel timeouts (`SO_RCVTIMEO`, `SO_SNDTIMEO`) within
//! [`SLACK`] of the time left, changed only when they drift further (so an
//! operation of normal length makes no extra system call), and a read that
//! wakes at a kernel timeout before the deadline sleeps again; a polled
//! one gives the loop its deadline with its socket. Past the deadline a
//! read or write fails with `ErrorKind::TimedOut`.

use crate::util::poller;
use bytes::BytesMut;
use socket2::SockRef;
use std::io::{self, Write};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// How far a held socket's kernel timeouts may drift from the time its
/// operation has left: an operation may end this much after its deadline.
const SLACK: Duration = Duration::from_millis(10);
/// The shortest kernel timeout set (a zero one would mean none).
const SHORTEST: Duration = Duration::from_millis(1);
/// Free room a held read asks of its buffer.
const READ_ROOM: usize = 8192;

pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Held(Held),
    Polled(Polled),
}

/// How a session's socket is driven, each operation allowed its timeout
/// when held or polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drive {
    /// By the worker's runtime.
    Runtime,
    /// With blocking calls: the session is alone on its thread.
    Held(Duration),
    /// Nonblocking, waited for by the worker's own loop with the thread's
    /// other sessions.
    Polled(Duration),
}

/// A socket read and written with blocking calls, within a deadline.
pub(crate) struct Held {
    socket: StdSocket,
    /// How long one operation may take.
    timeout: Duration,
    /// The running operation's deadline.
    deadline: Instant,
    /// What the kernel timeouts are set to now.
    kernel_timeout: Duration,
}

/// A nonblocking socket the worker's own loop waits for, within a
/// deadline.
pub(crate) struct Polled {
    socket: StdSocket,
    /// How long one operation may take.
    timeout: Duration,
    /// The running operation's deadline.
    deadline: Instant,
    /// The last call wrote a request (see [`Polled::read_buf`]).
    sent: bool,
    /// This connection's number among the process's (see
    /// [`poller::Want::Socket`]).
    conn: u64,
}

/// The last connection number given.
static CONNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A socket off the runtime.
enum StdSocket {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    /// Connects over TCP with Nagle's algorithm off (a statement is one
    /// small write that waits for its reply).
    pub(crate) async fn tcp(host: &str, port: u16) -> io::Result<Stream> {
        let s = TcpStream::connect((host, port)).await?;
        let _ = s.set_nodelay(true);
        Ok(Stream::Tcp(s))
    }

    pub(crate) async fn unix(path: &std::path::Path) -> io::Result<Stream> {
        UnixStream::connect(path).await.map(Stream::Unix)
    }

    /// The same socket, driven as `drive` says. Called on the runtime that
    /// opened it.
    pub(crate) fn drive(self, drive: Drive) -> io::Result<Stream> {
        let timeout = match drive {
            Drive::Runtime => return Ok(self),
            Drive::Held(t) | Drive::Polled(t) => t,
        };
        let socket = match self {
            Stream::Tcp(s) => StdSocket::Tcp(s.into_std()?),
            Stream::Unix(s) => StdSocket::Unix(s.into_std()?),
            driven => return Ok(driven),
        };
        let sock = socket.sock();
        let deadline = Instant::now() + timeout;
        if let Drive::Polled(_) = drive {
            sock.set_nonblocking(true)?;
            return Ok(Stream::Polled(Polled {
                socket,
                timeout,
                deadline,
                sent: false,
                conn: CONNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            }));
        }
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        Ok(Stream::Held(Held {
            socket,
            timeout,
            deadline,
            kernel_timeout: timeout,
        }))
    }

    /// An operation starts: a held socket's deadline is its timeout from
    /// now. Nothing for a socket the runtime drives (the engine bounds
    /// its operations).
    pub(crate) fn begin_operation(&mut self) {
        match self {
            Stream::Held(held) => held.deadline = Instant::now() + held.timeout,
            Stream::Polled(polled) => polled.deadline = Instant::now() + polled.timeout,
            Stream::Tcp(_) | Stream::Unix(_) => {}
        }
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes).await,
            Stream::Unix(s) => s.write_all(bytes).await,
            Stream::Held(held) => held.write_all(bytes),
            Stream::Polled(polled) => polled.write_all(bytes).await,
        }
    }

    /// Reads what has arrived into `buf`; 0 at the end of the stream.
    pub(crate) async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_buf(buf).await,
            Stream::Unix(s) => s.read_buf(buf).await,
            Stream::Held(held) => held.read_buf(buf),
            Stream::Polled(polled) => polled.read_buf(buf).await,
        }
    }
}

impl StdSocket {
    fn sock(&self) -> SockRef<'_> {
        match self {
            StdSocket::Tcp(s) => SockRef::from(s),
            StdSocket::Unix(s) => SockRef::from(s),
        }
    }

    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            StdSocket::Tcp(s) => s.as_raw_fd(),
            StdSocket::Unix(s) => s.as_raw_fd(),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            StdSocket::Tcp(s) => s.write(bytes),
            StdSocket::Unix(s) => s.write(bytes),
        }
    }

    /// Receives into `buf`'s spare room (made [`READ_ROOM`] at least).
    fn recv_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        if buf.capacity() - buf.len() < READ_ROOM {
            buf.reserve(READ_ROOM);
        }
        let n = self.sock().recv(buf.spare_capacity_mut())?;
        // SAFETY: `recv` wrote `n` bytes at the start of the spare
        // capacity, so they are initialised.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }
}

impl Held {
    /// Brings the kernel timeouts within [`SLACK`] of the time left;
    /// `TimedOut` once none is.
    fn arm(&mut self) -> io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        if self.kernel_timeout.abs_diff(left) > SLACK {
            let set = left.max(SHORTEST);
            let sock = self.socket.sock();
            sock.set_read_timeout(Some(set))?;
            sock.set_write_timeout(Some(set))?;
            self.kernel_timeout = set;
        }
        Ok(())
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            self.arm()?;
            match self.socket.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        loop {
            self.arm()?;
            match self.socket.recv_into(buf) {
                Err(e) if retry(&e) => {}
                done => return done,
            }
        }
    }
}

impl Polled {
    /// Writes all of `bytes`; when the socket's buffer is full, waits for
    /// room (by the worker's loop, or blocking off it).
    async fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.socket.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    bytes = &bytes[n..];
                    self.sent = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.ready(true).await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads what has arrived into `buf`, waiting for it when nothing has;
    /// 0 at the end of the stream. Straight after a request, it waits
    /// before it tries unless the thread's loop has at most two users
    /// ([`poller::tries_first`]). With few users on a thread the reply is
    /// often there already: the server's process that the request woke
    /// runs on this CPU before the sender resumes, and one `recv` then
    /// takes the reply that a `poll` and a `recv` would, the next request
    /// going out sooner (4 users on 2 CPUs, against `pgbench -j 2`, 7
    /// paired rounds of 5 s: simple-update 0.93 of pgbench's tps waiting
    /// first, 0.98 trying first; a custom script 0.93 and 0.96). With more,
    /// the other users' turns usually outlast the server's, and a `recv`
    /// that finds nothing is a system call spent (8 users: CPU per
    /// transaction 1.05 of pgbench's trying first, 1.02 waiting first).
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if std::mem::take(&mut self.sent) && !poller::tries_first() {
            self.ready(false).await?;
        }
        loop {
            match self.socket.recv_into(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.ready(false).await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return done,
            }
        }
    }

    /// Returns once the socket may be readable (writable) again: `TimedOut`
    /// past the operation's deadline. The clock is read once the wait is
    /// over, not before: the loop (or the blocking wait) is given the
    /// deadline, and a deadline already passed ends that wait at once.
    async fn ready(&self, write: bool) -> io::Result<()> {
        let (fd, conn, deadline) = (self.socket.fd(), self.conn, self.deadline);
        let mut asked = false;
        std::future::poll_fn(|_cx| {
            if asked {
                if Instant::now() >= deadline {
                    return std::task::Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
                }
                return std::task::Poll::Ready(Ok(()));
            }
            asked = true;
            let want = poller::Want::Socket {
                fd,
                conn,
                write,
                deadline,
            };
            if poller::want(want) {
                return std::task::Poll::Pending;
            }
            std::task::Poll::Ready(poller::block(fd, write, deadline))
        })
        .await
    }
}

/// A blocking call that ended without its work done: interrupted by a
/// signal, or woken at its kernel timeout (then `arm` decides whether the
/// deadline has passed).
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn runtime() -> tokio::runtime::Runtime {
        crate::util::test_runtime()
    }

    /// A held stream to a loopback peer whose end `peer` runs.
    fn held(timeout: Duration, peer: impl FnOnce(std::net::TcpStream) + Send + 'static) -> Stream {
        driven(Drive::Held(timeout), peer)
    }

    /// A stream driven as `drive` says to a loopback peer whose end `peer` runs.
    fn driven(drive: Drive, peer: impl FnOnce(std::net::TcpStream) + Send + 'static) -> Stream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((s, _)) = listener.accept() {
                peer(s);
            }
        });
        let rt = runtime();
        let _entered = rt.enter();
        let stream = rt.block_on(Stream::tcp("127.0.0.1", port)).unwrap();
        stream.drive(drive).unwrap()
    }

    #[test]
    fn a_held_read_gets_what_the_peer_sends() {
        let mut s = held(Duration::from_secs(5), |mut peer| {
            let mut ask = [0u8; 4];
            peer.read_exact(&mut ask).unwrap();
            peer.write_all(b"pong").unwrap();
        });
        let mut buf = BytesMut::new();
        s.begin_operation();
        let rt = runtime();
        rt.block_on(s.write_all(b"ping")).unwrap();
        while buf.len() < 4 {
            assert!(rt.block_on(s.read_buf(&mut buf)).unwrap() > 0);
        }
        assert_eq!(&buf[..], b"pong");
    }

    #[test]
    fn a_held_read_ends_at_the_deadline_not_before_and_not_long_after() {
        // The peer never answers. The operation starts 100 ms after the
        // hold, so its own deadline is the one that counts.
        let (hold, done) = std::sync::mpsc::channel::<()>();
        let mut s = held(Duration::from_millis(300), move |_peer| {
            let _ = done.recv();
        });
        let rt = runtime();
        std::thread::sleep(Duration::from_millis(100));
        s.begin_operation();
        let began = Instant::now();
        let mut buf = BytesMut::new();
        let e = rt.block_on(s.read_buf(&mut buf)).unwrap_err();
        let waited = began.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(
            waited >= Duration::from_millis(300)
                && waited < Duration::from_millis(300) + 10 * SLACK,
            "waited {waited:?}"
        );
        drop(hold);
    }

    #[test]
    fn a_polled_stream_off_the_worker_loop_waits_by_itself() {
        // No loop polls this thread's users: the read blocks on its socket
        // until the reply, or fails at the operation's deadline.
        let (hold, done) = std::sync::mpsc::channel::<()>();
        let mut s = driven(
            Drive::Polled(Duration::from_millis(200)),
            move |mut peer| {
                let mut ask = [0u8; 4];
                peer.read_exact(&mut ask).unwrap();
                std::thread::sleep(Duration::from_millis(30));
                peer.write_all(b"pong").unwrap();
                let _ = done.recv();
            },
        );
        let rt = runtime();
        s.begin_operation();
        rt.block_on(s.write_all(b"ping")).unwrap();
        let mut buf = BytesMut::new();
        while buf.len() < 4 {
            assert!(rt.block_on(s.read_buf(&mut buf)).unwrap() > 0);
        }
        assert_eq!(&buf[..], b"pong");
        s.begin_operation();
        let began = Instant::now();
        let e = rt.block_on(s.read_buf(&mut buf)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(began.elapsed() >= Duration::from_millis(200));
        drop(hold);
    }

    #[test]
    fn a_held_read_sees_the_peer_close() {
        let mut s = held(Duration::from_secs(5), drop);
        s.begin_operation();
        let mut buf = BytesMut::new();
        assert_eq!(runtime().block_on(s.read_buf(&mut buf)).unwrap(), 0);
    }
}
