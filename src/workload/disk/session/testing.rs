//! Disk workloads on small files for tests elsewhere in the crate.

use super::super::DiskWorkload;
use super::*;

/// A workload of `spec` on a fresh, writable 4 MiB file and its ledger
/// in `dir`, on `engine`, verifying reads when `verify`.
pub(crate) fn writable(
    dir: &std::path::Path,
    spec: &str,
    engine: Engine,
    verify: bool,
) -> DiskWorkload {
    let path = dir.join("t.bin");
    File::create(&path).unwrap().set_len(4 << 20).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let ledger = Ledger::create(&Ledger::path_for(&path), 4 << 20, 7, None).unwrap();
    DiskWorkload {
        shared: Arc::new(Shared::new(
            AccessSpec::parse_inline(spec).unwrap(),
            file,
            4 << 20,
            Some(ledger),
            engine,
            verify,
        )),
    }
}

/// Writes `len` bytes at `offset`, a place no other I/O holds, through
/// the user's engine: stamped and acknowledged as any write.
pub(crate) async fn write_at(s: &mut DiskSession, offset: u64, len: u64) -> Outcome {
    assert!(s.shared.claim(offset, len));
    s.held = Some((offset, len));
    inflight::count(s.shared.run_id(), true);
    let ledger = s.shared.ledger.as_ref().unwrap();
    let (generation, file_id) = (ledger.next_generation(), ledger.file_id());
    let fd = s.shared.file.as_raw_fd();
    let stamp = |b: &mut [u8]| block::stamp(b, offset, generation, file_id);
    let result = match &mut s.io {
        Io::Uring { ring, slot } => {
            ring.with_buffer(*slot, len as usize, stamp);
            ring.io(*slot, fd, true, offset, len as u32).await
        }
        Io::Psync(p) => {
            stamp(p.buffer(len as usize));
            p.io(fd, true, offset, len as u32).await
        }
    };
    let io = Prepared {
        write: true,
        offset,
        len,
        generation,
    };
    s.finish(io, result)
}

/// Writes every 4 KiB block of the workload's 4 MiB file once through
/// `s`, so that every later read is of perflab's writes.
pub(crate) async fn fill(s: &mut DiskSession) {
    for at in (0..4u64 << 20).step_by(4096) {
        let outcome = write_at(s, at, 4096).await;
        assert!(outcome.result == crate::measure::OpResult::Ok);
    }
}
