//! The text protocol (COM_QUERY) on perflab's own MySQL/MariaDB session,
//! for everything off the hot path: the bank's schema, loading and check,
//! the server's statistics and settings.
//!
//! A reply is an OK packet (the rows a statement changed), an ERR packet
//! (code, SQLSTATE, message), or a result set: the column count, one
//! definition per column, an EOF packet unless the server agreed to
//! CLIENT_DEPRECATE_EOF, the rows (each value a length-encoded string, or
//! 0xFB for NULL), and an EOF packet (or, with CLIENT_DEPRECATE_EOF, an OK
//! packet with the EOF header 0xFE) at the end. Source: the MySQL client/
//! server protocol's "Text Resultset" and "Protocol::ColumnDefinition41"
//! pages, and MariaDB's "Result Set Packets" page.
//!
//! **Bounds.** A result set is decoded packet by packet as it arrives, and
//! what it takes in memory (its bytes, plus each value's and row's own
//! size) is counted against [`MAX_RESULT`]: past it the query ends in one
//! error and the connection is dropped unread, so a peer cannot make the
//! process grow. Each query is allowed the connection's query timeout; a
//! query cut short leaves the connection broken (it lost its place).

use super::{error_code, lenenc, packet, MyWire, COM_QUERY};
use bytes::Buf;
use std::time::Duration;

/// The most memory one query's result may take (16 MiB).
pub(crate) const MAX_RESULT: usize = 16 << 20;
/// The longest payload of one packet; a longer one continues in the next
/// packet, which perflab neither sends nor reads (it is over
/// [`MAX_RESULT`] anyway).
const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// The most columns a result set may declare (MySQL's limit per table is
/// 4096).
const MAX_COLUMNS: u64 = 4096;
/// COM_QUIT: the session ends.
const COM_QUIT: u8 = 0x01;

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueryError {
    /// The server said no.
    #[error("ERROR {code} ({sqlstate}): {message}")]
    Server {
        code: u16,
        sqlstate: String,
        message: String,
    },
    /// The result would take more than [`MAX_RESULT`].
    #[error("{at} sent a result over {} MiB, the most perflab reads of one query; ask for fewer rows", MAX_RESULT >> 20)]
    TooLarge { at: String },
    /// The statement does not fit in one packet.
    #[error("a statement of {bytes} bytes is over the {} bytes one packet holds; send it in parts", MAX_PAYLOAD - 1)]
    TooLong { bytes: usize },
    /// The server sent what the protocol does not allow here.
    #[error("{at} answered a query out of protocol; is it a MySQL or MariaDB server?")]
    Nonsense { at: String },
    /// The connection closed or failed, or lost its place earlier.
    #[error("the connection to MariaDB/MySQL at {at} was lost ({why}); is the server up?")]
    Lost { at: String, why: String },
    /// No whole reply within the query timeout.
    #[error("{at} did not answer a query within {} s; is the server overloaded or the statement waiting on a lock?", .timeout.as_secs_f64())]
    TimedOut { at: String, timeout: Duration },
}

/// A fault found decoding a reply, before the connection's name is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fault {
    Server {
        code: u16,
        sqlstate: String,
        message: String,
    },
    TooLarge,
    Nonsense,
}

/// One row of a result set: each value as text, or none for NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row(Vec<Option<String>>);

impl Row {
    /// The text of value `i`; none for NULL or a column not there.
    pub(crate) fn text(&self, i: usize) -> Option<&str> {
        self.0.get(i)?.as_deref()
    }

    /// Value `i` parsed as a `T` (a number); none for NULL, a column not
    /// there, or text that is not a `T`.
    pub(crate) fn get<T: std::str::FromStr>(&self, i: usize) -> Option<T> {
        self.text(i)?.parse().ok()
    }
}

/// What a query did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct QueryResult {
    /// Rows an INSERT, UPDATE or DELETE changed (0 for a result set).
    pub(crate) affected: u64,
    /// The result set's column names (none for a statement without one).
    pub(crate) columns: Vec<String>,
    pub(crate) rows: Vec<Row>,
}

