//! The one lifecycle of a managed server, whatever its kind: its
//! programs found and its settings checked before anything is made, the
//! ledger begun, a fresh directory (and one for its log when `--log-dir`
//! asks), its shaped link and its cgroup, the kind's own files written,
//! the program spawned where its placement says, and a wait until it
//! answers, every way of not answering said the same way. On drop the
//! process stops first, then the link, the cgroup and the directories go,
//! and the ledger is struck off last (fields drop in order).
//!
//! A kind of server ([`ManagedKind`]) says only what differs: the
//! programs it needs, the files it writes, its command line, how to tell
//! it answers, what its log says when it fails, and how a run reaches it
//! ([`Reach`]). Like fio's `ioengine_ops`: one shape, many kinds.

use super::cgroup::ServerCgroup;
use super::ledger::Leftovers;
use super::link::ServerLink;
use super::{log_file, server_user, Advice, NotReady, Placement, Roles, ServerDir, ServerProcess};
use crate::error::PlanError;
use crate::sut::mysql::MyTarget;
use crate::sut::{ServerOptions, TargetKind};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Which start a readiness probe follows: the first (a database may be
/// created then) or a restart on the same files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    First,
    Again,
}

/// Polled until the server answers: `Err` says why it does not yet.
pub(crate) type Probe<'a> = Box<dyn FnMut() -> Result<(), String> + 'a>;

/// How a run reaches a managed server: by the protocol it speaks, not by
/// its kind (a cache in front of an origin is reached as any web server).
pub(crate) enum Reach {
    /// A PostgreSQL server's URL (libpq's fallbacks apply).
    Postgres { url: String },
    /// A MySQL-protocol server, credentials resolved.
    Mysql(MyTarget),
    /// A web server's base URLs, and its status page when it has one.
    Http {
        bases: Vec<String>,
        status: Option<String>,
        /// A caching proxy's access log in [`crate::sut::cache_log`]'s
        /// format, read each interval.
        cache_log: Option<crate::sut::cache_log::CacheAccounting>,
    },
}

/// What one kind of managed server says of itself; [`ManagedServer`]
/// drives the sequence.
pub(crate) trait ManagedKind: Sized {
    /// Its `--target`, e.g. `postgres:managed`.
    const SCHEME: &'static str;
    /// Whether it can be an accelerator's managed origin (`--origin
    /// SCHEME`): a web server that serves the file set.
    const SERVES_AS_ORIGIN: bool = false;
    /// The protocol it speaks, as a kind of target.
    const TARGET_KIND: TargetKind;
    /// How messages name the server, e.g. `PostgreSQL`.
    const NAME: &'static str;
    /// Its directory is `/tmp/perflab-PREFIX-…`.
    const DIR_PREFIX: &'static str;
    /// The log `--log-dir` moves, for a kind that has one to move.
    const MOVED_LOG: Option<MovedLog>;
    /// The system user it runs as when perflab is root.
    const USER: &'static str;
    /// Its log file in its directory (its standard error goes there).
    const LOG: &'static str;
    /// The prefix of its lab knobs (`pg` in `pg.NAME`).
    const KNOB: &'static str;
    /// The flags of its settings, its CPUs and its memory limit; the
    /// others its capabilities give it are `--KNOB-…` too ([`super::flags`]).
    const SETTINGS_FLAG: &'static str;
    const CPUS_FLAG: &'static str;
    const MEMORY_FLAG: &'static str;
    /// A setting it takes, for examples in messages.
    const EXAMPLE_SETTING: &'static str;
    /// What its settings flag takes, for its help.
    const SETTINGS_HELP: &'static str;
    /// Whether it serves, caches an origin, or either as its role flag
    /// says.
    const ROLES: Roles = Roles::Serves;
    /// Whether it listens on loopback addresses it is given.
    const LISTENS: bool = false;
    /// Whether it serves HTTPS with a certificate it is given.
    const SERVES_TLS: bool = false;
    /// Its settings the verdict's advice names.
    const ADVICE: Advice = Advice::NONE;
    /// The setting that sizes its own cache of pages, when it keeps one
    /// the memory what-if predicts (InnoDB's buffer pool).
    const CACHE_SETTING: Option<&'static str> = None;
    /// Its main program's name, for "cannot start PROGRAM".
    const PROGRAM: &'static str;
    /// How long it may take to answer, and how often it is asked.
    const START_TIMEOUT: Duration;
    const POLL: Duration;
    /// What it fails to do when it times out: "accept connections".
    const READY_MEANS: &'static str;
    /// The signal that stops it politely, and how long it may take.
    const STOP_SIGNAL: libc::c_int;
    const STOP_TIMEOUT: Duration;

