//! The `disk` workload: Iometer's access specifications on a file, as seed
//! 003 compared host bus adapters with them. Users are outstanding I/Os
//! (`--depth`, another name of `--users`); each runs one I/O at a time of
//! the [`access`] spec, on io_uring with direct I/O and registered buffers
//! ([`uring`]) or, where io_uring is unavailable, on threads with
//! pread/pwrite ([`psync`]). Every write is stamped sector by sector
//! ([`block`]) and recorded when acknowledged in the file's [`ledger`];
//! `--verify` checks every sector read against it, and `perflab check
//! disk` reads the whole file back.
//!
//! The target file is created at `--size` and preconditioned by one
//! sequential write pass (its MB/s reported), or reused when its ledger
//! says it was written to the end at that size. A file perflab did not make
//! — no ledger beside it, or a ledger made for another file of that name —
//! is written only with `--destroy-data`, and nothing is written that the
//! file system has no room for. A device is written only with
//! `--destroy-data`, and never while anything holds it
//! ([`crate::target::device`]).

pub mod access;
pub mod block;
mod inflight;
pub mod ledger;
mod psync;
mod session;
mod uring;

use super::{CheckReport, Driver, Kind, Started};
use crate::error::PlanError;
use crate::plan::{LoadModel, Plan};
use crate::target::Target;
use crate::units::Bytes;
use access::{AccessSpec, SECTOR};
use anyhow::Context;
use ledger::{FileIdentity, Ledger};
use serde::{Deserialize, Serialize};
use session::{DiskWorkload, Shared};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// `perflab run disk`.
pub struct Disk;

/// How I/O reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// io_uring, registered buffers.
    #[value(name = "io_uring")]
    #[serde(rename = "io_uring")]
    Uring,
    /// pread/pwrite on a thread per user.
    Psync,
}

/// The disk workload's flags.
#[derive(Debug, clap::Args)]
pub struct DiskArgs {
    /// The target: file:PATH (created at --size and preconditioned, or reused) or device:/dev/NAME.
    #[arg(long, value_name = "TARGET", required_unless_present = "list_specs")]
    pub target: Option<String>,

    /// Write over what the target holds: a device's data, or an existing file perflab did not make (never a device mounted or held).
    #[arg(long)]
    pub destroy_data: bool,

    /// The file's size when perflab creates it, e.g. 1GiB (default: an existing file's).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,

    /// The access spec: a name (see --list-specs) or lines, e.g. 'size=4k share=60 read=80; size=64k share=40 read=80'.
    #[arg(
        long,
        value_name = "SPEC",
        default_value = "4k-randread",
        conflicts_with = "spec_file"
    )]
    pub spec: String,

    /// The access spec from a TOML file ([[line]] tables of size, share, read, random, delay, burst, align).
    #[arg(long, value_name = "FILE")]
    pub spec_file: Option<PathBuf>,

    /// Print the built-in access specs and exit.
    #[arg(long)]
    pub list_specs: bool,

    /// Go through the page cache instead of direct I/O.
    #[arg(long)]
    pub buffered: bool,

    /// io_uring (default where the kernel allows it) or psync.
    #[arg(long, value_name = "ENGINE", value_enum)]
    pub engine: Option<Engine>,

    /// Check every sector read against the last write acknowledged there.
    #[arg(long)]
    pub verify: bool,
}

/// The disk workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSpec {
    pub target: Target,
    /// The file's size, bytes.
    pub size: u64,
    pub spec: AccessSpec,
    /// Direct I/O (O_DIRECT), not through the page cache.
    pub direct: bool,
    pub engine: Engine,
    /// Why the engine was chosen, when not asked for.
    #[serde(default)]
    pub engine_note: Option<String>,
    pub verify: bool,
    /// A device's contents, or a file perflab did not make, may be overwritten.
    #[serde(default)]
    pub destroy_data: bool,
}

/// `perflab check disk`.
#[derive(Debug, clap::Args)]
pub struct DiskCheckArgs {
    /// The target: file:PATH or device:/dev/NAME.
    #[arg(long, value_name = "TARGET")]
    pub target: String,
}

