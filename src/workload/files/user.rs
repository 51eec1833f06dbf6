//! One user of the file server: a thread that owns the user's subtree and
//! does each operation with the file system's own calls (open, write,
//! fsync, close, read, stat, unlink), since they block. The async session
//! hands it the operation over a one-slot channel and awaits the outcome
//! on another: no allocation per operation once the user's buffer has
//! grown to its largest file.
//!
//! The user remembers each file it wrote (its number, size and CRC-32),
//! reads back what it wrote and checks it, and hands its table back when
//! it ends, for the run's check and the next step's user of that number.
//! A write makes a file that was not there (never one over another's),
//! and a write that fails (a full file system) removes the file it cut
//! short, so that nothing is left that the table does not name.

use super::sizes::FileSizes;
use crate::measure::{ErrorKind, Outcome};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The operations, in the workload's order.
pub(crate) const OPS: [&str; 4] = ["write", "read", "stat", "delete"];
/// The operations of [`OPS`] that change a user's table.
pub(crate) const WRITE: usize = 0;
pub(crate) const DELETE: usize = 3;

/// A file the user wrote: its number, size and CRC-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileRec {
    pub(crate) number: u64,
    pub(crate) size: u64,
    pub(crate) crc: u32,
}

/// What a user keeps between steps.
#[derive(Debug, Default)]
pub(crate) struct UserFiles {
    pub(crate) files: Vec<FileRec>,
    pub(crate) next: u64,
    /// Reads whose content did not match, described.
    pub(crate) mismatches: Vec<String>,
    /// Files that failed writes cut short and that could not be removed:
    /// perflab's own, not in the table (their content is not what was meant).
    pub(crate) partial: Vec<u64>,
}

/// What the thread needs besides its table.
pub(crate) struct UserPlan {
    pub(crate) dir: PathBuf,
    pub(crate) sizes: FileSizes,
    pub(crate) fsync: bool,
    pub(crate) seed: u64,
}

/// Why a user's initial files stopped short.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// Ctrl-C or SIGTERM.
    Interrupted(crate::util::Interrupted),
    /// The file system's error (ENOSPC on a full one).
    Io(std::io::Error),
}

/// Makes a user's directory and writes its `count` initial files there,
/// on the calling thread, looking at the interrupt flag before each: the
/// user's table (what was written, for the run and its removal) and
/// whether all were written.
pub(crate) fn write_initial(plan: UserPlan, count: u32) -> (UserFiles, Result<(), Stopped>) {
    if let Err(e) = std::fs::create_dir(&plan.dir) {
        return (UserFiles::default(), Err(Stopped::Io(e)));
    }
    let mut user = User::new(plan, UserFiles::default());
    for _ in 0..count {
        if let Err(i) = crate::util::check_interrupt("writing the initial files") {
            return (user.files, Err(Stopped::Interrupted(i)));
        }
        if let Err(e) = user.write() {
            return (user.files, Err(Stopped::Io(e)));
        }
    }
    (user.files, Ok(()))
}

/// The name of file `number` of a user's directory.
pub(crate) fn file_name(number: u64) -> String {
    format!("f{number:08}")
}

/// A user's thread and its channels.
pub(crate) struct UserThread {
    jobs: Option<mpsc::SyncSender<usize>>,
    answers: tokio::sync::mpsc::Receiver<Outcome>,
    thread: Option<JoinHandle<UserFiles>>,
    /// The answer of an operation abandoned at a timeout is still owed.
    owed: bool,
}

impl UserThread {
    /// Starts the thread of a user with `files` from earlier steps.
    pub(crate) fn start(plan: UserPlan, files: UserFiles) -> std::io::Result<UserThread> {
        std::fs::create_dir_all(&plan.dir)?;
        let (jobs, inbox) = mpsc::sync_channel::<usize>(1);
        let (reply, answers) = tokio::sync::mpsc::channel::<Outcome>(1);
        let thread = std::thread::Builder::new()
            .name("perflab-files".to_string())
            .spawn(move || {
                let mut user = User::new(plan, files);
                for op in inbox {
                    let outcome = user.run(op);
                    if reply.blocking_send(outcome).is_err() {
                        break;
                    }
                }
                user.files
            })?;
        Ok(UserThread {
            jobs: Some(jobs),
            answers,
            thread: Some(thread),
            owed: false,
        })
    }

