//! A MySQL/MariaDB session that owns its socket: the bank's hot path, and
//! (in `text`) the text protocol for everything else: loading and checking
//! the bank, statistics, settings.
//!
//! - **Statements** are prepared once per connection (COM_STMT_PREPARE).
//!   Each one's COM_STMT_EXECUTE packet is encoded once as a template whose
//!   BIGINT parameters are patched in place; BEGIN, COMMIT and ROLLBACK are
//!   COM_QUERY packets made once.
//! - **Replies** are read whole into one buffer, then reduced to what a
//!   transaction needs: the affected rows, the rows returned, or the error
//!   code. No row is built and nothing is allocated per statement.
//! - **Startup**: `mysql_native_password`, and `caching_sha2_password` when
//!   the server has the user cached (its fast path); anything else, or TLS,
//!   is refused in one line.
//! - **Faults**: a packet over 1 MiB, a reply cut short or one that makes
//!   no sense ends the connection (`Lost`), never the process. A reply is
//!   consumed only once whole, so an exchange abandoned at its timeout is
//!   settled (its reply read and dropped) before the next; a write cut
//!   short marks the connection broken.
//!
use super::MyTarget;
use crate::error::PlanError;
use crate::sut::stream::Stream;
use bytes::{Buf, BytesMut};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use std::io;
use std::time::Duration;

mod text;

pub(crate) use text::Row;

/// The longest reply accepted (one packet or a whole result).
const MAX_REPLY: usize = 1 << 20;

// Capability flags of the client/server protocol.
const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_CONNECT_WITH_DB: u32 = 8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;
/// utf8mb4_general_ci.
const CHARSET: u8 = 45;

const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const MYSQL_TYPE_LONGLONG: u8 = 8;

/// Why an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MyError {
    /// The server's error code (1213 deadlock, 1205 lock wait timeout, …).
    Server(u16),
    /// The connection is gone or lost its place.
    Lost,
    /// A held connection's operation passed its deadline waiting for a
    /// reply; the reply still owed is read and dropped before the next
    /// exchange.
    TimedOut,
}

impl std::fmt::Display for MyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MyError::Server(code) => write!(f, "server error {code}"),
            MyError::Lost => f.write_str("connection lost"),
            MyError::TimedOut => f.write_str("no reply within the timeout"),
        }
    }
}

/// What a statement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reply {
    /// Rows an UPDATE or INSERT changed.
    pub(crate) affected: u64,
    /// Rows a SELECT returned.
    pub(crate) rows: u64,
}

/// A command ready to send: its whole packet, and where each BIGINT
/// parameter's 8 bytes go in it.
pub(crate) struct Command {
    packet: Vec<u8>,
    params: Vec<usize>,
}

impl Command {
    /// A text query (BEGIN, COMMIT, ROLLBACK).
    pub(crate) fn query(sql: &str) -> Command {
        let mut payload = vec![COM_QUERY];
        payload.extend_from_slice(sql.as_bytes());
        Command {
            packet: packet(0, &payload),
            params: Vec::new(),
        }
    }

    /// The execution of prepared statement `id` with `params` BIGINTs.
    fn execute(id: u32, params: usize) -> Command {
        let mut payload = vec![COM_STMT_EXECUTE];
        payload.extend_from_slice(&id.to_le_bytes());
        // No cursor, one iteration.
        payload.push(0);
        payload.extend_from_slice(&1u32.to_le_bytes());
        let mut offsets = Vec::with_capacity(params);
        if params > 0 {
            // No NULLs; the types follow.
            payload.extend(std::iter::repeat_n(0u8, params.div_ceil(8)));
            payload.push(1);
            for _ in 0..params {
                payload.extend_from_slice(&[MYSQL_TYPE_LONGLONG, 0]);
            }
            for _ in 0..params {
                offsets.push(4 + payload.len());
                payload.extend_from_slice(&[0; 8]);
            }
        }
        Command {
            packet: packet(0, &payload),
            params: offsets,
        }
    }

    #[cfg(test)]
    /// How many parameters it takes.
    pub(crate) fn arity(&self) -> usize {
        self.params.len()
    }
}

/// A packet: its payload's length (3 bytes), its sequence number, the payload.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&len.to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

