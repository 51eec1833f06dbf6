//! Removing what a files run wrote: the files its users' tables name,
//! their directories and the run's, nothing else. A run of a few seconds
//! at tens of thousands of writes a second leaves hundreds of thousands
//! of files, many still being written back; each unlink may wait on that
//! write, so several threads remove at once (one user's directory each).
//! The removal obeys Ctrl-C and SIGTERM: it goes on for [`GRACE`] after
//! it first sees the signal, then stops and names what it left.

use super::user::{self, UserFiles};
use super::Shared;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long the removal goes on after it first sees a signal: a small
/// run is still removed whole when stopped by Ctrl-C, a large one is not
/// held up for its whole length.
const GRACE: Duration = Duration::from_secs(1);

/// Threads that remove at once. An unlink mostly waits on the file
/// system (a file still being written back), not on a CPU: 243,524 files
/// of 16 KiB just written took 70 s to remove one at a time here, and
/// 33 s for 224,830 with eight at once.
const REMOVERS: usize = 8;

/// A removal of this many files or more is announced: it can take a
/// while, and the user should know what the wait is.
const ANNOUNCED: u64 = 10_000;

/// Removes the run's files and directories when dropped, unless `keep`.
pub(super) struct Removal {
    pub(super) shared: Arc<Shared>,
    pub(super) keep: bool,
}

impl Drop for Removal {
    fn drop(&mut self) {
        let root = &self.shared.root;
        if self.keep {
            crate::util::out(format_args!("kept {}\n", root.display()));
            return;
        }
        let users = self.shared.users.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = remove_own(root, &users) {
            crate::util::err(format_args!("could not remove {}: {e}\n", root.display()));
        }
    }
}

/// Whether the removal must stop: `grace` after a signal was first seen.
struct Stop {
    signalled: fn() -> bool,
    grace: Duration,
    seen: OnceLock<Instant>,
}

impl Stop {
    /// At Ctrl-C or SIGTERM, [`GRACE`] after the removal first sees it.
    fn at_signal() -> Self {
        Stop {
            signalled: || crate::util::check_interrupt("removing files").is_err(),
            grace: GRACE,
            seen: OnceLock::new(),
        }
    }

    fn now(&self) -> bool {
        (self.signalled)() && self.seen.get_or_init(Instant::now).elapsed() >= self.grace
    }
}

/// The work shared by the removing threads.
struct Work<'a> {
    dirs: Vec<(PathBuf, Vec<u64>)>,
    next: AtomicUsize,
    removed: AtomicU64,
    /// A thread stopped at the signal's grace.
    cut: AtomicBool,
    first_error: Mutex<Option<String>>,
    stop: &'a Stop,
}