    /// Runs operation `op` (an index into [`OPS`]) on the thread.
    pub(crate) async fn run(&mut self, op: usize) -> Outcome {
        if self.owed {
            // An operation abandoned at a timeout: its answer comes first.
            if self.answers.recv().await.is_none() {
                return Outcome::error(ErrorKind::Io(libc::EPIPE));
            }
            self.owed = false;
        }
        let Some(jobs) = self.jobs.as_ref() else {
            return Outcome::error(ErrorKind::Io(libc::EPIPE));
        };
        if jobs.send(op).is_err() {
            return Outcome::error(ErrorKind::Io(libc::EPIPE));
        }
        self.owed = true;
        let answer = self.answers.recv().await;
        self.owed = false;
        answer.unwrap_or(Outcome::error(ErrorKind::Io(libc::EPIPE)))
    }

    /// Ends the thread after its last operation; the user's table.
    pub(crate) fn finish(&mut self) -> UserFiles {
        self.jobs.take();
        // An answer still owed must not hold the thread on a full channel.
        self.answers.close();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

/// The user as its thread sees it.
struct User {
    plan: UserPlan,
    files: UserFiles,
    rng: SmallRng,
    buf: Vec<u8>,
    path: PathBuf,
    name: String,
}

impl User {
    fn new(plan: UserPlan, files: UserFiles) -> User {
        let rng = SmallRng::seed_from_u64(plan.seed);
        let path = plan.dir.join("f00000000");
        User {
            plan,
            files,
            rng,
            buf: Vec::new(),
            path,
            name: String::with_capacity(16),
        }
    }

    /// Points `self.path` at file `number`, without allocating.
    fn point_at(&mut self, number: u64) {
        self.name.clear();
        let _ = write!(self.name, "f{number:08}");
        self.path.set_file_name(&self.name);
    }

    fn run(&mut self, op: usize) -> Outcome {
        // Nothing to read, stat or delete: the user writes a file instead.
        // (The session chooses a write then too: this only guards.)
        let op = if op != WRITE && self.files.files.is_empty() {
            WRITE
        } else {
            op
        };
        let result = match op {
            WRITE => self.write(),
            1 => self.read(),
            2 => self.stat(),
            _ => self.delete(),
        };
        match result {
            Ok(outcome) => outcome,
            Err(e) => Outcome::error(ErrorKind::Io(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    fn write(&mut self) -> std::io::Result<Outcome> {
        let size = self.plan.sizes.draw(&mut self.rng);
        let number = self.files.next;
        self.files.next += 1;
        self.buf.resize(size as usize, 0);
        fill(
            &mut self.buf,
            self.plan.seed ^ number.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let crc = crc32fast::hash(&self.buf);
        self.point_at(number);
        // A new file: a file of that name is not perflab's to replace.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.path)?;
        let written = f.write_all(&self.buf).and_then(|()| {
            if self.plan.fsync {
                f.sync_all()
            } else {
                Ok(())
            }
        });
        drop(f);
        if let Err(e) = written {
            if std::fs::remove_file(&self.path).is_err() {
                self.files.partial.push(number);
            }
            return Err(e);
        }
        self.files.files.push(FileRec { number, size, crc });
        Ok(Outcome {
            bytes: size,
            ..Outcome::ok()
        })
    }

    fn pick(&mut self) -> usize {
        self.rng.gen_range(0..self.files.files.len())
    }

    fn read(&mut self) -> std::io::Result<Outcome> {
        let i = self.pick();
        let rec = self.files.files[i];
        self.point_at(rec.number);
        let mut f = std::fs::File::open(&self.path)?;
        self.buf.resize(rec.size as usize, 0);
        f.read_exact(&mut self.buf)?;
        let mut extra = [0u8; 1];
        let longer = f.read(&mut extra)? > 0;
        if longer || crc32fast::hash(&self.buf) != rec.crc {
            if self.files.mismatches.len() < 10 {
                self.files.mismatches.push(format!(
                    "{}: not the {} bytes written",
                    self.path.display(),
                    rec.size
                ));
            }
            return Ok(Outcome::error(ErrorKind::Corrupt));
        }
        Ok(Outcome {
            bytes: rec.size,
            ..Outcome::ok()
        })
    }

    fn stat(&mut self) -> std::io::Result<Outcome> {
        let i = self.pick();
        let rec = self.files.files[i];
        self.point_at(rec.number);
        let meta = std::fs::metadata(&self.path)?;
        if meta.len() != rec.size {
            return Ok(Outcome::error(ErrorKind::Corrupt));
        }
        Ok(Outcome::ok())
    }

    fn delete(&mut self) -> std::io::Result<Outcome> {
        let i = self.pick();
        let rec = self.files.files[i];
        self.point_at(rec.number);
        std::fs::remove_file(&self.path)?;
        self.files.files.swap_remove(i);
        Ok(Outcome::ok())
    }
}

/// Fills a buffer with a stream derived from `seed` (xorshift).
fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}
