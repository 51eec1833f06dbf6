//! The results store: one SQLite file (default `./perflab.db`) holding every
//! run with its plan, host facts and steps. A step is committed in one
//! transaction the moment it ends, so a crash or Ctrl-C loses at most the
//! step that was running. The schema is versioned (`PRAGMA user_version`)
//! and migrated forward on open. A commit waits through another
//! process's lock (`retry.rs`); a store that cannot be made is removed
//! again, when this process made its file.

mod lab;
mod labels;
mod migrations;
mod read;
mod retry;
mod status;
mod write;
mod writer;

pub(crate) use lab::{LabId, NewCell, RunProgress, StoredCell, StoredLab};
pub(crate) use labels::{labels_text, parse_labels, Labels};
pub(crate) use read::{RunRow, StoredRun};
pub(crate) use retry::is_locked;
pub use status::{CellStatus, LabStatus, RunStatus, StoredWord};
pub use write::{NewRun, StepId};

use crate::error::PlanError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// Identifies a run in a store.
pub(crate) type RunId = i64;

/// The first 16 bytes of every SQLite database file.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// An open results store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// How long a commit waits through another process's lock.
    patience: std::time::Duration,
}

/// The files SQLite keeps beside a store.
const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

impl Store {
    /// Opens (creating and migrating) the store at `path`. Failures are the
    /// user's to fix, so they come back as a [`PlanError`] naming the
    /// cause (another process's lock, a full file system). A store this
    /// call made that could not be made whole is removed again — only the
    /// files it made, never one that was there before.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let companion = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            std::path::PathBuf::from(name)
        };
        // SQLite's companions already there are not this call's to remove.
        let before: Vec<bool> = COMPANIONS.iter().map(|s| companion(s).exists()).collect();
        let made = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            // A path that cannot be made (no such directory, no room):
            // SQLite says why below.
            Err(_) => false,
        };
        let opened = Self::open_made(path);
        if opened.is_err() && made {
            for (suffix, was_there) in COMPANIONS.iter().zip(before) {
                if !was_there {
                    let _ = std::fs::remove_file(companion(suffix));
                }
            }
            let _ = std::fs::remove_file(path);
        }
        opened
    }

    /// [`Store::open`] once the file is there (or cannot be).
    fn open_made(path: &Path) -> anyhow::Result<Self> {
        let fail = |why: String| open_failure(path, &why);
        // SQLite would read a device or a FIFO as a database, and make its
        // journal beside it (`/dev/zero-journal`): only a regular file, or
        // a new path, is a store.
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(PlanError::new(format!(
                    "cannot open the results store {}: it {}; pass --store with a file path (the default is perflab.db)",
                    path.display(),
                    crate::util::open_regular(path)
                        .err()
                        .map_or("is not a regular file".to_string(), |e| e.to_string())
                        .replace(", not a regular file", ", not a file")
                ))
                .into())
            }
            _ => {}
        }
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            patience: retry::PATIENCE,
        };
        store
            .conn
            .busy_timeout(retry::BUSY_TIMEOUT)
            .map_err(|e| fail(e.to_string()))?;
        let version: i64 = store
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| fail(e.to_string()))?;
        refuse_newer(path, version)?;
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

    /// Opens a store that a run already wrote, to write more to it (a
    /// lab resumed): a missing or empty file, a file that is no SQLite
    /// database, or a database that holds no perflab results is refused,
    /// and left exactly as it was.
    pub(crate) fn open_existing(path: &Path) -> anyhow::Result<Self> {
        Self::check_existing(path)?;
        Self::open(path)
    }

    /// Opens a store that a run already wrote, for reading alone (`show`,
    /// `runs`, `report`, …): refused as [`Store::open_existing`] refuses,
    /// then opened read-only, so that a store on a read-only mount, or a
    /// file the user may only read, is read. A store of an older schema
    /// is migrated first when it can be written, else refused with what
    /// to do.
    pub(crate) fn open_read(path: &Path) -> anyhow::Result<Self> {
        let version = Self::check_existing(path)?;
        if version < migrations::VERSION {
            return Self::open(path).map_err(|e| {
                PlanError::new(format!(
                    "the results store {} was written by an older perflab and must be upgraded before it is read, which needs it writable ({}); copy it to a writable place and give --store the copy",
                    path.display(),
                    crate::util::one_line(&format!("{e:#}"))
                ))
                .into()
            });
        }
        let conn = read_only(path).map_err(|e| {
            PlanError::new(format!(
                "cannot read the results store {}: {e}; give --store the file a perflab run wrote",
                path.display()
            ))
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            patience: retry::PATIENCE,
        })
    }

    /// Opens the store for reading in a process that also writes it (a
    /// lab serving its own view while it runs): through SQLite alone. Its
    /// locks are POSIX advisory locks, which a close of *any* descriptor
    /// of the file in the process releases; SQLite keeps one process's
    /// connections from doing that to each other, but a plain open and
    /// close of the file (as [`Store::open_read`]'s checks do) would drop
    /// the writer's locks, and another process could then checkpoint and
    /// remove the log under it: a damaged store. Never migrates, never
    /// opens the file as immutable. None while there is no store there
    /// yet, or while it is still being made.
    pub(crate) fn open_in_process(path: &Path) -> anyhow::Result<Option<Self>> {
        use rusqlite::OpenFlags;
        // Its metadata only: no descriptor of the file is opened here.
        if !path.is_file() {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version < migrations::VERSION {
            return Ok(None);
        }
        refuse_newer(path, version)?;
        Ok(Some(Store {
            conn,
            path: path.to_path_buf(),
            patience: retry::PATIENCE,
        }))
    }

    /// Refuses what is no results store (a device, an empty file, a file
    /// that is not SQLite, a database of someone else's, a store of a
    /// newer perflab), reading it only; its schema version otherwise.
    fn check_existing(path: &Path) -> anyhow::Result<i64> {
        use std::io::Read;
        let refuse = |why: &str| -> anyhow::Error {
            PlanError::new(format!(
                "{} is {why}; give --store the file a perflab run wrote (the default is perflab.db)",
                path.display()
            ))
            .into()
        };
        let mut head = [0u8; 16];
        let n = crate::util::open_regular(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| refuse(&format!("not readable ({e})")))?;
        if n == 0 {
            return Err(refuse("an empty file, not a results store"));
        }
        if n < head.len() || &head != SQLITE_MAGIC {
            return Err(refuse("not a results store (not a SQLite database)"));
        }
        let version: i64 = read_only(path)
            .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
            .map_err(|e| refuse(&format!("not a readable database ({e})")))?;
        if version == 0 {
            return Err(refuse("a SQLite database with no perflab results"));
        }
        refuse_newer(path, version)?;
        Ok(version)
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A read-only connection to the store at `path`. A store in WAL mode
/// needs its shared-memory file (`-shm`) beside it; where that can be
/// neither found nor made (a read-only mount, a directory the user may
/// not write), the file is opened as immutable: nothing can be writing
/// it there. (What a log left by a killed writer holds is then not seen;
/// a store closed cleanly has no log left.)
fn read_only(path: &Path) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let plain = Connection::open_with_flags(path, flags).and_then(|c| {
        c.query_row("PRAGMA schema_version", [], |_| Ok(()))
            .map(|()| c)
    });
    match plain {
        Ok(conn) => Ok(conn),
        Err(first) => {
            let Some(uri) = immutable_uri(path) else {
                return Err(first);
            };
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
                .and_then(|c| {
                    c.query_row("PRAGMA schema_version", [], |_| Ok(()))
                        .map(|()| c)
                })
                .map_err(|_| first)
        }
    }
}

/// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it;
/// none for a path that is not UTF-8.
fn immutable_uri(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let mut uri = String::from("file:");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    Some(uri)
}

/// Why the store at `path` cannot be opened (`why`, SQLite's words), as
/// one line naming the real cause and its fix.
fn open_failure(path: &Path, why: &str) -> PlanError {
    let at = path.display();
    let lower = why.to_ascii_lowercase();
    if lower.contains("locked") || lower.contains("busy") {
        PlanError::new(format!(
            "cannot open the results store {at}: it is {} ({why}); wait until it is done, or pass --store with another file",
            retry::locked_by(path)
        ))
    } else if lower.contains("full") || lower.contains("no space") {
        PlanError::new(format!(
            "cannot open the results store {at}: the file system is full ({why}); free some space there, or pass --store with a file on another file system"
        ))
    } else {
        PlanError::new(format!(
            "cannot open the results store {at}: {why}; pass --store with a writable file path"
        ))
    }
}

/// Refuses a store written by a newer perflab (its schema is ahead of
/// this build's), naming the store.
fn refuse_newer(path: &Path, version: i64) -> Result<(), PlanError> {
    if version <= migrations::VERSION {
        return Ok(());
    }
    Err(PlanError::new(format!(
        "cannot open the results store {}: {}",
        path.display(),
        migrations::newer_than_this_build(version)
    )))
}
