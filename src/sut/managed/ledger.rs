//! The ledger of what managed servers leave on the host while they run:
//! the server's processes, its directory, its memory cgroup, its network
//! namespace and veth pair (the qdiscs and packet-drop rules live on those
//! and go with them). Each part is written down before it is made (a
//! process as soon as it has a pid) and struck off once it is gone, so
//! that whatever a perflab killed with SIGKILL left behind can be found
//! and removed later by [`sweep`] (`perflab lab cleanup`).
//!
//! The ledger is a directory of JSON files, one per managed server, under
//! `/run/perflab/leftovers` (root) or the temporary directory: the parts
//! are the host's, not any one results store's, so every store's lab finds
//! them, and a reboot clears the ledger together with what it lists.
//! An entry is swept only when its owner (the `perflab` process that made
//! it, known by pid and start time) has ended; processes are known the same
//! way, so a reused pid is never signalled.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a left-behind server has to stop before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest ledger entry read (a few parts; anything larger is not ours).
const MAX_ENTRY: u64 = 64 * 1024;

/// A process known by its pid and its start time (clock ticks after boot,
/// `/proc/PID/stat` field 22), so that a pid the kernel gave to another
/// process since is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcessId {
    pub(crate) pid: u32,
    pub(crate) start: u64,
}

impl ProcessId {
    /// The process `pid`, if it runs (a zombie has ended).
    pub(crate) fn of(pid: u32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may hold spaces: fields are
        // counted after its closing one (state is field 3).
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            return None;
        }
        Some(ProcessId {
            pid,
            start: fields.get(19)?.parse().ok()?,
        })
    }

    /// Whether this very process still runs.
    pub(crate) fn alive(&self) -> bool {
        ProcessId::of(self.pid) == Some(*self)
    }
}

/// One thing a managed server made on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Part {
    /// The server's main process, and the signal that stops it politely.
    Process { id: ProcessId, signal: i32 },
    /// Its directory of files (data, configuration, log).
    Dir { path: PathBuf },
    /// Its cgroup's directory.
    Cgroup { path: PathBuf },
    /// Its network namespace (`ip netns` name), with the shaping and
    /// packet-drop rules inside it.
    Netns { name: String },
    /// The host's end of its veth pair, with its qdisc.
    Veth { name: String },
}

impl Part {
    /// Whether it is still there.
    pub(crate) fn exists(&self) -> bool {
        match self {
            Part::Process { id, .. } => id.alive(),
            Part::Dir { path } | Part::Cgroup { path } => path.exists(),
            Part::Netns { name } => Path::new("/run/netns").join(name).exists(),
            Part::Veth { name } => Path::new("/sys/class/net").join(name).exists(),
        }
    }

    /// How a line names it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Part::Process { id, .. } => format!("process {}", id.pid),
            Part::Dir { path } => format!("directory {}", path.display()),
            Part::Cgroup { path } => format!("cgroup {}", path.display()),
            Part::Netns { name } => format!("network namespace {name}"),
            Part::Veth { name } => format!("veth {name}"),
        }
    }

    /// Whether it carries the names perflab gives (`perflab-…` directories,
    /// namespaces and cgroups, `pl…` interfaces): an entry that names
    /// anything else is not acted on.
    fn is_ours(&self) -> bool {
        let named = |path: &Path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("perflab-"))
        };
        match self {
            Part::Process { .. } => true,
            Part::Dir { path } => named(path) && path.is_absolute(),
            Part::Cgroup { path } => named(path) && path.starts_with("/sys/fs/cgroup"),
            Part::Netns { name } => name.starts_with("perflab-") && !name.contains('/'),
            Part::Veth { name } => name.starts_with("pl") && name.len() <= 15,
        }
    }

    /// Removes it (stops a process: its signal, then SIGKILL after
    /// [`STOP_TIMEOUT`]).
    fn remove(&self) -> Result<(), String> {
        if !self.exists() {
            return Ok(());
        }
        match self {
            Part::Process { id, signal } => {
                // SAFETY: the process is ours: its pid and start time match.
                unsafe { libc::kill(id.pid as libc::pid_t, *signal) };
                let deadline = Instant::now() + STOP_TIMEOUT;
                while id.alive() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
                if id.alive() {
                    // SAFETY: as above.
                    unsafe { libc::kill(id.pid as libc::pid_t, libc::SIGKILL) };
                }
                Ok(())
            }
            Part::Dir { path } => std::fs::remove_dir_all(path).map_err(|e| e.to_string()),
            Part::Cgroup { path } => remove_cgroup(path),
            Part::Netns { name } => run_ip(&["netns", "del", name]),
            Part::Veth { name } => run_ip(&["link", "del", name]),
        }
    }
}