impl Kind for Disk {
    const NAME: &'static str = "disk";
    const ABOUT: &'static str = "Iometer's access specs on a file: outstanding I/Os on io_uring, every write stamped and every block verifiable.";
    const CHECK_ABOUT: &'static str =
        "Reads a disk target back and checks every sector against the last write acknowledged there.";
    type RunArgs = DiskArgs;
    type CheckArgs = DiskCheckArgs;
    type Spec = DiskSpec;

    fn validate(args: &DiskArgs) -> Result<DiskSpec, PlanError> {
        if args.list_specs {
            crate::util::out(format_args!("{}", AccessSpec::list_text()));
            std::process::exit(0);
        }
        let target = storage_target(args.target.as_deref().unwrap_or_default(), "--target")?;
        let device = matches!(target, Target::Device { .. });
        let path = target.file().map(Path::to_path_buf).unwrap_or_default();
        let spec = match &args.spec_file {
            Some(file) => {
                let text =
                    crate::util::read_text_bounded(file, access::MAX_SPEC_FILE).map_err(|e| {
                        PlanError::flag(
                            "--spec-file",
                            format!("{}: {e}", file.display()),
                            "give a readable TOML file",
                        )
                    })?;
                AccessSpec::parse_toml(&text).map_err(|e| {
                    PlanError::flag(
                        "--spec-file",
                        format!("{}: {e}", file.display()),
                        "see perflab run disk --help",
                    )
                })?
            }
            None => match AccessSpec::named(args.spec.trim()) {
                Some(s) => s,
                None if args.spec.contains('=') => {
                    AccessSpec::parse_inline(&args.spec).map_err(|e| {
                        PlanError::flag(
                            "--spec",
                            e,
                            "e.g. --spec 'size=4k share=60 read=80; size=64k share=40 read=80'",
                        )
                    })?
                }
                None => return Err(PlanError::flag(
                    "--spec",
                    format!("'{}' is no built-in spec", args.spec),
                    "see perflab run disk --list-specs, or write lines such as 'size=4k read=70'",
                )),
            },
        };
        let size = if device {
            if args.size.is_some() {
                return Err(PlanError::flag(
                    "--size",
                    "a device's size is its own",
                    "drop --size",
                ));
            }
            crate::target::device::size(&path).map_err(|e| {
                PlanError::flag("--target", e, "give a block device, e.g. device:/dev/sdb")
            })?
        } else {
            size_of(&path, args.size.as_deref(), args.destroy_data)?
        };
        if device && spec.writes() {
            check_device_writable(&path, args.destroy_data)?;
        }
        if device && args.verify && !spec.writes() {
            let written = Ledger::open(&ledger_path(&target))
                .ok()
                .flatten()
                .is_some_and(|l| l.complete() && l.size() == size);
            if !written {
                return Err(PlanError::flag(
                    "--verify",
                    format!("perflab has not written {}, so there is nothing to check its reads against", path.display()),
                    "run a writing spec on it with --destroy-data first, or drop --verify",
                ));
            }
        }
        let direct = !args.buffered;
        spec.check(size, direct.then(|| dio_alignment(&path)))
            .map_err(|e| {
                PlanError::flag(
                    if args.spec_file.is_some() {
                        "--spec-file"
                    } else {
                        "--spec"
                    },
                    e,
                    "fit the spec to the target",
                )
            })?;
        let (engine, engine_note) = match args.engine {
            Some(e) => {
                if e == Engine::Uring {
                    if let Err(why) = uring_available() {
                        return Err(PlanError::flag(
                            "--engine",
                            format!("io_uring is not available here: {why}"),
                            "give --engine psync",
                        ));
                    }
                }
                (e, None)
            }
            None => match uring_available() {
                Ok(()) => (Engine::Uring, None),
                Err(why) => (
                    Engine::Psync,
                    Some(format!(
                        "io_uring is not available ({why}): pread/pwrite on a thread per user"
                    )),
                ),
            },
        };
        Ok(DiskSpec {
            target,
            size,
            spec,
            direct,
            engine,
            engine_note,
            verify: args.verify,
            destroy_data: args.destroy_data,
        })
    }

    fn target(spec: &DiskSpec) -> Target {
        spec.target.clone()
    }

