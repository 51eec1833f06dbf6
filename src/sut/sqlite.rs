//! What an SQLite error means to a run: another writer holding the lock
//! (busy, to be retried by perflab itself so that every retry is counted),
//! or an error of its own, counted under its extended result code.

use crate::measure::{ErrorKind, SqlCode};
use rusqlite::ErrorCode;

/// Whether `e` says another connection holds the lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// The kind a step counts `e` under: `sql:sqlite-N`, N its extended code.
pub(crate) fn error_kind(e: &rusqlite::Error) -> ErrorKind {
    match e {
        rusqlite::Error::SqliteFailure(code, _) => {
            ErrorKind::Sql(SqlCode::of(format_args!("sqlite-{}", code.extended_code)))
        }
        other => ErrorKind::Sql(SqlCode::of(other)),
    }
}
