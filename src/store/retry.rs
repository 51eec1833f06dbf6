//! Committing through another process's lock: a store another process
//! holds (a `sqlite3` shell in a transaction, a backup) makes a commit
//! wait and try again with back-off, saying once on standard error which
//! process holds it, rather than losing a measured step to
//! `database is locked`. A signal ends the waiting (after
//! `util::GRACE_AFTER_SIGNAL` when it came before). The holder is read
//! from `/proc/locks` (proc(5)): the write locks on the store or its
//! shared-memory file (`-shm`, where SQLite's WAL locks live).

use super::Store;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a commit waits for another process's lock in all.
pub(super) const PATIENCE: Duration = Duration::from_secs(600);
/// How long one try waits inside SQLite before it is tried again here
/// (where signals are looked at).
const ONE_TRY: Duration = Duration::from_millis(200);
/// The longest pause between tries.
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// The busy timeout a store's connection has otherwise.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `e` is SQLite's "another connection holds the lock".
pub(crate) fn is_locked(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|code| {
                matches!(
                    code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                )
            })
    })
}

/// The store at `path` is locked: by which process, in words.
pub(super) fn locked_by(path: &Path) -> String {
    let holder = std::fs::read_to_string("/proc/locks")
        .ok()
        .and_then(|locks| holder_in(&locks, path));
    match holder {
        Some(pid) => format!("locked by another process (pid {pid})"),
        None => "locked by another process".to_string(),
    }
}

/// The process other than this one that holds a write lock on the store
/// or its `-shm` file, in the text of `/proc/locks`.
fn holder_in(locks: &str, path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let inodes: Vec<u64> = [path.as_os_str(), shm.as_os_str()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.ino())
        .collect();
    locks.lines().find_map(|line| {
        // `1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (rw, pid, file) = (fields.get(3)?, fields.get(4)?, fields.get(5)?);
        let pid: u32 = pid.parse().ok()?;
        let inode: u64 = file.rsplit(':').next()?.parse().ok()?;
        (*rw == "WRITE" && pid != std::process::id() && inodes.contains(&inode)).then_some(pid)
    })
}

impl Store {
    /// The same store waiting `patience` through another process's lock
    /// (a test's minute stands for the run's ten).
    #[cfg(test)]
    pub(crate) fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Runs `commit` (one transaction, or one statement) on the store,
    /// again and again while another process holds the store's lock, for
    /// up to its patience ([`PATIENCE`]) or until a signal; says so once on standard
    /// error, and again once it went through.
    pub(super) fn committed<T>(
        &mut self,
        mut commit: impl FnMut(&mut rusqlite::Connection) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let started = Instant::now();
        let cutoff = crate::util::Cutoff::from_now();
        let mut pause = Duration::from_millis(20);
        let mut said = false;
        let _ = self.conn.busy_timeout(ONE_TRY);
        let done = loop {
            match commit(&mut self.conn) {
                Err(e)
                    if is_locked(&e) && started.elapsed() < self.patience && !cutoff.reached() =>
                {
                    if !said {
                        said = true;
                        crate::util::err(format_args!(
                            "the store {} is {}: retrying (the step is kept until it is stored)\n",
                            self.path.display(),
                            locked_by(&self.path)
                        ));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(e) if is_locked(&e) => {
                    break Err(e.context(format!(
                        "the store {} stayed {} for {} s",
                        self.path.display(),
                        locked_by(&self.path),
                        started.elapsed().as_secs()
                    )))
                }
                other => break other,
            }
        };
        let _ = self.conn.busy_timeout(BUSY_TIMEOUT);
        if said && done.is_ok() {
            crate::util::err(format_args!(
                "the store {} is free again: stored\n",
                self.path.display()
            ));
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another process's write lock on the store's `-shm` file names it;
    /// a read lock, another file or this process's own lock do not.
    #[test]
    fn the_holder_of_a_write_lock_is_found() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("perflab.db");
        std::fs::write(&store, b"").unwrap();
        std::fs::write(dir.path().join("perflab.db-shm"), b"").unwrap();
        let shm = std::fs::metadata(dir.path().join("perflab.db-shm"))
            .unwrap()
            .ino();
        let me = std::process::id();
        let locks = format!(
            "1: POSIX  ADVISORY  READ 4321 fd:01:{shm} 128 128\n\
             2: POSIX  ADVISORY  WRITE {me} fd:01:{shm} 120 120\n\
             3: POSIX  ADVISORY  WRITE 999 fd:01:1 0 EOF\n\
             4: POSIX  ADVISORY  WRITE 4242 fd:01:{shm} 120 120\n"
        );
        assert_eq!(holder_in(&locks, &store), Some(4242));
        assert_eq!(holder_in("garbage\n", &store), None);
    }
}