    fn start<D: Driver>(spec: &DiskSpec, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
        let path = spec
            .target
            .file()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let most = most_outstanding(plan);
        let chunks_per_io = spec.spec.max_size().div_ceil(4096) + 1;
        if most * chunks_per_io > spec.size / 4096 / 2 {
            return Err(PlanError::flag(
                "--size",
                format!(
                    "{} cannot hold {most} I/Os of up to {} in flight without overlap",
                    Bytes(spec.size),
                    Bytes(spec.spec.max_size())
                ),
                &format!(
                    "give --size {} or more, or a smaller --depth (or --connections)",
                    Bytes(most * chunks_per_io * 4096 * 2)
                ),
            )
            .into());
        }
        if let Some(note) = &spec.engine_note {
            crate::util::out(format_args!("{note}\n"));
        }
        if !spec.direct {
            crate::util::out(format_args!(
                "--buffered: I/O goes through the page cache; reads may come from memory, not the device\n"
            ));
        }
        let at = ledger_path(&spec.target);
        let writes = spec.spec.writes();
        let (file, ledger, prepared) = match spec.target {
            Target::Device { .. } if !writes => {
                // Reads only: the ledger of an earlier writing run, if any.
                let l = Ledger::open(&at)?.filter(|l| l.complete() && l.size() == spec.size);
                (
                    open_file(&path, spec.direct, false)?,
                    l,
                    serde_json::json!({ "reused": false, "read_only": true }),
                )
            }
            Target::Device { .. } => {
                let file = claim_device(&path, spec.direct)?;
                let (l, p) = ready_device(&file, &path, &at, spec.size)?;
                (file, Some(l), p)
            }
            _ => {
                let (file, l, p) =
                    prepare_file(&path, &at, spec.size, spec.direct, spec.destroy_data)?;
                (file, Some(l), p)
            }
        };
        let shared = Shared::new(
            spec.spec.clone(),
            file,
            spec.size,
            ledger,
            spec.engine,
            spec.verify,
        )
        .with_depth(most);
        let started = Started {
            setup: Some(serde_json::json!({
                "file": path.display().to_string(),
                "size": spec.size,
                "engine": spec.engine,
                "direct": spec.direct,
                "verify": spec.verify,
                "spec": spec.spec.name,
                "lines": spec.spec.lines.iter().map(access::Line::text).collect::<Vec<_>>(),
                "prepared": prepared,
            })),
            ..Started::default()
        };
        driver.drive(
            Arc::new(DiskWorkload {
                shared: Arc::new(shared),
            }),
            started,
        )
    }

    fn check(args: &DiskCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        let target = storage_target(&args.target, "--target")?;
        let path = target.file().map(Path::to_path_buf).unwrap_or_default();
        let report = read_back(&path, &ledger_path(&target))?;
        Ok((format!("disk {}", path.display()), report))
    }
}

/// A `file:PATH` or `device:/dev/NAME` target.
fn storage_target(text: &str, flag: &str) -> Result<Target, PlanError> {
    let fix = "give file:PATH or device:/dev/NAME";
    let target = Target::parse(text).map_err(|e| PlanError::flag(flag, e, fix))?;
    if target.traits().kind != crate::target::Kind::Storage {
        return Err(PlanError::flag(
            flag,
            format!("{} is not a file or a device", target.redacted()),
            fix,
        ));
    }
    Ok(target)
}

/// Where a target's ledger lives: beside a file; for a device, in
/// perflab's state directory (a device has no "beside").
fn ledger_path(target: &Target) -> PathBuf {
    match target {
        Target::Device { path } => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            PathBuf::from(DEVICE_LEDGERS).join(format!("{name}.perflab-ledger"))
        }
        other => Ledger::path_for(other.file().unwrap_or(Path::new(""))),
    }
}

/// The directory of devices' ledgers.
const DEVICE_LEDGERS: &str = "/var/lib/perflab/ledgers";

/// A device a spec would write: never one anything holds (mounted in
/// any namespace, swap, device-mapper or md), whatever the flags; any
/// other only with `--destroy-data`, the refusal saying what blkid finds
/// on it.
fn check_device_writable(path: &Path, destroy: bool) -> Result<(), PlanError> {
    use crate::target::device::{contents, held};
    let found = held(path).map_err(|e| PlanError::flag("--target", e, "give a block device"))?;
    if let Some(held) = found {
        return Err(PlanError::flag(
            "--target",
            format!(
                "{}: {held}; the spec writes and would corrupt what uses it",
                path.display()
            ),
            "give a device nothing uses, or a read-only spec (--destroy-data never overrides this)",
        ));
    }
    if destroy {
        return Ok(());
    }
    let what = match contents(path) {
        Ok(c) => c.to_string(),
        Err(e) => format!("perflab cannot tell what it holds ({e})"),
    };
    Err(PlanError::flag(
        "--target",
        format!(
            "{}: {what}; the spec writes and would destroy it",
            path.display()
        ),
        "give --destroy-data to write anyway, or a read-only spec",
    ))
}

