//! One user's HTTP/1.1 connection, owned by its session: the request's
//! bytes were built once before the run and are written as they are; the
//! reply's head is parsed in place in the session's own buffer
//! (`httparse`, no allocation), the body is read through that buffer and
//! counted, and on a sampled share of replies checksummed (CRC-32) against
//! the file set. No task or channel stands between the user and its
//! socket, and after the first request a keep-alive exchange allocates
//! nothing.
//!
//! Over `https://` the connection is a rustls session (the handshake at
//! connect; a failed one is an error of kind `tls`): rustls keeps its own
//! record buffers, so a TLS exchange is not free of allocation.
//!
//! With pipelining ([`Client::send`], [`Client::receive`]) several
//! requests are written before their replies are read, in order, as wrk's
//! pipelining does; a connection that fails loses the replies still due.
//!
//! Bodies are delimited by `Content-Length`, by chunked transfer coding
//! (RFC 9112 §7.1; extensions and trailers skipped), or by the server
//! closing the connection. A reused keep-alive connection the server
//! closed while idle (nothing read back, or the write refused) is opened
//! again once and the request repeated, as browsers do (RFC 9112 §9.3.1).

use crate::measure::{ErrorKind, OpResult, Outcome};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The session's buffer: a reply's head must fit in it.
pub(crate) const BUFFER: usize = 64 * 1024;
/// How long a client waits for the server to close a connection it asked
/// it to close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Most header lines of a reply.
const MAX_HEADERS: usize = 64;

/// What one exchange expects of the reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    /// The body's length when the file's size is known.
    pub(crate) size: Option<u64>,
    /// The body's CRC-32 to compare, when this reply is verified.
    pub(crate) checksum: Option<u32>,
    /// A HEAD request: no body follows.
    pub(crate) head: bool,
    /// The request asked the server to close the connection.
    pub(crate) close: bool,
}

/// How a client reaches its server over TLS.
#[derive(Clone)]
pub(crate) struct TlsTarget {
    pub(crate) connector: tokio_rustls::TlsConnector,
    pub(crate) name: rustls::pki_types::ServerName<'static>,
}

/// A connection: plain TCP or a TLS session over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }
}

/// A user's connection to one address.
pub(crate) struct Client {
    addr: SocketAddr,
    tls: Option<TlsTarget>,
    stream: Option<Stream>,
    buf: Box<[u8]>,
    /// Bytes of the buffer holding data read and not yet used.
    filled: usize,
    /// An exchange began and did not end (its future was dropped at a
    /// timeout): the connection's state is unknown and it is not reused.
    in_exchange: bool,
    /// Connections opened so far.
    pub(crate) connects: u64,
    /// The status of the last head read, until the next is awaited.
    head_seen: Option<u16>,
    /// A request flow's copy of each reply's head and body start.
    keep: Option<Box<Kept>>,
}

/// The last reply's head, and as much of its body as was asked for: what
/// a request flow captures values from.
#[derive(Default)]
pub(crate) struct Kept {
    pub(crate) head: Vec<u8>,
    pub(crate) body: Vec<u8>,
    body_limit: usize,
}

/// How a reply's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
    None,
}

/// What the head of a reply said.
struct Head {
    len: usize,
    status: u16,
    framing: Framing,
    close: bool,
}

impl Client {
    /// A client of `addr` (over TLS when `tls` says how); it connects on
    /// its first request.
    pub(crate) fn new(addr: SocketAddr, tls: Option<TlsTarget>) -> Self {
        Client {
            addr,
            tls,
            stream: None,
            buf: vec![0; BUFFER].into_boxed_slice(),
            filled: 0,
            in_exchange: false,
            connects: 0,
            head_seen: None,
            keep: None,
        }
    }

    /// Keeps each reply's head from now on, and up to `body_limit` bytes
    /// of its body.
    pub(crate) fn keep_replies(&mut self, body_limit: usize) {
        let kept = self.keep.get_or_insert_with(Box::default);
        kept.body_limit = body_limit;
    }

    /// The last reply's head and body start (empty when none came whole).
    pub(crate) fn kept(&self) -> (&[u8], &[u8]) {
        match &self.keep {
            Some(k) => (&k.head, &k.body),
            None => (&[], &[]),
        }
    }