impl Work<'_> {
    /// Takes user directories until none is left or the removal must stop.
    fn run(&self) {
        while let Some((dir, numbers)) = self.dirs.get(self.next.fetch_add(1, Ordering::Relaxed)) {
            for &number in numbers {
                if self.stop.now() {
                    self.cut.store(true, Ordering::Relaxed);
                    return;
                }
                let file = dir.join(user::file_name(number));
                if self.note(std::fs::remove_file(&file), &file) {
                    self.removed.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.note(std::fs::remove_dir(dir), dir);
        }
    }

    /// Whether `result` left the path gone; the first error is kept.
    fn note(&self, result: std::io::Result<()>, path: &Path) -> bool {
        let Err(said) = gone(result, path) else {
            return true;
        };
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(said);
        false
    }
}

/// A removal's result: gone (or never there), or why not.
fn gone(result: std::io::Result<()>, path: &Path) -> Result<(), String> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Err(format!(
            "{} holds files perflab did not write (left in place)",
            path.display()
        )),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Removes what the users wrote under `root`, their directories and
/// `root`; the first thing that could not be removed and why, or what a
/// signal left.
pub(super) fn remove_own(root: &Path, users: &HashMap<u32, UserFiles>) -> Result<(), String> {
    remove_until(root, users, &Stop::at_signal())
}

/// [`remove_own`], stopping when `stop` says.
fn remove_until(root: &Path, users: &HashMap<u32, UserFiles>, stop: &Stop) -> Result<(), String> {
    let dirs: Vec<(PathBuf, Vec<u64>)> = users
        .iter()
        .map(|(user, files)| {
            let numbers = files.files.iter().map(|r| r.number);
            let numbers = numbers.chain(files.partial.iter().copied()).collect();
            (root.join(format!("u{user:05}")), numbers)
        })
        .collect();
    let total: u64 = dirs.iter().map(|(_, n)| n.len() as u64).sum();
    if total >= ANNOUNCED {
        crate::util::out(format_args!(
            "removing the {total} files perflab wrote in {} (Ctrl-C leaves the rest)\n",
            root.display()
        ));
    }
    let work = Work {
        dirs,
        next: AtomicUsize::new(0),
        removed: AtomicU64::new(0),
        cut: AtomicBool::new(false),
        first_error: Mutex::new(None),
        stop,
    };
    std::thread::scope(|s| {
        for _ in 1..REMOVERS.min(work.dirs.len()) {
            // A thread that cannot start leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("perflab-remove".into())
                .spawn_scoped(s, || work.run());
        }
        work.run();
    });
    if work.cut.load(Ordering::Relaxed) {
        let removed = work.removed.load(Ordering::Relaxed);
        return Err(format!(
            "interrupted: removed {removed} of the {total} files perflab wrote; the rest are left there"
        ));
    }
    match work
        .first_error
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e),
        None => gone(std::fs::remove_dir(root), root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::files::user::FileRec;

    /// `users` users of `files` files each under a new `root`.
    fn tree(users: u32, files: u64) -> (tempfile::TempDir, PathBuf, HashMap<u32, UserFiles>) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("perflab-files-1-0");
        let mut table = HashMap::new();
        for u in 0..users {
            let udir = root.join(format!("u{u:05}"));
            std::fs::create_dir_all(&udir).unwrap();
            let mut mine = UserFiles::default();
            for number in 0..files {
                std::fs::write(udir.join(user::file_name(number)), b"x").unwrap();
                mine.files.push(FileRec {
                    number,
                    size: 1,
                    crc: 0,
                });
            }
            table.insert(u, mine);
        }
        (dir, root, table)
    }

    fn stop(signalled: fn() -> bool) -> Stop {
        Stop {
            signalled,
            grace: Duration::ZERO,
            seen: OnceLock::new(),
        }
    }

    fn files_under(root: &Path) -> usize {
        std::fs::read_dir(root)
            .map(|users| {
                users
                    .flatten()
                    .map(|u| std::fs::read_dir(u.path()).map_or(0, Iterator::count))
                    .sum()
            })
            .unwrap_or(0)
    }

    #[test]
    fn every_file_and_directory_perflab_wrote_goes() {
        let (_dir, root, users) = tree(12, 50);
        assert_eq!(remove_until(&root, &users, &stop(|| false)), Ok(()));
        assert!(!root.exists());
    }

    #[test]
    fn a_signal_past_its_grace_stops_the_removal_and_says_what_it_left() {
        let (_dir, root, users) = tree(3, 40);
        let said = remove_until(&root, &users, &stop(|| true)).unwrap_err();
        assert_eq!(
            said,
            "interrupted: removed 0 of the 120 files perflab wrote; the rest are left there"
        );
        assert_eq!(files_under(&root), 120);
    }

    #[test]
    fn a_file_someone_else_put_there_is_left_with_its_directory_and_named() {
        let (_dir, root, users) = tree(4, 10);
        let theirs = root.join("u00002").join("notes.txt");
        std::fs::write(&theirs, b"mine").unwrap();
        let said = remove_until(&root, &users, &stop(|| false)).unwrap_err();
        assert!(
            said.contains("u00002 holds files perflab did not write"),
            "{said}"
        );
        assert_eq!(std::fs::read(&theirs).unwrap(), b"mine");
        assert_eq!(files_under(&root), 1);
    }
}
