//! The disk workload's users. Each user holds one I/O in flight at a time
//! (so users are the outstanding I/Os: the depth). Per burst it draws a
//! line of the spec by share; per I/O, read or write and random or
//! sequential by the line's percentages. A random offset is uniform over
//! the target at the line's alignment; a sequential one follows the user's
//! last I/O. Every I/O first claims its 4 KiB chunks of the target, so no
//! two I/Os in flight overlap (a read beside a write of the same place, or
//! two writes, would leave what is on the disk undefined); a random draw
//! that meets a claim is drawn again, a sequential one jumps past it.
//!
//! Writes are stamped sector by sector ([`super::block`]) with a new
//! generation and recorded in the [`Ledger`] when acknowledged; with
//! `--verify`, every sector read is checked against the ledger.

use super::access::{AccessSpec, Line, SECTOR};
use super::block;
use super::inflight;
use super::ledger::Ledger;
use super::psync::Psync;
use super::uring::Ring;
use super::Engine;
use crate::measure::{ErrorKind, Outcome};
use crate::workload::{CheckLine, CheckReport, Session};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The unit of claims on the target.
const CHUNK: u64 = 4096;
/// Mismatches described in the check; beyond, only counted.
const MISMATCHES_KEPT: usize = 10;
/// Random draws before a user gives up finding a free place and lets the
/// users holding the places move.
pub(super) const DRAWS: u32 = 64;
/// Turns of [`DRAWS`] draws before an I/O ends as busy (no free place).
pub(super) const PLACE_ROUNDS: u32 = 4;

/// What every user of a run shares.
pub(crate) struct Shared {
    pub(crate) spec: AccessSpec,
    pub(crate) file: File,
    /// The target's ledger: none when a device is only read and perflab
    /// never wrote it.
    pub(crate) ledger: Option<Ledger>,
    pub(crate) size: u64,
    pub(crate) engine: Engine,
    pub(crate) verify: bool,
    /// One flag per 4 KiB chunk of the target: an I/O in flight holds it.
    claims: Vec<AtomicBool>,
    /// Cumulative weights of the lines (share over burst), for drawing a burst.
    cumulative: Vec<f64>,
    names: Vec<&'static str>,
    /// Counts summed from users as they end.
    pub(crate) tally: Mutex<DiskCounts>,
    /// The most I/Os the plan may hold in flight at once (its depth).
    depth: u64,
}

/// What users counted, summed at their end.
#[derive(Debug, Default, Clone)]
pub(crate) struct DiskCounts {
    /// Per line: [read random, read sequential, write random, write sequential].
    pub(crate) per_line: Vec<[u64; 4]>,
    /// Sectors read back and checked.
    pub(crate) verified: u64,
    pub(crate) mismatches: u64,
    /// Each worker thread's most I/Os held at once, and when it counted:
    /// the sum over threads counting at the same time bounds the I/Os in
    /// flight at any instant.
    pub(crate) most_held: inflight::PerThread,
    /// The first mismatches, described.
    pub(crate) described: Vec<String>,
}

impl Shared {
    pub(crate) fn new(
        spec: AccessSpec,
        file: File,
        size: u64,
        ledger: Option<Ledger>,
        engine: Engine,
        verify: bool,
    ) -> Shared {
        let chunks = size.div_ceil(CHUNK) as usize;
        // A line's share is of I/Os: drawn per burst, it weighs share/burst.
        let mut acc = 0.0;
        let cumulative = spec
            .lines
            .iter()
            .map(|l| {
                acc += l.share / f64::from(l.burst.max(1));
                acc
            })
            .collect();
        let names = crate::workload::leak_names(spec.op_names());
        let lines = spec.lines.len();
        Shared {
            spec,
            file,
            ledger,
            size,
            engine,
            verify,
            claims: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            cumulative,
            names,
            tally: Mutex::new(DiskCounts {
                per_line: vec![[0; 4]; lines],
                ..DiskCounts::default()
            }),
            depth: u64::MAX,
        }
    }

    /// The same, with the most I/Os the plan may hold in flight, which the
    /// check holds the run to.
    pub(crate) fn with_depth(self, depth: u64) -> Shared {
        Shared { depth, ..self }
    }

    /// The run's identity for the in-flight counts: this value's address.
    fn run_id(&self) -> usize {
        self as *const Shared as usize
    }

    /// Claims the chunks of `[offset, offset+len)`; false (nothing held)
    /// when another I/O holds one.
    fn claim(&self, offset: u64, len: u64) -> bool {
        let (first, last) = (offset / CHUNK, (offset + len).div_ceil(CHUNK));
        for c in first..last {
            let free = self.claims[c as usize]
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
            if !free {
                self.release_range(first, c);
                return false;
            }
        }
        true
    }

