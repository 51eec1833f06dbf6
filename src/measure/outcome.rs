//! The outcome taxonomy of one operation. Failed operations are counted by
//! kind, never fatal; the user's abort rule decides when a run has failed.

use std::fmt;

/// What happened to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub result: OpResult,
    /// Payload bytes moved by the operation (0 where the workload does not count them).
    pub bytes: u64,
    /// Times the operation was retried (busy, serialisation failure) before this result.
    pub retries: u32,
}

impl Outcome {
    /// A successful operation.
    pub fn ok() -> Self {
        Outcome {
            result: OpResult::Ok,
            bytes: 0,
            retries: 0,
        }
    }

    /// A failed operation of the given kind.
    pub fn error(kind: ErrorKind) -> Self {
        Outcome {
            result: OpResult::Error(kind),
            bytes: 0,
            retries: 0,
        }
    }
}

/// The three ways an operation can end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// Done as asked.
    Ok,
    /// Served, but declined for a business reason (a withdrawal beyond the
    /// balance): not an error, and the server did its work.
    Refused,
    /// Failed.
    Error(ErrorKind),
}

/// Kinds of failure, as counted per step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Slower than `--timeout`; the outcome on the server is unknown.
    Timeout,
    /// Could not reach or open the target.
    Connect,
    /// The target stayed busy (locked) through every retry.
    Busy,
    /// The database returned an error; the code names it (an SQLite result
    /// code name or an SQLSTATE).
    Sql(String),
    /// An I/O error other than the above.
    Io(String),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Timeout => f.write_str("timeout"),
            ErrorKind::Connect => f.write_str("connect"),
            ErrorKind::Busy => f.write_str("busy"),
            ErrorKind::Sql(code) => write!(f, "sql:{code}"),
            ErrorKind::Io(what) => write!(f, "io:{what}"),
        }
    }
}