/// The device opened for a writing run, claimed exclusively: refused
/// while anything holds it (the kernel's answer, in every namespace), and
/// looked at once more now that nothing else can mount it.
fn claim_device(path: &Path, direct: bool) -> anyhow::Result<File> {
    let fix = "give a device nothing uses, or a read-only spec";
    let file = crate::target::device::claim(path, direct)
        .map_err(|e| PlanError::flag("--target", e, fix))?;
    if let Some(held) =
        crate::target::device::held(path).map_err(|e| PlanError::flag("--target", e, fix))?
    {
        return Err(PlanError::flag("--target", format!("{}: {held}", path.display()), fix).into());
    }
    Ok(file)
}

/// The target's size: `--size`, else an existing perflab file's (or,
/// with `destroy`, another file's own). An existing file perflab did not
/// make is refused without `destroy`; a size the file system has no room
/// for is refused.
fn size_of(path: &Path, given: Option<&str>, destroy: bool) -> Result<u64, PlanError> {
    let given = given
        .map(|t| {
            Bytes::parse(t)
                .map(|b| b.0)
                .map_err(|e| PlanError::flag("--size", e, "e.g. --size 1GiB"))
        })
        .transpose()?;
    let whole = |s: u64| s >= 1 << 20 && s % 4096 == 0;
    if let Some(s) = given {
        if !whole(s) {
            return Err(PlanError::flag(
                "--size",
                format!(
                    "{} is not a whole number of 4 KiB blocks of at least 1 MiB",
                    Bytes(s)
                ),
                "e.g. --size 1GiB",
            ));
        }
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(PlanError::flag(
            "--target",
            format!("the directory {} does not exist", parent.display()),
            "give a path in an existing directory",
        ));
    }
    writable_dir(parent)?;
    let ledger_at = Ledger::path_for(path);
    let ledger = Ledger::open(&ledger_at)
        .map_err(|e| PlanError::flag("--target", format!("{e:#}"), "or give another path"))?;
    let existing = match std::fs::symlink_metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(PlanError::flag(
                "--target",
                format!("{}: {e}", path.display()),
                "give a path perflab may use",
            ))
        }
    };
    let ours = match (&existing, &ledger) {
        (Some(m), _) => {
            regular_file(path, m)?;
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| {
                    PlanError::flag(
                        "--target",
                        format!("{}: {e}", path.display()),
                        "give a file perflab may read",
                    )
                })?;
            ledger.as_ref().is_some_and(|l| is_ours(&file, l))
        }
        (None, _) => false,
    };
    if existing.is_some() && !ours && !destroy {
        return Err(foreign(path, ledger.is_some()));
    }
    let size = match (&existing, given) {
        (_, Some(s)) => s,
        (Some(_), None) if ours => ledger.as_ref().map_or(0, Ledger::size),
        (Some(m), None) if whole(m.len()) => m.len(),
        (Some(m), None) => {
            return Err(PlanError::flag(
                "--size",
                format!(
                    "{} is {}, not a whole number of 4 KiB blocks of at least 1 MiB",
                    path.display(),
                    Bytes(m.len())
                ),
                "give --size",
            ))
        }
        (None, None) => {
            return Err(PlanError::flag(
                "--size",
                format!(
                    "{} does not exist yet, so its size is needed",
                    path.display()
                ),
                "e.g. --size 1GiB",
            ))
        }
    };
    check_free_space(path, parent, &ledger_at, size)?;
    Ok(size)
}