/// One connection, owned by one user.
pub(crate) struct MyWire {
    stream: Stream,
    read: BytesMut,
    write: Vec<u8>,
    /// Commands sent whose reply has not been consumed.
    owed: u32,
    /// A write was cut short or a reply made no sense: the stream has lost
    /// its place and the connection cannot be used again.
    broken: bool,
    /// The server ends result sets with an OK packet, not an EOF one.
    deprecate_eof: bool,
    /// user@host:port/db, for the text protocol's messages.
    display: String,
    /// How long one text-protocol query may take.
    query_timeout: Duration,
}

impl MyWire {
    /// Connects, authenticates and selects the URL's database, within the
    /// handshake deadline.
    pub(crate) async fn connect(target: &MyTarget) -> Result<MyWire, PlanError> {
        tokio::time::timeout(super::super::HANDSHAKE, Self::handshake(target))
            .await
            .map_err(|_| super::super::silent_peer("MySQL/MariaDB", &target.display))?
    }

    /// The connection phase: the server's greeting, perflab's reply with
    /// its capabilities and credentials, then the server's verdict.
    async fn handshake(target: &MyTarget) -> Result<MyWire, PlanError> {
        let mut wire = Self::open(target).await?;
        let lost = |e: io::Error| super::unreachable(target, &e);
        let (seq, greeting) = wire.packet().await.map_err(lost)?;
        if greeting.first() == Some(&0xFF) {
            return Err(server_refusal(target, &greeting));
        }
        let hello = Greeting::parse(&greeting).ok_or_else(|| protocol(target))?;
        let caps = capabilities(target, &hello)?;
        wire.deprecate_eof = caps & CLIENT_DEPRECATE_EOF != 0;
        let password = target.opts.password.as_deref().unwrap_or("").as_bytes();
        let plugin = hello.plugin.as_str();
        let token = auth_token(plugin, password, &hello.scramble)
            .ok_or_else(|| unsupported_plugin(target, plugin))?;
        let response = handshake_response(target, caps, plugin, &token);
        wire.send_packet(seq.wrapping_add(1), &response)
            .await
            .map_err(lost)?;
        wire.authenticate(target, plugin, password).await?;
        Ok(wire)
    }

    /// The connection, over the URL's Unix socket or TCP (never TLS).
    async fn open(target: &MyTarget) -> Result<MyWire, PlanError> {
        let opts = &target.opts;
        if opts.tls {
            return Err(PlanError::new(format!(
                "{} asks for TLS; perflab speaks to MariaDB/MySQL without it: drop the ssl options from the URL",
                target.display
            )));
        }
        let opened = match &opts.socket {
            Some(path) => Stream::unix(std::path::Path::new(path)).await,
            None => Stream::tcp(&opts.host, opts.port).await,
        };
        let stream = opened.map_err(|e| super::unreachable(target, &e))?;
        Ok(MyWire {
            stream,
            read: BytesMut::with_capacity(8192),
            write: Vec::with_capacity(256),
            owed: 0,
            broken: false,
            deprecate_eof: false,
            display: target.display.clone(),
            query_timeout: super::BANK_QUERY,
        })
    }

