//! Whose the disk target is, before anything is written: a `file:` or
//! `device:` target and where its ledger lives; a device that anything
//! holds is refused whatever the flags, any other written only with
//! `--destroy-data`; a file that perflab did not make (no ledger naming
//! that very file) likewise; a size the file system has no room for is
//! refused from `statvfs`.

use super::access::SECTOR;
use super::block;
use super::ledger::{FileIdentity, Ledger};
use super::mapping::PageBuffer;

use crate::error::PlanError;
use crate::sut::Target;
use crate::units::Bytes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A `file:PATH` or `device:/dev/NAME` target.
pub(super) fn storage_target(text: &str, flag: &str) -> Result<Target, PlanError> {
    let fix = "give file:PATH or device:/dev/NAME";
    let target = Target::parse(text).map_err(|e| PlanError::flag(flag, e, fix))?;
    if target.traits().kind != crate::sut::TargetKind::Storage {
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
pub(super) fn ledger_path(target: &Target) -> PathBuf {
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
pub(super) const DEVICE_LEDGERS: &str = "/var/lib/perflab/ledgers";

/// A device a spec would write: never one anything holds (mounted in
/// any namespace, swap, device-mapper or md), whatever the flags; any
/// other only with `--destroy-data`, the refusal saying what blkid finds
/// on it.
pub(super) fn check_device_writable(path: &Path, destroy: bool) -> Result<(), PlanError> {
    use crate::sut::device::{contents, held};
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
pub(super) fn claim_device(path: &Path, direct: bool) -> anyhow::Result<File> {
    let fix = "give a device nothing uses, or a read-only spec";
    let file =
        crate::sut::device::claim(path, direct).map_err(|e| PlanError::flag("--target", e, fix))?;
    if let Some(held) =
        crate::sut::device::held(path).map_err(|e| PlanError::flag("--target", e, fix))?
    {
        return Err(PlanError::flag("--target", format!("{}: {held}", path.display()), fix).into());
    }
    Ok(file)
}

/// The target's size: `--size`, else an existing perflab file's (or,
/// with `destroy`, another file's own). An existing file perflab did not
/// make is refused without `destroy`; a size the file system has no room
/// for is refused.
pub(super) fn size_of(path: &Path, given: Option<&str>, destroy: bool) -> Result<u64, PlanError> {
    let given = given.map(given_size).transpose()?;
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
    let existing = existing_file(path)?;
    let ours = match &existing {
        Some(m) => is_ours_at(path, m, ledger.as_ref())?,
        None => false,
    };
    if existing.is_some() && !ours && !destroy {
        return Err(foreign(path, ledger.is_some()));
    }
    let size = match (&existing, given) {
        (_, Some(s)) => s,
        (Some(_), None) if ours => ledger.as_ref().map_or(0, Ledger::size),
        (Some(m), None) if whole_blocks(m.len()) => m.len(),
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

/// Whether a target file's size is whole 4 KiB blocks of at least 1 MiB.
fn whole_blocks(size: u64) -> bool {
    size >= 1 << 20 && size % 4096 == 0
}

/// `--size`, parsed and checked to be whole blocks.
fn given_size(text: &str) -> Result<u64, PlanError> {
    let size = Bytes::parse(text)
        .map(|b| b.0)
        .map_err(|e| PlanError::flag("--size", e, "e.g. --size 1GiB"))?;
    if !whole_blocks(size) {
        return Err(PlanError::flag(
            "--size",
            format!(
                "{} is not a whole number of 4 KiB blocks of at least 1 MiB",
                Bytes(size)
            ),
            "e.g. --size 1GiB",
        ));
    }
    Ok(size)
}

/// What is at `path` now, not following a link; none when nothing is.
fn existing_file(path: &Path) -> Result<Option<std::fs::Metadata>, PlanError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PlanError::flag(
            "--target",
            format!("{}: {e}", path.display()),
            "give a path perflab may use",
        )),
    }
}

/// Whether the existing file at `path` (a regular file, or refused) is the
/// one `ledger` was made for.
fn is_ours_at(
    path: &Path,
    meta: &std::fs::Metadata,
    ledger: Option<&Ledger>,
) -> Result<bool, PlanError> {
    regular_file(path, meta)?;
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
    Ok(ledger.is_some_and(|l| is_ours(&file, l)))
}

/// The directory of a target file must take the file and its ledger: a
/// read-only file system or a directory perflab may not write is bad
/// input, found before anything is done.
pub(super) fn writable_dir(dir: &Path) -> Result<(), PlanError> {
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
pub(super) fn regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), PlanError> {
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
pub(super) fn foreign(path: &Path, has_ledger: bool) -> PlanError {
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
        "give --target file:PATH for a file that does not exist yet, move it away, or give --destroy-data to overwrite it",
    )
}

/// Refuses a target file and ledger the file system of `dir` has no room
/// for, counting what an existing file and ledger there already hold (they
/// are rewritten). The space kept for root (statvfs's `f_bavail` excludes
/// it) is left to the host.
pub(super) fn check_free_space(
    path: &Path,
    dir: &Path,
    ledger_at: &Path,
    size: u64,
) -> Result<(), PlanError> {
    use std::os::unix::fs::MetadataExt;
    let free = crate::workload::free_bytes_at(dir, "give a path on a mounted file system")?;
    let held = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.blocks() * 512)
    };
    let free = free
        .saturating_add(held(path))
        .saturating_add(held(ledger_at));
    let need = size.saturating_add(Ledger::bytes_for(size));
    if need <= free {
        return Ok(());
    }
    // The largest size that fits with its ledger (8 bytes a sector).
    let fits = free.saturating_sub(8192) / (SECTOR + 8) * SECTOR / 4096 * 4096;
    let fix = if fits >= 1 << 20 {
        // Exact, in the unit the flag takes: a rounded "2.0 MiB" may be
        // more than fits.
        let size = match fits % (1 << 20) {
            0 => format!("{}MiB", fits >> 20),
            _ => format!("{}KiB", fits >> 10),
        };
        format!("give --size {size} or less, or free space there")
    } else {
        "free space there, or give a path on another file system".to_string()
    };
    let (need, free) = Bytes::apart(Bytes(need), Bytes(free));
    Err(PlanError::flag(
        "--size",
        format!(
            "{} and its ledger need {need}, but the file system of {} has {free} free",
            path.display(),
            std::fs::canonicalize(dir)
                .unwrap_or_else(|_| dir.to_path_buf())
                .display(),
        ),
        &fix,
    ))
}

/// The first bytes of an open target, up to 4 KiB, into an aligned buffer
/// (the file may be open for direct I/O).
pub(super) fn read_head(file: &File, buf: &mut PageBuffer) -> usize {
    file.read_at(buf.prefix_mut(4096), 0).unwrap_or(0)
}

/// Whether `file` is the file `ledger` was made for, as perflab left it:
/// the same file (device, inode and birth time, where the ledger records
/// them), whose first sector holds perflab's stamp of that file — or,
/// where perflab never wrote there, nothing yet (a preconditioning cut
/// short). A file removed and written again under the same name, or
/// copied over, is not.
pub(super) fn is_ours(file: &File, ledger: &Ledger) -> bool {
    let same = FileIdentity::of(file)
        .map(|id| ledger.belongs_to(&id))
        .unwrap_or(Some(false));
    if same == Some(false) {
        return false;
    }
    let Ok(mut buf) = PageBuffer::new(4096) else {
        return false;
    };
    let n = read_head(file, &mut buf);
    let never_written = same == Some(true) && ledger.acknowledged(0) == 0;
    if n < SECTOR as usize {
        return never_written && n == 0;
    }
    let first = &buf.bytes()[..SECTOR as usize];
    block::check(first, 0, ledger.file_id(), 0).is_ok()
        || (never_written && first.iter().all(|b| *b == 0))
}

/// Whether the target's first block is still the one the ledger knows
/// (not reformatted or overwritten since), so that the ledger may be reused.
pub(super) fn first_block_is_ours(file: &File, ledger: &Ledger) -> bool {
    let Ok(mut buf) = PageBuffer::new(4096) else {
        return false;
    };
    read_head(file, &mut buf) == 4096
        && buf.bytes()[..4096]
            .chunks_exact(SECTOR as usize)
            .enumerate()
            .all(|(i, sector)| {
                let at = i as u64 * SECTOR;
                block::check(sector, at, ledger.file_id(), ledger.acknowledged(at)).is_ok()
            })
}
