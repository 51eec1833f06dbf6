//! Servers perflab runs itself for the length of a run, and the lifecycle
//! they share: find the server's programs, make a fresh directory owned by
//! the user the server runs as (servers refuse to run as root), pick a free
//! loopback port, start the server with its CPUs and its log in that
//! directory, wait until it answers, follow its processes, and on drop stop
//! it (a polite signal, then SIGKILL after a deadline) and remove the
//! directory unless asked to keep it. [`postgres`], [`mariadb`] and
//! [`nginx`] are built on it.

pub mod asked;
pub mod cgroup;
pub mod disk;
pub mod ledger;
pub mod link;
pub mod mariadb;
pub mod nginx;
pub mod postgres;

use crate::error::PlanError;
use anyhow::Context;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The first directory of `dirs` (PATH's first) holding every one of `programs`.
pub fn find_programs(
    programs: &[&str],
    dirs: impl IntoIterator<Item = PathBuf>,
) -> Option<PathBuf> {
    let has_all = |dir: &Path| programs.iter().all(|p| dir.join(p).is_file());
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(dirs)
        .find(|dir| has_all(dir))
}

/// The uid and gid to run a server as: none (ours) unless perflab is root,
/// then the system user `name`'s.
pub fn server_user(name: &str, server: &str) -> Result<Option<(u32, u32)>, PlanError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let no_user = || {
        PlanError::new(format!(
            "a managed {server} cannot run as root and there is no '{name}' user to run it as; create one (useradd {name}) or run perflab as another user"
        ))
    };
    let c_name = std::ffi::CString::new(name).map_err(|_| no_user())?;
    // SAFETY: getpwnam reads a NUL-terminated name; the result is copied at once.
    let pw = unsafe { libc::getpwnam(c_name.as_ptr()) };
    if pw.is_null() {
        return Err(no_user());
    }
    // SAFETY: pw is non-null and points at a valid passwd entry.
    Ok(Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) }))
}

/// A port on 127.0.0.1 that nothing listened on a moment ago.
pub fn free_loopback_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// A fresh directory for a server's files, owned by the server's user;
/// removed on drop unless kept.
pub struct ServerDir {
    path: PathBuf,
    keep: bool,
    /// How the kept files are named when they are left behind.
    server: &'static str,
}

impl ServerDir {
    /// Creates `/tmp/perflab-PREFIX-…` for `server`, written in
    /// `leftovers` unless it is to be kept.
    pub fn create(
        prefix: &str,
        server: &'static str,
        user: Option<(u32, u32)>,
        keep: bool,
        leftovers: &mut ledger::Leftovers,
    ) -> anyhow::Result<Self> {
        Self::create_in(&std::env::temp_dir(), prefix, server, user, keep, leftovers)
    }

    /// Creates `PARENT/perflab-PREFIX-…`, as [`ServerDir::create`] does.
    pub fn create_in(
        parent: &Path,
        prefix: &str,
        server: &'static str,
        user: Option<(u32, u32)>,
        keep: bool,
        leftovers: &mut ledger::Leftovers,
    ) -> anyhow::Result<Self> {
        let path = tempfile::Builder::new()
            .prefix(&format!("perflab-{prefix}-"))
            .tempdir_in(parent)
            .with_context(|| format!("cannot create a directory for the managed {server}"))?
            .keep();
        let dir = ServerDir { path, keep, server };
        if !keep {
            leftovers.add(ledger::Part::Dir {
                path: dir.path.clone(),
            })?;
        }
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir.path, Some(uid), Some(gid))
                .with_context(|| format!("cannot hand the {server}'s directory to its user"))?;
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last line of its log `name` that holds anything, if any.
    pub fn last_line(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.path.join(name))
            .ok()?
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    }

    /// What the server said on the lines of its log `name` that hold
    /// `marker`: the text after the marker (nginx's `PID#TID: ` dropped),
    /// each once — nginx writes its error both to its log and, prefixed,
    /// to its standard error, which goes to the same file.
    pub fn said(&self, name: &str, marker: &str) -> Vec<String> {
        let mut said: Vec<String> = Vec::new();
        let text = std::fs::read(self.path.join(name)).unwrap_or_default();
        for line in String::from_utf8_lossy(&text).lines() {
            let Some(at) = line.find(marker) else {
                continue;
            };
            let mut words = line[at + marker.len()..].trim();
            if let Some((ids, rest)) = words.split_once(": ") {
                if !ids.is_empty() && ids.bytes().all(|b| b.is_ascii_digit() || b == b'#') {
                    words = rest.trim();
                }
            }
            let words = crate::util::one_line(words);
            if !words.is_empty() && !said.contains(&words) {
                said.push(words);
            }
        }
        said
    }
}

/// Why a managed server ended while it started, in one line: its exit
/// status and its own words, then what to look at — the files it is given
/// when it could not open one (it runs as `user`), the settings when some
/// were given with `settings_flag`, and only then.
pub fn start_failure(
    server: &str,
    status: &str,
    said: &[String],
    user: Option<&str>,
    (settings_flag, settings_given): (&str, bool),
) -> PlanError {
    let words = if said.is_empty() {
        "it wrote no error to its log".to_string()
    } else {
        format!("it said: {}", said.join(" / "))
    };
    let mut look = Vec::new();
    if said.iter().any(|s| s.contains("Permission denied")) {
        look.push(match user {
            Some(user) => format!(
                "it runs as the {user} user, who must be able to open every file and directory it is given"
            ),
            None => "check the permissions of the files and directories it is given".to_string(),
        });
    }
    if settings_given {
        look.push(format!("check the {settings_flag} values"));
    }
    if look.is_empty() {
        look.push(format!(
            "no {settings_flag} was given: this is the server's own failure"
        ));
    }
    PlanError::new(format!(
        "the managed {server} did not start ({status}): {words}; {}",
        look.join("; ")
    ))
}