/// The directory of a target file must take the file and its ledger: a
/// read-only file system or a directory perflab may not write is bad
/// input, found before anything is done.
fn writable_dir(dir: &Path) -> Result<(), PlanError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: a NUL-terminated path; access only reads it.
    if unsafe { libc::access(name.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    let why = match e.raw_os_error() {
        Some(libc::EROFS) => "is on a read-only file system".to_string(),
        Some(libc::EACCES | libc::EPERM) => "is not writable (permission denied)".to_string(),
        _ => format!("cannot be written in: {e}"),
    };
    Err(PlanError::flag(
        "--target",
        format!("the directory {} {why}", dir.display()),
        "give a path perflab may write the file and its ledger in",
    ))
}

/// A target path must name a regular file itself: never a link (perflab
/// would write where it points), a device (that is `device:`) or anything
/// else.
fn regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), PlanError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let (what, fix) = if kind.is_symlink() {
        (
            "a symbolic link",
            "give the path of the file itself".to_string(),
        )
    } else if kind.is_block_device() {
        (
            "a block device",
            format!("give device:{} to run on the device", path.display()),
        )
    } else {
        (
            "not a regular file",
            "give the path of a regular file".to_string(),
        )
    };
    Err(PlanError::flag(
        "--target",
        format!("{} is {what}", path.display()),
        &fix,
    ))
}

/// The refusal of an existing file perflab did not make.
fn foreign(path: &Path, has_ledger: bool) -> PlanError {
    let why = if has_ledger {
        format!(
            "its ledger {} was made for another file of that name, or the file was rewritten since",
            Ledger::path_for(path).display()
        )
    } else {
        format!("no {} beside it", Ledger::path_for(path).display())
    };
    PlanError::flag(
        "--target",
        format!(
            "{} exists and perflab did not make it ({why}); perflab overwrites only its own files unless told",
            path.display()
        ),
        "give a path that does not exist yet, or --destroy-data to overwrite it",
    )
}

/// Refuses a target file and ledger the file system of `dir` has no room
/// for, counting what an existing file and ledger there already hold (they
/// are rewritten). The space kept for root (statvfs's `f_bavail` excludes
/// it) is left to the host.
fn check_free_space(path: &Path, dir: &Path, ledger_at: &Path, size: u64) -> Result<(), PlanError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill; the result is checked.
    if unsafe { libc::statvfs(name.as_ptr(), &mut vfs) } != 0 {
        return Err(PlanError::flag(
            "--target",
            format!(
                "cannot tell the free space of {}: {}",
                dir.display(),
                std::io::Error::last_os_error()
            ),
            "give a path on a mounted file system",
        ));
    }
    let held = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.blocks() * 512)
    };
    let free = (vfs.f_bavail as u64)
        .saturating_mul(vfs.f_frsize as u64)
        .saturating_add(held(path))
        .saturating_add(held(ledger_at));
    let need = size.saturating_add(Ledger::bytes_for(size));
    if need <= free {
        return Ok(());
    }
    // The largest size that fits with its ledger (8 bytes a sector).
    let fits = free.saturating_sub(8192) / (SECTOR + 8) * SECTOR / 4096 * 4096;
    let fix = if fits >= 1 << 20 {
        format!("give --size {} or less, or free space there", Bytes(fits))
    } else {
        "free space there, or give a path on another file system".to_string()
    };
    Err(PlanError::flag(
        "--size",
        format!(
            "{} and its ledger need {}, but the file system of {} has {} free",
            path.display(),
            Bytes(need),
            std::fs::canonicalize(dir)
                .unwrap_or_else(|_| dir.to_path_buf())
                .display(),
            Bytes(free)
        ),
        &fix,
    ))
}

/// The alignment direct I/O needs on `path`: the file's own (statx), or
/// for a file not made yet, the logical block size of the device holding
/// its directory; a sector when neither is known.
fn dio_alignment(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) {
        // SAFETY: a zeroed statx is a valid out-parameter.
        let mut stx: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a statx to fill; the result is checked.
        let rc = unsafe {
            libc::statx(
                libc::AT_FDCWD,
                name.as_ptr(),
                0,
                libc::STATX_DIOALIGN,
                &mut stx,
            )
        };
        if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0 {
            return u64::from(stx.stx_dio_offset_align);
        }
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(meta) = std::fs::metadata(dir) else {
        return SECTOR;
    };
    let dev = std::os::unix::fs::MetadataExt::dev(&meta);
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    // A partition's queue is its disk's.
    [
        format!("{base}/queue/logical_block_size"),
        format!("{base}/../queue/logical_block_size"),
    ]
    .iter()
    .find_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
    .filter(|b| *b >= SECTOR)
    .unwrap_or(SECTOR)
}