    /// Reads the server's replies to the credentials until it accepts
    /// them: a switch to another method answered with a new token, a
    /// fast-auth step passed over, a refusal said in one line.
    async fn authenticate(
        &mut self,
        target: &MyTarget,
        plugin: &str,
        password: &[u8],
    ) -> Result<(), PlanError> {
        let lost = |e: io::Error| super::unreachable(target, &e);
        let mut plugin = plugin.to_string();
        loop {
            let (seq, reply) = self.packet().await.map_err(lost)?;
            match reply.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(server_refusal(target, &reply)),
                // Switch to another method, with a new scramble.
                Some(0xFE) => {
                    let rest = &reply[1..];
                    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                    plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
                    let scramble = rest.get(end + 1..).unwrap_or_default();
                    let scramble = scramble.strip_suffix(&[0]).unwrap_or(scramble);
                    let token = auth_token(&plugin, password, scramble)
                        .ok_or_else(|| unsupported_plugin(target, &plugin))?;
                    self.send_packet(seq.wrapping_add(1), &token)
                        .await
                        .map_err(lost)?;
                }
                // caching_sha2_password: 3 is "accepted from cache", the OK
                // follows; 4 asks for the password in full, which needs TLS
                // or the server's RSA key.
                Some(0x01) if plugin == "caching_sha2_password" && reply.get(1) == Some(&3) => {}
                Some(0x01) if plugin == "caching_sha2_password" => {
                    return Err(PlanError::new(format!(
                        "{} wants the password in full (caching_sha2_password without a cached entry), which needs TLS; log in once with the mysql client to cache it, or give the user mysql_native_password",
                        target.display
                    )));
                }
                _ => return Err(protocol(target)),
            }
        }
    }

    /// Prepares `sql` (its parameters all BIGINT) and returns the command
    /// that executes it.
    pub(crate) async fn prepare(
        &mut self,
        target: &MyTarget,
        sql: &str,
    ) -> anyhow::Result<Command> {
        let mut payload = vec![COM_STMT_PREPARE];
        payload.extend_from_slice(sql.as_bytes());
        let lost = |e: io::Error| super::unreachable(target, &e);
        self.send_packet(0, &payload).await.map_err(lost)?;
        let (_, ok) = self.packet().await.map_err(lost)?;
        if ok.first() == Some(&0xFF) {
            anyhow::bail!(server_refusal(target, &ok));
        }
        let field = |at: usize, len: usize| ok.get(at..at + len).ok_or_else(|| protocol(target));
        if ok.first() != Some(&0x00) {
            anyhow::bail!(protocol(target));
        }
        let id = u32::from_le_bytes(field(1, 4)?.try_into()?);
        let columns = u16::from_le_bytes(field(5, 2)?.try_into()?);
        let params = u16::from_le_bytes(field(7, 2)?.try_into()?);
        // Each group of definitions ends with an EOF packet unless the
        // server was told not to send one.
        for count in [params, columns] {
            let ending = usize::from(count > 0 && !self.deprecate_eof);
            for _ in 0..usize::from(count) + ending {
                self.packet().await.map_err(lost)?;
            }
        }
        Ok(Command::execute(id, usize::from(params)))
    }

    /// Sends `command` with `params` and reads its reply. An exchange a
    /// caller abandoned is settled first.
    pub(crate) async fn run(
        &mut self,
        command: &Command,
        params: &[i64],
    ) -> Result<Reply, MyError> {
        if self.broken {
            return Err(MyError::Lost);
        }
        while self.owed > 0 {
            // The reply of an exchange whose caller went away: dropped.
            let _dropped = self.reply().await?;
        }
        self.write.clear();
        self.write.extend_from_slice(&command.packet);
        for (&at, value) in command.params.iter().zip(params) {
            self.write[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        // Broken until the whole packet is written: a write cut short
        // (its caller gone at a timeout) leaves the stream mid-packet.
        self.broken = true;
        if self.stream.write_all(&self.write).await.is_err() {
            return Err(MyError::Lost);
        }
        self.broken = false;
        self.owed += 1;
        self.reply().await?.map_err(MyError::Server)
    }

    /// Holds the connection: its socket is read and written with blocking
    /// calls, each operation allowed `timeout` (for a user alone on its
    /// worker thread; see `sut::stream`).
    pub(crate) fn hold(self, timeout: std::time::Duration) -> io::Result<MyWire> {
        Ok(MyWire {
            stream: self.stream.hold(timeout)?,
            ..self
        })
    }

    /// An operation starts (a held connection's deadline runs from now).
    pub(crate) fn begin_operation(&mut self) {
        self.stream.begin_operation();
    }

    /// True when the connection cannot be used again.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// The next whole reply, consumed only once all of it has arrived.
    async fn reply(&mut self) -> Result<Result<Reply, u16>, MyError> {
        loop {
            match scan(&self.read, self.deprecate_eof) {
                Ok(Some((len, reply))) => {
                    self.read.advance(len);
                    self.owed -= 1;
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(_) => {
                    self.broken = true;
                    return Err(MyError::Lost);
                }
            }
            match self.stream.read_buf(&mut self.read).await {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(MyError::TimedOut),
                _ => {
                    self.broken = true;
                    return Err(MyError::Lost);
                }
            }
        }
    }

    async fn send_packet(&mut self, seq: u8, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&packet(seq, payload)).await
    }

    /// The next packet, read on its own (startup and prepare only).
    async fn packet(&mut self) -> io::Result<(u8, Vec<u8>)> {
        loop {
            if let Some((start, end)) = packet_at(&self.read, 0)? {
                let seq = self.read[3];
                let payload = self.read[start..end].to_vec();
                self.read.advance(end);
                return Ok((seq, payload));
            }
            if self.stream.read_buf(&mut self.read).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// The payload's bounds of the packet at `at` in `buf`; none until it has
/// all arrived.
fn packet_at(buf: &[u8], at: usize) -> io::Result<Option<(usize, usize)>> {
    let Some(header) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if at + 4 + len > MAX_REPLY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a reply of {} bytes", at + 4 + len),
        ));
    }
    Ok((buf.len() >= at + 4 + len).then_some((at + 4, at + 4 + len)))
}

/// The length of the whole reply at the front of `buf` and what it says
/// (what the statement did, or the server's error code); none until all of
/// it has arrived.
fn scan(buf: &[u8], deprecate_eof: bool) -> io::Result<Option<(usize, Result<Reply, u16>)>> {
    let nonsense = || io::Error::new(io::ErrorKind::InvalidData, "a reply out of protocol");
    let Some((start, end)) = packet_at(buf, 0)? else {
        return Ok(None);
    };
    let first = &buf[start..end];
    match first.first() {
        Some(0x00) => {
            let (affected, _) = lenenc(&first[1..]).ok_or_else(nonsense)?;
            return Ok(Some((end, Ok(Reply { affected, rows: 0 }))));
        }
        Some(0xFF) => return Ok(Some((end, Err(error_code(first).ok_or_else(nonsense)?)))),
        // LOCAL INFILE requests, and empty packets, are no answer here.
        Some(0xFB) | None => return Err(nonsense()),
        Some(_) => {}
    }
    // A result set: its column count, the column definitions (and an EOF
    // packet), rows, and an EOF or OK packet (header 0xFE) at the end; a
    // binary row begins with 0x00.
    let (columns, _) = lenenc(first).ok_or_else(nonsense)?;
    let mut at = end;
    // A count no reply of at most MAX_REPLY bytes can hold is refused
    // rather than added to.
    let definitions = columns
        .checked_add(u64::from(!deprecate_eof))
        .ok_or_else(nonsense)?;
    for _ in 0..definitions {
        let Some((_, end)) = packet_at(buf, at)? else {
            return Ok(None);
        };
        at = end;
    }
    let mut rows = 0;
    loop {
        let Some((start, end)) = packet_at(buf, at)? else {
            return Ok(None);
        };
        match buf[start..end].first() {
            Some(0xFE) => return Ok(Some((end, Ok(Reply { affected: 0, rows })))),
            Some(0xFF) => {
                let code = error_code(&buf[start..end]).ok_or_else(nonsense)?;
                return Ok(Some((end, Err(code))));
            }
            Some(_) => rows += 1,
            None => return Err(nonsense()),
        }
        at = end;
    }
}

/// A length-encoded integer and the bytes it took.
fn lenenc(b: &[u8]) -> Option<(u64, usize)> {
    let wide = |n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(b.get(1..1 + n)?);
        Some((u64::from_le_bytes(v), 1 + n))
    };
    match *b.first()? {
        n @ 0..=0xFA => Some((u64::from(n), 1)),
        0xFC => wide(2),
        0xFD => wide(3),
        0xFE => wide(8),
        _ => None,
    }
}

