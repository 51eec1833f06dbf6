//! The typed kinds of failed operations, and their one text form.
//!
//! A kind is `Copy` and never allocates, even when it carries a detail (a
//! database's error code, an errno, an HTTP status): a worker records it on
//! the hot path. It becomes text only where it is printed or stored, in the
//! form stores have always held: `timeout`, `connect`, `busy`, `sql:40001`,
//! `reset`, `tls`, `io:EIO`, `http:503`, `corrupt`. [`ErrorKind::parse`] reads that text
//! back. Errno names are Linux's (`errno(3)`, `asm-generic/errno-base.h`
//! and `errno.h`).

use std::fmt::{self, Write as _};

/// Kinds of failure, as counted per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ErrorKind {
    /// Slower than `--timeout`; the outcome on the server is unknown.
    Timeout,
    /// Could not reach or open the target, or lost the connection.
    Connect,
    /// The peer closed or reset the connection in the middle of a reply.
    Reset,
    /// A TLS handshake failed (a certificate refused, no common protocol).
    Tls,
    /// The target stayed busy (locked) through every retry.
    Busy,
    /// The database returned an error; the code names it (an SQLSTATE, a
    /// MySQL error number, `sqlite-N` for an SQLite extended result code).
    Sql(SqlCode),
    /// An I/O error, by its errno (`libc::EIO`).
    Io(i32),
    /// An HTTP reply with an error status (`503`).
    Http(u16),
    /// The target answered with data that fails the workload's own check
    /// (a wrong length, a bad checksum).
    Corrupt,
    /// A value a request flow takes from a reply (a header, a cookie, a
    /// JSON field) was not in it, or could not be sent on.
    Capture,
}

impl ErrorKind {
    /// Reads back the text [`Display`](fmt::Display) writes; none for any
    /// other text (a name written by another tool or an older perflab).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let kind = match text {
            "timeout" => ErrorKind::Timeout,
            "connect" => ErrorKind::Connect,
            "reset" => ErrorKind::Reset,
            "tls" => ErrorKind::Tls,
            "busy" => ErrorKind::Busy,
            "corrupt" => ErrorKind::Corrupt,
            "capture" => ErrorKind::Capture,
            _ => {
                let (class, detail) = text.split_once(':')?;
                match class {
                    "sql" => ErrorKind::Sql(SqlCode::fitting(detail)?),
                    "io" => ErrorKind::Io(errno_of_name(detail)?),
                    "http" => ErrorKind::Http(detail.parse().ok()?),
                    _ => return None,
                }
            }
        };
        // Only the text this kind prints: `http:0503` is someone else's name.
        let mut printed = TextBuffer::<40>::default();
        let _ = write!(printed, "{kind}");
        (!printed.truncated && printed.as_str() == text).then_some(kind)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Timeout => f.write_str("timeout"),
            ErrorKind::Connect => f.write_str("connect"),
            ErrorKind::Reset => f.write_str("reset"),
            ErrorKind::Tls => f.write_str("tls"),
            ErrorKind::Busy => f.write_str("busy"),
            ErrorKind::Sql(code) => write!(f, "sql:{code}"),
            ErrorKind::Io(errno) => match errno_name(*errno) {
                Some(name) => write!(f, "io:{name}"),
                None => write!(f, "io:errno{errno}"),
            },
            ErrorKind::Http(status) => write!(f, "http:{status}"),
            ErrorKind::Corrupt => f.write_str("corrupt"),
            ErrorKind::Capture => f.write_str("capture"),
        }
    }
}

/// A database's error code held inline, so that a kind carrying it stays
/// `Copy`. Codes are short (`40001`, `1213`, `sqlite-517`); a longer text
/// (a client library's message where it gives no code) is cut to
/// [`SqlCode::CAPACITY`] bytes, ending in `…`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SqlCode {
    // Unused bytes stay zero, so the derived comparisons see only the text.
    bytes: [u8; SqlCode::CAPACITY],
    len: u8,
}

impl SqlCode {
    /// Most bytes of text kept.
    pub(crate) const CAPACITY: usize = 31;

    /// The code `text` (cut as the type's doc says when longer).
    pub(crate) fn new(text: &str) -> Self {
        Self::of(text)
    }

    /// The code `what` prints, written in place without allocating:
    /// `SqlCode::of(format_args!("sqlite-{}", code))`.
    pub(crate) fn of(what: impl fmt::Display) -> Self {
        let mut buffer = TextBuffer::<{ SqlCode::CAPACITY }>::default();
        let _ = write!(buffer, "{what}");
        buffer.mark_truncation();
        SqlCode {
            bytes: buffer.bytes,
            len: buffer.len as u8,
        }
    }

    /// `text` when it fits whole; none when it would be cut.
    fn fitting(text: &str) -> Option<Self> {
        (text.len() <= Self::CAPACITY).then(|| Self::new(text))
    }

    /// The code's text.
    pub(crate) fn as_str(&self) -> &str {
        // Only whole characters are ever copied in, so this always succeeds.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for SqlCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SqlCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Text written into a fixed buffer: what does not fit is dropped, whole
/// characters at a time, and remembered.
struct TextBuffer<const N: usize> {
    bytes: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> Default for TextBuffer<N> {
    fn default() -> Self {
        TextBuffer {
            bytes: [0; N],
            len: 0,
            truncated: false,
        }
    }
}

impl<const N: usize> TextBuffer<N> {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    /// Ends a cut text with `…`, dropping whole characters to make room.
    fn mark_truncation(&mut self) {
        const MARK: &str = "…";
        if !self.truncated || N < MARK.len() {
            return;
        }
        let mut keep = self.len.min(N - MARK.len());
        while !self.as_str().is_char_boundary(keep) {
            keep -= 1;
        }
        self.bytes[keep..].fill(0);
        self.bytes[keep..keep + MARK.len()].copy_from_slice(MARK.as_bytes());
        self.len = keep + MARK.len();
    }
}

impl<const N: usize> fmt::Write for TextBuffer<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            self.truncated = true;
        }
        Ok(())
    }
}

