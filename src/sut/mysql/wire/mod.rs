//! A MySQL/MariaDB session that owns its socket: the hot path of the bank
//! and of a user's scripts, and (in `text`) the text protocol for
//! everything else: loading and checking the bank, statistics, settings.
//!
//! - **Statements** are prepared once per connection (COM_STMT_PREPARE).
//!   Each one's COM_STMT_EXECUTE packet is encoded once as a template whose
//!   BIGINT parameters are patched in place; BEGIN, COMMIT and ROLLBACK are
//!   COM_QUERY packets made once. A script's statement is a text query
//!   written into the connection's own buffer, its first row kept when
//!   asked (`\gset`); it is prepared only to be checked and described.
//! - **Replies** are read whole into one buffer, then reduced to what a
//!   transaction needs: the affected rows, the rows returned, or the error
//!   code. No row is built and nothing is allocated per statement.
//! - **Startup** (in `startup`): `mysql_native_password`, and
//!   `caching_sha2_password` when the server has the user cached (its fast
//!   path); anything else, or TLS, is refused in one line.
//! - **Faults**: a reply over 1 MiB (16 MiB for a script's; `TooLarge`),
//!   a reply cut short or one that makes no sense (a packet out of
//!   sequence among them) ends the connection (`Lost`), never the
//!   process; bytes past the last reply owed, sent unasked, leave the
//!   exchange answered and the next one lost. A reply is
//!   consumed only once whole, so an exchange abandoned at its timeout is
//!   settled (its reply read and dropped) before the next; a write cut
//!   short marks the connection broken.
//!
use super::MyTarget;
use crate::error::PlanError;
use crate::sut::stream::Stream;
use bytes::{Buf, BytesMut};
use std::io;
use std::time::Duration;

mod startup;
mod text;

pub(crate) use text::Row;

/// The longest reply accepted on the bank's path (one packet or a whole
/// result).
const MAX_REPLY: usize = 1 << 20;
/// The longest reply a script's statement may have: a user's query can
/// return many rows, and its whole reply is held until it has all come.
pub(crate) const MAX_SCRIPT_REPLY: usize = 16 << 20;

const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_CLOSE: u8 = 0x19;
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
    /// A reply longer than the connection accepts; the connection is
    /// dropped unread.
    TooLarge,
    /// A statement longer than one packet holds; nothing was sent.
    TooLong,
}

impl std::fmt::Display for MyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MyError::Server(code) => write!(f, "server error {code}"),
            MyError::Lost => f.write_str("connection lost"),
            MyError::TimedOut => f.write_str("no reply within the timeout"),
            MyError::TooLarge => f.write_str("a reply over the most perflab holds"),
            MyError::TooLong => f.write_str("a statement over one packet"),
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

/// A statement the server prepared.
struct Prepared {
    id: u32,
    params: usize,
    columns: Vec<String>,
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
    /// The longest reply a hot-path exchange accepts.
    reply_limit: usize,
}

