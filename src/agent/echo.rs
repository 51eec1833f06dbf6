//! The agent's echo role (`perflab agent --echo`): the far end of the net
//! workload (`perflab run net`). It listens on a TCP port of its own, next
//! to the agent's HTTP port, and speaks a small binary protocol
//! (`wire::echo`):
//!
//! - each connection opens with a hello of `HELLO_HEAD` bytes — the magic
//!   `PLE1`, a mode byte ([`Mode`]), the request size and the response
//!   size (u32, big-endian) and the ticket's length (one byte) — then the
//!   ticket itself;
//! - in [`Mode::RequestResponse`] the agent then reads requests of the
//!   request size and answers each with the response size in zero bytes,
//!   until the peer closes; in [`Mode::Sink`] it reads and drops everything
//!   (`stream`); in [`Mode::Source`] it writes zero bytes in messages of the
//!   response size until the peer closes (`maerts`).
//!
//! No acknowledgement follows a good hello, so that a connect-request-
//! response-close transaction is one round trip as netperf's TCP_CRR is.
//! A refused hello is answered by one line `ERR why\n` and the close: a
//! reply of zero bytes never starts with `ERR `, so a client tells the two
//! apart.
//!
//! The ticket is not the agent's token: the token crosses only the agent's
//! HTTP port (in TLS beyond loopback), where `GET /v1/echo` with it
//! answers this port and the ticket. The echo's data crosses in plain TCP
//! (what a network test measures is the path, not a cipher), so what
//! crosses it is a ticket drawn at start, worth nothing but a seat here.
//!
//! Bounds: at most [`Bounds::connections`] connections at once (the next
//! is told so and closed), the hello whole within [`Bounds::hello`] of
//! the accept, sizes of at most [`MAX_MESSAGE`], and each message — each
//! [`CHUNK`] of a longer one — read or written whole within
//! [`Bounds::message`] of its first read or write: a peer silent, trickling
//! or not reading for that long is cut off, however little it moves. Each
//! of those deadlines is one instant that progress does not move: before
//! each read or write the socket is given what is left of it. Whatever a
//! peer does ends its own connection only, logged with its address and
//! never with the ticket. The accept thread never reads: a refused
//! connection is told why and handed to one thread that lets it drain for
//! at most [`Bounds::linger`] in all. Each connection holds at most two
//! buffers of [`CHUNK`] bytes, whatever the sizes.

#[cfg(doc)]
use crate::wire::echo::MAX_MESSAGE;
use crate::wire::echo::{Hello, Mode, HELLO_HEAD};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bytes a connection reads or writes at a time.
pub(crate) const CHUNK: usize = 128 << 10;
/// The ticket's length, bytes (hex characters).
const TICKET_LEN: usize = 32;
/// How often the refusal thread looks at the connections it lets drain.
const LINGER_POLL: Duration = Duration::from_millis(20);

/// What one peer may take of the echo.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Connections served at once.
    pub(crate) connections: usize,
    /// Time from accepting a connection to its whole hello.
    pub(crate) hello: Duration,
    /// Time from the first read or write of a message (of each [`CHUNK`]
    /// of a longer one) to its last byte; also the longest wait between
    /// requests.
    pub(crate) message: Duration,
    /// The longest a refused connection is let drain after its `ERR` line.
    pub(crate) linger: Duration,
}

impl Bounds {
    /// The agent's: what `docs/net.md` promises.
    pub(crate) const AGENT: Bounds = Bounds {
        connections: 256,
        hello: Duration::from_secs(5),
        message: Duration::from_secs(60),
        linger: Duration::from_secs(1),
    };
}

/// A ticket drawn from the system's random source: hex characters.
pub(crate) fn draw_ticket() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; TICKET_LEN / 2];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The echo's listening socket and what `GET /v1/echo` tells of it.
pub(crate) struct Echo {
    pub(crate) port: u16,
    pub(crate) ticket: String,
    /// The most connections it serves at once.
    pub(crate) connections: usize,
}