    /// The programs it runs, found.
    type Programs;

    /// A setting's form, checked alone before anything is made, for a
    /// server that caches an origin (`accelerating`) or not; any by
    /// default.
    fn check_setting(_name: &str, _value: &str, _accelerating: bool) -> Result<(), String> {
        Ok(())
    }

    /// Whether the server takes these settings, asked of its own program
    /// before anything is made (see [`super::asked`]); yes by default.
    fn ask(_settings: &[(String, String)], _accelerating: bool) -> Result<(), String> {
        Ok(())
    }

    /// The flags besides its settings whose values reach its files (an
    /// origin's URL, a certificate), for a failed start to name.
    fn given_flags(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// Finds its programs and checks `options` against the kind, before
    /// anything is made.
    fn find(options: &ServerOptions) -> anyhow::Result<Self::Programs>;

    /// What its program says its version is (empty when it says nothing).
    fn version(programs: &Self::Programs, user: Option<(u32, u32)>) -> String;

    /// Writes its files on `site` (data directory, configuration) and
    /// picks its ports: the kind's state for the rest of its life.
    fn prepare(programs: Self::Programs, site: &Site) -> anyhow::Result<Self>;

    /// Its command line, the program placed as `site` says.
    fn command(&self, site: &Site) -> Command;

    /// The readiness probe after a start.
    fn probe<'a>(&'a self, site: &'a Site, start: Start) -> anyhow::Result<Probe<'a>>;

    /// What its log said when it ended while starting.
    fn said(dir: &ServerDir) -> Vec<String>;

    /// How a run reaches it.
    fn reach(&self, site: &Site) -> Result<Reach, PlanError>;

    /// Where it answers, as its announcement says: its address.
    fn at(&self, site: &Site) -> String {
        site.address().to_string()
    }

    /// Its settings as it runs with them (`NAME`, `VALUE`).
    fn settings<'a>(&'a self, site: &'a Site) -> &'a [(String, String)] {
        &site.settings
    }

    /// The directory a web server serves files from; none for others.
    fn docroot(&self, _site: &Site) -> Option<PathBuf> {
        None
    }

    /// The main process of the origin it runs in front of, when perflab
    /// runs that too (followed like the server's own).
    fn origin_pid(&self) -> Option<u32> {
        None
    }
}

/// A log a kind keeps apart when `--log-dir` asks.
pub(crate) struct MovedLog {
    /// Its directory under `--log-dir` is `perflab-PREFIX-…`.
    pub(crate) dir_prefix: &'static str,
    /// What it is, for messages: `PostgreSQL's write-ahead log`.
    pub(crate) what: &'static str,
}

/// Where a managed server lives and what it was given. The link and
/// the cgroup go after the process, the directories after them, the
/// ledger's record last (fields drop in order).
pub(crate) struct Site {
    /// The shaped link it runs behind, when it does.
    pub(crate) link: Option<ServerLink>,
    /// Its memory and I/O cgroup, when it is held to a limit.
    pub(crate) cgroup: Option<ServerCgroup>,
    pub(crate) dir: ServerDir,
    /// Its log's own directory, when `--log-dir` moved it.
    pub(crate) log_dir: Option<ServerDir>,
    leftovers: Leftovers,
    /// The uid and gid it runs as (perflab's own when `None`).
    pub(crate) user: Option<(u32, u32)>,
    /// Its settings as given (`--pg-set NAME=VALUE`, …).
    pub(crate) settings: Vec<(String, String)>,
    /// The CPUs it runs on (all when empty).
    pub(crate) cpus: Vec<usize>,
}

/// Where a server listens when its link is not shaped.
pub(crate) const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

impl Site {
    /// The ledger begun, then the directories, the link and the cgroup,
    /// each written in the ledger as it is made.
    fn make<K: ManagedKind>(options: &ServerOptions) -> anyhow::Result<Site> {
        let user = server_user(K::USER, K::NAME)?;
        let mut leftovers = Leftovers::begin(K::NAME)?;
        let dir = ServerDir::create(K::DIR_PREFIX, K::NAME, user, options.keep, &mut leftovers)?;
        let log_dir = match (&options.log_dir, K::MOVED_LOG) {
            (Some(parent), Some(moved)) => Some(ServerDir::create_in(
                parent,
                moved.dir_prefix,
                K::NAME,
                user,
                options.keep,
                &mut leftovers,
            )?),
            _ => None,
        };
        let link = options
            .link
            .as_ref()
            .map(|shape| ServerLink::create(shape, &mut leftovers))
            .transpose()?;
        let cgroup = ServerCgroup::for_server(
            dir.path(),
            options.memory,
            options.io.as_ref(),
            K::MEMORY_FLAG,
            &mut leftovers,
        )?;
        Ok(Site {
            link,
            cgroup,
            dir,
            log_dir,
            leftovers,
            user,
            settings: options.settings.clone(),
            cpus: options.cpus.clone(),
        })
    }