/// The code of an ERR packet.
fn error_code(payload: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(payload.get(1..3)?.try_into().ok()?))
}

/// The message of an ERR packet (after the `#` and SQLSTATE, when present).
fn error_message(payload: &[u8]) -> String {
    let rest = payload.get(3..).unwrap_or_default();
    let rest = match rest.first() {
        Some(b'#') => rest.get(6..).unwrap_or_default(),
        _ => rest,
    };
    String::from_utf8_lossy(rest).into_owned()
}

/// What the server says in its first packet.
struct Greeting {
    capabilities: u32,
    scramble: Vec<u8>,
    plugin: String,
}

impl Greeting {
    fn parse(p: &[u8]) -> Option<Greeting> {
        if *p.first()? != 10 {
            return None;
        }
        let version_end = 1 + p.get(1..)?.iter().position(|&b| b == 0)?;
        let mut at = version_end + 1 + 4;
        let mut scramble = p.get(at..at + 8)?.to_vec();
        at += 8 + 1;
        let low = u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?);
        at += 2;
        let Some(rest) = p.get(at..).filter(|r| r.len() >= 16) else {
            return Some(Greeting {
                capabilities: u32::from(low),
                scramble,
                plugin: "mysql_native_password".to_string(),
            });
        };
        let high = u16::from_le_bytes(rest[3..5].try_into().ok()?);
        let capabilities = u32::from(low) | u32::from(high) << 16;
        let auth_len = usize::from(rest[5]);
        at += 16;
        if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let len = auth_len.saturating_sub(8).max(13);
            let part = p.get(at..at + len)?;
            scramble.extend_from_slice(part.strip_suffix(&[0]).unwrap_or(part));
            at += len;
        }
        let plugin = match p.get(at..) {
            Some(name) if capabilities & CLIENT_PLUGIN_AUTH != 0 => {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            }
            _ => "mysql_native_password".to_string(),
        };
        Some(Greeting {
            capabilities,
            scramble,
            plugin,
        })
    }
}

