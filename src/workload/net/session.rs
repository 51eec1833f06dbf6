//! The net workload's users. A user of `rr`, `stream` or `maerts` opens
//! its connection (and sends its hello) before the step starts; a user of
//! `crr` opens one per transaction, sending the hello and the request in
//! one write. Buffers are made when the session opens: an operation
//! allocates nothing (a `crr` connect is the kernel's and tokio's).
//!
//! A reply is all 0 bytes (the echo never sends anything else after a good
//! hello): a reply starting with `ERR ` is the echo refusing the
//! connection, counted `connect`; one starting with anything else is a
//! peer that is no echo, counted `corrupt`.

use super::{NetSpec, NetTest};
use crate::measure::{ErrorKind, Outcome};
use crate::workload::{CheckReport, OpCounts, Seat, Session, Workload};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most bytes read or written at a time.
const CHUNK: usize = 128 << 10;

/// How long the probe before the run may take, each step of it.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The net target: the echo's address and what its users send.
pub(crate) struct NetWorkload {
    address: SocketAddr,
    /// The hello every connection opens with.
    hello: Vec<u8>,
    test: NetTest,
    request: usize,
    response: usize,
    message: usize,
}

impl NetWorkload {
    pub(crate) fn new(address: SocketAddr, hello: Vec<u8>, spec: &NetSpec) -> Self {
        NetWorkload {
            address,
            hello,
            test: spec.test,
            request: spec.request_size as usize,
            response: spec.response_size as usize,
            message: spec.message_size as usize,
        }
    }
}

/// One user: its connection (none between `crr` transactions, or after a
/// failure: the next operation connects again) and its buffers.
pub(crate) struct NetSession {
    address: SocketAddr,
    test: NetTest,
    stream: Option<TcpStream>,
    /// The hello (not for `crr`, whose hello is in `out`).
    hello: Vec<u8>,
    /// What one operation writes: a request (after the hello for `crr`),
    /// or a stream message.
    out: Vec<u8>,
    /// Where replies and stream messages are read.
    input: Vec<u8>,
    /// Bytes of a reply (rr, crr) or of a message read (maerts).
    reply: usize,
    /// Payload bytes one operation moves.
    moved: u64,
}

impl Workload for NetWorkload {
    type Session = NetSession;

    fn op_names(&self) -> &[&'static str] {
        match self.test {
            NetTest::Rr => &["rr"],
            NetTest::Crr => &["crr"],
            NetTest::Stream => &["stream"],
            NetTest::Maerts => &["maerts"],
        }
    }