/// Whether io_uring can be used here; why not.
fn uring_available() -> Result<(), String> {
    io_uring::IoUring::new(8)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The most I/Os the plan can hold in flight at once.
fn most_outstanding(plan: &Plan) -> u64 {
    match plan.load {
        LoadModel::Closed { .. } => plan
            .sweep
            .levels
            .iter()
            .map(|l| l.value() as u64)
            .max()
            .unwrap_or(1),
        // Each connection holds one I/O; arrivals beyond wait in a queue.
        LoadModel::Open { connections, .. } => u64::from(connections),
    }
}

/// Opens the target for the run (read-only when nothing is written).
fn open_file(path: &Path, direct: bool, write: bool) -> anyhow::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(write);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path).map_err(|e| open_failed(path, direct, e))
}

/// Why the target could not be opened: a file system that refuses
/// `O_DIRECT` is bad input with its fix; anything else, as it came.
fn open_failed(path: &Path, direct: bool, e: std::io::Error) -> anyhow::Error {
    if direct && e.raw_os_error() == Some(libc::EINVAL) {
        PlanError::flag(
            "--target",
            format!("{}'s file system does not take direct I/O", path.display()),
            "give --buffered, or a file on another file system",
        )
        .into()
    } else {
        anyhow::anyhow!("cannot open {}: {e}", path.display())
    }
}

/// Opens the target file read-write with the run's flags, never through
/// a symbolic link: an existing one, or (`create`) a new one that must not
/// exist yet.
fn open_target(path: &Path, direct: bool, create: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if create {
        o.create_new(true);
    }
    o.custom_flags(libc::O_NOFOLLOW | if direct { libc::O_DIRECT } else { 0 });
    o.open(path)
}

/// The target file ready for the run, open read-write with the run's
/// flags, and its ledger: perflab's own file reused when its ledger says
/// it is complete at `size`, else a new file created, perflab's own
/// re-made, or (`destroy`) another file taken over, each written end to
/// end. Whose the file is, is judged again on the open file: it may have
/// been replaced since the plan was validated. A file made or re-made
/// here that cannot be made ready (an error, a signal) is removed with
/// its ledger.
fn prepare_file(
    path: &Path,
    ledger_at: &Path,
    size: u64,
    direct: bool,
    destroy: bool,
) -> anyhow::Result<(File, Ledger, serde_json::Value)> {
    let direct_refused = |e: std::io::Error| open_failed(path, direct, e);
    let ledger = Ledger::open(ledger_at)?;
    let file = match open_target(path, direct, false) {
        Ok(file) => {
            let meta = file.metadata()?;
            regular_file(path, &meta)?;
            let ours = ledger.as_ref().is_some_and(|l| is_ours(&file, l));
            if !ours && !destroy {
                return Err(foreign(path, ledger.is_some()).into());
            }
            if let Some(l) =
                ledger.filter(|l| ours && l.complete() && l.size() == size && meta.len() == size)
            {
                if first_block_is_ours(&file, &l) {
                    crate::util::out(format_args!(
                        "reusing {} ({}, written by perflab to the end)\n",
                        path.display(),
                        Bytes(size)
                    ));
                    return Ok((file, l, serde_json::json!({ "reused": true })));
                }
            }
            file
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            open_target(path, direct, true).map_err(direct_refused)?
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(PlanError::flag(
                "--target",
                format!("{} is a symbolic link", path.display()),
                "give the path of the file itself",
            )
            .into())
        }
        Err(e) => return Err(direct_refused(e)),
    };
    let made = (|| {
        let identity =
            FileIdentity::of(&file).with_context(|| format!("cannot stat {}", path.display()))?;
        let file_id = rand::random::<u64>() | 1;
        let ledger = Ledger::create(ledger_at, size, file_id, Some(identity))?;
        // Emptied first: nothing of what it held before is left past the
        // new size, and no block of it is taken for perflab's.
        file.set_len(0)
            .and_then(|()| file.set_len(size))
            .with_context(|| format!("cannot size {}", path.display()))?;
        let prepared = precondition(&file, path, &ledger, size)?;
        anyhow::Ok((ledger, prepared))
    })();
    match made {
        Ok((ledger, prepared)) => Ok((file, ledger, prepared)),
        Err(e) => {
            // Half written, the file is of no use to anyone: removed with
            // its ledger — while the name is still that file's.
            let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| {
                use std::os::unix::fs::MetadataExt;
                (a.dev(), a.ino()) == (b.dev(), b.ino())
            };
            let still_ours = match (file.metadata(), std::fs::symlink_metadata(path)) {
                (Ok(a), Ok(b)) => same(&a, &b),
                _ => false,
            };
            drop(file);
            let ours: &[&Path] = if still_ours {
                &[path, ledger_at]
            } else {
                &[ledger_at]
            };
            for p in ours {
                if let Err(r) = std::fs::remove_file(p) {
                    if r.kind() != std::io::ErrorKind::NotFound {
                        crate::util::err(format_args!("could not remove {}: {r}\n", p.display()));
                    }
                }
            }
            Err(e)
        }
    }
}