    fn release(&self, offset: u64, len: u64) {
        self.release_range(offset / CHUNK, (offset + len).div_ceil(CHUNK));
    }

    fn release_range(&self, first: u64, end: u64) {
        for c in first..end {
            self.claims[c as usize].store(false, Ordering::Release);
        }
    }

    /// Records a mismatch (rare: off the hot path).
    fn mismatch(&self, text: String) {
        let mut t = self.tally.lock().unwrap_or_else(|p| p.into_inner());
        t.mismatches += 1;
        if t.described.len() < MISMATCHES_KEPT {
            t.described.push(text);
        }
    }
}

/// How a user reaches the device.
enum Io {
    Uring { ring: Rc<Ring>, slot: usize },
    Psync(Psync),
}

/// One user: its engine, its random stream, its place in the spec.
pub(crate) struct DiskSession {
    shared: Arc<Shared>,
    io: Io,
    rng: SmallRng,
    /// The line of the current burst and the I/Os left in it.
    line: usize,
    left: u32,
    /// The pause owed before the next I/O (a new burst's delay).
    pause: Duration,
    /// Whether the next I/O is at a random offset.
    random: bool,
    /// Where the user's next sequential I/O starts.
    cursor: u64,
    /// Counts kept by the user, summed into the shared tally at its end.
    per_line: Vec<[u64; 4]>,
    verified: u64,
    /// The place of the I/O in flight (still held if it was abandoned).
    held: Option<(u64, u64)>,
}

impl DiskSession {
    /// The session of virtual user `user` of a run, seeded for
    /// reproducibility, with its buffer on the run's engine.
    pub(super) fn open(shared: &Arc<Shared>, user: u32, seed: u64) -> anyhow::Result<DiskSession> {
        let len = shared.spec.max_size() as usize;
        let io = match shared.engine {
            Engine::Uring => {
                let ring = Ring::for_thread()?;
                let slot = ring.slot(len)?;
                Io::Uring { ring, slot }
            }
            Engine::Psync => Io::Psync(Psync::start(len)?),
        };
        let mut rng = SmallRng::seed_from_u64(seed);
        // Users start their sequential streams spread over the target.
        let cursor = align_down(
            shared.size / 64 * u64::from(user % 64) + rng.gen_range(0..SECTOR),
            SECTOR,
        );
        Ok(DiskSession {
            shared: shared.clone(),
            io,
            rng,
            line: 0,
            left: 0,
            pause: Duration::ZERO,
            random: true,
            cursor,
            per_line: vec![[0; 4]; shared.spec.lines.len()],
            verified: 0,
            held: None,
        })
    }

    /// The operation kinds' names.
    pub(super) fn op_names(shared: &Shared) -> &[&'static str] {
        &shared.names
    }
}

/// The run's check: each line's share, read and random percentages as
/// done against the spec, and the verification's outcome.
pub(crate) fn check_report(shared: &Shared) -> CheckReport {
    let t = shared
        .tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let total: u64 = t.per_line.iter().flatten().sum();
    let mut lines = Vec::new();
    for (i, (line, c)) in shared.spec.lines.iter().zip(&t.per_line).enumerate() {
        let n: u64 = c.iter().sum();
        let pct = |part: u64, of: u64| {
            if of == 0 {
                0.0
            } else {
                100.0 * part as f64 / of as f64
            }
        };
        lines.push(CheckLine {
            rule: format!("line {} ({})", i + 1, line.text()),
            // Shares are what the user asked for: they are reported, and
            // the tests hold them to a point; they are no pass/fail rule.
            passed: true,
            detail: format!(
                "{n} I/Os: share {:.2}%, read {:.2}%, random {:.2}%",
                pct(n, total),
                pct(c[0] + c[1], n),
                pct(c[0] + c[2], n)
            ),
        });
    }
    let in_flight = inflight::most(&t.most_held);
    if shared.depth != u64::MAX {
        lines.push(CheckLine {
            rule: "I/Os in flight never above the depth:".to_string(),
            passed: in_flight <= shared.depth,
            detail: format!(
                "at most {in_flight} at once of {} (each worker thread's most, summed over the threads running together)",
                shared.depth
            ),
        });
    }
    if shared.verify {
        lines.push(CheckLine {
            rule: "every sector read is the one last written there".to_string(),
            passed: t.mismatches == 0,
            detail: if t.mismatches == 0 {
                format!("{} sectors checked, all intact", t.verified)
            } else {
                format!(
                    "{} of {} sectors checked did not match: {}",
                    t.mismatches,
                    t.verified,
                    t.described.join("; ")
                )
            },
        });
    }
    CheckReport::from_lines(lines)
}

