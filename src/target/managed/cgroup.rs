//! The cgroup made for one managed server: its memory (`--pg-memory`,
//! `--mariadb-memory`) and its disk I/O (`--disk-*`, see [`super::disk`]).
//! For memory, the server and every process it forks are charged
//! for their memory and their page cache together, and held to the limit
//! — the kernel reclaims the cache down to it, so a server whose data no
//! longer fits reads from the disk again (seed 004's 16 MB against 32 MB).
//! Swap is held to nothing where the kernel accounts it, so the limit is
//! not met by swapping out. cgroup v1 (`memory.limit_in_bytes`,
//! `memory.memsw.limit_in_bytes`) and v2 (`memory.max`, `memory.swap.max`),
//! from the kernel's admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst.
//!
//! Under v1 each controller is a hierarchy of its own, so the server's
//! cgroup is one directory per controller (memory, blkio); under v2 it is
//! one directory. The server joins it between fork and exec, by writing
//! `0` (the writer itself) to each `cgroup.procs` through a file opened
//! before the fork: the
//! kernel checks the opener's rights, so the server may already have
//! become its own user. The cgroup is removed when dropped, once the
//! server's processes have left it.

use super::disk::IoThrottle;
use super::ledger::{Leftovers, Part};
use crate::error::PlanError;
use crate::units::Bytes;
use anyhow::Context;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The smallest limit taken: below it no database server starts.
const MIN_LIMIT: u64 = 16 << 20;
/// How long a dropped cgroup waits for its processes to leave.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the cgroup hierarchies are mounted.
const ROOT: &str = "/sys/fs/cgroup";

/// The prefix of every cgroup perflab makes, so that what a killed
/// perflab left can be found.
pub const PREFIX: &str = "perflab-server-";

/// The cgroup of one server: a directory per controller (one under v2).
pub struct ServerCgroup {
    dirs: Vec<PathBuf>,
    /// Each directory's `cgroup.procs`, opened for writing while perflab
    /// is root.
    procs: Vec<File>,
    /// The memory limit it holds the server to.
    pub memory: Option<Bytes>,
    /// The disk I/O limits.
    pub io: Option<IoThrottle>,
}

impl ServerCgroup {
    /// Makes a cgroup holding its processes to `memory` (memory and page
    /// cache) and `io`, on cgroup v2 or v1's memory and blkio hierarchies,
    /// each directory written in `leftovers` before it is made. `flag`
    /// names the memory flag in messages.
    pub fn create(
        memory: Option<Bytes>,
        io: Option<IoThrottle>,
        flag: &str,
        leftovers: &mut Leftovers,
    ) -> anyhow::Result<Self> {
        let flag = match (&memory, &io) {
            (None, Some(io)) => io.limits.flag(),
            _ => flag,
        };
        if let Some(limit) = memory.filter(|l| l.0 < MIN_LIMIT) {
            return Err(PlanError::flag(
                flag,
                format!("{limit} is less than a database server needs to start"),
                "give 16MiB or more",
            )
            .into());
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(PlanError::flag(
                flag,
                "a memory or disk limit is a cgroup, which only root can make",
                "run perflab as root, or drop the flag",
            )
            .into());
        }
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let root = Path::new(ROOT);
        let v2 = root.join("cgroup.controllers").is_file();
        let mut cgroup = ServerCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory,
            io: io.clone(),
        };
        // Each controller's directory and what is written in it.
        let mut plan: Vec<(PathBuf, Vec<(&str, String)>)> = Vec::new();
        if v2 {
            let mut files = Vec::new();
            if let Some(limit) = memory {
                // The controller must be on for the root's children;
                // writing it again when it is changes nothing.
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
                files.push(("memory.max", limit.0.to_string()));
                // Not there when the kernel keeps no swap accounting.
                files.push(("memory.swap.max?", "0".to_string()));
            }
            if let Some(io) = &io {
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
                files.push(("io.max", io.limits.v2_line(io.device)));
            }
            plan.push((root.join(&name), files));
        } else {
            if let Some(limit) = memory {
                plan.push((
                    root.join("memory").join(&name),
                    vec![
                        ("memory.limit_in_bytes", limit.0.to_string()),
                        // Memory and swap together, no more than memory alone.
                        ("memory.memsw.limit_in_bytes?", limit.0.to_string()),
                    ],
                ));
            }
            if let Some(io) = &io {
                plan.push((
                    root.join("blkio").join(&name),
                    io.limits.v1_files(io.device),
                ));
            }
            for (dir, _) in &plan {
                let hierarchy = dir.parent().unwrap_or(root);
                if !hierarchy.is_dir() {
                    anyhow::bail!(PlanError::flag(
                        flag,
                        format!(
                            "this kernel mounts no {} cgroup hierarchy",
                            hierarchy.display()
                        ),
                        "mount it (cgroup v1 memory and blkio, or v2) or drop the flag",
                    ));
                }
            }
        }
        // From here on a failure removes what was made (the value dropped).
        for (dir, files) in plan {
            leftovers.add(Part::Cgroup { path: dir.clone() })?;
            std::fs::create_dir(&dir)
                .with_context(|| format!("cannot make the server's cgroup {}", dir.display()))?;
            cgroup.dirs.push(dir.clone());
            for (file, value) in files {
                // A name ending in `?` is written only where it exists.
                let (file, optional) = match file.strip_suffix('?') {
                    Some(f) => (f, true),
                    None => (file, false),
                };
                if optional && !dir.join(file).exists() {
                    continue;
                }
                std::fs::write(dir.join(file), &value).with_context(|| {
                    format!("cannot write {value} to {}", dir.join(file).display())
                })?;
            }
            cgroup.procs.push(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
                    .context("cannot open the server's cgroup.procs")?,
            );
        }
        Ok(cgroup)
    }

    /// Each `cgroup.procs`, open for writing: a process that writes `0`
    /// to them joins the cgroup (see [`super::Placement`]).
    pub fn procs_fds(&self) -> [Option<RawFd>; 2] {
        [
            self.procs.first().map(|f| f.as_raw_fd()),
            self.procs.get(1).map(|f| f.as_raw_fd()),
        ]
    }

    /// The directory of its memory limit (v1's memory hierarchy, or v2's).
    pub fn memory_dir(&self) -> Option<&Path> {
        self.memory?;
        self.dirs.first().map(PathBuf::as_path)
    }

    /// The directory of its disk limits.
    pub fn io_dir(&self) -> Option<&Path> {
        self.io.as_ref()?;
        self.dirs.last().map(PathBuf::as_path)
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        // A cgroup goes once its last process has left it; a server's
        // processes take a moment to end after its main one.
        let deadline = Instant::now() + EMPTY_TIMEOUT;
        for dir in &self.dirs {
            while let Err(e) = std::fs::remove_dir(dir) {
                if e.kind() == std::io::ErrorKind::NotFound {
                    break;
                }
                if Instant::now() >= deadline {
                    crate::util::err(format_args!(
                        "warning: the server's cgroup {} still holds processes; perflab lab cleanup removes it once they end\n",
                        dir.display()
                    ));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