impl MyWire {
    /// Connects, authenticates and selects the URL's database, within the
    /// handshake deadline.
    pub(crate) async fn connect(target: &MyTarget) -> Result<MyWire, PlanError> {
        tokio::time::timeout(super::super::HANDSHAKE, Self::handshake(target))
            .await
            .map_err(|_| super::super::silent_peer("MySQL/MariaDB", &target.display))?
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
            reply_limit: MAX_REPLY,
        })
    }

    /// Prepares `sql` (its parameters all BIGINT) and returns the command
    /// that executes it.
    pub(crate) async fn prepare(
        &mut self,
        target: &MyTarget,
        sql: &str,
    ) -> anyhow::Result<Command> {
        match self.prepare_statement(target, sql).await? {
            Ok(prepared) => Ok(Command::execute(prepared.id, prepared.params)),
            Err((code, message)) => anyhow::bail!(super::refusal(target, code, &message)),
        }
    }

    /// Prepares `sql` to learn the names of the columns it returns, then
    /// closes it: a statement the server refuses is its error's code and
    /// message; a connection lost, an error.
    pub(crate) async fn describe(
        &mut self,
        target: &MyTarget,
        sql: &str,
    ) -> anyhow::Result<Result<Vec<String>, (u16, String)>> {
        let prepared = match self.prepare_statement(target, sql).await? {
            Ok(prepared) => prepared,
            Err(refused) => return Ok(Err(refused)),
        };
        let mut close = vec![COM_STMT_CLOSE];
        close.extend_from_slice(&prepared.id.to_le_bytes());
        // COM_STMT_CLOSE has no reply.
        self.send_packet(0, &close)
            .await
            .map_err(|e| super::unreachable(target, &e))?;
        Ok(Ok(prepared.columns))
    }

    /// COM_STMT_PREPARE: the statement's id, parameters and column names,
    /// or the server's error code and message.
    async fn prepare_statement(
        &mut self,
        target: &MyTarget,
        sql: &str,
    ) -> anyhow::Result<Result<Prepared, (u16, String)>> {
        let mut payload = vec![COM_STMT_PREPARE];
        payload.extend_from_slice(sql.as_bytes());
        let lost = |e: io::Error| super::unreachable(target, &e);
        self.send_packet(0, &payload).await.map_err(lost)?;
        let (_, ok) = self.packet().await.map_err(lost)?;
        if ok.first() == Some(&0xFF) {
            return Ok(Err((error_code(&ok).unwrap_or(0), error_message(&ok))));
        }
        let field = |at: usize, len: usize| ok.get(at..at + len).ok_or_else(|| protocol(target));
        if ok.first() != Some(&0x00) {
            anyhow::bail!(protocol(target));
        }
        let id = u32::from_le_bytes(field(1, 4)?.try_into()?);
        let columns = u16::from_le_bytes(field(5, 2)?.try_into()?);
        let params = u16::from_le_bytes(field(7, 2)?.try_into()?);
        let mut names = Vec::with_capacity(usize::from(columns));
        // Each group of definitions ends with an EOF packet unless the
        // server was told not to send one.
        for (count, keep) in [(params, false), (columns, true)] {
            let ending = usize::from(count > 0 && !self.deprecate_eof);
            for i in 0..usize::from(count) + ending {
                let (_, definition) = self.packet().await.map_err(lost)?;
                if keep && i < usize::from(count) {
                    names.push(text::column_name(&definition).ok_or_else(|| protocol(target))?);
                }
            }
        }
        Ok(Ok(Prepared {
            id,
            params: usize::from(params),
            columns: names,
        }))
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
            let _dropped = self.reply(None).await?;
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
        self.reply(None).await?.map_err(MyError::Server)
    }

    /// Runs `sql` as a text query (COM_QUERY) on the hot path: the packet
    /// is written into the connection's own buffer, and the reply reduced
    /// as [`MyWire::run`]'s is. With `first_row`, the first row's payload
    /// (its values as length-encoded text, see [`row_values`]) is copied
    /// there, or the buffer is left empty when no row came.
    pub(crate) async fn query_keeping(
        &mut self,
        sql: &str,
        first_row: Option<&mut Vec<u8>>,
    ) -> Result<Reply, MyError> {
        if self.broken {
            return Err(MyError::Lost);
        }
        let len = sql.len().saturating_add(1);
        if len >= 0xFF_FFFF {
            return Err(MyError::TooLong);
        }
        while self.owed > 0 {
            let _dropped = self.reply(None).await?;
        }
        self.write.clear();
        self.write
            .extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        self.write.extend_from_slice(&[0, COM_QUERY]);
        self.write.extend_from_slice(sql.as_bytes());
        self.broken = true;
        if self.stream.write_all(&self.write).await.is_err() {
            return Err(MyError::Lost);
        }
        self.broken = false;
        self.owed += 1;
        self.reply(first_row).await?.map_err(MyError::Server)
    }

    /// Accepts replies of up to `limit` bytes on the hot path (a script's
    /// statements: [`MAX_SCRIPT_REPLY`]).
    pub(crate) fn accept_replies(&mut self, limit: usize) {
        self.reply_limit = limit;
    }

    /// The connection with its socket driven as `drive` says (held by a
    /// user alone on its worker thread, or polled by the worker's loop;
    /// see `sut::stream`).
    pub(crate) fn drive(self, drive: crate::sut::stream::Drive) -> io::Result<MyWire> {
        Ok(MyWire {
            stream: self.stream.drive(drive)?,
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

    /// The next whole reply, consumed only once all of it has arrived;
    /// its first row's payload copied into `first_row` when given.
    async fn reply(
        &mut self,
        mut first_row: Option<&mut Vec<u8>>,
    ) -> Result<Result<Reply, u16>, MyError> {
        loop {
            match scan(&self.read, self.deprecate_eof, self.reply_limit) {
                Ok(Some((len, reply))) => {
                    if let Some(row) = first_row.as_deref_mut() {
                        row.clear();
                        if let Some((start, end)) = first_row_at(&self.read[..len]) {
                            row.extend_from_slice(&self.read[start..end]);
                        }
                    }
                    self.read.advance(len);
                    self.owed -= 1;
                    // Bytes past the last reply owed were sent unasked:
                    // the next exchange would read them as its own.
                    if self.owed == 0 && !self.read.is_empty() {
                        self.broken = true;
                    }
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => {
                    self.broken = true;
                    return Err(if e.kind() == io::ErrorKind::InvalidInput {
                        MyError::TooLarge
                    } else {
                        MyError::Lost
                    });
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
            if let Some((start, end)) = packet_at(&self.read, 0, MAX_REPLY)? {
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
/// all arrived. A packet that would take the reply past `limit` bytes is
/// an `InvalidInput` error (a reply out of protocol is `InvalidData`).
fn packet_at(buf: &[u8], at: usize, limit: usize) -> io::Result<Option<(usize, usize)>> {
    let Some(header) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if at + 4 + len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a reply of {} bytes", at + 4 + len),
        ));
    }
    Ok((buf.len() >= at + 4 + len).then_some((at + 4, at + 4 + len)))
}

/// The length of the whole reply at the front of `buf` and what it says
/// (what the statement did, or the server's error code); none until all of
/// it has arrived.
fn scan(
    buf: &[u8],
    deprecate_eof: bool,
    limit: usize,
) -> io::Result<Option<(usize, Result<Reply, u16>)>> {
    let nonsense = || io::Error::new(io::ErrorKind::InvalidData, "a reply out of protocol");
    // Each packet of a reply carries the next sequence number, from 1 (the
    // command was 0): one that does not was sent for another exchange,
    // and the connection has lost its place.
    let mut seq: u8 = 0;
    let mut next = |at: usize| -> io::Result<Option<(usize, usize)>> {
        let Some((start, end)) = packet_at(buf, at, limit)? else {
            return Ok(None);
        };
        seq = seq.wrapping_add(1);
        if buf[start - 1] != seq {
            return Err(nonsense());
        }
        Ok(Some((start, end)))
    };
    let Some((start, end)) = next(0)? else {
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
        let Some((_, end)) = next(at)? else {
            return Ok(None);
        };
        at = end;
    }
    let mut rows = 0;
    loop {
        let Some((start, end)) = next(at)? else {
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

/// The payload's bounds of the first row of a whole result set in
/// `reply` (already checked by [`scan`]); none for an OK or ERR packet or
/// a result without rows.
fn first_row_at(reply: &[u8]) -> Option<(usize, usize)> {
    let (start, end) = packet_at(reply, 0, usize::MAX).ok()??;
    if matches!(reply[start..end].first(), Some(0x00 | 0xFF) | None) {
        return None;
    }
    let (columns, _) = lenenc(&reply[start..end])?;
    let mut at = end;
    // The definitions, and the EOF packet after them when the server
    // sends one (its header 0xFE, under 9 bytes).
    for _ in 0..columns {
        at = packet_at(reply, at, usize::MAX).ok()??.1;
    }
    let (start, end) = packet_at(reply, at, usize::MAX).ok()??;
    let (start, end) = match reply[start..end].first() {
        Some(0xFE) if end - start < 9 => packet_at(reply, end, usize::MAX).ok()??,
        _ => (start, end),
    };
    match reply[start..end].first() {
        Some(0xFE | 0xFF) => None,
        _ => Some((start, end)),
    }
}

/// The values of a text row: each a length-encoded string, or NULL
/// (0xFB); the iteration ends at the first value that does not fit.
pub(crate) fn row_values(payload: &[u8]) -> impl Iterator<Item = Option<&[u8]>> {
    let mut rest = payload;
    std::iter::from_fn(move || {
        if rest.first() == Some(&0xFB) {
            rest = &rest[1..];
            return Some(None);
        }
        let (len, used) = lenenc(rest)?;
        let end = used.checked_add(usize::try_from(len).ok()?)?;
        let value = rest.get(used..end)?;
        rest = &rest[end..];
        Some(Some(value))
    })
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

fn server_refusal(target: &MyTarget, payload: &[u8]) -> PlanError {
    super::refusal(
        target,
        error_code(payload).unwrap_or(0),
        &error_message(payload),
    )
}

fn protocol(target: &MyTarget) -> PlanError {
    PlanError::new(format!(
        "{} answered the MySQL handshake with nonsense; is it a MySQL or MariaDB server?",
        target.display
    ))
}

#[cfg(test)]
mod tests;
