//! The outcome taxonomy of one operation. Failed operations are counted by
//! kind, never fatal; the user's abort rule decides when a run has failed.

use super::error_kind::ErrorKind;

/// What happened to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub(crate) result: OpResult,
    /// Payload bytes moved by the operation (0 where the workload does not count them).
    pub(crate) bytes: u64,
    /// Times the operation was retried (busy, serialisation failure) before this result.
    pub(crate) retries: u32,
}

impl Outcome {
    /// A successful operation.
    pub(crate) fn ok() -> Self {
        Outcome {
            result: OpResult::Ok,
            bytes: 0,
            retries: 0,
        }
    }

    /// A failed operation of the given kind.
    pub(crate) fn error(kind: ErrorKind) -> Self {
        Outcome {
            result: OpResult::Error(kind),
            bytes: 0,
            retries: 0,
        }
    }
}

/// The three ways an operation can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpResult {
    /// Done as asked.
    Ok,
    /// Served, but declined for a business reason (a withdrawal beyond the
    /// balance): not an error, and the server did its work.
    Refused,
    /// Failed.
    Error(ErrorKind),
}