/// Where a result set's decoding stands.
#[derive(Debug)]
enum Stage {
    /// Waiting for the first packet.
    Start,
    /// Column definitions still to come.
    Columns {
        left: u64,
    },
    /// The EOF packet after the definitions.
    ColumnsEnd,
    Rows,
}

/// Decodes one reply fed to it a packet at a time, counting what it keeps
/// against a limit.
#[derive(Debug)]
pub(super) struct ResultDecoder {
    deprecate_eof: bool,
    stage: Stage,
    result: QueryResult,
    /// What may still be kept, in bytes.
    room: usize,
}

impl ResultDecoder {
    /// A decoder for a server that did (`deprecate_eof`) or did not agree
    /// to end result sets with an OK packet, keeping at most `limit` bytes.
    pub(super) fn new(deprecate_eof: bool, limit: usize) -> ResultDecoder {
        ResultDecoder {
            deprecate_eof,
            stage: Stage::Start,
            result: QueryResult::default(),
            room: limit,
        }
    }

    /// The longest payload the next packet may have.
    pub(super) fn room(&self) -> usize {
        self.room
    }

    /// Takes `bytes` of the room, or says the result is too large.
    fn take(&mut self, bytes: usize) -> Result<(), Fault> {
        self.room = self.room.checked_sub(bytes).ok_or(Fault::TooLarge)?;
        Ok(())
    }

    /// Feeds the next packet's payload; the result once it is whole.
    pub(super) fn feed(&mut self, payload: &[u8]) -> Result<Option<QueryResult>, Fault> {
        self.take(payload.len())?;
        match self.stage {
            Stage::Start => match payload.first() {
                Some(0x00) => {
                    let (affected, _) = lenenc(&payload[1..]).ok_or(Fault::Nonsense)?;
                    self.result.affected = affected;
                    Ok(Some(std::mem::take(&mut self.result)))
                }
                Some(0xFF) => Err(server_fault(payload)),
                // LOCAL INFILE requests (not asked for), EOF, empty packets.
                Some(0xFB | 0xFE) | None => Err(Fault::Nonsense),
                Some(_) => {
                    let (columns, used) = lenenc(payload).ok_or(Fault::Nonsense)?;
                    if used != payload.len() || columns == 0 || columns > MAX_COLUMNS {
                        return Err(Fault::Nonsense);
                    }
                    self.stage = Stage::Columns { left: columns };
                    Ok(None)
                }
            },
            Stage::Columns { left } => {
                let name = column_name(payload).ok_or(Fault::Nonsense)?;
                self.take(std::mem::size_of::<String>())?;
                self.result.columns.push(name);
                self.stage = match (left - 1, self.deprecate_eof) {
                    (0, true) => Stage::Rows,
                    (0, false) => Stage::ColumnsEnd,
                    (left, _) => Stage::Columns { left },
                };
                Ok(None)
            }
            Stage::ColumnsEnd => {
                if !is_eof(payload) {
                    return Err(Fault::Nonsense);
                }
                self.stage = Stage::Rows;
                Ok(None)
            }
            Stage::Rows => match payload.first() {
                Some(0xFF) => Err(server_fault(payload)),
                // The end: an EOF packet (under 9 bytes), or with
                // CLIENT_DEPRECATE_EOF an OK packet with the EOF header. A
                // row beginning with 0xFE would hold a value of 16 MiB or
                // more, which is refused as too large before it is read.
                Some(0xFE) if is_eof(payload) || self.deprecate_eof => {
                    Ok(Some(std::mem::take(&mut self.result)))
                }
                _ => {
                    let row = self.row(payload)?;
                    self.result.rows.push(row);
                    Ok(None)
                }
            },
        }
    }

