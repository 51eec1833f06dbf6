//! Servers perflab runs itself for the length of a run, and the lifecycle
//! they share: find the server's programs, make a fresh directory owned by
//! the user the server runs as (servers refuse to run as root), pick a free
//! loopback port, start the server with its CPUs and its log in that
//! directory, wait until it answers, follow its processes, and on drop stop
//! it (a polite signal, then SIGKILL after a deadline) and remove the
//! directory unless asked to keep it. [`server`] drives that sequence;
//! [`postgres`], [`mariadb`], [`nginx`] and [`varnish`] each say only
//! what differs (an accelerator's origin is [`origin`]'s),
//! and [`KINDS`] lists them: a new kind is its file and one line there.

pub(crate) mod asked;
pub(crate) mod cgroup;
pub(crate) mod disk;
pub(crate) mod flags;
pub(crate) mod guard;
pub mod ledger;
pub(crate) mod link;
pub(crate) mod mariadb;
pub mod nginx;
mod options;
pub(crate) mod origin;
pub mod postgres;
#[cfg(test)]
mod proof;
pub(crate) mod server;
pub(crate) mod stop;
pub(crate) mod varnish;

pub use options::{Origin, ServerOptions};

use crate::error::PlanError;
use crate::sut::TargetKind;
use anyhow::Context;
use server::{ManagedKind, Running};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The kinds of server perflab manages, one line each; every list of
/// them (the schemes `--target` takes, the knobs, the messages) is made
/// from this one.
pub(crate) const KINDS: &[KindEntry] = &[
    KindEntry::of::<postgres::Postgres>(),
    KindEntry::of::<mariadb::Mariadb>(),
    KindEntry::of::<nginx::Nginx>(),
    KindEntry::of::<varnish::Varnish>(),
    #[cfg(test)]
    KindEntry::of::<proof::Proof>(),
];

/// A server's settings, each a name and a value.
pub(crate) type Settings = [(String, String)];

/// One kind of managed server as the rest of perflab sees it: its
/// `--target`, its flags, and how to start it.
pub struct KindEntry {
    /// Its `--target`, e.g. `postgres:managed`.
    pub(crate) scheme: &'static str,
    /// How messages name the server, e.g. `PostgreSQL`.
    pub(crate) name: &'static str,
    /// The protocol it speaks, as a kind of target.
    pub(crate) target_kind: TargetKind,
    /// Whether it can be an accelerator's managed origin.
    pub(crate) serves_as_origin: bool,
    /// The prefix of its lab knobs (`pg` in `pg.NAME`).
    pub(crate) knob: &'static str,
    /// Its settings flag (`--pg-set`), its CPUs flag and its memory flag.
    pub(crate) set_flag: &'static str,
    pub(crate) cpus_flag: &'static str,
    pub(crate) memory_flag: &'static str,
    /// A setting it takes, for examples in messages.
    pub(crate) example: &'static str,
    /// What its settings flag takes, for its help.
    pub(crate) settings_help: &'static str,
    /// Whether it serves, caches an origin, or either.
    pub(crate) roles: Roles,
    /// Whether it listens on addresses it is given (`--KNOB-listen`).
    pub(crate) listens: bool,
    /// Whether it serves HTTPS (`--KNOB-tls-cert`, `--KNOB-tls-key`).
    pub(crate) serves_tls: bool,
    /// Its settings the verdict's advice names.
    pub(crate) advice: Advice,
    /// The setting that sizes its cache of pages, for the memory what-if.
    pub(crate) cache_setting: Option<&'static str>,
    /// What `--log-dir` moves, for a kind that has a log to move.
    pub(crate) moved_log: Option<&'static str>,
    /// A setting's form, for a server that accelerates or not.
    pub(crate) check_setting: fn(&str, &str, bool) -> Result<(), String>,
    /// Whether the server takes these settings (accelerating or not),
    /// asked before anything is made.
    pub(crate) ask: fn(&Settings, bool) -> Result<(), String>,
    /// Starts one.
    pub(crate) start: fn(&ServerOptions) -> anyhow::Result<Box<dyn Running>>,
}

