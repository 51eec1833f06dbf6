//! A PostgreSQL connection that owns its socket, for the hot path: no
//! connection task and no channel between a user and the server. It speaks
//! the extended protocol with `postgres-protocol`'s codec: statements are
//! parsed once, each one's Bind and Execute messages are encoded once into
//! a template whose parameters are patched in place, and replies are read
//! for what a transaction needs (a row count, an error's code) without
//! building rows. Statements queue until [`Wire::flush`], so one round trip
//! can carry one statement or a whole pipelined transaction.
//!
//! A future dropped mid-exchange (an operation abandoned at its timeout)
//! leaves the connection usable: replies still owed are read and dropped
//! before the next exchange; a write cut short marks it broken.

use super::PgTarget;
use crate::error::PlanError;
use crate::sut::stream::Stream;
use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::backend::{Header, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use std::io;
use tokio_postgres::config::{Host, SslMode};

mod text;
pub(crate) use text::columns_of;

/// The type of every parameter perflab binds: bigint (`int8`).
const INT8_OID: u32 = 20;
/// The longest reply message accepted; a longer one is a protocol error
/// (no reply to the statements perflab sends comes near it).
const MAX_MESSAGE: usize = 1 << 20;

/// Why an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireError {
    /// The server answered with an error; its SQLSTATE.
    Server(SqlState),
    /// The connection is gone (closed, reset, or a reply that makes no sense).
    Lost,
    /// A held connection's operation passed its deadline waiting for a
    /// reply; the replies still owed are read and dropped before the next
    /// exchange.
    TimedOut,
}

/// A five-character SQLSTATE, kept inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SqlState([u8; 5]);

impl SqlState {
    /// The code as text (`40001`); `?????` if the server sent no ASCII code.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("?????")
    }

    /// A serialisation failure or a deadlock: worth another try.
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(&self.0, b"40001" | b"40P01")
    }

    /// Class 08 (connection exception) or 57P0x (the server is shutting
    /// down or ended this session): the connection is gone.
    pub(crate) fn ends_connection(&self) -> bool {
        self.0.starts_with(b"08") || self.0.starts_with(b"57P0")
    }
}

impl std::fmt::Debug for SqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for SqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A prepared statement's Bind and Execute messages, encoded once, with the
/// offsets of its bigint parameters.
pub(crate) struct Statement {
    template: Box<[u8]>,
    params: Box<[usize]>,
}

impl Statement {
    /// Encodes the Bind (parameters and results in binary) and Execute
    /// messages of the named statement with `params` bigint parameters.
    fn new(name: &str, params: usize) -> io::Result<Statement> {
        let mut template = BytesMut::new();
        frontend::bind(
            "",
            name,
            std::iter::repeat_n(1, params),
            std::iter::repeat_n(0i64, params),
            |v, buf| {
                buf.extend_from_slice(&v.to_be_bytes());
                Ok(IsNull::No)
            },
            Some(1),
            &mut template,
        )
        .map_err(|_| io::Error::other("a statement's name holds a NUL"))?;
        // Bind: tag, length, portal "" and the name (each NUL-ended), the
        // formats (a count and one per parameter), the values' count; then
        // each value is a length and 8 bytes.
        let first = 1 + 4 + 1 + name.len() + 1 + 2 + 2 * params + 2;
        let params = (0..params).map(|i| first + i * 12 + 4).collect();
        frontend::execute("", 0, &mut template)?;
        Ok(Statement {
            template: template.to_vec().into_boxed_slice(),
            params,
        })
    }
}

/// What the statements of one exchange returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reply {
    /// Rows the last statement affected or returned (its command tag's count).
    pub(crate) rows: u64,
    /// Data rows read, when they were asked for ([`Wire::flush_keeping`]).
    pub(crate) data_rows: u64,
}

/// One connection, owned by one user.
pub(crate) struct Wire {
    stream: Stream,
    read: BytesMut,
    write: BytesMut,
    /// Syncs sent whose ReadyForQuery has not been read.
    owed: u32,
    /// A write was cut short or a reply made no sense: the stream has lost
    /// its place and the connection cannot be used again.
    broken: bool,
    /// Exchanges (Syncs sent) so far: the round trips.
    round_trips: u64,
}

impl Wire {
    /// Connects to the target's first reachable host, starts a session and
    /// authenticates (trust, password, MD5 or SCRAM-SHA-256), within the
    /// handshake deadline.
    pub(crate) async fn connect(target: &PgTarget) -> anyhow::Result<Wire> {
        tokio::time::timeout(super::super::HANDSHAKE, Self::handshake(target))
            .await
            .map_err(|_| super::super::silent_peer("PostgreSQL", &target.display))?
    }