/// A device claimed for a writing run made ready: reused when its ledger
/// says it is complete at `size` and its first block is still perflab's,
/// else written end to end.
fn ready_device(
    file: &File,
    path: &Path,
    ledger_at: &Path,
    size: u64,
) -> anyhow::Result<(Ledger, serde_json::Value)> {
    if let Some(l) = Ledger::open(ledger_at)? {
        if l.complete() && l.size() == size && first_block_is_ours(file, &l) {
            crate::util::out(format_args!(
                "reusing {} ({}, written by perflab to the end)\n",
                path.display(),
                Bytes(size)
            ));
            return Ok((l, serde_json::json!({ "reused": true })));
        }
    }
    let ledger = Ledger::create(ledger_at, size, rand::random::<u64>() | 1, None)?;
    let prepared = precondition(file, path, &ledger, size)?;
    Ok((ledger, prepared))
}

/// Writes the target sequentially end to end, every sector stamped and
/// acknowledged in `ledger`; obeys Ctrl-C and SIGTERM between chunks.
/// What was done, for the run's record.
fn precondition(
    file: &File,
    path: &Path,
    ledger: &Ledger,
    size: u64,
) -> anyhow::Result<serde_json::Value> {
    crate::util::out(format_args!(
        "preconditioning {} ({}): one sequential write pass\n",
        path.display(),
        Bytes(size)
    ));
    let start = Instant::now();
    let chunk: u64 = 1 << 20;
    let mut buf = psync::Buffer::new(chunk as usize)?;
    let mut offset = 0;
    while offset < size {
        crate::util::check_interrupt("preconditioning the target")?;
        let len = chunk.min(size - offset);
        let generation = ledger.next_generation();
        let bytes = buf.bytes(len as usize);
        block::stamp(bytes, offset, generation, ledger.file_id());
        // SAFETY: writes `len` bytes of our buffer.
        let n = unsafe {
            libc::pwrite(
                file.as_raw_fd(),
                bytes.as_ptr().cast(),
                len as usize,
                offset as i64,
            )
        };
        if n != len as isize {
            anyhow::bail!(
                "preconditioning {} failed at offset {offset}: {}",
                path.display(),
                if n < 0 {
                    std::io::Error::last_os_error().to_string()
                } else {
                    format!("wrote {n} of {len} bytes")
                }
            );
        }
        ledger.acknowledge(offset, len, generation);
        offset += len;
    }
    file.sync_data()?;
    let seconds = start.elapsed().as_secs_f64();
    ledger.set_complete();
    ledger.sync()?;
    let mb_per_s = size as f64 / seconds.max(1e-9) / 1e6;
    crate::util::out(format_args!(
        "preconditioned in {seconds:.1} s: {mb_per_s:.0} MB/s sequential write\n"
    ));
    Ok(serde_json::json!({ "reused": false, "seconds": seconds, "mb_per_s": mb_per_s }))
}

/// The first bytes of an open target, up to 4 KiB, into an aligned buffer
/// (the file may be open for direct I/O).
fn read_head(file: &File, buf: &mut psync::Buffer) -> usize {
    let bytes = buf.bytes(4096);
    // SAFETY: reads at most 4096 bytes into our buffer.
    let n = unsafe { libc::pread(file.as_raw_fd(), bytes.as_mut_ptr().cast(), 4096, 0) };
    usize::try_from(n).unwrap_or(0)
}