impl KindEntry {
    /// The entry of kind `K`, from what the kind says of itself.
    pub(crate) const fn of<K: ManagedKind + 'static>() -> KindEntry {
        KindEntry {
            scheme: K::SCHEME,
            name: K::NAME,
            target_kind: K::TARGET_KIND,
            serves_as_origin: K::SERVES_AS_ORIGIN,
            knob: K::KNOB,
            set_flag: K::SETTINGS_FLAG,
            cpus_flag: K::CPUS_FLAG,
            memory_flag: K::MEMORY_FLAG,
            example: K::EXAMPLE_SETTING,
            settings_help: K::SETTINGS_HELP,
            roles: K::ROLES,
            listens: K::LISTENS,
            serves_tls: K::SERVES_TLS,
            advice: K::ADVICE,
            cache_setting: K::CACHE_SETTING,
            moved_log: match K::MOVED_LOG {
                Some(log) => Some(log.what),
                None => None,
            },
            check_setting: K::check_setting,
            ask: K::ask,
            start: server::start_boxed::<K>,
        }
    }

    /// The entry whose `--target` is `scheme`.
    pub(crate) fn by_scheme(scheme: &str) -> Option<&'static KindEntry> {
        KINDS.iter().find(|k| k.scheme == scheme)
    }

    /// Its flag `--KNOB-WHAT`, e.g. `--nginx-listen` ([`flags`]).
    pub(crate) fn flag(&self, what: &str) -> String {
        format!("--{}-{what}", self.knob)
    }
}

/// What a kind does with a file set: serves it (or, for a database, is
/// not a web server at all), caches an origin's, or either as its role
/// flag says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Roles {
    Serves,
    Accelerates,
    Either,
}

/// A kind's settings that the verdict's advice names, where it has them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Advice {
    /// The setting, with its value, that gives the server more worker
    /// processes or threads, e.g. `worker_processes=auto`.
    pub(crate) more_workers: Option<&'static str>,
    /// The setting that raises its open-file limit.
    pub(crate) open_files: Option<&'static str>,
    /// The setting that sizes its cache.
    pub(crate) cache_size: Option<&'static str>,
    /// The setting that keeps what it cached longer.
    pub(crate) cache_ttl: Option<&'static str>,
}

impl Advice {
    /// No setting to name.
    pub(crate) const NONE: Advice = Advice {
        more_workers: None,
        open_files: None,
        cache_size: None,
        cache_ttl: None,
    };
}

/// Each kind's advice of one sort, with its flag: `nginx: --nginx-set
/// proxy_cache_max_size=…; Varnish: --varnish-set storage=…`; none when
/// no kind has it.
pub(crate) fn advice(what: impl Fn(&Advice) -> Option<&'static str>) -> Option<String> {
    let said: Vec<String> = KINDS
        .iter()
        .filter_map(|k| Some(format!("{}: {} {}", k.name, k.set_flag, what(&k.advice)?)))
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

impl PartialEq for KindEntry {
    fn eq(&self, other: &Self) -> bool {
        self.scheme == other.scheme
    }
}

impl Eq for KindEntry {}

impl std::fmt::Debug for KindEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.scheme)
    }
}

/// The kind an accelerator's managed origin is (`--origin SCHEME`): the
/// first that serves as one.
pub(crate) fn origin_kind() -> Option<&'static KindEntry> {
    KINDS.iter().find(|k| k.serves_as_origin)
}

/// The schemes of the managed kinds that `keep` lets through, in
/// [`KINDS`]'s order.
pub(crate) fn schemes(keep: impl Fn(&KindEntry) -> bool) -> Vec<&'static str> {
    KINDS.iter().filter(|k| keep(k)).map(|k| k.scheme).collect()
}

