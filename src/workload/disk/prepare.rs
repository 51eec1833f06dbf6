//! Making the disk target ready for a run: the file opened (never through
//! a link, a new one never over an existing one), reused when its ledger
//! says it is whole at that size and it is still perflab's, else written
//! end to end (preconditioned) — and removed again when that is cut short
//! by a signal or an error; a device claimed and checked likewise.

use super::block;
use super::ledger::{FileIdentity, Ledger};
use super::mapping::PageBuffer;
use super::owner::{first_block_is_ours, foreign, is_ours, regular_file};
use anyhow::Context;
use std::time::Instant;

use crate::error::PlanError;
use crate::units::Bytes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Opens the target for the run (read-only when nothing is written).
pub(super) fn open_file(path: &Path, direct: bool, write: bool) -> anyhow::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(write);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path).map_err(|e| open_failed(path, direct, e))
}

/// Why the target could not be opened: a file system that refuses
/// `O_DIRECT` is bad input with its fix; anything else, as it came.
pub(super) fn open_failed(path: &Path, direct: bool, e: std::io::Error) -> anyhow::Error {
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
pub(super) fn open_target(path: &Path, direct: bool, create: bool) -> std::io::Result<File> {
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
pub(super) fn prepare_file(
    path: &Path,
    ledger_at: &Path,
    size: u64,
    direct: bool,
    destroy: bool,
) -> anyhow::Result<(File, Ledger, serde_json::Value)> {
    let file = match open_for_run(path, ledger_at, size, direct, destroy)? {
        FileState::Reused(file, ledger) => {
            crate::util::out(format_args!(
                "reusing {} ({}, written by perflab to the end)\n",
                path.display(),
                Bytes(size)
            ));
            return Ok((file, ledger, serde_json::json!({ "reused": true })));
        }
        FileState::ToWrite(file) => file,
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
            remove_half_written(file, path, ledger_at);
            Err(e)
        }
    }
}

/// A target file opened for a run: perflab's own, complete at the run's
/// size, or one to write end to end.
enum FileState {
    Reused(File, Ledger),
    ToWrite(File),
}

/// Opens (or creates) the target file, and judges on the open file whose
/// it is: another's is refused without `destroy`, a symbolic link always.
fn open_for_run(
    path: &Path,
    ledger_at: &Path,
    size: u64,
    direct: bool,
    destroy: bool,
) -> anyhow::Result<FileState> {
    let direct_refused = |e: std::io::Error| open_failed(path, direct, e);
    let ledger = Ledger::open(ledger_at)?;
    match open_target(path, direct, false) {
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
                    return Ok(FileState::Reused(file, l));
                }
            }
            Ok(FileState::ToWrite(file))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileState::ToWrite(
            open_target(path, direct, true).map_err(direct_refused)?,
        )),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Err(PlanError::flag(
            "--target",
            format!("{} is a symbolic link", path.display()),
            "give the path of the file itself",
        )
        .into()),
        Err(e) => Err(direct_refused(e)),
    }
}

/// Removes a file half written (of no use to anyone) with its ledger —
/// the file only while its name is still that file's.
fn remove_half_written(file: File, path: &Path, ledger_at: &Path) {
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
}

/// A device claimed for a writing run made ready: reused when its ledger
/// says it is complete at `size` and its first block is still perflab's,
/// else written end to end.
pub(super) fn ready_device(
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
pub(super) fn precondition(
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
    let mut buf = PageBuffer::new(chunk as usize)?;
    let mut offset = 0;
    while offset < size {
        crate::util::check_interrupt("preconditioning the target")?;
        let len = chunk.min(size - offset);
        let generation = ledger.next_generation();
        let bytes = buf.prefix_mut(len as usize);
        block::stamp(bytes, offset, generation, ledger.file_id());
        match file.write_at(bytes, offset) {
            Ok(n) if n as u64 == len => {}
            Ok(n) => anyhow::bail!(
                "preconditioning {} failed at offset {offset}: wrote {n} of {len} bytes",
                path.display()
            ),
            Err(e) => anyhow::bail!(
                "preconditioning {} failed at offset {offset}: {e}",
                path.display()
            ),
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
