//! The cgroup made for one managed server: every process it forks, kept
//! together so that all of them are killed as one when it stops (nothing
//! it forked survives perflab); its memory (`--pg-memory`,
//! `--mariadb-memory`) and its disk I/O (`--disk-*`, see [`super::disk`]).
//! For memory, the server and every process it forks are charged
//! for their memory and their page cache together, and held to the limit
//! — the kernel reclaims the cache down to it, so a server whose data no
//! longer fits reads from the disk again (16 MB against a 32 MB database).
//! Swap is held to nothing where the kernel accounts it, so the limit is
//! not met by swapping out. cgroup v1 (`memory.limit_in_bytes`,
//! `memory.memsw.limit_in_bytes`) and v2 (`memory.max`, `memory.swap.max`),
//! from the kernel's admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst.
//!
//! Under v1 each controller is a hierarchy of its own, so the server's
//! cgroup is one directory per controller: freezer (or, without it, pids)
//! to hold every process, memory and blkio for the limits; under v2 it is
//! one directory. Perflab makes one for every managed server when it is
//! root; otherwise only when a limit asks for one (which needs root), and
//! the server's session is all that holds its processes together
//! ([`super::stop`]). Its processes are killed as one when it is dropped:
//! v2's `cgroup.kill`, or the cgroup frozen (no process can fork while
//! its siblings are killed), each process killed, then thawed. The
//! server joins it between fork and exec, by writing
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

/// The smallest limit taken: below it no managed server starts.
const MIN_LIMIT: u64 = 16 << 20;
/// How long a dropped cgroup waits for its processes to leave.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the cgroup hierarchies are mounted.
const ROOT: &str = "/sys/fs/cgroup";

/// The prefix of every cgroup perflab makes, so that what a killed
/// perflab left can be found.
pub(crate) const PREFIX: &str = "perflab-server-";

/// The cgroup of one server: a directory per controller (one under v2).
pub struct ServerCgroup {
    dirs: Vec<PathBuf>,
    /// The directory that holds every process (v2's one; v1's freezer or
    /// pids), and how its processes are killed as one.
    holder: Option<(PathBuf, Holder)>,
    /// The directories of the memory limit and of the disk limits.
    memory_dir: Option<PathBuf>,
    io_dir: Option<PathBuf>,
    /// Each directory's `cgroup.procs`, opened for writing while perflab
    /// is root.
    procs: Vec<File>,
    /// The memory limit it holds the server to.
    pub(crate) memory: Option<Bytes>,
    /// The disk I/O limits.
    pub(crate) io: Option<IoThrottle>,
}

/// How the processes of a holding cgroup are killed as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// cgroup v2: `cgroup.kill` (Linux 5.14), else frozen with
    /// `cgroup.freeze` while each is killed.
    V2,
    /// v1's freezer: frozen with `freezer.state` while each is killed.
    Freezer,
    /// v1's pids: each killed, until none is left.
    Pids,
}

/// What each directory of a server's cgroup is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Holds(Holder),
    Memory,
    Io,
}

