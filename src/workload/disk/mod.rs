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
//! Without `--target` the target is perflab's own `./perflab-disk.bin`
//! ([`DEFAULT_TARGET`]), made at 1 GiB and reused after, under the same
//! ownership rule as any file.
//!
//! The target file is created at `--size` and preconditioned by one
//! sequential write pass (its MB/s reported), or reused when its ledger
//! says it was written to the end at that size. A file perflab did not make
//! — no ledger beside it, or a ledger made for another file of that name —
//! is written only with `--destroy-data`, and nothing is written that the
//! file system has no room for. A device is written only with
//! `--destroy-data`, and never while anything holds it
//! ([`crate::sut::device`]).

pub(crate) mod access;
#[cfg(test)]
mod access_props;
mod asked;
mod batch;
pub(crate) mod block;
mod fio_job;
mod inflight;
pub(crate) mod ledger;
mod mapping;
mod owner;
mod prepare;
mod psync;
mod session;
mod uring;

use super::{Batch, CheckReport, OpCounts, Seat, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::plan::{LoadModel, Plan};
use crate::sut::Target;
use crate::units::Bytes;
use access::{AccessSpec, SECTOR};
use asked::Asked;
use ledger::{FileIdentity, Ledger};
use mapping::PageBuffer;
use owner::{check_device_writable, claim_device, ledger_path, size_of, storage_target};
use prepare::{open_file, prepare_file, ready_device};
use serde::{Deserialize, Serialize};
#[cfg(test)]
pub(crate) use session::testing;
use session::{DiskSession, Shared};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `perflab run disk`.
pub struct Disk;

/// The disk's target when no `--target` is given: perflab's own file in
/// the current directory, made at [`DEFAULT_SIZE`] (then reused), as the
/// bank starts on `perflab-bank.db`.
pub(crate) const DEFAULT_TARGET: &str = "file:perflab-disk.bin";

/// The size of [`DEFAULT_TARGET`] when perflab makes it.
const DEFAULT_SIZE: &str = "1GiB";

/// How I/O reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Engine {
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
    /// The target: file:PATH (created at --size and preconditioned, or reused) or device:/dev/NAME. Default: perflab's own ./perflab-disk.bin, made at 1 GiB.
    #[arg(long, value_name = "TARGET")]
    pub(crate) target: Option<String>,

    /// Write over what the target holds: a device's data, or an existing file perflab did not make (never a device mounted or held).
    #[arg(long)]
    pub(crate) destroy_data: bool,

    /// The file's size when perflab creates it, e.g. 1GiB (default: an existing file's).
    #[arg(long, value_name = "SIZE")]
    pub(crate) size: Option<String>,

    /// The access spec: a name (see --list-specs) or lines, e.g. 'size=4k share=60 read=80; size=64k share=40 read=80'.
    #[arg(
        long,
        value_name = "SPEC",
        default_value = "4k-randread",
        conflicts_with = "spec_file"
    )]
    pub(crate) spec: String,

    /// The access spec from a TOML file ([[line]] tables of size, share, read, random, delay, burst, align).
    #[arg(long, value_name = "FILE")]
    pub(crate) spec_file: Option<PathBuf>,

    /// Print the built-in access specs and exit.
    #[arg(long)]
    pub(crate) list_specs: bool,

    /// Go through the page cache instead of direct I/O.
    #[arg(long)]
    pub(crate) buffered: bool,

    /// io_uring (default where the kernel allows it) or psync.
    #[arg(long, value_name = "ENGINE", value_enum)]
    pub(crate) engine: Option<Engine>,

    /// Check every sector read against the last write acknowledged there.
    #[arg(long)]
    pub(crate) verify: bool,

    /// Run a fio job file's job: its rw, mix, block sizes, iodepth, size, filename, direct, ioengine and runtime (see docs/disk.md); what perflab does not run is refused.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["spec", "spec_file", "buffered", "engine", "list_specs"]
    )]
    pub(crate) fio_job: Option<PathBuf>,

    /// The job section of --fio-job to run, when the file has several.
    #[arg(long, value_name = "NAME", requires = "fio_job")]
    pub(crate) section: Option<String>,
}