impl Drop for ServerDir {
    fn drop(&mut self) {
        if self.keep {
            crate::util::err(format_args!(
                "kept the managed {}'s files in {}\n",
                self.server,
                self.path.display()
            ));
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Where and as whom a server's program runs: its user, its CPUs, its
/// memory cgroup and its network namespace.
#[derive(Default, Clone, Copy)]
pub struct Placement<'a> {
    /// The uid and gid it runs as (perflab's own when `None`).
    pub user: Option<(u32, u32)>,
    /// The CPUs it may run on (all when empty).
    pub cpus: &'a [usize],
    /// The memory cgroup it joins.
    pub cgroup: Option<&'a cgroup::ServerCgroup>,
    /// The shaped link whose namespace it joins.
    pub link: Option<&'a link::ServerLink>,
}

/// A program run as `user` on `cpus` (all when empty); a new command.
pub fn server_command(program: &Path, user: Option<(u32, u32)>, cpus: &[usize]) -> Command {
    placed_command(
        program,
        &Placement {
            user,
            cpus,
            ..Placement::default()
        },
    )
}

/// A program run where `placement` says. Between fork and exec it joins
/// the cgroup and the namespace while it is still root (joining a
/// namespace takes CAP_SYS_ADMIN), then becomes its user.
pub fn placed_command(program: &Path, placement: &Placement) -> Command {
    let mut cmd = Command::new(program);
    let mask = (!placement.cpus.is_empty()).then(|| {
        // SAFETY: CPU_ZERO/CPU_SET on a local set; nothing is shared.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in placement.cpus {
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        set
    });
    // The descriptors stay open for as long as the cgroup and the link
    // live, which the caller keeps past the spawn.
    let cgroup_procs = placement
        .cgroup
        .map_or([None, None], cgroup::ServerCgroup::procs_fds);
    let namespace = placement.link.map(link::ServerLink::namespace_fd);
    let user = placement.user;
    if mask.is_none() && placement.cgroup.is_none() && namespace.is_none() && user.is_none() {
        return cmd;
    }
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: between fork and exec only async-signal-safe system calls
    // run (write, sched_setaffinity, setns, setgroups, setgid, setuid),
    // on values copied into the closure.
    unsafe {
        cmd.pre_exec(move || {
            for fd in cgroup_procs.into_iter().flatten() {
                // Writing `0` moves the writer itself into the cgroup.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return fail();
                }
            }
            if let Some(mask) = &mask {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask) != 0 {
                    return fail();
                }
            }
            if let Some(fd) = namespace {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return fail();
                }
            }
            if let Some((uid, gid)) = user {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return fail();
                }
            }
            Ok(())
        });
    }
    cmd
}

/// Appends a log file in the server's directory (owned by its user) for
/// the server's standard error.
pub fn log_file(dir: &ServerDir, name: &str, user: Option<(u32, u32)>) -> anyhow::Result<Stdio> {
    let path = dir.path().join(name);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
    }
    Ok(Stdio::from(log))
}

/// A running server process: on drop, asked to stop with `stop_signal`,
/// then killed if it has not within `stop_timeout`.
pub struct ServerProcess {
    child: Child,
    stop_signal: libc::c_int,
    stop_timeout: Duration,
}

/// Why a server did not become ready.
pub enum NotReady {
    /// The process ended (its exit status, as text).
    Exited(String),
    /// It ran but did not answer before the deadline (the last error).
    Timeout(String),
    /// Ctrl-C or SIGTERM came while it started.
    Interrupted(crate::util::Interrupted),
}

impl ServerProcess {
    /// Starts `cmd` (its stdout discarded), written in `leftovers` as soon
    /// as it has a pid.
    pub fn spawn(
        mut cmd: Command,
        stop_signal: libc::c_int,
        stop_timeout: Duration,
        what: &str,
        leftovers: &mut ledger::Leftovers,
    ) -> anyhow::Result<Self> {
        let child = cmd
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        let process = ServerProcess {
            child,
            stop_signal,
            stop_timeout,
        };
        if let Some(id) = ledger::ProcessId::of(process.pid()) {
            leftovers.add(ledger::Part::Process {
                id,
                signal: stop_signal,
            })?;
        }
        Ok(process)
    }

    /// The server's main process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has ended (reaping it).
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    /// Polls `ready` every `every` until it succeeds, the process ends, or
    /// `timeout` passes.
    pub fn wait_ready(
        &mut self,
        timeout: Duration,
        every: Duration,
        mut ready: impl FnMut() -> Result<(), String>,
    ) -> Result<(), NotReady> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Err(NotReady::Exited(status));
            }
            crate::util::check_interrupt("starting the managed server")
                .map_err(NotReady::Interrupted)?;
            match ready() {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => std::thread::sleep(every),
                Err(e) => return Err(NotReady::Timeout(e)),
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            // SAFETY: signalling the child we started, by its PID.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, self.stop_signal);
            }
        }
        let deadline = Instant::now() + self.stop_timeout;
        while Instant::now() < deadline && self.exited().is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