/// Removes a cgroup once its processes have ended; those still in it after
/// a while are the left-behind server's own children, and are killed.
fn remove_cgroup(path: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
            Err(_) => {}
        }
        if Instant::now() + Duration::from_secs(5) >= deadline {
            let procs = std::fs::read_to_string(path.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: a process in the server's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `ip ARGS`, its error as one line.
pub(crate) fn run_ip(args: &[&str]) -> Result<(), String> {
    run_tool("ip", args, None)
}

/// Runs a network tool (`ip`, `tc`, `nft`) with `input` on its standard
/// input; its complaint as one line when it fails.
pub(crate) fn run_tool(tool: &str, args: &[&str], input: Option<&str>) -> Result<(), String> {
    use std::io::Write;
    let program = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(tool));
    let shown = format!("{tool} {}", args.join(" "));
    let mut child = Command::new(&program)
        .args(args)
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run {tool} ({e}); install it (apt-get install iproute2 nftables)")
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{shown}` failed: {}",
            crate::util::one_line(String::from_utf8_lossy(&out.stderr).trim())
        ))
    }
}

/// One managed server's entry, as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// What the server is (`PostgreSQL`).
    server: String,
    /// The perflab process that made it.
    owner: ProcessId,
    /// What it made, in the order it was made.
    parts: Vec<Part>,
}

/// A managed server's entry in the ledger, kept current as its parts are
/// made; dropped last, it strikes off what is gone and leaves what is not.
pub(crate) struct Leftovers {
    path: PathBuf,
    entry: Entry,
    /// Counts the server as alive (a second signal then hurries its stop
    /// rather than ending the process); dropped after the entry is
    /// struck off.
    _live: super::stop::Live,
}

/// The ledger's directory.
pub fn ledger_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/run/perflab/leftovers")
    } else {
        // SAFETY: as above.
        std::env::temp_dir().join(format!("perflab-leftovers-{}", unsafe { libc::geteuid() }))
    }
}

/// Checks that `path` is this user's alone: a directory or file, not a
/// link, owned by the effective user and writable by no one else. The
/// ledger names processes to stop and directories to remove, so one that
/// another user could write (a ledger in a shared /tmp made by someone
/// else first) is never read.
fn this_users_alone(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.file_type().is_symlink() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        anyhow::bail!(
            "{} is not this user's alone (owner {}, mode {:o}); perflab keeps its ledger of managed servers there: remove it and run again",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

impl Leftovers {
    /// Opens an entry for a managed `server` owned by this process.
    pub(crate) fn begin(server: &str) -> anyhow::Result<Leftovers> {
        use std::os::unix::fs::DirBuilderExt;
        static OPENED: AtomicUsize = AtomicUsize::new(0);
        let dir = ledger_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot make the ledger directory {}", dir.display()))?;
        this_users_alone(&dir)?;
        let pid = std::process::id();
        let owner = ProcessId::of(pid).context("cannot read this process's start time")?;
        let path = dir.join(format!(
            "{pid}-{}.json",
            OPENED.fetch_add(1, Ordering::Relaxed)
        ));
        let leftovers = Leftovers {
            path,
            entry: Entry {
                server: server.to_string(),
                owner,
                parts: Vec::new(),
            },
            _live: super::stop::Live::new(),
        };
        leftovers.write()?;
        Ok(leftovers)
    }

    /// Writes `part` down (before it is made, or as soon as it has a name).
    pub(crate) fn add(&mut self, part: Part) -> anyhow::Result<()> {
        self.entry.parts.push(part);
        self.write()
    }

    fn write(&self) -> anyhow::Result<()> {
        let text = serde_json::to_string(&self.entry)?;
        let temporary = self.path.with_extension("tmp");
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, &self.path))
            .with_context(|| format!("cannot write the ledger entry {}", self.path.display()))
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        self.entry.parts.retain(Part::exists);
        if self.entry.parts.is_empty() {
            let _ = std::fs::remove_file(&self.path);
        } else if self.write().is_ok() {
            crate::util::err(format_args!(
                "warning: the managed {} left {}; perflab lab cleanup removes them\n",
                self.entry.server,
                self.entry
                    .parts
                    .iter()
                    .map(Part::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
}

/// What [`sweep`] did with one part.
pub(crate) struct Swept {
    /// The server it belonged to.
    pub(crate) server: String,
    /// The part, named.
    pub(crate) part: String,
    /// Removed, or why not.
    pub(crate) outcome: Result<(), String>,
}

/// Removes what the managed servers of ended perflab processes left:
/// their processes first, then namespaces, interfaces, cgroups and
/// directories. Entries of running perflab processes are not touched; a
/// sweep waits while another runs. Returns what was there, part by part.
pub(crate) fn sweep() -> anyhow::Result<Vec<Swept>> {
    let dir = ledger_dir();
    let mut swept = Vec::new();
    if !dir.exists() {
        return Ok(swept);
    }
    this_users_alone(&dir)?;
    // One sweep at a time (a `lab cleanup` beside a `lab resume`): the
    // second waits, then finds what the first removed struck off, so each
    // part is removed and said once.
    let _swept_alone = lock_exclusive(&dir)?;
    let files = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read the ledger {}", dir.display()))?;
    for file in files.filter_map(Result::ok) {
        let path = file.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Some(mut entry) = this_users_alone(&path)
            .ok()
            .and_then(|()| read_entry(&path))
        else {
            crate::util::err(format_args!(
                "warning: {} is not a ledger entry perflab wrote; left alone\n",
                path.display()
            ));
            continue;
        };
        if entry.owner.alive() {
            continue;
        }
        // Processes before what they use, and a namespace before the
        // host's veth end (deleting the namespace takes the pair with it).
        let rank = |p: &Part| match p {
            Part::Process { .. } => 0,
            Part::Netns { .. } => 1,
            Part::Veth { .. } => 2,
            Part::Cgroup { .. } => 3,
            Part::Dir { .. } => 4,
        };
        entry.parts.sort_by_key(rank);
        let mut remaining = Vec::new();
        for part in entry.parts.iter().filter(|p| p.exists()) {
            let outcome = if part.is_ours() {
                // A veth goes with its namespace, a moment after: gone is
                // removed, whoever removed it.
                part.remove().or_else(|e| match part.exists() {
                    true => Err(e),
                    false => Ok(()),
                })
            } else {
                Err("not named as perflab names what it makes; left alone".to_string())
            };
            if outcome.is_err() {
                remaining.push(part.clone());
            }
            swept.push(Swept {
                server: entry.server.clone(),
                part: part.describe(),
                outcome,
            });
        }
        if remaining.is_empty() {
            let _ = std::fs::remove_file(&path);
        } else {
            entry.parts = remaining;
            let _ = std::fs::write(&path, serde_json::to_string(&entry).unwrap_or_default());
        }
    }
    Ok(swept)
}

/// `dir` open and locked (`flock`, exclusive) until the file is dropped;
/// waits while another process holds it.
fn lock_exclusive(dir: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let file =
        std::fs::File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    loop {
        // SAFETY: a descriptor the file owns, for as long as the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).with_context(|| format!("cannot lock {}", dir.display()));
        }
    }
}

/// An entry, if the file is one (small, and JSON of the right shape).
fn read_entry(path: &Path) -> Option<Entry> {
    use std::io::Read;
    let mut text = String::new();
    // A FIFO named like an entry would hold the sweep until a writer came.
    crate::util::open_regular(path)
        .ok()?
        .take(MAX_ENTRY)
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_another_user_could_write_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert!(this_users_alone(dir.path()).is_ok());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = this_users_alone(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("not this user's alone") && e.contains("mode 777"),
            "{e}"
        );
        let symlink = dir.path().join("symlink");
        std::os::unix::fs::symlink("/", &symlink).unwrap();
        assert!(this_users_alone(&symlink).is_err());
    }

    /// A FIFO named like an entry is no entry, said at once: opening it
    /// for reading would wait for a writer that never comes.
    #[test]
    fn a_fifo_among_the_entries_is_passed_over_at_once() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("1234.json");
        let name = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path this test owns.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_entry(&fifo).is_none()));
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(2)),
            Ok(true),
            "the FIFO was waited on"
        );
    }

    #[test]
    fn a_process_is_known_by_its_start_time() {
        let me = ProcessId::of(std::process::id()).unwrap();
        assert!(me.alive());
        let other = ProcessId {
            start: me.start + 1,
            ..me
        };
        assert!(!other.alive(), "a reused pid is another process");
    }

    #[test]
    fn an_ended_owners_parts_are_swept_and_a_living_owners_kept() {
        // An owner that has ended: a child that ran and was reaped.
        let mut child = Command::new("true").spawn().unwrap();
        let ended = ProcessId::of(child.id()).unwrap_or(ProcessId {
            pid: child.id(),
            start: 1,
        });
        child.wait().unwrap();
        let dir = tempfile::Builder::new()
            .prefix("perflab-swept-")
            .tempdir()
            .unwrap()
            .keep();
        let not_ours = tempfile::Builder::new().prefix("other-").tempdir().unwrap();
        let ledger = ledger_dir();
        std::fs::create_dir_all(&ledger).unwrap();
        let entry = |owner, path: &Path| Entry {
            server: "test".into(),
            owner,
            parts: vec![Part::Dir {
                path: path.to_path_buf(),
            }],
        };
        let dead = ledger.join(format!("test-dead-{}.json", std::process::id()));
        let odd = ledger.join(format!("test-odd-{}.json", std::process::id()));
        std::fs::write(&dead, serde_json::to_string(&entry(ended, &dir)).unwrap()).unwrap();
        std::fs::write(
            &odd,
            serde_json::to_string(&entry(ended, not_ours.path())).unwrap(),
        )
        .unwrap();
        // A living owner's entry is not touched.
        let mut mine = Leftovers::begin("test").unwrap();
        let kept = tempfile::Builder::new()
            .prefix("perflab-kept-")
            .tempdir()
            .unwrap();
        mine.add(Part::Dir {
            path: kept.path().to_path_buf(),
        })
        .unwrap();

        // While another sweep holds the ledger, this one waits for it.
        let held = lock_exclusive(&ledger).unwrap();
        let sweeping = std::thread::spawn(sweep);
        std::thread::sleep(Duration::from_millis(300));
        assert!(dir.exists(), "swept beside another sweep");
        drop(held);
        let swept = sweeping.join().unwrap().unwrap();
        assert!(!dir.exists(), "the ended owner's directory is removed");
        assert!(!dead.exists(), "and its entry struck off");
        assert!(kept.path().exists(), "a running owner's parts stay");
        assert!(
            not_ours.path().exists(),
            "a part perflab did not name stays"
        );
        assert!(swept
            .iter()
            .any(|s| s.part.contains("perflab-swept-") && s.outcome.is_ok()));
        assert!(swept
            .iter()
            .any(|s| s.part.contains("other-") && s.outcome.is_err()));
        std::fs::remove_file(&odd).unwrap();
        drop(kept);
        drop(mine);
    }
}