    /// A text row: one length-encoded string or NULL per column, and
    /// nothing after.
    fn row(&mut self, mut payload: &[u8]) -> Result<Row, Fault> {
        let columns = self.result.columns.len();
        self.take(std::mem::size_of::<Row>() + columns * std::mem::size_of::<Option<String>>())?;
        let mut values = Vec::with_capacity(columns);
        for _ in 0..columns {
            if payload.first() == Some(&0xFB) {
                values.push(None);
                payload = &payload[1..];
                continue;
            }
            let (text, rest) = lenenc_bytes(payload).ok_or(Fault::Nonsense)?;
            values.push(Some(String::from_utf8_lossy(text).into_owned()));
            payload = rest;
        }
        if !payload.is_empty() {
            return Err(Fault::Nonsense);
        }
        Ok(Row(values))
    }
}

/// An EOF packet: the header 0xFE and under 9 bytes (warnings, status).
fn is_eof(payload: &[u8]) -> bool {
    payload.first() == Some(&0xFE) && payload.len() < 9
}

/// A length-encoded string and what follows it.
fn lenenc_bytes(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, used) = lenenc(b)?;
    let len = usize::try_from(len).ok()?;
    let end = used.checked_add(len)?;
    Some((b.get(used..end)?, b.get(end..)?))
}

/// The name in a column definition (catalog, schema, table, original
/// table, then the name, each a length-encoded string).
pub(super) fn column_name(payload: &[u8]) -> Option<String> {
    let mut rest = payload;
    for _ in 0..4 {
        rest = lenenc_bytes(rest)?.1;
    }
    let (name, _) = lenenc_bytes(rest)?;
    Some(String::from_utf8_lossy(name).into_owned())
}

/// The server's error from an ERR packet: its code, its SQLSTATE (HY000,
/// "general error", when the packet has none) and its message.
fn server_fault(payload: &[u8]) -> Fault {
    let Some(code) = error_code(payload) else {
        return Fault::Nonsense;
    };
    let rest = payload.get(3..).unwrap_or_default();
    let (sqlstate, message) = match rest.split_first() {
        Some((b'#', tail)) if tail.len() >= 5 => (&tail[..5], &tail[5..]),
        _ => (&b"HY000"[..], rest),
    };
    Fault::Server {
        code,
        sqlstate: String::from_utf8_lossy(sqlstate).into_owned(),
        message: String::from_utf8_lossy(message).into_owned(),
    }
}

impl MyWire {
    /// Sets how long each later text-protocol query may take.
    pub(crate) fn set_query_timeout(&mut self, timeout: Duration) {
        self.query_timeout = timeout;
    }

    /// Runs `sql` and returns what it did: the rows it changed, or its
    /// result set.
    pub(crate) async fn query(&mut self, sql: &str) -> Result<QueryResult, QueryError> {
        let timeout = self.query_timeout;
        match tokio::time::timeout(timeout, self.exchange(sql)).await {
            Ok(done) => done,
            Err(_) => {
                // Cut short mid-exchange: the stream has lost its place.
                self.broken = true;
                Err(QueryError::TimedOut {
                    at: self.display.clone(),
                    timeout,
                })
            }
        }
    }

    /// Runs `sql` and returns the rows it changed.
    pub(crate) async fn query_drop(&mut self, sql: &str) -> Result<u64, QueryError> {
        Ok(self.query(sql).await?.affected)
    }

    /// Runs `sql` and returns its rows.
    pub(crate) async fn query_rows(&mut self, sql: &str) -> Result<Vec<Row>, QueryError> {
        Ok(self.query(sql).await?.rows)
    }

    /// Runs `sql` and returns its first row, if any.
    pub(crate) async fn query_first(&mut self, sql: &str) -> Result<Option<Row>, QueryError> {
        Ok(self.query_rows(sql).await?.into_iter().next())
    }

    /// Ends the session politely (COM_QUIT), so the server counts no
    /// aborted client; a failure to say so is of no consequence.
    pub(crate) async fn quit(mut self) {
        if !self.broken && self.owed == 0 {
            let _ = self.stream.write_all(&packet(0, &[COM_QUIT])).await;
        }
    }

    fn lost(&self, why: impl std::fmt::Display) -> QueryError {
        QueryError::Lost {
            at: self.display.clone(),
            why: why.to_string(),
        }
    }

