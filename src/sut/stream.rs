//! A database session's own socket, TCP or Unix, for the lean sessions
//! that speak a server's protocol themselves (PostgreSQL, MySQL/MariaDB).
//!
//! A socket is driven by the worker's runtime (its reads wait in the
//! runtime's poll of the driver, beside the thread's other users), or
//! **held**: a session alone on its worker thread in a closed loop reads
//! and writes it with blocking calls. A held read sleeps in the kernel
//! until the reply comes, as libpq's `recv` does, and saves the runtime's
//! `epoll_wait` and wake-up around every reply; nothing else on the
//! thread is kept waiting but the interval ticker, which runs between
//! operations.
//!
//! A held socket keeps the operation's deadline itself: its kernel
//! timeouts (`SO_RCVTIMEO`, `SO_SNDTIMEO`) are kept within [`SLACK`] of
//! the time left, changed only when they drift further (so an operation
//! of normal length makes no extra system call), and a read that wakes at
//! a kernel timeout before the deadline sleeps again. Past the deadline a
//! read or write fails with `ErrorKind::TimedOut`.

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
}

/// A socket read and written with blocking calls, within a deadline.
pub(crate) struct Held {
    socket: HeldSocket,
    /// How long one operation may take.
    timeout: Duration,
    /// The running operation's deadline.
    deadline: Instant,
    /// What the kernel timeouts are set to now.
    kernel_timeout: Duration,
}

enum HeldSocket {
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

    /// The same socket, held (read and written with blocking calls), each
    /// operation allowed `timeout`. Called on the runtime that opened it.
    pub(crate) fn hold(self, timeout: Duration) -> io::Result<Stream> {
        let socket = match self {
            Stream::Tcp(s) => HeldSocket::Tcp(s.into_std()?),
            Stream::Unix(s) => HeldSocket::Unix(s.into_std()?),
            held @ Stream::Held(_) => return Ok(held),
        };
        let sock = socket.sock();
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        Ok(Stream::Held(Held {
            socket,
            timeout,
            deadline: Instant::now() + timeout,
            kernel_timeout: timeout,
        }))
    }

    /// An operation starts: a held socket's deadline is its timeout from
    /// now. Nothing for a socket the runtime drives (the engine bounds
    /// its operations).
    pub(crate) fn begin_operation(&mut self) {
        if let Stream::Held(held) = self {
            held.deadline = Instant::now() + held.timeout;
        }
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes).await,
            Stream::Unix(s) => s.write_all(bytes).await,
            Stream::Held(held) => held.write_all(bytes),
        }
    }

    /// Reads what has arrived into `buf`; 0 at the end of the stream.
    pub(crate) async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_buf(buf).await,
            Stream::Unix(s) => s.read_buf(buf).await,
            Stream::Held(held) => held.read_buf(buf),
        }
    }
}

impl HeldSocket {
    fn sock(&self) -> SockRef<'_> {
        match self {
            HeldSocket::Tcp(s) => SockRef::from(s),
            HeldSocket::Unix(s) => SockRef::from(s),
        }
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
            let written = match &mut self.socket {
                HeldSocket::Tcp(s) => s.write(bytes),
                HeldSocket::Unix(s) => s.write(bytes),
            };
            match written {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if buf.capacity() - buf.len() < READ_ROOM {
            buf.reserve(READ_ROOM);
        }
        loop {
            self.arm()?;
            let spare = buf.spare_capacity_mut();
            match self.socket.sock().recv(spare) {
                Ok(n) => {
                    // SAFETY: `recv` wrote `n` bytes at the start of the
                    // spare capacity, so they are initialised.
                    unsafe { buf.set_len(buf.len() + n) };
                    return Ok(n);
                }
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
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
        stream.hold(timeout).unwrap()
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
    fn a_held_read_sees_the_peer_close() {
        let mut s = held(Duration::from_secs(5), drop);
        s.begin_operation();
        let mut buf = BytesMut::new();
        assert_eq!(runtime().block_on(s.read_buf(&mut buf)).unwrap(), 0);
    }
}