    /// Where its program runs: its user, CPUs, cgroup and namespace.
    pub(crate) fn placement(&self) -> Placement<'_> {
        Placement {
            user: self.user,
            cpus: &self.cpus,
            cgroup: self.cgroup.as_ref(),
            link: self.link.as_ref(),
        }
    }

    /// The address it listens on: loopback, or its end of a shaped link.
    pub(crate) fn address(&self) -> Ipv4Addr {
        self.link.as_ref().map_or(LOOPBACK, |l| l.server_addr)
    }

    /// The address perflab comes from: loopback, or the host's end of
    /// the link.
    pub(crate) fn client(&self) -> Ipv4Addr {
        self.link.as_ref().map_or(LOOPBACK, |l| l.host_addr)
    }

    /// Hands `path`, made by perflab in the server's directory, to the
    /// server's user.
    pub(crate) fn hand_over(&self, path: &Path) -> anyhow::Result<()> {
        if let Some((uid, gid)) = self.user {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
        }
        Ok(())
    }
}

/// A running managed server of kind `K`: stopped, then its surroundings
/// removed, on drop. Public for the integration tests, which start one by
/// its alias (`ManagedPostgres::start`); the kinds themselves stay the
/// crate's own.
#[allow(private_bounds)]
pub struct ManagedServer<K: ManagedKind> {
    process: ServerProcess,
    kind: K,
    site: Site,
    /// What its program says its version is.
    version: String,
}

#[allow(private_bounds)]
impl<K: ManagedKind> ManagedServer<K> {
    /// Makes everything the server needs, starts it with `options` and
    /// waits until it answers.
    pub fn start(options: &ServerOptions) -> anyhow::Result<Self> {
        let programs = K::find(options)?;
        let site = Site::make::<K>(options)?;
        let version = K::version(&programs, site.user);
        let kind = K::prepare(programs, &site)?;
        let mut site = site;
        let process = spawn(&kind, &mut site)?;
        let mut server = ManagedServer {
            process,
            kind,
            site,
            version,
        };
        server.wait_ready(Start::First)?;
        Ok(server)
    }