/// Listens on `address` (port 0: any free one) with `bounds` (the agent's,
/// [`Bounds::AGENT`], its message deadline as `--echo-deadline` sets it)
/// and serves connections on threads of their own until `stop` is set.
pub(crate) fn start_bounded(
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    bounds: Bounds,
) -> io::Result<Echo> {
    let listener = TcpListener::bind(address)?;
    let port = listener.local_addr()?.port();
    let ticket = draw_ticket();
    let kept: Arc<str> = Arc::from(ticket.as_str());
    let (refusals, queue) = std::sync::mpsc::sync_channel(bounds.connections);
    std::thread::Builder::new()
        .name("perflab-echo-refuse".to_string())
        .spawn(move || refuse_loop(&queue, bounds))?;
    std::thread::Builder::new()
        .name("perflab-echo".to_string())
        .spawn(move || accept_loop(&listener, &kept, &stop, &refusals, bounds))?;
    Ok(Echo {
        port,
        ticket,
        connections: bounds.connections,
    })
}

fn accept_loop(
    listener: &TcpListener,
    ticket: &Arc<str>,
    stop: &AtomicBool,
    refusals: &SyncSender<Refusal>,
    bounds: Bounds,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let mut said_accept = false;
    while !stop.load(Ordering::Relaxed) {
        // A blocking accept: a connection per transaction (crr) is served
        // at once, not at the next poll. The thread ends with the process.
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) => {
                // Out of descriptors, say: logged once, survived.
                if !said_accept {
                    crate::util::err(format_args!(
                        "perflab agent: echo cannot accept a connection: {e}\n"
                    ));
                    said_accept = true;
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= bounds.connections {
            open.fetch_sub(1, Ordering::AcqRel);
            let why = format!(
                "the echo serves at most {} connections at once; run fewer users or more agents",
                bounds.connections
            );
            refuse(refusals, stream, peer, why);
            continue;
        }
        let seat = Seat(open.clone());
        let (ticket, refusals) = (ticket.clone(), refusals.clone());
        let spawned = std::thread::Builder::new()
            .name("perflab-echo-conn".to_string())
            .spawn(move || {
                let _seat = seat;
                if let Err(why) = serve_connection(stream, peer, &ticket, &refusals, bounds) {
                    crate::util::err(format_args!("perflab agent: echo peer {peer}: {why}\n"));
                }
            });
        if let Err(e) = spawned {
            crate::util::err(format_args!(
                "perflab agent: echo cannot start a connection's thread: {e}\n"
            ));
        }
    }
}

/// A connection's place among [`Bounds::connections`], given back however
/// its thread ends.
struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection to refuse, and why.
struct Refusal {
    stream: TcpStream,
    peer: SocketAddr,
    why: String,
}

/// Hands a connection to the refusal thread, without waiting: when that
/// thread has as many as it holds, the connection is closed at once.
fn refuse(refusals: &SyncSender<Refusal>, stream: TcpStream, peer: SocketAddr, why: String) {
    match refusals.try_send(Refusal { stream, peer, why }) {
        Ok(()) => {}
        Err(TrySendError::Full(refusal) | TrySendError::Disconnected(refusal)) => {
            crate::util::err(format_args!(
                "perflab agent: echo closed {} unanswered: {}\n",
                refusal.peer, refusal.why
            ));
        }
    }
}

/// The refusal thread: tells each refused peer why in one line, then lets
/// its connection drain (closing with unread bytes would reset it, and the
/// peer could lose the line) for at most [`Bounds::linger`] in all,
/// reading without ever waiting on one peer.
fn refuse_loop(queue: &Receiver<Refusal>, bounds: Bounds) {
    let mut lingering: Vec<(TcpStream, Instant)> = Vec::new();
    let mut scrap = [0u8; 4096];
    loop {
        let next = if lingering.is_empty() {
            queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            queue.recv_timeout(LINGER_POLL)
        };
        match next {
            Ok(refusal) => {
                if let Some(stream) = tell(refusal) {
                    if lingering.len() < bounds.connections {
                        lingering.push((stream, Instant::now() + bounds.linger));
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if lingering.is_empty() => return,
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(LINGER_POLL),
        }
        let now = Instant::now();
        lingering.retain_mut(|(stream, until)| now < *until && drains(stream, &mut scrap));
    }
}

/// Writes the refusal's line and ends the echo's side; the stream to let
/// drain, none when it is gone already.
fn tell(refusal: Refusal) -> Option<TcpStream> {
    let Refusal {
        mut stream,
        peer,
        why,
    } = refusal;
    crate::util::err(format_args!("perflab agent: echo refused {peer}: {why}\n"));
    // A fresh connection's send buffer holds one line: a write that would
    // wait is a peer not worth waiting for.
    stream.set_nonblocking(true).ok()?;
    stream.write_all(format!("ERR {why}\n").as_bytes()).ok()?;
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    Some(stream)
}

/// Reads what a lingering connection has sent, without waiting: whether
/// it is still open.
fn drains(stream: &mut TcpStream, scrap: &mut [u8]) -> bool {
    // A few reads a round: a peer that floods is cut at its linger's end.
    for _ in 0..16 {
        match stream.read(scrap) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Serves one connection to its end; an error is why it ended early.
fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    ticket: &str,
    refusals: &SyncSender<Refusal>,
    bounds: Bounds,
) -> Result<(), String> {
    let mut conn = Timed::new(stream);
    let hello_by = Instant::now() + bounds.hello;
    let hello_seconds = bounds.hello.as_secs_f64();
    let mut head = [0u8; HELLO_HEAD];
    match conn.read_by(&mut head, bounds.hello) {
        // A peer gone before saying anything (a port scan, a health
        // check) is not worth a line.
        Ok(0) => return Ok(()),
        Ok(HELLO_HEAD) => {}
        Ok(got) => return Err(format!("closed after {got} bytes of its hello")),
        Err(e) => {
            return Err(format!(
                "no whole hello within {hello_seconds}s ({e}); connection closed"
            ))
        }
    }
    let (hello, ticket_len) = match Hello::parse(&head) {
        Ok(parsed) => parsed,
        Err(why) => {
            refuse(refusals, conn.stream, peer, why);
            return Ok(());
        }
    };
    let mut given = [0u8; 255];
    let given = &mut given[..ticket_len];
    let read = left_of(hello_by).and_then(|left| conn.read_by(given, left));
    if read.ok() != Some(ticket_len) || !super::constant_time_eq(given, ticket.as_bytes()) {
        let why = "a wrong ticket, or none within the hello's deadline; ask the agent's GET /v1/echo (with its token) for the ticket";
        refuse(refusals, conn.stream, peer, why.to_string());
        return Ok(());
    }
    let _ = conn.stream.set_nodelay(true);
    serve_mode(&mut conn, hello, bounds.message)
}

/// Serves what the hello asked for, until the peer closes.
fn serve_mode(conn: &mut Timed, hello: Hello, within: Duration) -> Result<(), String> {
    let io = |what: &str, e: io::Error| match e.kind() {
        io::ErrorKind::TimedOut => format!(
            "{what}: not whole within {}s; connection closed",
            within.as_secs_f64()
        ),
        _ => format!("{what}: {e}"),
    };
    // Requests are read into one buffer, responses written from another
    // that stays zero: a reply never echoes what a peer sent.
    let (request, response) = (hello.request as usize, hello.response as usize);
    match hello.mode {
        Mode::RequestResponse => {
            let mut buffer = vec![0u8; request.min(CHUNK)];
            let zeros = vec![0u8; response.min(CHUNK)];
            loop {
                // A peer may close between requests: that is the end.
                if !read_message(conn, &mut buffer, request, within)
                    .map_err(|e| io("reading a request", e))?
                {
                    return Ok(());
                }
                write_zeros(conn, &zeros, response, within)
                    .map_err(|e| io("writing a response", e))?;
            }
        }
        Mode::Sink => sink(conn, request.min(CHUNK), within).map_err(|e| io("reading a stream", e)),
        Mode::Source => {
            let zeros = vec![0u8; response.min(CHUNK)];
            loop {
                if let Err(e) = write_zeros(conn, &zeros, response, within) {
                    // The peer closing is how a source ends.
                    return match e.kind() {
                        io::ErrorKind::BrokenPipe
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted => Ok(()),
                        _ => Err(io("writing a stream", e)),
                    };
                }
            }
        }
    }
}

/// Reads and drops a stream until the peer closes, as much as has come at
/// each read, each `unit` of it (a message, or a [`CHUNK`] of a longer
/// one) within `within` of the read that began it.
fn sink(conn: &mut Timed, unit: usize, within: Duration) -> io::Result<()> {
    let mut buffer = vec![0u8; CHUNK];
    let (mut into, mut deadline) = (0, Instant::now());
    loop {
        let left = if into == 0 {
            deadline = Instant::now() + within;
            within
        } else {
            left_of(deadline)?
        };
        let n = conn.read_once(&mut buffer, left)?;
        if n == 0 {
            return Ok(());
        }
        if into + n >= unit {
            deadline = Instant::now() + within;
        }
        into = (into + n) % unit;
    }
}

/// What is left until `deadline`; `TimedOut` once it has passed.
fn left_of(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "the deadline passed"))
}

/// A connection whose socket timeouts are set to what is left of one
/// deadline before each read or write, and left alone when they already
/// are (the first read of a message that came whole costs no more calls).
struct Timed {
    stream: TcpStream,
    read_set: Option<Duration>,
    write_set: Option<Duration>,
}

impl Timed {
    fn new(stream: TcpStream) -> Self {
        Timed {
            stream,
            read_set: None,
            write_set: None,
        }
    }

    /// One read, given `left` (the socket's timeout set only when it
    /// differs): the bytes read, or `TimedOut`.
    fn read_once(&mut self, buf: &mut [u8], left: Duration) -> io::Result<usize> {
        if self.read_set != Some(left) {
            self.stream.set_read_timeout(Some(left))?;
            self.read_set = Some(left);
        }
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return done.map_err(timed_out),
            }
        }
    }

    /// One write, given `left`, as [`Timed::read_once`].
    fn write_once(&mut self, buf: &[u8], left: Duration) -> io::Result<usize> {
        if self.write_set != Some(left) {
            self.stream.set_write_timeout(Some(left))?;
            self.write_set = Some(left);
        }
        loop {
            match self.stream.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                done => return done.map_err(timed_out),
            }
        }
    }

    /// Reads until `buf` is full or the peer closes, all of it within
    /// `within`: the bytes read, or `TimedOut`.
    fn read_by(&mut self, buf: &mut [u8], within: Duration) -> io::Result<usize> {
        let deadline = Instant::now() + within;
        let (mut got, mut left) = (0, within);
        while got < buf.len() {
            match self.read_once(&mut buf[got..], left)? {
                0 => break,
                n => got += n,
            }
            if got < buf.len() {
                left = left_of(deadline)?;
            }
        }
        Ok(got)
    }

    /// Writes all of `buf` within `within`, or `TimedOut`.
    fn write_by(&mut self, mut buf: &[u8], within: Duration) -> io::Result<()> {
        let deadline = Instant::now() + within;
        let mut left = within;
        while !buf.is_empty() {
            buf = &buf[self.write_once(buf, left)?..];
            if !buf.is_empty() {
                left = left_of(deadline)?;
            }
        }
        Ok(())
    }
}