/// What a server's cgroup is: each directory to make, what it is for,
/// and the files written in it (a name ending in `?` only where the
/// kernel has it). Under v2 one directory has every role.
type Plan = Vec<(PathBuf, Vec<Role>, Vec<(&'static str, String)>)>;

/// The directories and files of cgroup `name` under the hierarchies
/// mounted at `root`: one directory under v2 (whose root then has the
/// controllers turned on for its children), one per controller under v1
/// — the holding one (freezer, else pids) only when `hold`.
fn plan(
    root: &Path,
    name: &str,
    hold: bool,
    memory: Option<Bytes>,
    io: Option<&IoThrottle>,
    flag: &str,
) -> anyhow::Result<Plan> {
    let mut plan: Plan = Vec::new();
    if root.join("cgroup.controllers").is_file() {
        let mut files = Vec::new();
        if let Some(limit) = memory {
            // The controller must be on for the root's children;
            // writing it again when it is changes nothing.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
            files.push(("memory.max", limit.0.to_string()));
            // Not there when the kernel keeps no swap accounting.
            files.push(("memory.swap.max?", "0".to_string()));
        }
        if let Some(io) = io {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
            files.push(("io.max", io.limits.v2_line(io.device)));
        }
        let mut roles = vec![Role::Holds(Holder::V2)];
        roles.extend(memory.map(|_| Role::Memory));
        roles.extend(io.map(|_| Role::Io));
        plan.push((root.join(name), roles, files));
        return Ok(plan);
    }
    if hold {
        let holder = [("freezer", Holder::Freezer), ("pids", Holder::Pids)]
            .into_iter()
            .find(|(hierarchy, _)| root.join(hierarchy).join("cgroup.procs").is_file());
        if let Some((hierarchy, holder)) = holder {
            plan.push((
                root.join(hierarchy).join(name),
                vec![Role::Holds(holder)],
                Vec::new(),
            ));
        }
    }
    if let Some(limit) = memory {
        plan.push((
            root.join("memory").join(name),
            vec![Role::Memory],
            vec![
                ("memory.limit_in_bytes", limit.0.to_string()),
                // Memory and swap together, no more than memory alone.
                ("memory.memsw.limit_in_bytes?", limit.0.to_string()),
            ],
        ));
    }
    if let Some(io) = io {
        plan.push((
            root.join("blkio").join(name),
            vec![Role::Io],
            io.limits.v1_files(io.device),
        ));
    }
    for (dir, _, _) in &plan {
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
    Ok(plan)
}

impl ServerCgroup {
    /// The cgroup a managed server whose files are in `dir` runs in: one
    /// that holds all its processes when perflab is root, with its memory
    /// limit and its I/O limits on the disk under `dir`; none when
    /// perflab is not root and no limit is asked for.
    pub(crate) fn for_server(
        dir: &Path,
        memory: Option<Bytes>,
        io: Option<&super::disk::IoLimits>,
        flag: &str,
        leftovers: &mut Leftovers,
    ) -> anyhow::Result<Option<Self>> {
        let io = io
            .map(|limits| super::disk::throttle_under(dir, limits))
            .transpose()?;
        if memory.is_some() || io.is_some() {
            return Self::create(memory, io, flag, leftovers).map(Some);
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(None);
        }
        // Only to hold the processes: where the hierarchy cannot be
        // written (a container's read-only cgroupfs), the server's session
        // is what holds them.
        Ok(Self::create(None, None, flag, leftovers).ok())
    }

    /// Makes a cgroup holding its processes to `memory` (memory and page
    /// cache) and `io`, on cgroup v2 or v1's memory and blkio hierarchies,
    /// each directory written in `leftovers` before it is made. `flag`
    /// names the memory flag in messages.
    pub(crate) fn create(
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
                format!("{limit} is less than a managed server needs to start"),
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
        let mut cgroup = ServerCgroup {
            dirs: Vec::new(),
            holder: None,
            memory_dir: None,
            io_dir: None,
            procs: Vec::new(),
            memory,
            io: io.clone(),
        };
        let plan = plan(Path::new(ROOT), &name, true, memory, io.as_ref(), flag)?;
        // From here on a failure removes what was made (the value dropped).
        for (dir, roles, files) in plan {
            leftovers.add(Part::Cgroup { path: dir.clone() })?;
            std::fs::create_dir(&dir)
                .with_context(|| format!("cannot make the server's cgroup {}", dir.display()))?;
            cgroup.dirs.push(dir.clone());
            for role in roles {
                match role {
                    Role::Holds(holder) => cgroup.holder = Some((dir.clone(), holder)),
                    Role::Memory => cgroup.memory_dir = Some(dir.clone()),
                    Role::Io => cgroup.io_dir = Some(dir.clone()),
                }
            }
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
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The directory of its memory limit (v1's memory hierarchy, or v2's).
    pub(crate) fn memory_dir(&self) -> Option<&Path> {
        self.memory_dir.as_deref()
    }

    /// The directory of its disk limits.
    pub(crate) fn io_dir(&self) -> Option<&Path> {
        self.io_dir.as_deref()
    }

    /// The directory that holds every one of its processes, if any.
    pub fn holding_dir(&self) -> Option<&Path> {
        self.holder.as_ref().map(|(dir, _)| dir.as_path())
    }

    /// Puts its disk limits on (`held`) or lifts them, in the files they
    /// were first written to; nothing when it holds no disk limit.
    pub(crate) fn hold_io(&self, held: bool) -> anyhow::Result<()> {
        let (Some(io), Some(dir)) = (&self.io, &self.io_dir) else {
            return Ok(());
        };
        let (limits, device) = (&io.limits, io.device);
        let files = match (dir.join("io.max").is_file(), held) {
            (true, true) => vec![("io.max", limits.v2_line(device))],
            (true, false) => vec![("io.max", limits.v2_lifted(device))],
            (false, true) => limits.v1_files(device),
            (false, false) => limits.v1_lifted(device),
        };
        for (file, value) in files {
            std::fs::write(dir.join(file), &value)
                .with_context(|| format!("cannot write {value} to {}", dir.join(file).display()))?;
        }
        Ok(())
    }

    /// Kills every process in it, as one: none can fork a new one while
    /// the others are killed.
    pub(crate) fn kill_all(&self) {
        if let Some((dir, holder)) = &self.holder {
            kill_all_in(dir, *holder);
        }
    }
}

/// A cgroup file and a value written to it.
type FileValue = (&'static str, &'static str);

/// The pids in a cgroup directory.
fn procs_in(dir: &Path) -> Vec<libc::pid_t> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Kills the processes of the cgroup `dir` as one (see the module's
/// header), and waits (bounded) until none is left.
fn kill_all_in(dir: &Path, holder: Holder) {
    if procs_in(dir).is_empty() {
        return;
    }
    if holder == Holder::V2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        wait_empty(dir);
        return;
    }
    // The file that freezes the cgroup, and what freezes and thaws it.
    let (freeze, thaw): (Option<FileValue>, Option<FileValue>) = match holder {
        Holder::V2 => (Some(("cgroup.freeze", "1")), Some(("cgroup.freeze", "0"))),
        Holder::Freezer => (
            Some(("freezer.state", "FROZEN")),
            Some(("freezer.state", "THAWED")),
        ),
        Holder::Pids => (None, None),
    };
    let deadline = Instant::now() + EMPTY_TIMEOUT;
    while !procs_in(dir).is_empty() && Instant::now() < deadline {
        if let Some((file, value)) = freeze {
            let _ = std::fs::write(dir.join(file), value);
        }
        for pid in procs_in(dir) {
            // SAFETY: a process in the server's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // A frozen process dies of SIGKILL once thawed.
        if let Some((file, value)) = thaw {
            let _ = std::fs::write(dir.join(file), value);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits, at most [`EMPTY_TIMEOUT`], until the cgroup `dir` holds no process.
fn wait_empty(dir: &Path) {
    let deadline = Instant::now() + EMPTY_TIMEOUT;
    while !procs_in(dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        // The server's main process has stopped (it is dropped first):
        // whatever it left in the cgroup is killed.
        self.kill_all();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sut::managed::disk::IoLimits;

    fn throttle() -> IoThrottle {
        IoThrottle {
            limits: IoLimits {
                read_iops: Some(300),
                write_iops: None,
                read_bps: None,
                write_bps: Some(Bytes(1 << 20)),
            },
            device: (254, 0),
            disk: "vda".to_string(),
        }
    }

    /// Under v2 (a root with `cgroup.controllers`, as a fixture tree) one
    /// directory holds `memory.max`, `memory.swap.max` and `io.max`, and
    /// the root's children get both controllers.
    #[test]
    fn a_v2_cgroup_is_one_directory_with_both_controllers_turned_on() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu io memory\n").unwrap();
        let plan = plan(
            root.path(),
            "perflab-x",
            true,
            Some(Bytes(64 << 20)),
            Some(&throttle()),
            "--pg-memory",
        )
        .unwrap();
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[0].0, root.path().join("perflab-x"));
        assert_eq!(plan[0].1, [Role::Holds(Holder::V2), Role::Memory, Role::Io]);
        assert_eq!(
            plan[0].2,
            [
                ("memory.max", (64u64 << 20).to_string()),
                ("memory.swap.max?", "0".to_string()),
                ("io.max", "254:0 riops=300 wbps=1048576".to_string()),
            ]
        );
        // Written last: +io after +memory (each write turns one on).
        assert_eq!(
            std::fs::read_to_string(root.path().join("cgroup.subtree_control")).unwrap(),
            "+io"
        );
    }

    /// Under v1 each controller is its own hierarchy; one that is not
    /// mounted is refused in one line naming the flag.
    #[test]
    fn a_v1_cgroup_is_a_directory_per_controller_and_needs_each_mounted() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("memory")).unwrap();
        std::fs::create_dir(root.path().join("blkio")).unwrap();
        std::fs::create_dir(root.path().join("pids")).unwrap();
        std::fs::write(root.path().join("pids/cgroup.procs"), "").unwrap();
        let plan = plan(
            root.path(),
            "perflab-x",
            true,
            Some(Bytes(64 << 20)),
            Some(&throttle()),
            "--pg-memory",
        )
        .unwrap();
        assert_eq!(plan.len(), 3);
        // Without freezer, pids holds the processes.
        assert_eq!(plan[0].0, root.path().join("pids/perflab-x"));
        assert_eq!(plan[0].1, [Role::Holds(Holder::Pids)]);
        let plan = &plan[1..];
        assert_eq!(plan[0].0, root.path().join("memory/perflab-x"));
        assert_eq!(
            plan[0].2[0],
            ("memory.limit_in_bytes", (64u64 << 20).to_string())
        );
        assert_eq!(plan[1].0, root.path().join("blkio/perflab-x"));
        assert_eq!(
            plan[1].2,
            [
                ("blkio.throttle.read_iops_device", "254:0 300".to_string()),
                (
                    "blkio.throttle.write_bps_device",
                    "254:0 1048576".to_string()
                ),
            ]
        );
        std::fs::remove_dir(root.path().join("blkio")).unwrap();
        let e = plan_error(root.path());
        assert!(
            e.starts_with("--disk-read-iops: this kernel mounts no "),
            "{e}"
        );
        assert!(e.ends_with("blkio cgroup hierarchy; mount it (cgroup v1 memory and blkio, or v2) or drop the flag"), "{e}");
    }

    fn plan_error(root: &Path) -> String {
        let t = throttle();
        let flag = t.limits.flag();
        plan(root, "perflab-x", false, None, Some(&t), flag)
            .unwrap_err()
            .to_string()
    }
}