    /// Starts the server again on the same files and ports (after a
    /// crash), until it answers or its start's deadline passes (a
    /// database's old backends may hold its shared memory a while).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let _ = self.process.exited();
        let deadline = Instant::now() + K::START_TIMEOUT;
        loop {
            self.process = spawn(&self.kind, &mut self.site)?;
            match self.wait_ready(Start::Again) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Polls the kind's probe until the server answers; a server that
    /// ended, or did not answer in time, is said in one line.
    fn wait_ready(&mut self, start: Start) -> anyhow::Result<()> {
        let probe = self.kind.probe(&self.site, start)?;
        match self.process.wait_ready(K::START_TIMEOUT, K::POLL, probe) {
            Ok(()) => Ok(()),
            Err(NotReady::Exited(status)) => Err(super::start_failure(
                K::NAME,
                &status,
                &K::said(&self.site.dir),
                self.site.user.map(|_| K::USER),
                (K::SETTINGS_FLAG, !self.site.settings.is_empty()),
                &self.kind.given_flags(),
            )
            .into()),
            Err(NotReady::Timeout(e)) => anyhow::bail!(
                "the managed {} did not {} in {} s: {e}",
                K::NAME,
                K::READY_MEANS,
                K::START_TIMEOUT.as_secs()
            ),
            Err(NotReady::Interrupted(i)) => Err(i.into()),
        }
    }

    /// The kind's own state.
    pub(crate) fn kind(&self) -> &K {
        &self.kind
    }

    /// Where it lives and what it was given.
    pub(crate) fn site(&self) -> &Site {
        &self.site
    }

    /// The server's main process id (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Where the server's files are.
    pub fn dir(&self) -> &Path {
        self.site.dir.path()
    }

    /// The shaped link it runs behind, when it does.
    pub(crate) fn link(&self) -> Option<&ServerLink> {
        self.site.link.as_ref()
    }

    /// Its memory and I/O cgroup, when it runs in one.
    pub fn cgroup(&self) -> Option<&ServerCgroup> {
        self.site.cgroup.as_ref()
    }

    /// Its log's own directory, when `--log-dir` moved it.
    pub(crate) fn log_dir(&self) -> Option<&Path> {
        self.site.log_dir.as_ref().map(ServerDir::path)
    }
}

/// Spawns the kind's command on `site`, its standard error into its log,
/// written in the ledger as soon as it has a pid.
fn spawn<K: ManagedKind>(kind: &K, site: &mut Site) -> anyhow::Result<ServerProcess> {
    let mut cmd = kind.command(site);
    cmd.stderr(log_file(&site.dir, K::LOG, site.user)?);
    ServerProcess::spawn(
        cmd,
        K::STOP_SIGNAL,
        K::STOP_TIMEOUT,
        K::PROGRAM,
        &mut site.leftovers,
    )
}

/// A managed server of any kind, as a run holds it.
pub(crate) trait Running {
    /// Its main process id.
    fn pid(&self) -> u32;
    /// What its program says its version is.
    fn version(&self) -> &str;
    /// Where its files are.
    fn dir(&self) -> &Path;
    /// Where it answers, for its announcement.
    fn at(&self) -> String;
    /// Its memory and I/O cgroup, when it runs in one.
    fn cgroup(&self) -> Option<&ServerCgroup>;
    /// The shaped link it runs behind, when it does.
    fn link(&self) -> Option<&ServerLink>;
    /// Its log's own directory, when it has one.
    fn log_dir(&self) -> Option<&Path>;
    /// Its settings as it runs with them (`NAME`, `VALUE`).
    fn settings(&self) -> &[(String, String)];
    /// How a run reaches it.
    fn reach(&self) -> Result<Reach, PlanError>;
    /// The directory a web server serves files from.
    fn docroot(&self) -> Option<PathBuf>;
    /// The main process of its managed origin, when it has one.
    fn origin_pid(&self) -> Option<u32>;
}

/// Before the server stops (its fields drop after this), its disk
/// throttle is lifted: no figure is taken while it shuts down, and
/// PostgreSQL's shutdown checkpoint through 100 writes a second took 7.5
/// to 8.5 s of a lab's cell where the bare disk takes a fraction of one.
impl<K: ManagedKind> Drop for ManagedServer<K> {
    fn drop(&mut self) {
        if let Some(cgroup) = &self.site.cgroup {
            let _ = cgroup.hold_io(false);
        }
    }
}

impl<K: ManagedKind> Running for ManagedServer<K> {
    fn pid(&self) -> u32 {
        ManagedServer::pid(self)
    }
    fn version(&self) -> &str {
        &self.version
    }
    fn dir(&self) -> &Path {
        ManagedServer::dir(self)
    }
    fn at(&self) -> String {
        self.kind.at(&self.site)
    }
    fn cgroup(&self) -> Option<&ServerCgroup> {
        ManagedServer::cgroup(self)
    }
    fn link(&self) -> Option<&ServerLink> {
        ManagedServer::link(self)
    }
    fn log_dir(&self) -> Option<&Path> {
        ManagedServer::log_dir(self)
    }
    fn settings(&self) -> &[(String, String)] {
        self.kind.settings(&self.site)
    }
    fn reach(&self) -> Result<Reach, PlanError> {
        self.kind.reach(&self.site)
    }
    fn docroot(&self) -> Option<PathBuf> {
        self.kind.docroot(&self.site)
    }
    fn origin_pid(&self) -> Option<u32> {
        self.kind.origin_pid()
    }
}

/// Starts a server of kind `K`, boxed: what a [`super::KindEntry`] calls.
pub(crate) fn start_boxed<K: ManagedKind + 'static>(
    options: &ServerOptions,
) -> anyhow::Result<Box<dyn Running>> {
    Ok(Box::new(ManagedServer::<K>::start(options)?))
}