/// The disk workload's validated options, as the run's plan stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSpec {
    pub(crate) target: Target,
    /// The file's size, bytes.
    pub(crate) size: u64,
    pub(crate) spec: AccessSpec,
    /// Direct I/O (O_DIRECT), not through the page cache.
    pub(crate) direct: bool,
    pub(crate) engine: Engine,
    /// Why the engine was chosen, when not asked for.
    #[serde(default)]
    pub(crate) engine_note: Option<String>,
    pub(crate) verify: bool,
    /// A device's contents, or a file perflab did not make, may be overwritten.
    #[serde(default)]
    pub(crate) destroy_data: bool,
    /// No `--target` was given: the target is [`DEFAULT_TARGET`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) default_target: bool,
    /// The fio job the spec came from (`--fio-job`), resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fio_job: Option<fio_job::FioJob>,
    /// The steps the job asks for where no flag does: its outstanding
    /// I/Os, its rate, its runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) steps: Option<crate::plan::StepDefaults>,
}

/// `perflab check disk`.
#[derive(Debug, clap::Args)]
pub struct DiskCheckArgs {
    /// The target: file:PATH or device:/dev/NAME.
    #[arg(long, value_name = "TARGET", default_value = DEFAULT_TARGET)]
    pub(crate) target: String,
}

impl WorkloadKind for Disk {
    const NAME: &'static str = "disk";
    const ABOUT: &'static str = "Iometer's access specs on a file: outstanding I/Os on io_uring, every write stamped and every block verifiable.";
    const CHECK_ABOUT: &'static str =
        "Reads a disk target back and checks every sector against the last write acknowledged there.";
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Iops;
    type RunArgs = DiskArgs;
    type CheckArgs = DiskCheckArgs;
    type Spec = DiskSpec;