    async fn handshake(target: &PgTarget) -> anyhow::Result<Wire> {
        let config = &target.config;
        if config.get_ssl_mode() == SslMode::Require {
            anyhow::bail!(PlanError::new(format!(
                "{} asks for sslmode=require; perflab speaks to PostgreSQL without TLS: drop sslmode from the URL",
                target.display
            )));
        }
        let stream = open_stream(target).await?;
        let mut wire = Wire {
            stream,
            read: BytesMut::with_capacity(8192),
            write: BytesMut::with_capacity(1024),
            owed: 0,
            broken: false,
            round_trips: 0,
        };
        let user = config.get_user().unwrap_or("postgres");
        let mut params = vec![("user", user), ("client_encoding", "UTF8")];
        if let Some(db) = config.get_dbname() {
            params.push(("database", db));
        }
        if let Some(app) = config.get_application_name() {
            params.push(("application_name", app));
        }
        if let Some(options) = config.get_options() {
            params.push(("options", options));
        }
        frontend::startup_message(params, &mut wire.write)?;
        wire.send().await.map_err(|e| lost(target, &e))?;
        wire.authenticate(target, user.as_bytes()).await?;
        // Parameter statuses and the key data, then ready.
        loop {
            match wire.message().await.map_err(|e| lost(target, &e))? {
                Message::ReadyForQuery(_) => return Ok(wire),
                Message::ErrorResponse(body) => {
                    let (code, text) = error_fields(&body);
                    anyhow::bail!(super::refusal(target, Some(code.as_str()), &text, ""));
                }
                _ => {}
            }
        }
    }