    async fn open_session(&self, _user: u32, _seed: u64, seat: Seat) -> anyhow::Result<NetSession> {
        let (out, reply, moved) = match self.test {
            NetTest::Rr => (
                vec![0u8; self.request],
                self.response,
                self.request + self.response,
            ),
            NetTest::Crr => {
                let mut out = Vec::with_capacity(self.hello.len() + self.request);
                out.extend_from_slice(&self.hello);
                out.resize(self.hello.len() + self.request, 0);
                (out, self.response, self.request + self.response)
            }
            NetTest::Stream => (vec![0u8; self.message], 0, self.message),
            NetTest::Maerts => (Vec::new(), self.message, self.message),
        };
        let mut session = NetSession {
            address: self.address,
            test: self.test,
            stream: None,
            hello: self.hello.clone(),
            out,
            input: vec![0u8; reply.clamp(1, CHUNK)],
            reply,
            moved: moved as u64,
        };
        if self.test != NetTest::Crr {
            tokio::time::timeout(seat.timeout, session.connect())
                .await
                .map_err(|_| {
                    anyhow::anyhow!("connecting to the echo at {} timed out", self.address)
                })?
                .map_err(|kind| {
                    anyhow::anyhow!(
                        "cannot open a connection to the echo at {}: {kind}",
                        self.address
                    )
                })?;
        }
        Ok(session)
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

impl NetSession {
    /// Connects and sends the hello (rr, stream, maerts).
    async fn connect(&mut self) -> Result<(), ErrorKind> {
        let mut stream = TcpStream::connect(self.address)
            .await
            .map_err(|_| ErrorKind::Connect)?;
        let _ = stream.set_nodelay(true);
        stream
            .write_all(&self.hello)
            .await
            .map_err(|e| io_kind(&e))?;
        self.stream = Some(stream);
        Ok(())
    }

    /// One request and its reply on `stream`.
    async fn transact(
        stream: &mut TcpStream,
        out: &[u8],
        input: &mut [u8],
        reply: usize,
    ) -> Result<(), ErrorKind> {
        stream.write_all(out).await.map_err(|e| io_kind(&e))?;
        read_reply(stream, input, reply, true).await
    }

    async fn operate(&mut self) -> Result<(), ErrorKind> {
        if self.test == NetTest::Crr {
            let mut stream = TcpStream::connect(self.address)
                .await
                .map_err(|_| ErrorKind::Connect)?;
            let _ = stream.set_nodelay(true);
            return Self::transact(&mut stream, &self.out, &mut self.input, self.reply).await;
        }
        if self.stream.is_none() {
            self.connect().await?;
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(ErrorKind::Connect);
        };
        match self.test {
            NetTest::Rr => Self::transact(stream, &self.out, &mut self.input, self.reply).await,
            NetTest::Stream => stream.write_all(&self.out).await.map_err(|e| io_kind(&e)),
            // Bulk is not looked at: a source writes zeros, and reading
            // is what is measured.
            _ => read_reply(stream, &mut self.input, self.reply, false).await,
        }
    }
}

impl Session for NetSession {
    fn choose(&mut self) -> usize {
        0
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        match self.operate().await {
            Ok(()) => Outcome {
                bytes: self.moved,
                ..Outcome::ok()
            },
            Err(kind) => {
                // What is left of a failed exchange is not to be read as
                // the next one's: connect again.
                self.stream = None;
                Outcome::error(kind)
            }
        }
    }
}

/// Reads `size` bytes through `input`; with `check`, each read must be
/// zero bytes.
async fn read_reply(
    stream: &mut TcpStream,
    input: &mut [u8],
    size: usize,
    check: bool,
) -> Result<(), ErrorKind> {
    let mut got = 0;
    while got < size {
        let want = (size - got).min(input.len());
        let n = stream
            .read(&mut input[..want])
            .await
            .map_err(|e| io_kind(&e))?;
        if n == 0 {
            return Err(ErrorKind::Reset);
        }
        if check && input[..n].iter().any(|b| *b != 0) {
            // A reply's first bytes `ERR ` are the echo refusing the
            // connection (it is full): not a reply gone wrong.
            let refused = got == 0 && input[..n].starts_with(&b"ERR "[..n.min(4)]);
            return Err(if refused {
                ErrorKind::Connect
            } else {
                ErrorKind::Corrupt
            });
        }
        got += n;
    }
    Ok(())
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

/// One request/response transaction with the echo before the run, in
/// blocking I/O with deadlines: a wrong ticket, a peer that is no echo,
/// one that never answers or closes mid-reply is found here and said in
/// one line (what the echo answered, when it said why).
pub(crate) fn probe(address: SocketAddr, ticket: &str) -> Result<(), String> {
    use crate::wire::echo::{Hello, Mode};
    // The probe is one small transaction whatever the test.
    let mut bytes = Hello {
        mode: Mode::RequestResponse,
        request: 1,
        response: 1,
    }
    .encode(ticket);
    bytes.push(0);
    let mut stream = std::net::TcpStream::connect_timeout(&address, PROBE_DEADLINE)
        .map_err(|e| format!("cannot be reached: {e}"))?;
    stream
        .set_read_timeout(Some(PROBE_DEADLINE))
        .and_then(|()| stream.set_write_timeout(Some(PROBE_DEADLINE)))
        .map_err(|e| format!("cannot be given a deadline: {e}"))?;
    stream
        .write_all(&bytes)
        .map_err(|e| format!("refused a request: {e}"))?;
    // A reply is one zero byte; a refusal is one line of at most a few
    // hundred bytes, then the close.
    let mut first = [0u8; 1];
    match stream.read(&mut first) {
        Ok(1) if first[0] == 0 => return Ok(()),
        Ok(1) => {}
        Ok(_) => return Err("closed the connection before answering".to_string()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Err(format!(
                "did not answer a request within {}s",
                PROBE_DEADLINE.as_secs()
            ))
        }
        Err(e) => return Err(format!("broke off: {e}")),
    }
    let mut answer = first.to_vec();
    let _ = (&mut stream).take(511).read_to_end(&mut answer);
    match answer.strip_prefix(b"ERR ") {
        Some(why) => Err(format!(
            "refused: {}",
            crate::util::one_line(&String::from_utf8_lossy(why))
        )),
        None => Err(format!(
            "answered with what is not an echo's reply ({:?}…)",
            crate::util::one_line(&String::from_utf8_lossy(&answer[..answer.len().min(24)]))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::counting_alloc::allocations;
    use crate::wire::echo::{Hello, Mode};

    /// A peer that answers each 1-byte request with one zero byte.
    fn echo_peer() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let mut head = [0u8; crate::wire::echo::HELLO_HEAD + 1];
            s.read_exact(&mut head).unwrap();
            let mut byte = [0u8; 1];
            while s.read_exact(&mut byte).is_ok() {
                if s.write_all(&[0]).is_err() {
                    return;
                }
            }
        });
        addr
    }

    #[test]
    fn a_request_response_transaction_allocates_nothing() {
        let addr = echo_peer();
        let spec = NetSpec {
            target: crate::sut::Target::InProcess,
            test: NetTest::Rr,
            request_size: 1,
            response_size: 1,
            message_size: 1,
        };
        let hello = Hello {
            mode: Mode::RequestResponse,
            request: 1,
            response: 1,
        }
        .encode("t");
        let workload = NetWorkload::new(addr, hello, &spec);
        let rt = crate::util::test_runtime();
        rt.block_on(async {
            let mut session = workload
                .open_session(0, 0, Seat::alone(Duration::from_secs(5)))
                .await
                .unwrap();
            for _ in 0..100 {
                assert_eq!(
                    session.execute(0).await,
                    Outcome {
                        bytes: 2,
                        ..Outcome::ok()
                    }
                );
            }
            // Unconstrained: a loaded machine answers many reads at once,
            // and tokio's cooperative budget then yields the task through
            // its own deferred-waker list, which may grow: the scheduler's
            // allocation, not the session's.
            let (before, after) = tokio::task::unconstrained(async {
                let before = allocations();
                for _ in 0..2_000 {
                    let o = session.execute(0).await;
                    assert_eq!(o.result, crate::measure::OpResult::Ok);
                }
                (before, allocations())
            })
            .await;
            let per_transaction = (after - before) as f64 / 2_000.0;
            assert_eq!(per_transaction, 0.0, "allocations per transaction");
        });
    }
}