    /// Sends the query and reads its whole reply. The connection is marked
    /// broken until the reply has been read, so one abandoned here is
    /// never reused.
    async fn exchange(&mut self, sql: &str) -> Result<QueryResult, QueryError> {
        if self.broken {
            return Err(self.lost("an earlier exchange was cut short"));
        }
        if sql.len() + 1 >= MAX_PAYLOAD {
            return Err(QueryError::TooLong {
                bytes: sql.len() + 1,
            });
        }
        while self.owed > 0 {
            // A hot-path exchange whose caller went away: its reply dropped.
            if self.reply(None).await.is_err() {
                return Err(self.lost("an earlier exchange was cut short"));
            }
        }
        let mut payload = Vec::with_capacity(1 + sql.len());
        payload.push(COM_QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.broken = true;
        self.stream
            .write_all(&packet(0, &payload))
            .await
            .map_err(|e| self.lost(e))?;
        let mut decoder = ResultDecoder::new(self.deprecate_eof, MAX_RESULT);
        // Each packet of the reply carries the next sequence number, from
        // 1 (the query went as 0): one out of step is not this reply's.
        let mut seq: u8 = 0;
        loop {
            while let Some((start, end)) =
                frame(&self.read, decoder.room()).map_err(|f| self.fault(f))?
            {
                seq = seq.wrapping_add(1);
                if self.read[start - 1] != seq {
                    return Err(self.lost("a reply's packet came out of sequence"));
                }
                let done = decoder
                    .feed(&self.read[start..end])
                    .map_err(|f| self.fault(f));
                self.read.advance(end);
                // The reply ends the exchange: bytes after it were sent
                // unasked and would answer the next query.
                let ends = matches!(done, Ok(Some(_)) | Err(QueryError::Server { .. }));
                if ends && !self.read.is_empty() {
                    return Err(self.lost("it sent bytes no query asked for"));
                }
                match done {
                    Ok(Some(result)) => {
                        self.broken = false;
                        return Ok(result);
                    }
                    Ok(None) => {}
                    // The server's error ends its reply: the connection
                    // goes on.
                    Err(e @ QueryError::Server { .. }) => {
                        self.broken = false;
                        return Err(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            match self.stream.read_buf(&mut self.read).await {
                Ok(0) => return Err(self.lost("it closed mid-reply")),
                Ok(_) => {}
                Err(e) => return Err(self.lost(e)),
            }
        }
    }

    fn fault(&self, fault: Fault) -> QueryError {
        let at = self.display.clone();
        match fault {
            Fault::Server {
                code,
                sqlstate,
                message,
            } => QueryError::Server {
                code,
                sqlstate,
                message,
            },
            Fault::TooLarge => QueryError::TooLarge { at },
            Fault::Nonsense => QueryError::Nonsense { at },
        }
    }
}

/// The payload's bounds of the packet at the front of `buf`, none until it
/// has all arrived; a payload longer than `room` (or continued in another
/// packet) is refused from its header, before it is read.
pub(super) fn frame(buf: &[u8], room: usize) -> Result<Option<(usize, usize)>, Fault> {
    let Some(header) = buf.get(..4) else {
        return Ok(None);
    };
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > room || len == MAX_PAYLOAD {
        return Err(Fault::TooLarge);
    }
    Ok((buf.len() >= 4 + len).then_some((4, 4 + len)))
}

/// A whole reply in `bytes` (packets with their headers) decoded at once;
/// none while it is incomplete.
#[cfg(test)]
pub(super) fn decode(
    bytes: &[u8],
    deprecate_eof: bool,
    limit: usize,
) -> Result<Option<QueryResult>, Fault> {
    let mut decoder = ResultDecoder::new(deprecate_eof, limit);
    let mut at = 0;
    while let Some((start, end)) = frame(&bytes[at..], decoder.room())? {
        if let Some(result) = decoder.feed(&bytes[at + start..at + end])? {
            return Ok(Some(result));
        }
        at += end;
    }
    Ok(None)
}

#[cfg(test)]
impl Row {
    pub(crate) fn of(values: &[Option<&str>]) -> Row {
        Row(values.iter().map(|v| v.map(str::to_string)).collect())
    }
}