/// The answer to a scramble for `plugin`; none for a method not spoken here.
fn auth_token(plugin: &str, password: &[u8], scramble: &[u8]) -> Option<Vec<u8>> {
    if password.is_empty() {
        return Some(Vec::new());
    }
    match plugin {
        // SHA1(password) XOR SHA1(scramble, SHA1(SHA1(password))).
        "mysql_native_password" => {
            let once = Sha1::digest(password);
            let twice = Sha1::digest(once);
            let mixed = Sha1::new()
                .chain_update(scramble)
                .chain_update(twice)
                .finalize();
            Some(once.iter().zip(mixed).map(|(a, b)| a ^ b).collect())
        }
        // SHA256(password) XOR SHA256(SHA256(SHA256(password)), scramble).
        "caching_sha2_password" => {
            let once = Sha256::digest(password);
            let twice = Sha256::digest(once);
            let mixed = Sha256::new()
                .chain_update(twice)
                .chain_update(scramble)
                .finalize();
            Some(once.iter().zip(mixed).map(|(a, b)| a ^ b).collect())
        }
        _ => None,
    }
}

/// The capabilities perflab asks for that the server offers; an old
/// server without the 4.1 protocol and its secure authentication is
/// refused.
fn capabilities(target: &MyTarget, hello: &Greeting) -> Result<u32, PlanError> {
    let mut caps = CLIENT_LONG_PASSWORD
        | CLIENT_PROTOCOL_41
        | CLIENT_TRANSACTIONS
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_DEPRECATE_EOF;
    if target.opts.db.is_some() {
        caps |= CLIENT_CONNECT_WITH_DB;
    }
    caps &= hello.capabilities;
    if caps & CLIENT_PROTOCOL_41 == 0 || caps & CLIENT_SECURE_CONNECTION == 0 {
        return Err(protocol(target));
    }
    Ok(caps)
}

/// The handshake response: capabilities, packet size, character set,
/// user, the authentication token, the database and the method.
fn handshake_response(target: &MyTarget, caps: u32, plugin: &str, token: &[u8]) -> Vec<u8> {
    let opts = &target.opts;
    let mut response = Vec::with_capacity(128);
    response.extend_from_slice(&caps.to_le_bytes());
    response.extend_from_slice(&(16u32 << 20).to_le_bytes());
    response.push(CHARSET);
    response.extend_from_slice(&[0; 23]);
    response.extend_from_slice(opts.user.as_deref().unwrap_or("").as_bytes());
    response.push(0);
    response.push(token.len() as u8);
    response.extend_from_slice(token);
    if let Some(db) = opts
        .db
        .as_ref()
        .filter(|_| caps & CLIENT_CONNECT_WITH_DB != 0)
    {
        response.extend_from_slice(db.as_bytes());
        response.push(0);
    }
    if caps & CLIENT_PLUGIN_AUTH != 0 {
        response.extend_from_slice(plugin.as_bytes());
        response.push(0);
    }
    response
}

fn server_refusal(target: &MyTarget, payload: &[u8]) -> PlanError {
    super::refusal(
        target,
        error_code(payload).unwrap_or(0),
        &error_message(payload),
    )
}

fn unsupported_plugin(target: &MyTarget, plugin: &str) -> PlanError {
    PlanError::new(format!(
        "{} asks to log in with {plugin}, which perflab's MariaDB/MySQL session does not speak; give the user mysql_native_password (ALTER USER … IDENTIFIED WITH mysql_native_password BY '…')",
        target.display
    ))
}

fn protocol(target: &MyTarget) -> PlanError {
    PlanError::new(format!(
        "{} answered the MySQL handshake with nonsense; is it a MySQL or MariaDB server?",
        target.display
    ))
}

#[cfg(test)]
mod tests;
