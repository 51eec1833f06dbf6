//! The results store: one SQLite file (default `./perflab.db`) holding every
//! run with its plan, host facts and steps. A step is committed in one
//! transaction the moment it ends, so a crash or Ctrl-C loses at most the
//! step that was running. The schema is versioned (`PRAGMA user_version`)
//! and migrated forward on open.

mod lab;
mod migrations;
mod read;
mod write;
mod writer;

pub use lab::{LabId, NewCell, StoredCell, StoredLab};
pub use read::{RunRow, StoredRun};
pub use write::{NewRun, StepId};

use crate::error::PlanError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// Identifies a run in a store.
pub type RunId = i64;

/// A run's status as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Still being written, or its writer died (then shown as partial).
    Running,
    /// Every step ran.
    Complete,
    /// Cut short: some steps are missing.
    Partial,
    /// A step broke the error limit, or the check failed.
    Failed,
}

impl RunStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Partial => "partial",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(RunStatus::Running),
            "complete" => Some(RunStatus::Complete),
            "partial" => Some(RunStatus::Partial),
            "failed" => Some(RunStatus::Failed),
            _ => None,
        }
    }
}

/// The first 16 bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating and migrating) the store at `path`. Failures are the
    /// user's to fix, so they come back as a [`PlanError`].
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let fail = |why: String| {
            PlanError::new(format!(
                "cannot open the results store {}: {why}; pass --store with a writable file path",
                path.display()
            ))
        };
        if path.is_dir() {
            return Err(fail("it is a directory".to_string()).into());
        }
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store
            .conn
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| fail(e.to_string()))?;
        let version: i64 = store
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| fail(e.to_string()))?;
        if version > migrations::VERSION {
            return Err(PlanError::new(format!(
                "cannot open the results store {}: {}",
                path.display(),
                migrations::newer_than_this_build(version)
            ))
            .into());
        }
        // Switching to WAL takes the database alone; the busy timeout does
        // not cover it, so another process opening the store at the same
        // moment is waited for here, up to the same 10 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match store.conn.pragma_update(None, "journal_mode", "WAL") {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if matches!(
                        e.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(fail(e.to_string()).into()),
            }
        }
        store
            .conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(|e| fail(e.to_string()))?;
        // A run writes each interval as it ends and reads little back: a
        // page cache of SQLite's default 2 MB only held a long step's
        // pages (the store grows ~5 kB a second), and the kernel caches
        // the file anyway.
        store
            .conn
            .pragma_update(None, "cache_size", -256)
            .map_err(|e| fail(e.to_string()))?;
        migrations::migrate(&mut store.conn).map_err(|e| fail(format!("{e:#}")))?;
        Ok(store)
    }

    /// Opens a store that a run already wrote, for reading: a missing or
    /// empty file, a file that is no SQLite database, or a database that
    /// holds no perflab results is refused, and left exactly as it was.
    pub fn open_existing(path: &Path) -> anyhow::Result<Self> {
        use std::io::Read;
        let refuse = |why: &str| -> anyhow::Error {
            PlanError::new(format!(
                "{} is {why}; give --store the file a perflab run wrote (the default is perflab.db)",
                path.display()
            ))
            .into()
        };
        let mut head = [0u8; 16];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| refuse(&format!("not readable ({e})")))?;
        if n == 0 {
            return Err(refuse("an empty file, not a results store"));
        }
        if n < head.len() || &head != SQLITE_MAGIC {
            return Err(refuse("not a results store (not a SQLite database)"));
        }
        let version: i64 =
            Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
                .map_err(|e| refuse(&format!("not a readable database ({e})")))?;
        if version == 0 {
            return Err(refuse("a SQLite database with no perflab results"));
        }
        Self::open(path)
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
