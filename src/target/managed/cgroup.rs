//! A memory cgroup made for one managed server (`--pg-memory`,
//! `--mariadb-memory`): the server and every process it forks are charged
//! for their memory and their page cache together, and held to the limit
//! — the kernel reclaims the cache down to it, so a server whose data no
//! longer fits reads from the disk again (seed 004's 16 MB against 32 MB).
//! Swap is held to nothing where the kernel accounts it, so the limit is
//! not met by swapping out. cgroup v1 (`memory.limit_in_bytes`,
//! `memory.memsw.limit_in_bytes`) and v2 (`memory.max`, `memory.swap.max`),
//! from the kernel's admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst.
//!
//! The server joins it between fork and exec, by writing `0` (the writer
//! itself) to `cgroup.procs` through a file opened before the fork: the
//! kernel checks the opener's rights, so the server may already have
//! become its own user. The cgroup is removed when dropped, once the
//! server's processes have left it.

use crate::error::PlanError;
use crate::units::Bytes;
use anyhow::Context;
use std::fs::File;
use std::os::fd::AsRawFd;
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

/// A memory cgroup of one server.
pub struct ServerCgroup {
    dir: PathBuf,
    /// Its `cgroup.procs`, opened for writing while perflab is root.
    procs: File,
    /// The limit it holds the server to.
    pub limit: Bytes,
}

impl ServerCgroup {
    /// Makes a cgroup holding its processes to `limit` (memory and page
    /// cache), on cgroup v2 or v1's memory hierarchy.
    /// The cgroup is written in `leftovers` before it is made.
    pub fn create(
        limit: Bytes,
        flag: &str,
        leftovers: &mut super::ledger::Leftovers,
    ) -> anyhow::Result<Self> {
        if limit.0 < MIN_LIMIT {
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
                "a memory limit is a cgroup, which only root can make",
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
        let hierarchy = if v2 {
            root.to_path_buf()
        } else {
            root.join("memory")
        };
        if v2 {
            // The memory controller must be on for the root's children;
            // writing it again when it is changes nothing.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
        } else if !hierarchy.is_dir() {
            anyhow::bail!(PlanError::flag(
                flag,
                "this kernel mounts no memory cgroup hierarchy",
                "mount one (cgroup v1 memory, or v2) or drop the flag",
            ));
        }
        let dir = hierarchy.join(&name);
        leftovers.add(super::ledger::Part::Cgroup { path: dir.clone() })?;
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot make the server's cgroup {}", dir.display()))?;
        // From here on a failure removes the cgroup (the value dropped).
        let write = |file: &str, value: &str| {
            std::fs::write(dir.join(file), value)
                .with_context(|| format!("cannot write {value} to {}", dir.join(file).display()))
        };
        let limits = if v2 {
            write("memory.max", &limit.0.to_string()).and_then(|()| {
                // Not there when the kernel keeps no swap accounting.
                match dir.join("memory.swap.max").exists() {
                    true => write("memory.swap.max", "0"),
                    false => Ok(()),
                }
            })
        } else {
            write("memory.limit_in_bytes", &limit.0.to_string()).and_then(|()| {
                // Memory and swap together, no more than memory alone.
                match dir.join("memory.memsw.limit_in_bytes").exists() {
                    true => write("memory.memsw.limit_in_bytes", &limit.0.to_string()),
                    false => Ok(()),
                }
            })
        };
        let procs = limits.and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .context("cannot open the server's cgroup.procs")
        });
        match procs {
            Ok(procs) => Ok(ServerCgroup { dir, procs, limit }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// Its `cgroup.procs`, open for writing: a process that writes `0`
    /// to it joins the cgroup (see [`super::Placement`]).
    pub fn procs_fd(&self) -> std::os::fd::RawFd {
        self.procs.as_raw_fd()
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        // A cgroup goes once its last process has left it; a server's
        // processes take a moment to end after its main one.
        let deadline = Instant::now() + EMPTY_TIMEOUT;
        while let Err(e) = std::fs::remove_dir(&self.dir) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return;
            }
            if Instant::now() >= deadline {
                crate::util::err(format_args!(
                    "warning: the server's cgroup {} still holds processes; remove it with rmdir once they end\n",
                    self.dir.display()
                ));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
