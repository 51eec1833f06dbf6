//! The `files` workload: a file server simulation. Each user owns
//! a subtree of a directory on any mounted file system (local, NFS, SMB),
//! thinks (`--think exp:10s`), then writes a new file, reads one of its
//! files back, stats one or deletes one, drawn by `--mix`; file sizes come
//! from `--file-size`. Every file's CRC-32 is recorded when written and
//! checked when read; after the run the whole tree is compared with what
//! the users wrote: missing, extra and altered files are named.
//!
//! Without `--target` the target is perflab's own `./perflab-files/`
//! ([`DEFAULT_DIR`]): made (and marked as perflab's) when absent, reused
//! after; a directory of that name without perflab's mark is refused.
//!
//! Each run works in a directory of its own under the target
//! (`perflab-files-…`). The users' initial files are written there before
//! the first step, obeying Ctrl-C and SIGTERM and stopping at the first
//! error (a full file system) with one line. Afterwards — after the run
//! unless `--keep`, and always after a preparation cut short — perflab
//! removes the files it wrote and its directories, nothing else: a
//! directory holding someone else's file is left, and named.

mod check;
mod removal;
mod sizes;
mod user;

use super::{CheckReport, OpCounts, Seat, Session, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::measure::Outcome;
use crate::plan::{Level, LoadModel, Plan};
use crate::sut::Target;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use removal::Removal;
use serde::{Deserialize, Serialize};
use sizes::FileSizes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use user::{Stopped, UserFiles, UserPlan, UserThread, DELETE, OPS, WRITE};

/// `perflab run files`.
pub struct Files;

/// The directory the files workload works in when no `--target` is given:
/// perflab's own, in the current directory, made if absent (then reused),
/// as the bank starts on `perflab-bank.db`.
pub(crate) const DEFAULT_DIR: &str = "perflab-files";

/// The file that marks [`DEFAULT_DIR`] as perflab's: a directory of that
/// name without it is someone else's, and perflab does not work in it
/// unless told with `--target`.
const OWNER_MARK: &str = ".perflab-files";

/// The files workload's flags.
#[derive(Debug, clap::Args)]
pub struct FilesArgs {
    /// The file server: dir:PATH, a directory on any mounted file system. Default: perflab's own ./perflab-files/, made if absent.
    #[arg(long, value_name = "TARGET")]
    pub(crate) target: Option<String>,

    /// Weights of the operations, e.g. write=60,read=30,stat=5,delete=5.
    #[arg(
        long,
        value_name = "MIX",
        default_value = "write=60,read=30,stat=5,delete=5"
    )]
    pub(crate) mix: String,

    /// Sizes of the files written: 16k, exp:16k or uniform:4k..64k.
    #[arg(long, value_name = "SIZES", default_value = "exp:16k")]
    pub(crate) file_size: String,

    /// Files each user writes before the first step.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(crate) initial_files: u32,

    /// Each write is made durable (fsync) before its file is closed.
    #[arg(long)]
    pub(crate) fsync: bool,

    /// Keep the run's directory (its files) after the run.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// The files workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesSpec {
    pub(crate) target: Target,
    /// Weights of write, read, stat and delete.
    pub(crate) mix: [u32; 4],
    pub(crate) sizes: FileSizes,
    pub(crate) initial_files: u32,
    pub(crate) fsync: bool,
    pub(crate) keep: bool,
    /// No `--target` was given: the target is [`DEFAULT_DIR`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) default_target: bool,
}

/// `perflab check files` takes no flags.
#[derive(Debug, clap::Args)]
pub struct FilesCheckArgs {}

impl WorkloadKind for Files {
    const NAME: &'static str = "files";
    const ABOUT: &'static str = "A file server: users write, read, stat and delete their files in a directory, every file checked.";
    const CHECK_ABOUT: &'static str =
        "The files workload checks its tree after every run (nothing to check after).";
    type RunArgs = FilesArgs;
    type CheckArgs = FilesCheckArgs;
    type Spec = FilesSpec;

