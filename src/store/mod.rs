//! The results store: one SQLite file (default `./perflab.db`) holding every
//! run with its plan, host facts and steps. A step is committed in one
//! transaction the moment it ends, so a crash or Ctrl-C loses at most the
//! step that was running. The schema is versioned (`PRAGMA user_version`)
//! and migrated forward on open.

mod migrations;
mod read;
mod write;

pub use read::{RunRow, StoredRun};
pub use write::NewRun;

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
        store
            .conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| fail(e.to_string()))?;
        store
            .conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(|e| fail(e.to_string()))?;
        migrations::migrate(&mut store.conn).map_err(|e| fail(format!("{e:#}")))?;
        Ok(store)
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
