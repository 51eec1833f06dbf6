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
//! Bounds: at most [`MAX_CONNECTIONS`] connections at once (the next is
//! told so and closed), the hello whole within [`HELLO_DEADLINE`], sizes
//! of at most [`MAX_MESSAGE`], and a peer silent mid-message or not reading
//! for [`IDLE_DEADLINE`] is cut off. Whatever a peer does ends its own
//! connection only, logged with its address and never with the ticket.
//! Each connection holds at most two buffers of [`CHUNK`] bytes, whatever
//! the sizes.

#[cfg(doc)]
use crate::wire::echo::MAX_MESSAGE;
use crate::wire::echo::{Hello, Mode, HELLO_HEAD};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Time from accepting a connection to its whole hello.
pub(crate) const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// Longest silence inside a message, or wait for the peer to read.
pub(crate) const IDLE_DEADLINE: Duration = Duration::from_secs(60);
/// The bytes a connection reads or writes at a time.
pub(crate) const CHUNK: usize = 128 << 10;
/// The ticket's length, bytes (hex characters).
const TICKET_LEN: usize = 32;

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
}

/// Listens on `address` (port 0: any free one) and serves connections on
/// threads of their own until `stop` is set.
pub(crate) fn start(address: SocketAddr, stop: Arc<AtomicBool>) -> std::io::Result<Echo> {
    let listener = TcpListener::bind(address)?;
    let port = listener.local_addr()?.port();
    let ticket = draw_ticket();
    let kept = ticket.clone();
    std::thread::Builder::new()
        .name("perflab-echo".to_string())
        .spawn(move || accept_loop(&listener, &kept, &stop))?;
    Ok(Echo { port, ticket })
}

fn accept_loop(listener: &TcpListener, ticket: &str, stop: &AtomicBool) {
    let open = Arc::new(AtomicUsize::new(0));
    let ticket: Arc<str> = Arc::from(ticket);
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
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            refuse(
                stream,
                peer,
                &format!("already {MAX_CONNECTIONS} echo connections; close some"),
            );
            continue;
        }
        let seat = Seat(open.clone());
        let ticket = ticket.clone();
        let spawned = std::thread::Builder::new()
            .name("perflab-echo-conn".to_string())
            .spawn(move || {
                let _seat = seat;
                if let Err(why) = serve_connection(stream, peer, &ticket) {
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

/// A connection's place among [`MAX_CONNECTIONS`], given back however its
/// thread ends.
struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Tells the peer why in one line and closes; logs it.
fn refuse(mut stream: TcpStream, peer: SocketAddr, why: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(format!("ERR {why}\n").as_bytes());
    // Closing with unread bytes would reset the connection, and the peer
    // could lose the line: read (and drop) a little of what it still
    // sends, for a short while, first.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = std::io::copy(&mut (&mut stream).take(64 << 10), &mut std::io::sink());
    crate::util::err(format_args!("perflab agent: echo refused {peer}: {why}\n"));
}

/// Serves one connection to its end; an error is why it ended early.
fn serve_connection(mut stream: TcpStream, peer: SocketAddr, ticket: &str) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!(
                "{what}: nothing for {}s; connection closed",
                IDLE_DEADLINE.as_secs()
            )
        }
        _ => format!("{what}: {e}"),
    };
    let started = std::time::Instant::now();
    let mut head = [0u8; HELLO_HEAD];
    let hello = stream
        .set_read_timeout(Some(HELLO_DEADLINE))
        .and_then(|()| stream.read_exact(&mut head));
    if let Err(e) = hello {
        // Not an error worth a line when the peer went away before
        // saying anything (a port scan, a health check).
        return match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Ok(()),
            _ => Err(format!(
                "no whole hello within {}s ({e}); connection closed",
                HELLO_DEADLINE.as_secs()
            )),
        };
    }
    let (hello, ticket_len) = match Hello::parse(&head) {
        Ok(parsed) => parsed,
        Err(why) => {
            refuse(stream, peer, &why);
            return Ok(());
        }
    };
    let mut given = [0u8; 255];
    let left = HELLO_DEADLINE.saturating_sub(started.elapsed());
    let read = stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .and_then(|()| stream.read_exact(&mut given[..ticket_len]));
    if read.is_err() || !super::constant_time_eq(&given[..ticket_len], ticket.as_bytes()) {
        refuse(
            stream,
            peer,
            "a wrong ticket; ask the agent's GET /v1/echo (with its token) for the ticket",
        );
        return Ok(());
    }
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(IDLE_DEADLINE))
        .and_then(|()| stream.set_write_timeout(Some(IDLE_DEADLINE)))
        .map_err(|e| io("setting deadlines", e))?;
    // Requests are read into one buffer, responses written from another
    // that stays zero: a reply never echoes what a peer sent.
    let (request, response) = (hello.request as usize, hello.response as usize);
    match hello.mode {
        Mode::RequestResponse => {
            let mut buffer = vec![0u8; request.min(CHUNK)];
            let zeros = vec![0u8; response.min(CHUNK)];
            loop {
                // A peer may close between requests: that is the end.
                if !read_message(&mut stream, &mut buffer, request)
                    .map_err(|e| io("reading a request", e))?
                {
                    return Ok(());
                }
                write_zeros(&mut stream, &zeros, response)
                    .map_err(|e| io("writing a response", e))?;
            }
        }
        Mode::Sink => {
            let mut buffer = vec![0u8; CHUNK];
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("reading a stream", e)),
                }
            }
        }
        Mode::Source => {
            let zeros = vec![0u8; response.min(CHUNK)];
            loop {
                if let Err(e) = write_zeros(&mut stream, &zeros, response) {
                    // The peer closing is how a source ends.
                    return match e.kind() {
                        std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted => Ok(()),
                        _ => Err(io("writing a stream", e)),
                    };
                }
            }
        }
    }
}

/// Reads one message of `size` bytes through `buffer`: false when the
/// peer closed before its first byte; an error when it closed inside it.
fn read_message(stream: &mut TcpStream, buffer: &mut [u8], size: usize) -> std::io::Result<bool> {
    let mut got = 0;
    while got < size {
        let want = (size - got).min(buffer.len());
        match stream.read(&mut buffer[..want]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the peer closed after {got} of {size} bytes"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Writes `size` zero bytes from `zeros`, as many times as it takes.
fn write_zeros(stream: &mut TcpStream, zeros: &[u8], size: usize) -> std::io::Result<()> {
    let mut left = size;
    while left > 0 {
        let n = left.min(zeros.len());
        stream.write_all(&zeros[..n])?;
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
}