    /// What the server had sent of the reply under way when the exchange
    /// was cut off (by a timeout): for a one-line error.
    pub(crate) fn received(&self) -> String {
        match self.head_seen {
            Some(status) => {
                format!("the head of an HTTP {status} reply, but not the whole body it announced")
            }
            None if self.filled == 0 => "nothing".to_string(),
            None => {
                let shown = &self.buf[..self.filled.min(48)];
                format!(
                    "{} bytes that do not make a whole HTTP head yet ({:?})",
                    self.filled,
                    crate::util::printable(&String::from_utf8_lossy(shown))
                )
            }
        }
    }

    /// Sends `request` and reads the whole reply.
    pub(crate) async fn exchange(&mut self, request: &[u8], expect: Expect) -> Outcome {
        if self.in_exchange {
            self.stream = None;
        }
        self.in_exchange = true;
        if let Some(k) = &mut self.keep {
            k.head.clear();
            k.body.clear();
        }
        let mut outcome = self.attempt(request, expect).await;
        if let Err(Retry) = outcome {
            self.stream = None;
            outcome = self.attempt(request, expect).await;
        }
        self.in_exchange = false;
        outcome.unwrap_or_else(|Retry| Outcome::error(ErrorKind::Reset))
    }

    /// Whether a connection is open (and its replies in order).
    pub(crate) fn connected(&self) -> bool {
        self.stream.is_some() && !self.in_exchange
    }

    /// Pipelining: writes `batch` (one or more requests) on the
    /// connection, opening one if there is none.
    pub(crate) async fn send(&mut self, batch: &[u8]) -> Result<(), ErrorKind> {
        if self.in_exchange {
            self.stream = None;
        }
        self.in_exchange = true;
        if self.stream.is_none() {
            let stream = self.connect().await?;
            self.stream = Some(stream);
            self.connects += 1;
            self.filled = 0;
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(ErrorKind::Connect);
        };
        if let Err(e) = stream.write_all(batch).await {
            self.stream = None;
            return Err(io_kind(&e));
        }
        self.in_exchange = false;
        Ok(())
    }

    /// Pipelining: reads the next reply of those sent.
    pub(crate) async fn receive(&mut self, expect: Expect) -> Outcome {
        if self.in_exchange {
            self.stream = None;
        }
        self.in_exchange = true;
        let outcome = match self.read_head().await {
            Ok(head) => {
                let outcome = self.read_body(&head, expect).await;
                let intact = matches!(
                    outcome.result,
                    OpResult::Ok | OpResult::Error(ErrorKind::Http(_))
                );
                if !intact || head.close {
                    self.stream = None;
                }
                outcome
            }
            Err(e) => {
                self.stream = None;
                Outcome::error(e.kind())
            }
        };
        self.in_exchange = false;
        outcome
    }

    /// One try; `Err(Retry)` when a reused connection turned out closed
    /// before the server read the request.
    async fn attempt(&mut self, request: &[u8], expect: Expect) -> Result<Outcome, Retry> {
        let reused = self.stream.is_some();
        if !reused {
            match self.connect().await {
                Ok(s) => {
                    self.stream = Some(s);
                    self.connects += 1;
                    self.filled = 0;
                }
                Err(kind) => return Ok(Outcome::error(kind)),
            }
        }
        let Some(stream) = self.stream.as_mut() else {
            return Ok(Outcome::error(ErrorKind::Connect));
        };
        if let Err(e) = stream.write_all(request).await {
            self.stream = None;
            return if reused {
                Err(Retry)
            } else {
                Ok(Outcome::error(io_kind(&e)))
            };
        }
        let head = match self.read_head().await {
            Ok(head) => head,
            Err(HeadError::ClosedEarly) if reused => return Err(Retry),
            Err(e) => {
                self.stream = None;
                return Ok(Outcome::error(e.kind()));
            }
        };
        let outcome = self.read_body(&head, expect).await;
        let intact = matches!(
            outcome.result,
            OpResult::Ok | OpResult::Error(ErrorKind::Http(_))
        );
        if !intact {
            // Where the reply ends is unknown: the connection is not reused.
            self.stream = None;
        } else if head.close || expect.close {
            self.finish_close().await;
        }
        Ok(outcome)
    }