    async fn authenticate(&mut self, target: &PgTarget, user: &[u8]) -> anyhow::Result<()> {
        let password = || {
            target.config.get_password().ok_or_else(|| {
                PlanError::new(format!(
                    "PostgreSQL at {} asks for a password; give one in the URL, PGPASSWORD or ~/.pgpass",
                    target.display
                ))
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            let message = self.message().await.map_err(|e| lost(target, &e))?;
            match message {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password()?, &mut self.write)?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let hash = postgres_protocol::authentication::md5_hash(
                        user,
                        password()?,
                        body.salt(),
                    );
                    frontend::password_message(hash.as_bytes(), &mut self.write)?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut mechanisms = body.mechanisms();
                    let mut offered = false;
                    while let Some(m) = mechanisms.next()? {
                        offered |= m == SCRAM_SHA_256;
                    }
                    if !offered {
                        anyhow::bail!(PlanError::new(format!(
                            "PostgreSQL at {} offers no SASL mechanism perflab speaks (SCRAM-SHA-256 without channel binding); allow scram-sha-256 or md5 in pg_hba.conf",
                            target.display
                        )));
                    }
                    let s = ScramSha256::new(password()?, ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.write)?;
                    scram = Some(s);
                }
                Message::AuthenticationSaslContinue(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol(target))?;
                    s.update(body.data()).map_err(|_| protocol(target))?;
                    frontend::sasl_response(s.message(), &mut self.write)?;
                }
                Message::AuthenticationSaslFinal(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol(target))?;
                    s.finish(body.data()).map_err(|_| {
                        PlanError::new(format!(
                            "PostgreSQL at {} could not prove it knows the password (SCRAM); is it the server you meant?",
                            target.display
                        ))
                    })?;
                    continue;
                }
                Message::ErrorResponse(body) => {
                    let (code, text) = error_fields(&body);
                    anyhow::bail!(super::refusal(target, Some(code.as_str()), &text, ""));
                }
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => continue,
                _ => anyhow::bail!(PlanError::new(format!(
                    "PostgreSQL at {} asks for an authentication perflab does not speak (Kerberos, GSS or SSPI); allow scram-sha-256, md5 or password in pg_hba.conf",
                    target.display
                ))),
            }
            self.send().await.map_err(|e| lost(target, &e))?;
        }
    }

    /// Reads the replies owed to statements being prepared, up to the
    /// last ReadyForQuery, within [`crate::sut::LOOK_QUERY`]: the first
    /// error the server gave, and the columns a description named (into
    /// `columns`). A FATAL error ends the session there (the server closes
    /// it next), in the server's words; so does a server, or a pool in
    /// front of it, that answers nothing in time.
    async fn prepared(
        &mut self,
        target: &PgTarget,
        mut columns: Option<&mut Vec<String>>,
    ) -> anyhow::Result<Option<(SqlState, String)>> {
        let replies = async {
            let mut failed = None;
            while self.owed > 0 {
                match self.message().await.map_err(|e| lost(target, &e))? {
                    Message::ErrorResponse(body) => {
                        let (code, text) = error_fields(&body);
                        if is_fatal(&body) {
                            self.broken = true;
                            anyhow::bail!(super::refusal(target, Some(code.as_str()), &text, ""));
                        }
                        failed.get_or_insert((code, text));
                    }
                    Message::RowDescription(body) => {
                        if let Some(columns) = columns.as_deref_mut() {
                            let mut fields = body.fields();
                            while let Some(field) = fields.next().map_err(|_| protocol(target))? {
                                columns.push(field.name().to_string());
                            }
                        }
                    }
                    Message::ReadyForQuery(_) => self.owed -= 1,
                    _ => {}
                }
            }
            Ok(failed)
        };
        match tokio::time::timeout(crate::sut::LOOK_QUERY, replies).await {
            // A statement this new session never prepared already there:
            // the server connection was another session's.
            Ok(Ok(Some((code, text)))) if code.0 == *b"42P05" => {
                Err(super::pool::by_transaction(&target.display, &format!("{code}: {text}")).into())
            }
            Ok(replies) => replies,
            Err(_) => {
                self.broken = true;
                anyhow::bail!(PlanError::new(format!(
                    "{} took the session but {} within {} s: a connection pool in front of the server (pgbouncer in session mode) keeps a session waiting while every server connection it may open is taken, or the server is stalled; give fewer users or raise the pool's size",
                    target.display,
                    super::pool::UNANSWERED,
                    crate::sut::LOOK_QUERY.as_secs()
                )))
            }
        }
    }

    /// Parses `sql` as the named statement, its parameters all bigint, and
    /// encodes its Bind and Execute messages (parameters and results in
    /// binary).
    pub(crate) async fn prepare(
        &mut self,
        target: &PgTarget,
        name: &str,
        sql: &str,
        params: usize,
    ) -> anyhow::Result<Statement> {
        frontend::parse(
            name,
            sql,
            std::iter::repeat_n(INT8_OID, params),
            &mut self.write,
        )?;
        frontend::sync(&mut self.write);
        self.owed += 1;
        self.send().await.map_err(|e| lost(target, &e))?;
        if let Some((code, text)) = self.prepared(target, None).await? {
            anyhow::bail!(PlanError::new(format!(
                "PostgreSQL at {} cannot prepare `{sql}` ({code}: {text})",
                target.display
            )));
        }
        Statement::new(name, params).map_err(|_| protocol(target).into())
    }

    /// Queues a statement with its parameters (as many as it binds).
    pub(crate) fn queue(&mut self, statement: &Statement, params: &[i64]) {
        let base = self.write.len();
        self.write.extend_from_slice(&statement.template);
        for (offset, value) in statement.params.iter().zip(params) {
            let at = base + offset;
            self.write[at..at + 8].copy_from_slice(&value.to_be_bytes());
        }
    }

    /// Sends what is queued with a Sync and reads the replies up to the
    /// server's ReadyForQuery. After an error the server skips the rest of
    /// what was queued; the first error is returned.
    pub(crate) async fn flush(&mut self) -> Result<Reply, WireError> {
        self.flush_keeping(None).await
    }

    /// [`Wire::flush`], keeping the first data row's body in `first_row`
    /// (its columns read by [`columns_of`]) and counting the rows returned
    /// in the reply's `data_rows`.
    pub(crate) async fn flush_keeping(
        &mut self,
        first_row: Option<&mut Vec<u8>>,
    ) -> Result<Reply, WireError> {
        self.exchange(None, first_row).await
    }

    /// Sends `sql` as one simple query (its text whole, no parameters) and
    /// reads its reply as [`Wire::flush_keeping`] does. A NUL in `sql`
    /// would end it early: the caller writes none.
    pub(crate) async fn query_keeping(
        &mut self,
        sql: &str,
        first_row: Option<&mut Vec<u8>>,
    ) -> Result<Reply, WireError> {
        self.exchange(Some(sql), first_row).await
    }

    /// One round trip: what is queued and a Sync, or a simple query.
    async fn exchange(
        &mut self,
        query: Option<&str>,
        mut first_row: Option<&mut Vec<u8>>,
    ) -> Result<Reply, WireError> {
        if self.broken {
            return Err(WireError::Lost);
        }
        self.settle().await?;
        match query {
            None => frontend::sync(&mut self.write),
            Some(sql) => {
                if frontend::query(sql, &mut self.write).is_err() {
                    self.write.clear();
                    return Err(WireError::Server(SqlState(*b"54000")));
                }
            }
        }
        // A server that said more than it was asked is out of step: what
        // it says next answers no exchange of this one's.
        if out_of_step(&self.read) {
            self.broken = true;
            self.write.clear();
            return Err(WireError::Lost);
        }
        self.owed += 1;
        self.round_trips += 1;
        self.broken = true;
        let sent = self.send().await;
        if sent.is_err() {
            return Err(WireError::Lost);
        }
        self.broken = false;
        let mut reply = Reply::default();
        let mut failed = None;
        while self.owed > 0 {
            let frame = match self.frame().await {
                Ok(frame) => frame,
                Err(e) => return Err(self.read_failed(&e)),
            };
            match frame.tag {
                COMMAND_COMPLETE => reply.rows = rows_of(self.body(frame)),
                DATA_ROW if first_row.is_some() => {
                    if reply.data_rows == 0 {
                        if let Some(keep) = first_row.as_deref_mut() {
                            keep.clear();
                            keep.extend_from_slice(self.body(frame));
                        }
                    }
                    reply.data_rows = reply.data_rows.saturating_add(1);
                }
                ERROR_RESPONSE => {
                    // Rare: taken out whole and parsed by the codec.
                    let mut whole = self.read.split_to(frame.len);
                    let code = match Message::parse(&mut whole) {
                        Ok(Some(Message::ErrorResponse(body))) => error_fields(&body).0,
                        _ => SqlState(*b"?????"),
                    };
                    failed.get_or_insert(code);
                    continue;
                }
                READY_FOR_QUERY => self.owed -= 1,
                _ => {}
            }
            self.read.advance(frame.len);
        }
        match failed {
            Some(code) => Err(WireError::Server(code)),
            None => Ok(reply),
        }
    }

    /// Drops what was queued and never sent (by an exchange whose caller
    /// went away before its flush).
    pub(crate) fn discard(&mut self) {
        if !self.broken {
            self.write.clear();
        }
    }

    /// The connection with its socket driven as `drive` says (held by a
    /// user alone on its worker thread, or polled by the worker's loop;
    /// see `sut::stream`).
    pub(crate) fn drive(self, drive: crate::sut::stream::Drive) -> io::Result<Wire> {
        Ok(Wire {
            stream: self.stream.drive(drive)?,
            ..self
        })
    }

    /// An operation starts (a held connection's deadline runs from now).
    pub(crate) fn begin_operation(&mut self) {
        self.stream.begin_operation();
    }

    #[cfg(test)]
    /// Round trips (exchanges) so far on this connection.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// True when the connection cannot be used again.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// Reads and drops the replies of an exchange whose caller went away.
    async fn settle(&mut self) -> Result<(), WireError> {
        while self.owed > 0 {
            match self.frame().await {
                Ok(frame) => {
                    if frame.tag == READY_FOR_QUERY {
                        self.owed -= 1;
                    }
                    self.read.advance(frame.len);
                }
                Err(e) => return Err(self.read_failed(&e)),
            }
        }
        Ok(())
    }

    /// What a failed read means: a held connection's deadline passed (the
    /// connection keeps its place: what is owed is settled later), or the
    /// connection is lost.
    fn read_failed(&mut self, e: &io::Error) -> WireError {
        if e.kind() == io::ErrorKind::TimedOut {
            WireError::TimedOut
        } else {
            self.broken = true;
            WireError::Lost
        }
    }

    async fn send(&mut self) -> io::Result<()> {
        let sent = self.stream.write_all(&self.write).await;
        self.write.clear();
        sent
    }

    /// The next whole message from the server, parsed by the codec (for
    /// the exchanges off the hot path: start-up, authentication, prepare).
    async fn message(&mut self) -> io::Result<Message> {
        self.frame().await?;
        Message::parse(&mut self.read)?.ok_or_else(|| io::ErrorKind::InvalidData.into())
    }

    /// Waits until the read buffer starts with a whole message and returns
    /// its frame; the message stays in the buffer (read in place, then
    /// dropped with `advance(frame.len)`).
    async fn frame(&mut self) -> io::Result<Frame> {
        loop {
            if let Some(header) = Header::parse(&self.read)? {
                let len = usize::try_from(header.len()).unwrap_or(usize::MAX);
                if len > MAX_MESSAGE {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a reply of {len} bytes"),
                    ));
                }
                // The tag byte, then the length, which counts itself.
                let whole = 1 + len;
                if self.read.len() >= whole {
                    return Ok(Frame {
                        tag: header.tag(),
                        len: whole,
                    });
                }
            }
            if self.stream.read_buf(&mut self.read).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// A framed message's body (after its tag and length).
    fn body(&self, frame: Frame) -> &[u8] {
        &self.read[HEADER_LEN..frame.len]
    }
}