/// A socket's timeout (`EAGAIN`) said as what it is.
fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "timed out"),
        _ => e,
    }
}

/// Reads one message of `size` bytes through `buffer`, each [`CHUNK`]
/// within `within`: false when the peer closed before its first byte; an
/// error when it closed inside it.
fn read_message(
    conn: &mut Timed,
    buffer: &mut [u8],
    size: usize,
    within: Duration,
) -> io::Result<bool> {
    let mut got = 0;
    while got < size {
        let want = (size - got).min(buffer.len());
        match conn.read_by(&mut buffer[..want], within)? {
            0 if got == 0 => return Ok(false),
            n if n < want => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the peer closed after {} of {size} bytes", got + n),
                ))
            }
            n => got += n,
        }
    }
    Ok(true)
}

/// Writes `size` zero bytes from `zeros`, as many times as it takes, each
/// [`CHUNK`] within `within`.
fn write_zeros(conn: &mut Timed, zeros: &[u8], size: usize, within: Duration) -> io::Result<()> {
    let mut left = size;
    while left > 0 {
        let n = left.min(zeros.len());
        conn.write_by(&zeros[..n], within)?;
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_hex_and_differ() {
        let (a, b) = (draw_ticket(), draw_ticket());
        assert_eq!(a.len(), TICKET_LEN);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    /// Short deadlines, and one seat, so that a test sees them pass.
    const QUICK: Bounds = Bounds {
        connections: 1,
        hello: Duration::from_millis(500),
        message: Duration::from_millis(300),
        linger: Duration::from_millis(300),
    };
    /// What "at all" means: far beyond any deadline above.
    const GENEROUS: Duration = Duration::from_secs(10);
    /// A byte every this long: under each deadline, so that a timeout per
    /// read would never end it.
    const TRICKLE: Duration = Duration::from_millis(150);

    fn echo(bounds: Bounds) -> (SocketAddr, String) {
        let stop = Arc::new(AtomicBool::new(false));
        let echo = start_bounded(([127, 0, 0, 1], 0).into(), stop, bounds).unwrap();
        (([127, 0, 0, 1], echo.port).into(), echo.ticket)
    }

    fn hello(mode: Mode, request: u32, response: u32, ticket: &str) -> Vec<u8> {
        Hello {
            mode,
            request,
            response,
        }
        .encode(ticket)
    }

    fn connect(at: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(at).unwrap();
        stream.set_read_timeout(Some(GENEROUS)).unwrap();
        stream.set_write_timeout(Some(GENEROUS)).unwrap();
        stream
    }

    /// Writes `bytes` a byte every [`TRICKLE`] until `stop` is set: how
    /// many went before the echo cut the connection, none if it never did.
    fn trickle(at: SocketAddr, bytes: Vec<u8>, stop: Arc<AtomicBool>) -> Option<usize> {
        let mut stream = connect(at);
        for (sent, byte) in bytes.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if stream.write_all(&[*byte]).is_err() {
                return Some(sent);
            }
            std::thread::sleep(TRICKLE);
        }
        None
    }

    /// One request and its reply, retried while the echo says it is full:
    /// whether it was served within [`GENEROUS`].
    fn served(at: SocketAddr, ticket: &str) -> Result<(), String> {
        let until = Instant::now() + GENEROUS;
        let mut request = hello(Mode::RequestResponse, 1, 1, ticket);
        request.push(7);
        while Instant::now() < until {
            let mut stream = connect(at);
            let mut reply = [9u8; 1];
            let sent = stream
                .write_all(&request)
                .and_then(|()| stream.read_exact(&mut reply));
            if sent.is_ok() && reply == [0] {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("not served within {GENEROUS:?}"))
    }

    #[test]
    fn a_trickled_hello_is_cut_at_its_deadline_however_it_trickles() {
        let (at, ticket) = echo(QUICK);
        let mut bytes = hello(Mode::RequestResponse, 1, 1, &ticket);
        bytes.extend_from_slice(&[0; 64]);
        let stop = Arc::new(AtomicBool::new(false));
        // The hello alone takes 46 trickles (7 s) against a deadline of
        // 0.5 s: cut before it ends.
        let cut = trickle(at, bytes, stop);
        assert!(cut.is_some_and(|sent| sent < 46), "{cut:?}");
        served(at, &ticket).unwrap();
    }

    #[test]
    fn an_honest_peer_is_served_while_a_refused_one_trickles() {
        // The seat's holder is not cut while the test runs.
        let (at, ticket) = echo(Bounds {
            message: Duration::from_secs(60),
            ..QUICK
        });
        // The one seat, taken by a stream that sends nothing for now.
        let mut holder = connect(at);
        holder.write_all(&hello(Mode::Sink, 1, 1, &ticket)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let stop = Arc::new(AtomicBool::new(false));
        let refused = {
            let stop = stop.clone();
            std::thread::spawn(move || trickle(at, vec![b'x'; 1 << 16], stop))
        };
        std::thread::sleep(Duration::from_millis(300));
        drop(holder);
        let honest = served(at, &ticket);
        // The trickler is cut at its linger's end, on its own.
        let until = Instant::now() + GENEROUS;
        while !refused.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        honest.unwrap();
        assert!(
            refused.join().unwrap().is_some(),
            "the trickler was not cut"
        );
    }

    #[test]
    fn a_refused_peer_is_told_why() {
        let (at, ticket) = echo(QUICK);
        let mut holder = connect(at);
        holder.write_all(&hello(Mode::Sink, 1, 1, &ticket)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut refused = connect(at);
        let mut said = String::new();
        refused.read_to_string(&mut said).unwrap();
        assert_eq!(
            said,
            "ERR the echo serves at most 1 connections at once; run fewer users or more agents\n"
        );
    }

    #[test]
    fn a_maerts_peer_that_stops_reading_is_cut() {
        let (at, ticket) = echo(QUICK);
        let mut peer = connect(at);
        peer.write_all(&hello(Mode::Source, 1, 64 << 10, &ticket))
            .unwrap();
        let mut message = vec![0u8; 64 << 10];
        peer.read_exact(&mut message).unwrap();
        // Stops reading, well past the message deadline, then reads on:
        // what the echo had queued, then its close.
        std::thread::sleep(Duration::from_secs(2));
        let until = Instant::now() + GENEROUS;
        let mut after = 0u64;
        let ended = loop {
            match peer.read(&mut message) {
                Ok(0) | Err(_) => break true,
                Ok(n) => after += n as u64,
            }
            if Instant::now() > until {
                break false;
            }
        };
        assert!(ended, "still writing after {after} bytes more");
    }
}