    /// Opens a connection (and its TLS session).
    async fn connect(&self) -> Result<Stream, ErrorKind> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|_| ErrorKind::Connect)?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(Stream::Plain(tcp)),
            Some(t) => t
                .connector
                .connect(t.name.clone(), tcp)
                .await
                .map(|s| Stream::Tls(Box::new(s)))
                .map_err(|_| ErrorKind::Tls),
        }
    }

    /// Reads until a whole head is in the buffer and parses it.
    async fn read_head(&mut self) -> Result<Head, HeadError> {
        self.head_seen = None;
        loop {
            if self.filled > 0 {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut reply = httparse::Response::new(&mut headers);
                match reply.parse(&self.buf[..self.filled]) {
                    // An interim reply (100 Continue, 103 Early Hints):
                    // the final one follows it.
                    Ok(httparse::Status::Complete(len))
                        if reply
                            .code
                            .is_some_and(|c| (100..200).contains(&c) && c != 101) =>
                    {
                        self.consume(len);
                        continue;
                    }
                    Ok(httparse::Status::Complete(len)) => {
                        if let Some(k) = &mut self.keep {
                            k.head.clear();
                            k.head.extend_from_slice(&self.buf[..len]);
                            k.body.clear();
                        }
                        let head = head_of(&reply, len);
                        self.head_seen = head.as_ref().ok().map(|h| h.status);
                        return head;
                    }
                    Ok(httparse::Status::Partial) if self.filled < self.buf.len() => {}
                    Ok(httparse::Status::Partial) | Err(_) => return Err(HeadError::Garbage),
                }
            }
            let Some(stream) = self.stream.as_mut() else {
                return Err(HeadError::Reset);
            };
            match stream.read(&mut self.buf[self.filled..]).await {
                Ok(0) if self.filled == 0 => return Err(HeadError::ClosedEarly),
                Ok(0) => return Err(HeadError::Reset),
                Ok(n) => self.filled += n,
                Err(_) => return Err(HeadError::Reset),
            }
        }
    }

    /// Reads the body the head announced; the buffer keeps what follows it.
    async fn read_body(&mut self, head: &Head, expect: Expect) -> Outcome {
        let error_status = !(200..300).contains(&head.status);
        let framing = if expect.head || head.status == 204 || head.status == 304 {
            Framing::None
        } else {
            head.framing
        };
        // The announced length is checked before the body is read.
        let announced = match (framing, expect.head, head.framing) {
            (Framing::Length(n), _, _) | (_, true, Framing::Length(n)) => Some(n),
            _ => None,
        };
        if !error_status {
            if let (Some(want), Some(got)) = (expect.size, announced) {
                if want != got {
                    return Outcome::error(ErrorKind::Corrupt);
                }
            }
        }
        self.consume(head.len);
        let mut hasher = expect
            .checksum
            .filter(|_| !error_status && !expect.head)
            .map(|_| crc32fast::Hasher::new());
        let body = match framing {
            Framing::None => Ok(0),
            Framing::Length(n) => self.read_exact_body(n, &mut hasher).await,
            Framing::UntilClose => self.read_until_close(&mut hasher).await,
            Framing::Chunked => self.read_chunked(&mut hasher).await,
        };
        let bytes = match body {
            Ok(bytes) => bytes,
            Err(kind) => return Outcome::error(kind),
        };
        if error_status {
            return Outcome::error(ErrorKind::Http(head.status));
        }
        if !expect.head && expect.size.is_some_and(|want| want != bytes) {
            return Outcome::error(ErrorKind::Corrupt);
        }
        if let (Some(hasher), Some(want)) = (hasher, expect.checksum) {
            if hasher.finalize() != want {
                return Outcome::error(ErrorKind::Corrupt);
            }
        }
        Outcome {
            bytes,
            ..Outcome::ok()
        }
    }

    /// Drops the first `n` bytes of the buffer's data.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.filled);
        self.buf.copy_within(n..self.filled, 0);
        self.filled -= n;
    }

    /// Reads more into the buffer; the bytes read, 0 at the end of the stream.
    async fn fill(&mut self) -> Result<usize, ErrorKind> {
        if self.filled == self.buf.len() {
            return Err(ErrorKind::Corrupt);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(ErrorKind::Reset);
        };
        match stream.read(&mut self.buf[self.filled..]).await {
            Ok(n) => {
                self.filled += n;
                Ok(n)
            }
            Err(e) => Err(io_kind(&e)),
        }
    }

    /// Takes up to `max` body bytes from the buffer (reading if it is
    /// empty); 0 at the end of the stream.
    async fn take(
        &mut self,
        max: u64,
        hasher: &mut Option<crc32fast::Hasher>,
    ) -> Result<usize, ErrorKind> {
        if self.filled == 0 && self.fill().await? == 0 {
            return Ok(0);
        }
        let n = self.filled.min(usize::try_from(max).unwrap_or(usize::MAX));
        if let Some(h) = hasher.as_mut() {
            h.update(&self.buf[..n]);
        }
        if let Some(k) = &mut self.keep {
            let room = k.body_limit.saturating_sub(k.body.len());
            k.body.extend_from_slice(&self.buf[..n.min(room)]);
        }
        self.consume(n);
        Ok(n)
    }

    async fn read_exact_body(
        &mut self,
        length: u64,
        hasher: &mut Option<crc32fast::Hasher>,
    ) -> Result<u64, ErrorKind> {
        let mut left = length;
        while left > 0 {
            match self.take(left, hasher).await? {
                0 => return Err(ErrorKind::Reset),
                n => left -= n as u64,
            }
        }
        Ok(length)
    }

    async fn read_until_close(
        &mut self,
        hasher: &mut Option<crc32fast::Hasher>,
    ) -> Result<u64, ErrorKind> {
        let mut total = 0;
        loop {
            match self.take(u64::MAX, hasher).await? {
                0 => {
                    self.stream = None;
                    return Ok(total);
                }
                n => total += n as u64,
            }
        }
    }

    /// Reads a chunked body: `SIZE[;ext]\r\n DATA \r\n` … `0\r\n` trailers `\r\n`.
    async fn read_chunked(
        &mut self,
        hasher: &mut Option<crc32fast::Hasher>,
    ) -> Result<u64, ErrorKind> {
        let mut total: u64 = 0;
        loop {
            let line = self.line().await?;
            let size_text = line.split(|&b| b == b';').next().unwrap_or_default();
            let size = std::str::from_utf8(size_text)
                .ok()
                .and_then(|t| u64::from_str_radix(t.trim(), 16).ok())
                .ok_or(ErrorKind::Corrupt)?;
            let line_len = line.len();
            self.consume(line_len);
            if size == 0 {
                // Trailer lines up to an empty one.
                loop {
                    let trailer = self.line().await?.len();
                    self.consume(trailer);
                    if trailer <= 2 {
                        return Ok(total);
                    }
                }
            }
            total = total
                .checked_add(self.read_exact_body(size, hasher).await?)
                .ok_or(ErrorKind::Corrupt)?;
            let crlf = self.line().await?.len();
            if crlf > 2 {
                return Err(ErrorKind::Corrupt);
            }
            self.consume(crlf);
        }
    }

    /// The buffer's next line, `\n` included (read in as needed).
    async fn line(&mut self) -> Result<&[u8], ErrorKind> {
        loop {
            if let Some(end) = self.buf[..self.filled].iter().position(|&b| b == b'\n') {
                return Ok(&self.buf[..=end]);
            }
            if self.fill().await? == 0 {
                return Err(ErrorKind::Reset);
            }
        }
    }

    /// Ends a connection that is not reused: when the server closes it
    /// (it was asked to), its end holds the TIME_WAIT, so the client waits
    /// for the close; otherwise the client closes.
    async fn finish_close(&mut self) {
        if let Some(mut stream) = self.stream.take() {
            let mut scrap = [0u8; 512];
            let drain = async {
                while let Ok(n) = stream.read(&mut scrap).await {
                    if n == 0 {
                        break;
                    }
                }
            };
            // A server that keeps the connection open despite being asked
            // to close it is closed by the client.
            let _ = tokio::time::timeout(CLOSE_WAIT, drain).await;
        }
        self.filled = 0;
    }
}