    fn validate(args: &DiskArgs) -> Result<DiskSpec, PlanError> {
        if args.list_specs {
            crate::util::out(format_args!("{}", AccessSpec::list_text()));
            std::process::exit(0);
        }
        let asked = Asked::of(args)?;
        let default_target = asked.default_target;
        let flag = if asked.job.as_ref().is_some_and(|j| j.filename.is_some()) {
            "--fio-job"
        } else {
            "--target"
        };
        let target = storage_target(&asked.target, flag)?;
        let path = target.file().map(Path::to_path_buf).unwrap_or_default();
        // perflab makes its own file at the default size; one it made
        // before keeps the size it has.
        let size_given = asked
            .size
            .as_deref()
            .or((default_target && !path.exists()).then_some(DEFAULT_SIZE));
        let size = if matches!(target, Target::Device { .. }) {
            let size = device_size(asked.size.is_some(), &path)?;
            check_device_use(args, &target, &asked.spec, size)?;
            size
        } else {
            size_of(&path, size_given, args.destroy_data)?
        };
        asked
            .spec
            .check(size, asked.direct.then(|| dio_alignment(&path)))
            .map_err(|e| PlanError::flag(asked.spec_flag, e, "fit the spec to the target"))?;
        let (engine, engine_note) = choose_engine(asked.engine)?;
        let steps = asked.steps();
        Ok(DiskSpec {
            target,
            size,
            spec: asked.spec,
            direct: asked.direct,
            engine,
            engine_note,
            verify: args.verify,
            destroy_data: args.destroy_data,
            default_target,
            fio_job: asked.job,
            steps,
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
        check_room(spec, most)?;
        if spec.default_target {
            crate::util::out(format_args!(
                "no --target: using ./{} ({}, perflab's own)\n",
                path.display(),
                Bytes(spec.size)
            ));
        }
        if let Some(job) = &spec.fio_job {
            crate::util::out(format_args!("{}\n", job.summary()));
        }
        if let Some(note) = &spec.engine_note {
            crate::util::out(format_args!("{note}\n"));
        }
        if !spec.direct {
            crate::util::out(format_args!(
                "--buffered: I/O goes through the page cache; reads may come from memory, not the device\n"
            ));
        }
        let (file, ledger, prepared) = ready_target(spec, &path)?;
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
                "fio_job": spec.fio_job,
            })),
            addresses: Some(Vec::new()),
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

/// The access spec: `--spec-file`, or `--spec` as a built-in name or
/// inline lines.
fn access_spec(args: &DiskArgs) -> Result<AccessSpec, PlanError> {
    if let Some(file) = &args.spec_file {
        let bad = |e: String, fix: &str| {
            PlanError::flag("--spec-file", format!("{}: {e}", file.display()), fix)
        };
        let text = crate::util::read_text_bounded(file, access::MAX_SPEC_FILE)
            .map_err(|e| bad(e.to_string(), "give a readable TOML file"))?;
        return AccessSpec::parse_toml(&text)
            .map_err(|e| bad(e.to_string(), "see perflab run disk --help"));
    }
    match AccessSpec::named(args.spec.trim()) {
        Some(s) => Ok(s),
        None if args.spec.contains('=') => AccessSpec::parse_inline(&args.spec).map_err(|e| {
            PlanError::flag(
                "--spec",
                e,
                "e.g. --spec 'size=4k share=60 read=80; size=64k share=40 read=80'",
            )
        }),
        None => Err(PlanError::flag(
            "--spec",
            format!("'{}' is no built-in spec", args.spec),
            "see perflab run disk --list-specs, or write lines such as 'size=4k read=70'",
        )),
    }
}

/// A device's size: its own (`--size`, or a job's `size=`, is refused).
fn device_size(size_given: bool, path: &Path) -> Result<u64, PlanError> {
    if size_given {
        return Err(PlanError::flag(
            "--size",
            "a device's size is its own",
            "drop --size (or the job's size=)",
        ));
    }
    let size = crate::sut::device::size(path)
        .map_err(|e| PlanError::flag("--target", e, "give a block device, e.g. device:/dev/sdb"))?;
    if size == 0 {
        return Err(PlanError::flag(
            "--target",
            format!(
                "{} holds nothing (0 B): a drive with no medium, or a loop device with no file attached",
                path.display()
            ),
            "attach a file to it (losetup) or give another device",
        ));
    }
    Ok(size)
}

/// A device is written only when nothing holds it and `--destroy-data`
/// says so, and its reads are verified only against perflab's own
/// complete writing of it.
fn check_device_use(
    args: &DiskArgs,
    target: &Target,
    spec: &AccessSpec,
    size: u64,
) -> Result<(), PlanError> {
    let path = target.file().unwrap_or(Path::new(""));
    if spec.writes() {
        check_device_writable(path, args.destroy_data)?;
    }
    if args.verify && !spec.writes() {
        let written = Ledger::open(&ledger_path(target))
            .ok()
            .flatten()
            .is_some_and(|l| l.complete() && l.size() == size);
        if !written {
            return Err(PlanError::flag(
                "--verify",
                format!(
                    "perflab has not written {}, so there is nothing to check its reads against",
                    path.display()
                ),
                "run a writing spec on it with --destroy-data first, or drop --verify",
            ));
        }
    }
    Ok(())
}

/// The engine asked for (io_uring refused where unavailable), or the best
/// available with a note saying why it is not io_uring.
fn choose_engine(asked: Option<Engine>) -> Result<(Engine, Option<String>), PlanError> {
    match asked {
        Some(Engine::Uring) => match uring_available() {
            Ok(()) => Ok((Engine::Uring, None)),
            Err(why) => Err(PlanError::flag(
                "--engine",
                format!("io_uring is not available here: {why}"),
                "give --engine psync",
            )),
        },
        Some(e) => Ok((e, None)),
        None => Ok(match uring_available() {
            Ok(()) => (Engine::Uring, None),
            Err(why) => (
                Engine::Psync,
                Some(format!(
                    "io_uring is not available ({why}): pread/pwrite on a thread per user"
                )),
            ),
        }),
    }
}

/// The target must hold `most` I/Os in flight without overlap (each user
/// claims its place), with room to spare for drawing free places.
fn check_room(spec: &DiskSpec, most: u64) -> Result<(), PlanError> {
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
        ));
    }
    Ok(())
}