/// A whole message at the start of the read buffer.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Its type byte.
    tag: u8,
    /// Its length in the buffer, the type byte included.
    len: usize,
}

/// A message's tag byte and length field.
const HEADER_LEN: usize = 5;
/// The tags the hot path reads in place (PostgreSQL protocol, "Message
/// Formats").
const COMMAND_COMPLETE: u8 = b'C';
const ERROR_RESPONSE: u8 = b'E';
const READY_FOR_QUERY: u8 = b'Z';
const DATA_ROW: u8 = b'D';

/// Whether `read`, what was read beyond the last exchange's
/// ReadyForQuery, holds a whole message no exchange asked for: the
/// messages a server may send unasked (a notice, a parameter's new value,
/// a notification) are passed over; any other — another ReadyForQuery, a
/// row, a command's completion — means the server is out of step, and
/// what it says next answers no exchange of this one's. A message not yet
/// whole says nothing either way.
fn out_of_step(read: &[u8]) -> bool {
    let mut rest = read;
    while let [tag, a, b, c, d, ..] = *rest {
        let len = u32::from_be_bytes([a, b, c, d]) as usize;
        let Some(whole) = len.checked_add(1).filter(|w| *w <= rest.len() && len >= 4) else {
            return false;
        };
        match tag {
            b'N' | b'S' | b'A' => rest = &rest[whole..],
            _ => return true,
        }
    }
    false
}