/// Whether `file` is the file `ledger` was made for, as perflab left it:
/// the same file (device, inode and birth time, where the ledger records
/// them), whose first sector holds perflab's stamp of that file — or,
/// where perflab never wrote there, nothing yet (a preconditioning cut
/// short). A file removed and written again under the same name, or
/// copied over, is not.
fn is_ours(file: &File, ledger: &Ledger) -> bool {
    let same = FileIdentity::of(file)
        .map(|id| ledger.belongs_to(&id))
        .unwrap_or(Some(false));
    if same == Some(false) {
        return false;
    }
    let Ok(mut buf) = psync::Buffer::new(4096) else {
        return false;
    };
    let n = read_head(file, &mut buf);
    let never_written = same == Some(true) && ledger.acknowledged(0) == 0;
    if n < SECTOR as usize {
        return never_written && n == 0;
    }
    let first = &buf.bytes(4096)[..SECTOR as usize];
    block::check(first, 0, ledger.file_id(), 0).is_ok()
        || (never_written && first.iter().all(|b| *b == 0))
}

/// Whether the target's first block is still the one the ledger knows
/// (not reformatted or overwritten since), so that the ledger may be reused.
fn first_block_is_ours(file: &File, ledger: &Ledger) -> bool {
    let Ok(mut buf) = psync::Buffer::new(4096) else {
        return false;
    };
    read_head(file, &mut buf) == 4096
        && buf
            .bytes(4096)
            .chunks_exact(SECTOR as usize)
            .enumerate()
            .all(|(i, sector)| {
                let at = i as u64 * SECTOR;
                block::check(sector, at, ledger.file_id(), ledger.acknowledged(at)).is_ok()
            })
}

/// `perflab check disk`: every sector of the file against the ledger.
fn read_back(path: &Path, ledger_at: &Path) -> anyhow::Result<CheckReport> {
    let Some(ledger) = Ledger::open(ledger_at)? else {
        return Err(PlanError::flag(
            "--target",
            format!(
                "{} has no ledger ({}): perflab did not write it",
                path.display(),
                ledger_at.display()
            ),
            "give a file or device a perflab disk run wrote",
        )
        .into());
    };
    let file = open_file(path, true, false).or_else(|_| open_file(path, false, false))?;
    if let Ok(id) = FileIdentity::of(&file) {
        if ledger.belongs_to(&id) == Some(false) {
            return Err(PlanError::flag(
                "--target",
                format!(
                    "{} is not the file perflab wrote: its ledger {} names another (removed and written again since)",
                    path.display(),
                    ledger_at.display()
                ),
                "give a file or device a perflab disk run wrote",
            )
            .into());
        }
    }
    let size = ledger.size();
    let chunk: u64 = 1 << 20;
    let mut buf = psync::Buffer::new(chunk as usize)?;
    let (mut checked, mut bad, mut unwritten) = (0u64, 0u64, 0u64);
    let mut described = Vec::new();
    let mut offset = 0;
    while offset < size {
        let len = chunk.min(size - offset);
        let bytes = buf.bytes(len as usize);
        // SAFETY: reads `len` bytes into our buffer.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                bytes.as_mut_ptr().cast(),
                len as usize,
                offset as i64,
            )
        };
        if n != len as isize {
            anyhow::bail!(
                "cannot read {} at offset {offset}: the file is shorter than its ledger says",
                path.display()
            );
        }
        for (i, sector) in bytes.chunks_exact(SECTOR as usize).enumerate() {
            let at = offset + i as u64 * SECTOR;
            let acked = ledger.acknowledged(at);
            if acked == 0 {
                unwritten += 1;
                continue;
            }
            checked += 1;
            if let Err(m) = block::check(sector, at, ledger.file_id(), acked) {
                bad += 1;
                if described.len() < 10 {
                    described.push(format!("offset {at}: {m}"));
                }
            }
        }
        offset += len;
    }
    let mut lines = vec![crate::workload::CheckLine {
        rule: "every sector holds the last write acknowledged there".to_string(),
        passed: bad == 0,
        detail: if bad == 0 {
            format!(
                "{checked} sectors checked ({}), all intact",
                Bytes(checked * SECTOR)
            )
        } else {
            format!(
                "{bad} of {checked} sectors do not: {}",
                described.join("; ")
            )
        },
    }];
    if unwritten > 0 {
        lines.push(crate::workload::CheckLine {
            rule: "every sector was written".to_string(),
            passed: true,
            detail: format!("{unwritten} sectors never written by perflab (not checked)"),
        });
    }
    Ok(CheckReport::from_lines(lines))
}