/// The target opened for the run, its ledger, and what preparing it did:
/// a device only read keeps the ledger of an earlier writing run (if any);
/// a device written is claimed; a file is created or reused.
fn ready_target(
    spec: &DiskSpec,
    path: &Path,
) -> anyhow::Result<(std::fs::File, Option<Ledger>, serde_json::Value)> {
    let at = ledger_path(&spec.target);
    Ok(match spec.target {
        Target::Device { .. } if !spec.spec.writes() => {
            let l = Ledger::open(&at)?.filter(|l| l.complete() && l.size() == spec.size);
            (
                open_file(path, spec.direct, false)?,
                l,
                serde_json::json!({ "reused": false, "read_only": true }),
            )
        }
        Target::Device { .. } => {
            let file = claim_device(path, spec.direct)?;
            let (l, p) = ready_device(&file, path, &at, spec.size)?;
            (file, Some(l), p)
        }
        _ => {
            let (file, l, p) = prepare_file(path, &at, spec.size, spec.direct, spec.destroy_data)?;
            (file, Some(l), p)
        }
    })
}

/// The alignment direct I/O needs on `path`: the file's own (statx), or
/// for a file not made yet, the logical block size of the device holding
/// its directory; a sector when neither is known.
fn dio_alignment(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) {
        if let Ok(stx) = crate::util::sys::statx(libc::AT_FDCWD, &name, 0, libc::STATX_DIOALIGN) {
            if stx.stx_mask & libc::STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0 {
                return u64::from(stx.stx_dio_offset_align);
            }
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
    let (file, ledger) = open_written(path, ledger_at)?;
    let size = ledger.size();
    let chunk: u64 = 1 << 20;
    let mut buf = PageBuffer::new(chunk as usize)?;
    let mut tally = SectorTally::default();
    let mut offset = 0;
    while offset < size {
        let len = chunk.min(size - offset);
        let bytes = buf.prefix_mut(len as usize);
        if file.read_at(bytes, offset).ok() != Some(bytes.len()) {
            anyhow::bail!(
                "cannot read {} at offset {offset}: the file is shorter than its ledger says",
                path.display()
            );
        }
        tally.check(bytes, offset, &ledger);
        offset += len;
    }
    Ok(tally.report())
}

/// The file or device at `path` opened for reading back, with its ledger:
/// refused when perflab did not write it, or when the ledger names another
/// file of that name.
fn open_written(path: &Path, ledger_at: &Path) -> anyhow::Result<(std::fs::File, Ledger)> {
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
    Ok((file, ledger))
}

/// What reading a target back found, sector by sector.
#[derive(Default)]
struct SectorTally {
    checked: u64,
    bad: u64,
    unwritten: u64,
    /// The first mismatches, described.
    described: Vec<String>,
}

impl SectorTally {
    /// Checks the sectors of `bytes`, read at `offset`, against the ledger.
    fn check(&mut self, bytes: &[u8], offset: u64, ledger: &Ledger) {
        for (i, sector) in bytes.chunks_exact(SECTOR as usize).enumerate() {
            let at = offset + i as u64 * SECTOR;
            let acked = ledger.acknowledged(at);
            if acked == 0 {
                self.unwritten += 1;
                continue;
            }
            self.checked += 1;
            if let Err(m) = block::check(sector, at, ledger.file_id(), acked) {
                self.bad += 1;
                if self.described.len() < 10 {
                    self.described.push(format!("offset {at}: {m}"));
                }
            }
        }
    }

    /// The check's lines.
    fn report(self) -> CheckReport {
        let (checked, bad) = (self.checked, self.bad);
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
                    self.described.join("; ")
                )
            },
        }];
        if self.unwritten > 0 {
            lines.push(crate::workload::CheckLine {
                rule: "every sector was written".to_string(),
                passed: true,
                detail: format!(
                    "{} sectors never written by perflab (not checked)",
                    self.unwritten
                ),
            });
        }
        CheckReport::from_lines(lines)
    }
}

/// The disk workload as the engine sees it.
pub(crate) struct DiskWorkload {
    pub(crate) shared: Arc<Shared>,
}

impl Workload for DiskWorkload {
    type Session = DiskSession;

    fn op_names(&self) -> &[&'static str] {
        DiskSession::op_names(&self.shared)
    }

    async fn open_session(&self, user: u32, seed: u64, _seat: Seat) -> anyhow::Result<DiskSession> {
        DiskSession::open(&self.shared, user, seed)
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(Some(session::check_report(&self.shared)))
    }

    fn batch(&self, sessions: Vec<DiskSession>) -> Result<Box<dyn Batch>, Vec<DiskSession>> {
        let batch = batch::DiskBatch::new(sessions, &self.shared)?;
        Ok(Box::new(batch))
    }
}
