//! The slots the integration tests take to share the host: four for the
//! tests that load it ([`heavy`]), two for the long ones that mostly wait
//! ([`waits`]). A test that must have a quiet machine is a verdict test
//! (`tests/verdict`), which holds the whole of it. Each hold is written
//! to `PERFLAB_TEST_TIMES` for `scripts/test.sh`.

use std::time::Duration;

/// How many tests that load the machine run at once. Each was measured
/// alone at half a CPU on average (542 CPU-seconds over 1089 s for the
/// heavy tests then). Two at once, the group took 443 s in CI; three at
/// once, 389 s with the host's two CPUs 65% busy, 101 s of it in three
/// tests that had to run alone and the drain before each; with those
/// moved to the verdict suite, 262 s at 77% busy (260 s in CI); four at
/// once, with eight threads, 217 s at 82% busy, the heavy tests holding
/// their slots 686 s in all where three at once held them 672 s: they
/// hardly slow each other.
const HEAVY_AT_ONCE: usize = 4;

/// How many long tests that mostly wait ([`waits`]) run at once, beside
/// the heavy ones: each was measured at under a quarter of a CPU, so
/// these add less than half a CPU's work in all. Four at once, with
/// eight threads, failed the gate's log what-if in a run (the host's
/// CPUs 86% busy at one user, its prediction held to the CPU).
const WAITING_AT_ONCE: usize = 2;

/// Slots taken by the tests that load the machine and by the long ones
/// that mostly wait.
static HEAVY: std::sync::Mutex<Slots> = std::sync::Mutex::new(Slots {
    taken: 0,
    waiting: 0,
});
static HEAVY_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// A slot for a test that loads the machine for seconds (a sweep at full
/// speed, managed servers under load, a search that judges latencies) or
/// its disk (a disk or files run at a rate), or whose figures hang on
/// timely wake-ups (an open loop's rate, what ends in a window): four
/// disk tests at once, side by side in the suite's order, once failed a
/// psync run at 2000/s on a disk 76% busy with the others' writes.
/// At most [`HEAVY_AT_ONCE`] of them run at once (at half a CPU each on
/// average, as much as the host's two CPUs give); the short
/// tests (bad input, help, fixtures, runs of a second or two) and those
/// that mostly wait ([`waits`]) run beside them in the suite's other
/// threads (`--test-threads` in `scripts/test.sh`). Held until the
/// returned guard drops.
pub fn heavy() -> HeavySlot {
    take_slots(Kind::Heavy)
}

/// A slot for a test of seconds that mostly waits and judges no rate or
/// latency: deadlines (a silent peer given up, a store held locked), signals
/// at chosen moments, a browser following a page, a cache's counts, a
/// link made and removed. Each such test, run alone in a cgroup of its
/// own, used under a quarter of a CPU over its time (0.00-0.20 CPUs, for
/// 5-29 s), where the tests that take [`heavy`] use up to a CPU or two.
/// At most [`WAITING_AT_ONCE`] run at once, beside the heavy ones.
pub fn waits() -> HeavySlot {
    take_slots(Kind::Waits)
}

/// What a test takes of the slots.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Heavy,
    Waits,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Heavy => "heavy",
            Kind::Waits => "waits",
        }
    }
}

/// The slots' state.
struct Slots {
    taken: usize,
    waiting: usize,
}

impl Slots {
    /// Whether a test of `kind` may start now.
    fn admits(&self, kind: Kind) -> bool {
        match kind {
            Kind::Heavy => self.taken < HEAVY_AT_ONCE,
            Kind::Waits => self.waiting < WAITING_AT_ONCE,
        }
    }

    /// Takes (`take`) or gives back what a test of `kind` holds.
    fn count(&mut self, kind: Kind, take: bool) {
        let counter = match kind {
            Kind::Heavy => &mut self.taken,
            Kind::Waits => &mut self.waiting,
        };
        *counter = if take {
            *counter + 1
        } else {
            counter.saturating_sub(1)
        };
    }
}

/// Takes what `kind` holds once it is free.
fn take_slots(kind: Kind) -> HeavySlot {
    let asked = std::time::Instant::now();
    let mut slots = HEAVY.lock().unwrap_or_else(|p| p.into_inner());
    while !slots.admits(kind) {
        slots = HEAVY_FREED.wait(slots).unwrap_or_else(|p| p.into_inner());
    }
    slots.count(kind, true);
    HeavySlot {
        kind,
        taken: std::time::Instant::now(),
        waited: asked.elapsed(),
    }
}

/// A slot of [`heavy`] or [`waits`]; given back when dropped, a
/// failed test's too.
pub struct HeavySlot {
    kind: Kind,
    taken: std::time::Instant,
    waited: Duration,
}

impl Drop for HeavySlot {
    fn drop(&mut self) {
        record_hold(self);
        let mut slots = HEAVY.lock().unwrap_or_else(|p| p.into_inner());
        slots.count(self.kind, false);
        // Waiters want different counts: each looks again.
        HEAVY_FREED.notify_all();
    }
}

/// Appends how long a test held its heavy slots, and waited for them, to
/// the file `PERFLAB_TEST_TIMES` names (`scripts/test.sh` prints the
/// longest): the integration suite's time is the sum of these holds over
/// the slots, and the test harness's own times count the wait as well.
fn record_hold(slot: &HeavySlot) {
    use std::io::Write;
    let Some(path) = std::env::var_os("PERFLAB_TEST_TIMES") else {
        return;
    };
    let line = format!(
        "{:.1} {:.1} {} {}\n",
        slot.taken.elapsed().as_secs_f64(),
        slot.waited.as_secs_f64(),
        slot.kind.name(),
        std::thread::current().name().unwrap_or("?"),
    );
    // One write of one short line to a file opened for appending: the
    // lines of tests ending at once do not interleave.
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}