/// Why a TLS handshake with `addr` fails, in the TLS library's words; none
/// when it succeeds (or the TCP connection itself fails).
pub(crate) async fn handshake_error(addr: SocketAddr, tls: &TlsTarget) -> Option<std::io::Error> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    tls.connector.connect(tls.name.clone(), tcp).await.err()
}

/// A reused connection found closed: try once more on a new one.
struct Retry;

/// Why a reply's head could not be read.
enum HeadError {
    /// The connection ended before any byte of a reply.
    ClosedEarly,
    /// It ended or failed inside the reply.
    Reset,
    /// Not an HTTP reply, or a head larger than the buffer.
    Garbage,
}

impl HeadError {
    fn kind(&self) -> ErrorKind {
        match self {
            HeadError::ClosedEarly | HeadError::Reset => ErrorKind::Reset,
            HeadError::Garbage => ErrorKind::Corrupt,
        }
    }
}

/// The parts of a parsed head the exchange needs.
fn head_of(reply: &httparse::Response<'_, '_>, len: usize) -> Result<Head, HeadError> {
    let status = reply.code.ok_or(HeadError::Garbage)?;
    let mut length = None;
    let mut chunked = false;
    let mut close = reply.version == Some(0);
    for h in reply.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(HeadError::Garbage)?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::Garbage);
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    close = false;
                }
            }
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => {
            close = true;
            Framing::UntilClose
        }
    };
    Ok(Head {
        len,
        status,
        framing,
        close,
    })
}