    fn validate(args: &FilesArgs) -> Result<FilesSpec, PlanError> {
        let Some(given) = args.target.as_deref() else {
            return validate_with(args, default_target()?, true);
        };
        let target = Target::parse(given)
            .ok()
            .filter(|t| matches!(t, Target::Dir { .. }))
            .ok_or_else(|| {
                PlanError::flag(
                    "--target",
                    format!("'{}' is not dir:PATH", crate::sut::redact(given)),
                    "give a directory, e.g. --target dir:/mnt/share",
                )
            })?;
        let dir = target.file().map(Path::to_path_buf).unwrap_or_default();
        if !dir.is_dir() {
            return Err(PlanError::flag(
                "--target",
                format!("{} is not a directory", dir.display()),
                "give an existing directory",
            ));
        }
        writable(&dir)?;
        validate_with(args, target, false)
    }

    fn target(spec: &FilesSpec) -> Target {
        spec.target.clone()
    }

    fn start<D: SweepDriver>(
        spec: &FilesSpec,
        plan: &Plan,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let base = spec
            .target
            .file()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if spec.default_target {
            make_default_dir(&base, spec, users_of(plan))?;
        }
        let root = base.join(format!(
            "perflab-files-{}-{:08x}",
            std::process::id(),
            plan.seed as u32
        ));
        start_in(spec, plan, driver, base, root)
    }

    fn check(_args: &FilesCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new(
            "the files workload compares its whole tree with what its users wrote after every run; see the run's check",
        )
        .into())
    }
}

/// [`DEFAULT_DIR`] as a target: refused when a file or directory of that
/// name is there that perflab did not make, and when perflab may not make
/// it in the current directory.
fn default_target() -> Result<Target, PlanError> {
    let dir = Path::new(DEFAULT_DIR);
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && dir.join(OWNER_MARK).is_file() => writable(dir)?,
        Ok(m) if m.is_dir() => {
            return Err(PlanError::flag(
                "--target",
                format!(
                    "./{DEFAULT_DIR} exists and perflab did not make it (no {OWNER_MARK} in it); perflab works only in its own directory unless told"
                ),
                &format!("give --target dir:{DEFAULT_DIR} to work in it, --target dir:PATH for another, or move it away"),
            ))
        }
        Ok(_) => {
            // A file or a link of that name: no directory to work in.
            return Err(PlanError::flag(
                "--target",
                format!("./{DEFAULT_DIR} exists and perflab did not make it: it is not a directory"),
                "move it away, or give --target dir:PATH for a directory to work in",
            ));
        }
        Err(_) => writable(Path::new("."))?,
    }
    Ok(Target::Dir {
        path: dir.to_path_buf(),
    })
}

/// Makes [`DEFAULT_DIR`] perflab's own (the directory and its mark) if it
/// is not yet, after checking its file system has room for the initial
/// files of `users` users, and says where the run works.
fn make_default_dir(dir: &Path, spec: &FilesSpec, users: u32) -> anyhow::Result<()> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let need = u64::from(users)
        .saturating_mul(u64::from(spec.initial_files))
        .saturating_mul(spec.sizes.mean());
    let free =
        crate::workload::free_bytes_at(parent, "give --target dir:PATH on a mounted file system")?;
    if need > free {
        let (need, free) =
            crate::units::Bytes::apart(crate::units::Bytes(need), crate::units::Bytes(free));
        return Err(PlanError::flag(
            "--target",
            format!(
                "./{DEFAULT_DIR}: {users} users' initial files need about {need}, but its file system has {free} free"
            ),
            "free space there, give fewer --initial-files, or --target dir:PATH on another file system",
        )
        .into());
    }
    if !dir.join(OWNER_MARK).is_file() {
        std::fs::create_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot create ./{DEFAULT_DIR}: {e}"))?;
        std::fs::write(
            dir.join(OWNER_MARK),
            "made by perflab for the files workload; perflab works in this directory when run without --target\n",
        )
        .map_err(|e| anyhow::anyhow!("cannot mark ./{DEFAULT_DIR} as perflab's: {e}"))?;
    }
    crate::util::out(format_args!(
        "no --target: using ./{DEFAULT_DIR}/ (perflab's own)\n"
    ));
    Ok(())
}

/// The flags other than the target, validated; the spec on `target`.
fn validate_with(
    args: &FilesArgs,
    target: Target,
    default_target: bool,
) -> Result<FilesSpec, PlanError> {
    let mix = parse_mix(&args.mix)
        .map_err(|e| PlanError::flag("--mix", e, "e.g. --mix write=60,read=30,stat=5,delete=5"))?;
    let sizes = FileSizes::parse(&args.file_size)
        .map_err(|e| PlanError::flag("--file-size", e, "e.g. --file-size exp:16k"))?;
    if args.initial_files == 0 && mix[0] == 0 {
        return Err(PlanError::flag(
            "--initial-files",
            "with no files to start and no writes, there is nothing to read, stat or delete",
            "give --initial-files 1 or more, or writes in --mix",
        ));
    }
    Ok(FilesSpec {
        target,
        mix,
        sizes,
        initial_files: args.initial_files,
        fsync: args.fsync,
        keep: args.keep,
        default_target,
    })
}

