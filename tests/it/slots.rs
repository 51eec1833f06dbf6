//! The slots the integration tests take to share the host: two for the
//! tests that load it ([`heavy`]), two for the long ones that mostly wait
//! ([`waits`]), all of them for one held to a quiet machine ([`alone`]).
//! Each hold is written to `PERFLAB_TEST_TIMES` for `scripts/test.sh`.

use std::time::Duration;

/// How many tests that load the machine run at once: the host's two
/// CPUs, as when the suite ran two tests at a time.
const HEAVY_AT_ONCE: usize = 2;

/// How many long tests that mostly wait ([`waits`]) run at once, beside
/// the heavy ones: each was measured at under a quarter of a CPU, so
/// these add less than half a CPU's work in all. Four at once, with
/// eight threads, failed the gate's log what-if in a run (the host's
/// CPUs 86% busy at one user, its prediction held to the CPU).
const WAITING_AT_ONCE: usize = 2;

/// Slots taken by the tests that load the machine and by the long ones
/// that mostly wait, and how many tests wait to run [`alone`].
static HEAVY: std::sync::Mutex<Slots> = std::sync::Mutex::new(Slots {
    taken: 0,
    waiting: 0,
    alone_waiting: 0,
});
static HEAVY_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// A slot for a test that loads the machine for seconds (a sweep at full
/// speed, managed servers under load, a search that judges latencies) or
/// its disk (a disk or files run at a rate), or whose figures hang on
/// timely wake-ups (an open loop's rate, what ends in a window): four
/// disk tests at once, side by side in the suite's order, once failed a
/// psync run at 2000/s on a disk 76% busy with the others' writes.
/// At most [`HEAVY_AT_ONCE`] of them run at once, so that they share the
/// host as they did when the suite ran two tests at a time; the short
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
/// At most [`WAITING_AT_ONCE`] run at once, beside the heavy ones; none
/// starts while a test waits to run [`alone`].
pub fn waits() -> HeavySlot {
    take_slots(Kind::Waits)
}

/// Every slot of [`heavy`]: for a test whose figures are held to what a
/// quiet machine gives (the search's steps against the truth of the
/// null queue), no other test that loads the machine, or that mostly
/// waits, runs beside it. While one waits, no [`heavy`] or [`waits`]
/// test starts: the running ones drain, and it does not wait for the
/// suite's last.
pub fn alone() -> HeavySlot {
    take_slots(Kind::Alone)
}

/// What a test takes of the slots.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Heavy,
    Waits,
    Alone,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Heavy => "heavy",
            Kind::Waits => "waits",
            Kind::Alone => "alone",
        }
    }
}

/// The slots' state.
struct Slots {
    taken: usize,
    waiting: usize,
    alone_waiting: usize,
}

impl Slots {
    /// Whether a test of `kind` may start now.
    fn admits(&self, kind: Kind) -> bool {
        match kind {
            Kind::Alone => self.taken == 0 && self.waiting == 0,
            Kind::Heavy => self.alone_waiting == 0 && self.taken < HEAVY_AT_ONCE,
            Kind::Waits => self.alone_waiting == 0 && self.waiting < WAITING_AT_ONCE,
        }
    }

    /// Takes (`take`) or gives back what a test of `kind` holds.
    fn count(&mut self, kind: Kind, take: bool) {
        let (counter, n) = match kind {
            Kind::Alone => (&mut self.taken, HEAVY_AT_ONCE),
            Kind::Heavy => (&mut self.taken, 1),
            Kind::Waits => (&mut self.waiting, 1),
        };
        *counter = if take {
            *counter + n
        } else {
            counter.saturating_sub(n)
        };
    }
}

/// Takes what `kind` holds once it is free (and, but for [`alone`], once
/// no test waits to run alone).
fn take_slots(kind: Kind) -> HeavySlot {
    let asked = std::time::Instant::now();
    let mut slots = HEAVY.lock().unwrap_or_else(|p| p.into_inner());
    if kind == Kind::Alone {
        slots.alone_waiting += 1;
    }
    while !slots.admits(kind) {
        slots = HEAVY_FREED.wait(slots).unwrap_or_else(|p| p.into_inner());
    }
    if kind == Kind::Alone {
        slots.alone_waiting -= 1;
    }
    slots.count(kind, true);
    HeavySlot {
        kind,
        taken: std::time::Instant::now(),
        waited: asked.elapsed(),
    }
}

/// Slots of [`heavy`], [`waits`] or [`alone`]; given back when dropped, a
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