impl Drop for DiskSession {
    fn drop(&mut self) {
        if self.held.take().is_some() {
            inflight::count(self.shared.run_id(), false);
        }
        let mut t = self.shared.tally.lock().unwrap_or_else(|p| p.into_inner());
        inflight::report(self.shared.run_id(), &mut t.most_held);
        for (sum, mine) in t.per_line.iter_mut().zip(&self.per_line) {
            for (a, b) in sum.iter_mut().zip(mine) {
                *a += b;
            }
        }
        t.verified += self.verified;
    }
}

impl Session for DiskSession {
    fn choose(&mut self) -> usize {
        if self.left == 0 {
            // The first burst: no delay is owed before it.
            self.next_burst();
            self.pause = Duration::ZERO;
        }
        self.left -= 1;
        let l = &self.shared.spec.lines[self.line];
        let write = self.rng.gen::<f64>() * 100.0 >= l.read;
        self.random = self.rng.gen::<f64>() * 100.0 < l.random;
        let op = self.line * 2 + usize::from(write);
        if self.left == 0 {
            // The next burst is drawn now, so that its delay is owed after this I/O.
            self.next_burst();
        }
        op
    }

    fn pause(&mut self) -> Duration {
        std::mem::take(&mut self.pause)
    }

    async fn execute(&mut self, op: usize) -> Outcome {
        // An I/O abandoned at a timeout holds its place until the kernel
        // is done with it: wait it out (its place is given back next).
        if !self.settle().await {
            return Outcome::error(ErrorKind::Io(libc::EPIPE));
        }
        let mut rounds = 1;
        let prepared = loop {
            match self.begin(op, DRAWS) {
                Ok(Some(prepared)) => break prepared,
                Ok(None) if rounds < PLACE_ROUNDS => {
                    // The users of this thread holding the places get a turn.
                    rounds += 1;
                    tokio::task::yield_now().await;
                }
                Ok(None) => return Outcome::error(ErrorKind::Busy),
                Err(outcome) => return outcome,
            }
        };
        let fd = self.shared.file.as_raw_fd();
        let (write, offset, len) = (prepared.write, prepared.offset, prepared.len as u32);
        let result = match &mut self.io {
            Io::Uring { ring, slot } => ring.io(*slot, fd, write, offset, len).await,
            Io::Psync(p) => p.io(fd, write, offset, len).await,
        };
        self.finish(prepared, result)
    }
}

/// An I/O readied at its claimed place: counted, and stamped if a write.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prepared {
    pub(super) write: bool,
    pub(super) offset: u64,
    pub(super) len: u64,
    /// The generation a write stamped.
    generation: u64,
}

impl DiskSession {
    /// Waits for an I/O abandoned at a timeout to end; false when the
    /// user's engine is gone.
    async fn settle(&mut self) -> bool {
        match &mut self.io {
            Io::Uring { ring, slot } => {
                ring.settle(*slot).await;
                true
            }
            Io::Psync(p) => p.settle().await,
        }
    }

    /// The ring and slot of a user on io_uring.
    pub(super) fn ring_slot(&self) -> Option<(&Rc<Ring>, usize)> {
        match &self.io {
            Io::Uring { ring, slot } => Some((ring, *slot)),
            Io::Psync(_) => None,
        }
    }

    /// Readies the I/O of kind `op` once the user's last I/O has ended
    /// (abandoned or not): gives that one's place back, claims a place
    /// within `draws` draws, counts the I/O and stamps it if a write.
    /// `Ok(None)` when no place could be claimed: the users holding the
    /// places must move first.
    pub(super) fn begin(&mut self, op: usize, draws: u32) -> Result<Option<Prepared>, Outcome> {
        let shared = &*self.shared;
        if let Some((o, l)) = self.held.take() {
            shared.release(o, l);
            inflight::count(shared.run_id(), false);
        }
        let (index, write) = (op / 2, op % 2 == 1);
        let Some(line) = shared.spec.lines.get(index) else {
            return Err(Outcome::error(ErrorKind::Corrupt));
        };
        // A write needs the ledger (validation gives one to every writing run).
        let ledger = match (&shared.ledger, write) {
            (Some(l), true) => Some(l),
            (None, true) => return Err(Outcome::error(ErrorKind::Io(libc::EROFS))),
            (_, false) => None,
        };
        let Some(offset) = place(
            shared,
            line,
            draws,
            self.random,
            &mut self.rng,
            &mut self.cursor,
        ) else {
            return Ok(None);
        };
        let len = line.size;
        self.held = Some((offset, len));
        inflight::count(shared.run_id(), true);
        let pattern = usize::from(write) * 2 + usize::from(!self.random);
        self.per_line[index][pattern] += 1;
        let generation = match ledger {
            Some(ledger) => {
                let (generation, file_id) = (ledger.next_generation(), ledger.file_id());
                let stamp = |b: &mut [u8]| block::stamp(b, offset, generation, file_id);
                match &mut self.io {
                    Io::Uring { ring, slot } => ring.with_buffer(*slot, len as usize, stamp),
                    Io::Psync(p) => stamp(p.buffer(len as usize)),
                }
                generation
            }
            None => 0,
        };
        Ok(Some(Prepared {
            write,
            offset,
            len,
            generation,
        }))
    }