/// The row count at the end of a CommandComplete body, a command tag
/// ending in NUL (`UPDATE 1`, `INSERT 0 1`, `SELECT 1`); 0 for tags
/// without one (`BEGIN`).
fn rows_of(body: &[u8]) -> u64 {
    let tag = body.strip_suffix(b"\0").unwrap_or(body);
    let digits = tag.rsplit(|&b| b == b' ').next().unwrap_or_default();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    digits
        .iter()
        .try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .unwrap_or(0)
}

/// An error response's SQLSTATE and message.
fn error_fields(
    body: &postgres_protocol::message::backend::ErrorResponseBody,
) -> (SqlState, String) {
    let mut code = SqlState(*b"?????");
    let mut text = String::new();
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        match field.type_() {
            b'C' => {
                if let Ok(c) = <[u8; 5]>::try_from(field.value_bytes()) {
                    code = SqlState(c);
                }
            }
            b'M' => text = String::from_utf8_lossy(field.value_bytes()).into_owned(),
            _ => {}
        }
    }
    (code, text)
}

/// Whether an error response ends the session: severity FATAL or PANIC
/// (the server, or a pool in front of it, closes the connection next).
fn is_fatal(body: &postgres_protocol::message::backend::ErrorResponseBody) -> bool {
    // `V` is never translated; `S` may be, and is all an older server or
    // a pool sends.
    let (mut localized, mut plain) = (None, None);
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        match field.type_() {
            b'V' => {
                plain = Some(field.value_bytes() == b"FATAL" || field.value_bytes() == b"PANIC")
            }
            b'S' => {
                localized = Some(field.value_bytes() == b"FATAL" || field.value_bytes() == b"PANIC")
            }
            _ => {}
        }
    }
    plain.or(localized).unwrap_or(false)
}

/// Connects to the first of the target's hosts that accepts.
async fn open_stream(target: &PgTarget) -> anyhow::Result<Stream> {
    let config = &target.config;
    let ports = config.get_ports();
    let mut last = None;
    for (i, host) in config.get_hosts().iter().enumerate() {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let opened = match host {
            Host::Tcp(name) => Stream::tcp(name, port).await,
            Host::Unix(dir) => Stream::unix(&dir.join(format!(".s.PGSQL.{port}"))).await,
        };
        match opened {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    let cause = last.map(|e| e.to_string()).unwrap_or_default();
    Err(super::refusal(target, None, "", &cause).into())
}

fn lost(target: &PgTarget, e: &io::Error) -> PlanError {
    super::refusal(target, None, "", &e.to_string())
}

fn protocol(target: &PgTarget) -> PlanError {
    PlanError::new(format!(
        "{} answered the PostgreSQL handshake with nonsense; is it a PostgreSQL server?",
        target.display
    ))
}

#[cfg(test)]
mod tests;
