//! The `disk` workload: Iometer's access specifications on a file, as a
//! lab comparing host bus adapters runs them. Users are outstanding I/Os
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
mod owner;
mod prepare;
mod psync;
mod session;
mod uring;

use super::{CheckReport, Started, SweepDriver, WorkloadKind};
use crate::error::PlanError;
use crate::plan::{LoadModel, Plan};
use crate::target::Target;
use crate::units::Bytes;
use access::{AccessSpec, SECTOR};
use ledger::{FileIdentity, Ledger};
use owner::{check_device_writable, claim_device, ledger_path, size_of, storage_target};
use prepare::{open_file, prepare_file, ready_device};
use serde::{Deserialize, Serialize};
use session::{DiskWorkload, Shared};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

impl WorkloadKind for Disk {
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

    fn start<D: SweepDriver>(spec: &DiskSpec, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
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
