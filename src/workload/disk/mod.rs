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
//! (no ledger beside it) is never written.

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
use ledger::Ledger;
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

    /// A device: write even though it holds a partition table or a file system (never a mounted one).
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
    /// A device's contents may be overwritten.
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
            if args.destroy_data {
                return Err(PlanError::flag(
                    "--destroy-data",
                    "perflab writes only files it made, whatever the flag",
                    "drop --destroy-data, or give device:/dev/NAME",
                ));
            }
            size_of(&path, args.size.as_deref())?
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
        let (ledger, prepared) = match spec.target {
            Target::Device { .. } if !writes => {
                // Reads only: the ledger of an earlier writing run, if any.
                let l = Ledger::open(&at)?.filter(|l| l.complete() && l.size() == spec.size);
                (l, serde_json::json!({ "reused": false, "read_only": true }))
            }
            Target::Device { .. } => {
                let (l, p) = prepare(&path, &at, spec.size, spec.direct, false)?;
                (Some(l), p)
            }
            _ => {
                let (l, p) = prepare(&path, &at, spec.size, spec.direct, true)?;
                (Some(l), p)
            }
        };
        let file = open_file(&path, spec.direct, writes)?;
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

/// A device a spec would write: never one mounted; one holding a
/// partition table or a signature only with `--destroy-data`.
fn check_device_writable(path: &Path, destroy: bool) -> Result<(), PlanError> {
    use crate::target::device::{in_use, InUse};
    let found = in_use(path).map_err(|e| PlanError::flag("--target", e, "give a block device"))?;
    match found {
        Some(InUse::Mounted(at)) => Err(PlanError::flag(
            "--target",
            format!(
                "{} is mounted at {at}; the spec writes and would corrupt that file system",
                path.display()
            ),
            "unmount it first, or give a read-only spec",
        )),
        Some(other) if !destroy => Err(PlanError::flag(
            "--target",
            format!(
                "{}: {other}; the spec writes and would destroy it",
                path.display()
            ),
            "give --destroy-data to write anyway, or a read-only spec",
        )),
        _ => Ok(()),
    }
}

/// The target's size: `--size`, else an existing perflab file's; an
/// existing file perflab did not make is refused.
fn size_of(path: &Path, given: Option<&str>) -> Result<u64, PlanError> {
    let given = given
        .map(|t| {
            Bytes::parse(t)
                .map(|b| b.0)
                .map_err(|e| PlanError::flag("--size", e, "e.g. --size 1GiB"))
        })
        .transpose()?;
    if let Some(s) = given {
        if s < 1 << 20 || s % 4096 != 0 {
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
    let existing = path.exists();
    let ledger = Ledger::open(&Ledger::path_for(path))
        .map_err(|e| PlanError::flag("--target", format!("{e:#}"), "remove both files"))?;
    match (existing, ledger, given) {
        (true, None, _) => Err(PlanError::flag(
            "--target",
            format!(
                "{} exists and perflab did not make it (no {} beside it); perflab writes only its own files",
                path.display(),
                Ledger::path_for(path).display()
            ),
            "give a path that does not exist yet",
        )),
        (_, _, Some(s)) => Ok(s),
        (true, Some(l), None) => Ok(l.size()),
        (false, _, None) => Err(PlanError::flag(
            "--size",
            format!("{} does not exist yet, so its size is needed", path.display()),
            "e.g. --size 1GiB",
        )),
    }
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
    o.open(path).map_err(|e| {
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
    })
}

/// The target ready for a writing run: reused when its ledger (at
/// `ledger_at`) says it is complete at `size`, else (a file created or
/// re-made, when `create`) written sequentially end to end. What was done,
/// for the run's record.
fn prepare(
    path: &Path,
    ledger_at: &Path,
    size: u64,
    direct: bool,
    create: bool,
) -> anyhow::Result<(Ledger, serde_json::Value)> {
    if let Some(l) = Ledger::open(ledger_at)? {
        let on_disk = if create {
            std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        } else {
            size
        };
        if l.complete()
            && l.size() == size
            && on_disk == size
            && first_block_is_ours(path, &l, direct)
        {
            crate::util::out(format_args!(
                "reusing {} ({}, written by perflab to the end)\n",
                path.display(),
                Bytes(size)
            ));
            return Ok((l, serde_json::json!({ "reused": true })));
        }
    }
    let file_id = rand::random::<u64>() | 1;
    let ledger = Ledger::create(ledger_at, size, file_id)?;
    if create {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        file.set_len(size)?;
    }
    let file = open_file(path, direct, true)?;
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
        let len = chunk.min(size - offset);
        let generation = ledger.next_generation();
        let bytes = buf.bytes(len as usize);
        block::stamp(bytes, offset, generation, file_id);
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
    Ok((
        ledger,
        serde_json::json!({ "reused": false, "seconds": seconds, "mb_per_s": mb_per_s }),
    ))
}

/// Whether the target's first block is still the one the ledger knows
/// (not reformatted or overwritten since), so that the ledger may be reused.
fn first_block_is_ours(path: &Path, ledger: &Ledger, direct: bool) -> bool {
    let Ok(file) = open_file(path, direct, false) else {
        return false;
    };
    let Ok(mut buf) = psync::Buffer::new(4096) else {
        return false;
    };
    let bytes = buf.bytes(4096);
    // SAFETY: reads 4096 bytes into our buffer.
    let n = unsafe { libc::pread(file.as_raw_fd(), bytes.as_mut_ptr().cast(), 4096, 0) };
    n == 4096
        && bytes
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