/// The first directory of `dirs` (PATH's first) holding every one of `programs`.
pub(crate) fn find_programs(
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
pub(crate) fn server_user(name: &str, server: &str) -> Result<Option<(u32, u32)>, PlanError> {
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
pub(crate) fn free_loopback_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// A fresh directory for a server's files, owned by the server's user;
/// removed on drop unless kept.
pub(crate) struct ServerDir {
    path: PathBuf,
    keep: bool,
    /// How the kept files are named when they are left behind.
    server: &'static str,
}

impl ServerDir {
    /// Creates `/tmp/perflab-PREFIX-…` for `server`, written in
    /// `leftovers` unless it is to be kept.
    pub(crate) fn create(
        prefix: &str,
        server: &'static str,
        user: Option<(u32, u32)>,
        keep: bool,
        leftovers: &mut ledger::Leftovers,
    ) -> anyhow::Result<Self> {
        Self::create_in(&std::env::temp_dir(), prefix, server, user, keep, leftovers)
    }

    /// Creates `PARENT/perflab-PREFIX-…`, as [`ServerDir::create`] does.
    pub(crate) fn create_in(
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

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The last line of its log `name` that holds anything, if any.
    pub(crate) fn last_line(&self, name: &str) -> Option<String> {
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
    pub(crate) fn said(&self, name: &str, marker: &str) -> Vec<String> {
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
/// were given with `settings_flag`, the other flags whose values it was
/// given (`others`: an origin, a certificate), and only then.
pub(crate) fn start_failure(
    server: &str,
    status: &str,
    said: &[String],
    user: Option<&str>,
    (settings_flag, settings_given): (&str, bool),
    others: &[&str],
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
    look.extend(others.iter().map(|flag| format!("check {flag}")));
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
pub(crate) struct Placement<'a> {
    /// The uid and gid it runs as (perflab's own when `None`).
    pub(crate) user: Option<(u32, u32)>,
    /// The CPUs it may run on (all when empty).
    pub(crate) cpus: &'a [usize],
    /// The memory cgroup it joins.
    pub(crate) cgroup: Option<&'a cgroup::ServerCgroup>,
    /// The shaped link whose namespace it joins.
    pub(crate) link: Option<&'a link::ServerLink>,
}

/// A program run as `user` on `cpus` (all when empty); a new command.
pub(crate) fn server_command(program: &Path, user: Option<(u32, u32)>, cpus: &[usize]) -> Command {
    placed_command(
        program,
        &Placement {
            user,
            cpus,
            ..Placement::default()
        },
    )
}

/// A program run where `placement` says. Between fork and exec it starts
/// a session of its own (signals to perflab's process group, a Ctrl-C at
/// the terminal among them, do not reach it: perflab stops it, in order;
/// see [`stop`]), joins the cgroup and the namespace while it is still
/// root (joining a namespace takes CAP_SYS_ADMIN), then becomes its user.
pub(crate) fn placed_command(program: &Path, placement: &Placement) -> Command {
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
        .map(cgroup::ServerCgroup::procs_fds)
        .unwrap_or_default();
    let namespace = placement.link.map(link::ServerLink::namespace_fd);
    let user = placement.user;
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: between fork and exec only async-signal-safe system calls
    // run (setsid, write, sched_setaffinity, setns, setgroups, setgid,
    // setuid), on values made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return fail();
            }
            for &fd in &cgroup_procs {
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
pub(crate) fn log_file(
    dir: &ServerDir,
    name: &str,
    user: Option<(u32, u32)>,
) -> anyhow::Result<Stdio> {
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

/// A running server process, leading a session of its own (see
/// [`placed_command`]): on drop, asked to stop with `stop_signal`, then
/// killed if it has not within `stop_timeout` (at once after a second
/// signal, [`stop::hurry`]), and whatever is left of its session killed
/// with it. It is reaped only then: until, its pid holds the session's id
/// so that no other process can take it.
pub(crate) struct ServerProcess {
    child: Child,
    stop_signal: libc::c_int,
    stop_timeout: Duration,
    /// How it ended, once it has (it is not reaped before the drop).
    ended: Option<std::process::ExitStatus>,
}

/// Why a server did not become ready.
pub(crate) enum NotReady {
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
    pub(crate) fn spawn(
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
            ended: None,
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
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has ended, and how (it is left a zombie until
    /// the drop, which reaps it).
    pub(crate) fn exited(&mut self) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.ended {
            return Some(status.to_string());
        }
        // SAFETY: waitid on our own child, into a zeroed siginfo; WNOWAIT
        // leaves it to be reaped later.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let waited = unsafe {
            libc::waitid(
                libc::P_PID,
                self.child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if waited != 0 {
            return Some(std::io::Error::last_os_error().to_string());
        }
        // SAFETY: filled in by waitid for a child that changed state;
        // si_pid stays 0 when none has.
        let (pid, code, value) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
        if pid == 0 {
            return None;
        }
        // The wait status the kernel would give: a code, or a signal.
        let raw = if code == libc::CLD_EXITED {
            (value & 0xff) << 8
        } else {
            value & 0x7f
        };
        let status = std::process::ExitStatus::from_raw(raw);
        self.ended = Some(status);
        Some(status.to_string())
    }

    /// Polls `ready` every `every` until it succeeds, the process ends, or
    /// `timeout` passes.
    pub(crate) fn wait_ready(
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
        while Instant::now() < deadline && !stop::hurry() && self.exited().is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
        // The main process, if it still runs, and whatever of its session
        // outlived it (workers its master left behind), while its pid —
        // the session's id — is still held by it, alive or a zombie.
        stop::signal_session(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nginx's error, in its log and again on its standard error (the
    /// same file), is quoted once, without its pid; the settings flag is
    /// named only when settings were given.
    #[test]
    fn a_failed_start_quotes_the_server_once_and_blames_only_what_was_given() {
        let mut leftovers = ledger::Leftovers::begin("test").unwrap();
        let dir = ServerDir::create("said", "test", None, false, &mut leftovers).unwrap();
        std::fs::write(
            dir.path().join("error.log"),
            "2026/11/26 17:58:32 [emerg] 26179#26179: cannot load certificate key \"/k.pem\": BIO_new_file() failed (Permission denied)\n\
             nginx: [emerg] cannot load certificate key \"/k.pem\": BIO_new_file() failed (Permission denied)\n\
             2026/11/26 17:58:32 [warn] 26179#26179: something else\n",
        )
        .unwrap();
        let said = dir.said("error.log", "[emerg]");
        assert_eq!(
            said,
            ["cannot load certificate key \"/k.pem\": BIO_new_file() failed (Permission denied)"]
        );
        let e = start_failure(
            "nginx",
            "exit status: 1",
            &said,
            Some("www-data"),
            ("--nginx-set", false),
            &[],
        )
        .to_string();
        assert!(e.starts_with("the managed nginx did not start (exit status: 1): it said: cannot load certificate key"), "{e}");
        assert!(e.contains("runs as the www-data user"), "{e}");
        assert!(!e.contains("check the --nginx-set"), "{e}");
        let e = start_failure(
            "nginx",
            "exit status: 1",
            &[],
            None,
            ("--nginx-set", true),
            &[],
        )
        .to_string();
        assert!(
            e.ends_with("it wrote no error to its log; check the --nginx-set values"),
            "{e}"
        );
        let e = start_failure(
            "PostgreSQL",
            "exit status: 1",
            &[],
            None,
            ("--pg-set", false),
            &[],
        )
        .to_string();
        assert!(
            e.ends_with("no --pg-set was given: this is the server's own failure"),
            "{e}"
        );
        // An accelerator given an origin URL blames the origin, not itself.
        let e = start_failure(
            "Varnish",
            "exit status: 2",
            &[],
            None,
            ("--varnish-set", false),
            &["--origin"],
        )
        .to_string();
        assert!(
            e.ends_with("it wrote no error to its log; check --origin"),
            "{e}"
        );
    }
}