/// Makes the run's own directory `root` under `base` and the users'
/// initial files in it, then hands the workload to `driver`; what perflab
/// wrote is removed after (unless `--keep`).
fn start_in<D: SweepDriver>(
    spec: &FilesSpec,
    plan: &Plan,
    driver: D,
    base: PathBuf,
    root: PathBuf,
) -> anyhow::Result<D::Output> {
    std::fs::create_dir(&root).map_err(|e| match e.raw_os_error() {
        Some(libc::EROFS | libc::EACCES | libc::EPERM) => not_writable(&base, &e).into(),
        Some(libc::ENOSPC | libc::EDQUOT) => anyhow::Error::from(PlanError::flag(
            "--target",
            format!("cannot create {}: {e}", root.display()),
            "free space there, or give a directory on another file system",
        )),
        _ => anyhow::anyhow!("cannot create {}: {e}", root.display()),
    })?;
    crate::util::out(format_args!("working in {}\n", root.display()));
    let shared = Arc::new(Shared {
        spec: spec.clone(),
        root: root.clone(),
        users: Mutex::new(HashMap::new()),
    });
    // From here every way out removes what perflab wrote; --keep holds
    // only once the preparation is done.
    let mut removal = Removal {
        shared: shared.clone(),
        keep: false,
    };
    write_initial_files(&shared, users_of(plan), plan.seed)?;
    removal.keep = spec.keep;
    let workload = Arc::new(FilesWorkload { shared });
    let started = Started {
        setup: Some(serde_json::json!({
            "directory": root.display().to_string(),
            "mix": OPS.iter().zip(spec.mix).map(|(o, w)| format!("{o}={w}")).collect::<Vec<_>>(),
            "fsync": spec.fsync,
        })),
        addresses: Some(Vec::new()),
        ..Started::default()
    };
    let out = driver.drive(workload, started);
    drop(removal);
    out
}

/// Whether perflab may make its directory in `dir`.
fn writable(dir: &Path) -> Result<(), PlanError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: a NUL-terminated path; access only reads it.
    if unsafe { libc::access(name.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        return Ok(());
    }
    Err(not_writable(dir, &std::io::Error::last_os_error()))
}

/// The refusal of a directory perflab may not write in.
fn not_writable(dir: &Path, e: &std::io::Error) -> PlanError {
    let why = match e.raw_os_error() {
        Some(libc::EROFS) => "is on a read-only file system".to_string(),
        Some(libc::EACCES | libc::EPERM) => "is not writable (permission denied)".to_string(),
        _ => format!("cannot be written in: {e}"),
    };
    PlanError::flag(
        "--target",
        format!("{} {why}", dir.display()),
        "give a directory perflab may write in",
    )
}

/// The most users any step of the plan opens: users are numbered from 0.
fn users_of(plan: &Plan) -> u32 {
    let connections = match plan.load {
        LoadModel::Open { connections, .. } => connections,
        LoadModel::Closed { .. } => 1,
    };
    plan.sweep
        .levels
        .iter()
        .map(|l| match l {
            Level::Users(n) => *n,
            Level::Rate(_) => connections,
        })
        .max()
        .unwrap_or(1)
        .max(1)
}