/// Linux's errno names that an operation on a file, a disk or a socket can
/// end with.
const ERRNO_NAMES: &[(i32, &str)] = &[
    (libc::EPERM, "EPERM"),
    (libc::ENOENT, "ENOENT"),
    (libc::EINTR, "EINTR"),
    (libc::EIO, "EIO"),
    (libc::ENXIO, "ENXIO"),
    (libc::EBADF, "EBADF"),
    (libc::EAGAIN, "EAGAIN"),
    (libc::ENOMEM, "ENOMEM"),
    (libc::EACCES, "EACCES"),
    (libc::EFAULT, "EFAULT"),
    (libc::EBUSY, "EBUSY"),
    (libc::EEXIST, "EEXIST"),
    (libc::ENODEV, "ENODEV"),
    (libc::ENOTDIR, "ENOTDIR"),
    (libc::EISDIR, "EISDIR"),
    (libc::EINVAL, "EINVAL"),
    (libc::ENFILE, "ENFILE"),
    (libc::EMFILE, "EMFILE"),
    (libc::EFBIG, "EFBIG"),
    (libc::ENOSPC, "ENOSPC"),
    (libc::ESPIPE, "ESPIPE"),
    (libc::EROFS, "EROFS"),
    (libc::EPIPE, "EPIPE"),
    (libc::ENAMETOOLONG, "ENAMETOOLONG"),
    (libc::ENOTSUP, "ENOTSUP"),
    (libc::EADDRINUSE, "EADDRINUSE"),
    (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
    (libc::ENETDOWN, "ENETDOWN"),
    (libc::ENETUNREACH, "ENETUNREACH"),
    (libc::ECONNABORTED, "ECONNABORTED"),
    (libc::ECONNRESET, "ECONNRESET"),
    (libc::ENOBUFS, "ENOBUFS"),
    (libc::ENOTCONN, "ENOTCONN"),
    (libc::ETIMEDOUT, "ETIMEDOUT"),
    (libc::ECONNREFUSED, "ECONNREFUSED"),
    (libc::EHOSTUNREACH, "EHOSTUNREACH"),
    (libc::ESTALE, "ESTALE"),
    (libc::EDQUOT, "EDQUOT"),
    (libc::ECANCELED, "ECANCELED"),
];

fn errno_name(errno: i32) -> Option<&'static str> {
    ERRNO_NAMES
        .iter()
        .find(|(n, _)| *n == errno)
        .map(|(_, name)| *name)
}

/// An errno from its name (`EIO`) or from `errnoN` for one without a name.
fn errno_of_name(text: &str) -> Option<i32> {
    match ERRNO_NAMES.iter().find(|(_, name)| *name == text) {
        Some((n, _)) => Some(*n),
        None => text.strip_prefix("errno")?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_print_as_stores_hold_them_and_read_back() {
        let cases = [
            (ErrorKind::Timeout, "timeout"),
            (ErrorKind::Connect, "connect"),
            (ErrorKind::Busy, "busy"),
            (ErrorKind::Sql(SqlCode::new("40001")), "sql:40001"),
            (
                ErrorKind::Sql(SqlCode::of(format_args!("sqlite-{}", 517))),
                "sql:sqlite-517",
            ),
            (ErrorKind::Io(libc::EIO), "io:EIO"),
            (ErrorKind::Io(libc::ENOSPC), "io:ENOSPC"),
            (ErrorKind::Io(4000), "io:errno4000"),
            (ErrorKind::Http(503), "http:503"),
            (ErrorKind::Corrupt, "corrupt"),
            (ErrorKind::Capture, "capture"),
        ];
        for (kind, text) in cases {
            assert_eq!(kind.to_string(), text);
            assert_eq!(ErrorKind::parse(text), Some(kind), "{text}");
        }
    }

    #[test]
    fn text_no_kind_prints_is_not_read_as_one() {
        for text in [
            "deadlock (40P01)",
            "sql",
            "http:0503",
            "http:70000",
            "io:EWHAT",
            "io:",
            "Timeout",
            "sql:a message from a client library longer than a code",
        ] {
            assert_eq!(ErrorKind::parse(text), None, "{text}");
        }
    }

    #[test]
    fn long_codes_are_cut_on_a_character_boundary_and_marked() {
        let long = "é".repeat(40);
        let code = SqlCode::new(&long);
        assert!(code.as_str().len() <= SqlCode::CAPACITY);
        assert!(code.as_str().ends_with('…'), "{code}");
        assert!(code.as_str().starts_with("éé"));
        let exact = "x".repeat(SqlCode::CAPACITY);
        assert_eq!(
            SqlCode::new(&exact).as_str(),
            exact,
            "a code that fits is whole"
        );
        assert_eq!(SqlCode::new("").as_str(), "");
    }

    #[test]
    fn kinds_order_by_their_code() {
        assert!(SqlCode::new("40001") < SqlCode::new("40P01"));
        assert!(SqlCode::new("4") < SqlCode::new("40"));
    }
}