    /// Ends a readied I/O with the kernel's result (bytes, or a negated
    /// errno): records a write's generation, checks a verified read, then
    /// gives the place back.
    pub(super) fn finish(&mut self, io: Prepared, result: i32) -> Outcome {
        let shared = &*self.shared;
        let outcome = if result < 0 {
            Outcome::error(ErrorKind::Io(-result))
        } else if result as u64 != io.len {
            // A short transfer: the target ended or the device gave less.
            Outcome::error(ErrorKind::Io(libc::EIO))
        } else if let (true, Some(l)) = (io.write, &shared.ledger) {
            l.acknowledge(io.offset, io.len, io.generation);
            Outcome {
                bytes: io.len,
                ..Outcome::ok()
            }
        } else if !io.write
            && shared.verify
            && !verify(shared, &mut self.io, &mut self.verified, io.offset, io.len)
        {
            Outcome::error(ErrorKind::Corrupt)
        } else {
            Outcome {
                bytes: io.len,
                ..Outcome::ok()
            }
        };
        // Given back only now: a write of the place by another user must
        // not come between this read and its check against the ledger.
        if let Some((o, l)) = self.held.take() {
            shared.release(o, l);
            inflight::count(shared.run_id(), false);
        }
        outcome
    }

    /// Draws the line of the next burst (by share over burst, so that
    /// shares hold of I/Os); its delay is owed before it.
    fn next_burst(&mut self) {
        let cumulative = &self.shared.cumulative;
        let x = self.rng.gen::<f64>() * cumulative.last().copied().unwrap_or(100.0);
        self.line = cumulative
            .iter()
            .position(|c| x < *c)
            .unwrap_or(cumulative.len() - 1);
        let l = &self.shared.spec.lines[self.line];
        self.left = l.burst;
        self.pause = l.delay;
    }
}

/// Where a user's next I/O of `line` goes, claimed: a random aligned
/// offset, or the end of the user's last I/O (its `cursor`). None when no
/// place could be claimed within `draws` draws (the users hold nearly all
/// of the target).
fn place(
    shared: &Shared,
    line: &Line,
    draws: u32,
    random: bool,
    rng: &mut SmallRng,
    cursor: &mut u64,
) -> Option<u64> {
    let (len, align) = (line.size, line.align);
    let room = shared.size - len;
    for _ in 0..draws {
        let offset = if random {
            align_down(rng.gen_range(0..=room), align)
        } else {
            let at = align_up(*cursor, align);
            if at > room {
                0
            } else {
                at
            }
        };
        if shared.claim(offset, len) {
            if !random {
                *cursor = offset + len;
            }
            return Some(offset);
        }
        if !random {
            // Past the I/O in the way.
            *cursor = offset + len;
        }
    }
    None
}

/// Checks every sector of a read in the user's buffer; false on the first
/// mismatch (described).
fn verify(shared: &Shared, io: &mut Io, verified: &mut u64, offset: u64, len: u64) -> bool {
    let Some(ledger) = &shared.ledger else {
        return true;
    };
    let mut check = |buf: &mut [u8]| {
        for (i, sector) in buf.chunks_exact(SECTOR as usize).enumerate() {
            let at = offset + i as u64 * SECTOR;
            let acked = ledger.acknowledged(at);
            *verified += 1;
            if let Err(m) = block::check(sector, at, ledger.file_id(), acked) {
                shared.mismatch(format!("offset {at}: {m}"));
                return false;
            }
        }
        true
    };
    match io {
        Io::Uring { ring, slot } => ring.with_buffer(*slot, len as usize, check),
        Io::Psync(p) => check(p.buffer(len as usize)),
    }
}

fn align_down(x: u64, align: u64) -> u64 {
    x - x % align.max(1)
}

fn align_up(x: u64, align: u64) -> u64 {
    x.div_ceil(align.max(1)) * align.max(1)
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;