/// Each user's directory and `--initial-files`, before the first step.
/// Stops at the first signal ([`crate::util::Interrupted`]) or error (a
/// full file system: one line, bad input); the tables of what was written
/// are kept in `shared` either way, for the removal.
fn write_initial_files(shared: &Shared, users: u32, seed: u64) -> anyhow::Result<()> {
    let spec = &shared.spec;
    let total = u64::from(users) * u64::from(spec.initial_files);
    if total > 0 {
        crate::util::out(format_args!(
            "writing {} initial files for each of {users} users\n",
            spec.initial_files
        ));
    }
    let started = std::time::Instant::now();
    let mut written = 0u64;
    for user in 0..users {
        let plan = UserPlan {
            dir: shared.root.join(format!("u{user:05}")),
            sizes: spec.sizes,
            fsync: spec.fsync,
            seed: seed ^ (u64::from(user) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        let (files, result) = user::write_initial(plan, spec.initial_files);
        written += files.files.len() as u64;
        shared
            .users
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user, files);
        match result {
            Ok(()) => {}
            Err(Stopped::Interrupted(i)) => return Err(i.into()),
            Err(Stopped::Io(e)) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                return Err(PlanError::flag(
                    "--initial-files",
                    format!(
                        "the file system of {} is full after {written} of {total} initial files ({e})",
                        shared.root.display()
                    ),
                    "free space there, or give fewer --initial-files or a smaller --file-size",
                )
                .into())
            }
            Err(Stopped::Io(e)) => anyhow::bail!(
                "cannot write the initial files in {} after {written} of {total}: {e}",
                shared.root.display()
            ),
        }
    }
    if total > 0 {
        crate::util::out(format_args!(
            "wrote {written} initial files in {:.1} s\n",
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(())
}

/// `write=60,read=30,stat=5,delete=5` (missing names weigh 0).
fn parse_mix(text: &str) -> Result<[u32; 4], String> {
    let mut mix = [0u32; 4];
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not NAME=WEIGHT"))?;
        let i = OPS.iter().position(|o| *o == name.trim()).ok_or_else(|| {
            format!("'{name}' is not an operation; use write, read, stat, delete")
        })?;
        mix[i] = weight
            .trim()
            .parse()
            .ok()
            .filter(|w| *w <= 1_000_000)
            .ok_or_else(|| format!("'{weight}' is not a whole weight of at most 1000000"))?;
    }
    if mix.iter().sum::<u32>() == 0 {
        return Err("every weight is 0".to_string());
    }
    Ok(mix)
}

/// The files workload as the engine sees it.
pub(crate) struct FilesWorkload {
    shared: Arc<Shared>,
}

/// What the users of a run share.
struct Shared {
    spec: FilesSpec,
    root: PathBuf,
    /// Each user's files, kept between steps.
    users: Mutex<HashMap<u32, UserFiles>>,
}

/// One user: its thread, the mix and its random stream.
pub(crate) struct FilesSession {
    shared: Arc<Shared>,
    user: u32,
    thread: UserThread,
    rng: SmallRng,
    /// Files in the user's table, as its operations' outcomes tell: with
    /// none, the user writes, and its operation is counted as the write
    /// it is (a full file system's ENOSPC is never a read's).
    held: usize,
}

impl Workload for FilesWorkload {
    type Session = FilesSession;

    fn op_names(&self) -> &[&'static str] {
        &OPS
    }

    async fn open_session(
        &self,
        user: u32,
        seed: u64,
        _seat: Seat,
    ) -> anyhow::Result<FilesSession> {
        let s = &self.shared;
        let files = s
            .users
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&user);
        let plan = UserPlan {
            dir: s.root.join(format!("u{user:05}")),
            sizes: s.spec.sizes,
            fsync: s.spec.fsync,
            seed,
        };
        // Every user's table was made with its initial files before the
        // first step ([`write_initial_files`]).
        let files = files.unwrap_or_default();
        let held = files.files.len();
        let thread = UserThread::start(plan, files)?;
        Ok(FilesSession {
            shared: s.clone(),
            user,
            thread,
            rng: SmallRng::seed_from_u64(seed ^ 0x5EED),
            held,
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        let users = self.shared.users.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Some(check::tree_check(&self.shared.root, &users)?))
    }
}

impl Drop for FilesSession {
    fn drop(&mut self) {
        let files = self.thread.finish();
        self.shared
            .users
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.user, files);
    }
}

impl Session for FilesSession {
    fn choose(&mut self) -> usize {
        let mix = &self.shared.spec.mix;
        let mut x = self.rng.gen_range(0..mix.iter().sum::<u32>());
        let mut chosen = 0;
        for (i, w) in mix.iter().enumerate() {
            if x < *w {
                chosen = i;
                break;
            }
            x -= w;
        }
        // Nothing to read, stat or delete: the user writes a file instead.
        if self.held == 0 {
            0
        } else {
            chosen
        }
    }

    async fn execute(&mut self, op: usize) -> Outcome {
        let outcome = self.thread.run(op).await;
        if outcome.result == crate::measure::OpResult::Ok {
            match op {
                WRITE => self.held += 1,
                DELETE => self.held = self.held.saturating_sub(1),
                _ => {}
            }
        }
        outcome
    }
}