/// The kind of a failed read or write.
fn io_kind(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Connect,
        K::TimedOut | K::WouldBlock => ErrorKind::Timeout,
        _ => ErrorKind::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::counting_alloc::allocations;
    use std::io::{Read, Write};

    /// A loopback peer answering each request on one connection with the
    /// next of `replies` (cycling), for at most `requests` requests.
    fn peer(replies: Vec<Vec<u8>>, requests: usize) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut buf = [0u8; 4096];
            let mut pending = Vec::new();
            let mut answered = 0;
            while answered < requests {
                let Ok(n) = stream.read(&mut buf) else { return };
                if n == 0 {
                    return;
                }
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    pending.drain(..end + 4);
                    if stream
                        .write_all(&replies[answered % replies.len()])
                        .is_err()
                    {
                        return;
                    }
                    answered += 1;
                }
            }
        });
        addr
    }

    fn expect(size: u64, checksum: Option<u32>) -> Expect {
        Expect {
            size: Some(size),
            checksum,
            head: false,
            close: false,
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        crate::util::test_runtime()
    }

    #[test]
    fn a_keep_alive_exchange_allocates_nothing_after_the_first() {
        let body = vec![b'x'; 1024];
        let mut reply = b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 1024\r\n\r\n".to_vec();
        reply.extend_from_slice(&body);
        let addr = peer(vec![reply], 2_100);
        let rt = runtime();
        let mut client = Client::new(addr, None);
        let request = b"GET /f HTTP/1.1\r\nHost: t\r\n\r\n";
        let sum = crc32fast::hash(&body);
        rt.block_on(async {
            for _ in 0..100 {
                let o = client.exchange(request, expect(1024, Some(sum))).await;
                assert_eq!(o.result, OpResult::Ok);
            }
            let before = allocations();
            for i in 0..2_000 {
                let verify = (i % 10 == 0).then_some(sum);
                let o = client.exchange(request, expect(1024, verify)).await;
                assert_eq!((o.result, o.bytes), (OpResult::Ok, 1024));
            }
            let per_exchange = (allocations() - before) as f64 / 2_000.0;
            assert_eq!(per_exchange, 0.0, "allocations per exchange");
        });
        assert_eq!(client.connects, 1);
    }

    #[test]
    fn chunked_bodies_are_read_whole_and_checked() {
        let body = b"hello, chunked world";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nf\r\n, chunked world\r\n0\r\nX-Trailer: 1\r\n\r\n".to_vec();
        let addr = peer(vec![chunked], 3);
        let rt = runtime();
        let mut client = Client::new(addr, None);
        let request = b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n";
        rt.block_on(async {
            let good = crc32fast::hash(body);
            let o = client.exchange(request, expect(20, Some(good))).await;
            assert_eq!((o.result, o.bytes), (OpResult::Ok, 20));
            let o = client.exchange(request, expect(20, Some(good ^ 1))).await;
            assert_eq!(o.result, OpResult::Error(ErrorKind::Corrupt));
        });
    }

    /// Interim replies before the final one are read past, not taken
    /// for the reply (nor waited on until a timeout).
    #[test]
    fn interim_replies_are_read_past() {
        let reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        let addr = peer(vec![reply], 2);
        let rt = runtime();
        let mut client = Client::new(addr, None);
        let request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
        rt.block_on(async {
            for _ in 0..2 {
                let o = client.exchange(request, expect(2, None)).await;
                assert_eq!((o.result, o.bytes), (OpResult::Ok, 2));
            }
        });
        assert_eq!(client.connects, 1);
    }

    /// An exchange cut off by a timeout says what the server had sent.
    #[test]
    fn a_cut_off_exchange_says_what_arrived() {
        let rt = runtime();
        let request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
        for (reply, said) in [
            (&b""[..], "nothing"),
            (
                b"HTTP/1.1 200 OK\r\nServ",
                "21 bytes that do not make a whole HTTP head",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nsome",
                "the head of an HTTP 200 reply, but not the whole body",
            ),
        ] {
            // Two requests due: the peer holds the connection open.
            let addr = peer(vec![reply.to_vec()], 2);
            let mut client = Client::new(addr, None);
            let cut = rt.block_on(async {
                let any_size = Expect {
                    size: None,
                    checksum: None,
                    head: false,
                    close: false,
                };
                tokio::time::timeout(
                    Duration::from_millis(300),
                    client.exchange(request, any_size),
                )
                .await
            });
            assert!(cut.is_err(), "{said}: the exchange ended");
            assert!(client.received().contains(said), "{}", client.received());
        }
    }

    #[test]
    fn bad_replies_are_counted_by_kind_and_never_reused() {
        let rt = runtime();
        let request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
        for (reply, kind) in [
            (
                &b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!"[..],
                ErrorKind::Http(404),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsh",
                ErrorKind::Reset,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
                ErrorKind::Corrupt,
            ),
            (b"\x15\x03\x01\x00\x02\x02\x46", ErrorKind::Corrupt),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                ErrorKind::Corrupt,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                ErrorKind::Corrupt,
            ),
        ] {
            // The peer answers once, then closes.
            let addr = peer(vec![reply.to_vec()], 1);
            let mut client = Client::new(addr, None);
            let o = rt.block_on(client.exchange(request, expect(5, None)));
            assert_eq!(
                o.result,
                OpResult::Error(kind),
                "{:?}",
                String::from_utf8_lossy(reply)
            );
        }
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let o = rt.block_on(Client::new(closed, None).exchange(request, expect(5, None)));
        assert_eq!(o.result, OpResult::Error(ErrorKind::Connect));
    }

    mod props {
        //! Replies a server might send, whole, cut or absurd, each from a
        //! loopback peer that then closes: every exchange ends in an
        //! outcome (a kind of error at worst), never a panic or a hang.
        use super::*;
        use proptest::prelude::*;

        fn chunk_size() -> impl Strategy<Value = String> {
            prop_oneof![
                (0u64..64).prop_map(|n| format!("{n:x}")),
                (0u64..64).prop_map(|n| format!("{:x}", u64::MAX - n)),
                "[0-9a-fA-F]{1,40}",
                "[0-9a-z;= -]{0,8}",
            ]
        }

        fn reply() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::collection::vec((chunk_size(), "[a-z]{0,24}"), 0..5),
                prop_oneof![
                    (0u64..64).prop_map(|n| n.to_string()),
                    (0u64..64).prop_map(|n| (u64::MAX - n).to_string()),
                    "[0-9]{19,30}",
                ],
                0usize..100,
                any::<bool>(),
                any::<prop::sample::Index>(),
            )
                .prop_map(|(chunks, length, headers, chunked, cut)| {
                    let mut out = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n".to_vec();
                    for i in 0..headers {
                        out.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
                    }
                    let framing = if chunked {
                        "Transfer-Encoding: chunked".to_string()
                    } else {
                        format!("Content-Length: {length}")
                    };
                    out.extend_from_slice(format!("{framing}\r\n\r\n").as_bytes());
                    for (size, data) in &chunks {
                        if chunked {
                            out.extend_from_slice(format!("{size}\r\n").as_bytes());
                        }
                        out.extend_from_slice(data.as_bytes());
                        if chunked {
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    out.truncate(cut.index(out.len() + 1));
                    out
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn any_reply_ends_in_an_outcome(reply in reply()) {
                let rt = runtime();
                let addr = peer(vec![reply], 1);
                let mut client = Client::new(addr, None);
                let request = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
                let any_size = Expect { size: None, checksum: None, head: false, close: false };
                let ended = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(10), client.exchange(request, any_size))
                        .await
                });
                prop_assert!(ended.is_ok(), "no outcome within 10 s");
            }
        }
    }
}
