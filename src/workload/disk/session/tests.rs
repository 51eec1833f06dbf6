//! The disk session's own tests: its draws, places, stamps and checks.

use super::testing::{fill, writable};
use super::*;
use crate::workload::{Seat, Workload};

/// Where `s`'s next I/O of `line` goes, claimed (within all its draws).
fn place_of(s: &mut DiskSession, line: &Line) -> Option<u64> {
    let shared = s.shared.clone();
    place(
        &shared,
        line,
        DRAWS * PLACE_ROUNDS,
        s.random,
        &mut s.rng,
        &mut s.cursor,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    crate::util::test_runtime()
}

/// 200,000 draws of a joint mix with bursts: each line's share of
/// I/Os, and its read and random percentages, within a point.
#[test]
fn draws_honour_shares_of_ios_and_percentages_within_a_point() {
    let dir = tempfile::tempdir().unwrap();
    let w = writable(
        dir.path(),
        "size=4k share=60 read=75 random=100; size=8k share=30 read=50 random=50 burst=3; size=16k share=10 read=0 random=0 burst=2",
        Engine::Psync,
        false,
    );
    let mut s = runtime()
        .block_on(w.open_session(0, 11, Seat::alone(Duration::from_secs(10))))
        .unwrap();
    let n = 200_000;
    let mut counts = [[0u64; 4]; 3];
    for _ in 0..n {
        let op = s.choose();
        counts[op / 2][usize::from(op % 2 == 1) * 2 + usize::from(!s.random)] += 1;
    }
    for (i, (share, read, random)) in [(60.0, 75.0, 100.0), (30.0, 50.0, 50.0), (10.0, 0.0, 0.0)]
        .into_iter()
        .enumerate()
    {
        let c = counts[i];
        let total: u64 = c.iter().sum();
        let pct = |x: u64, of: u64| 100.0 * x as f64 / of as f64;
        assert!((pct(total, n) - share).abs() < 1.0, "line {i}: {c:?}");
        assert!(
            (pct(c[0] + c[1], total) - read).abs() < 1.0,
            "line {i}: {c:?}"
        );
        assert!(
            (pct(c[0] + c[2], total) - random).abs() < 1.0,
            "line {i}: {c:?}"
        );
    }
}

/// On io_uring, an I/O after warm-up allocates nothing: writes
/// stamped and acknowledged, reads verified, through the thread's ring
/// and its reaper.
#[test]
fn an_io_on_the_ring_allocates_nothing() {
    use crate::util::counting_alloc::allocations;
    let dir = tempfile::tempdir().unwrap();
    let w = writable(
        dir.path(),
        "size=4k read=50 random=100",
        Engine::Uring,
        true,
    );
    let rt = runtime();
    let local = tokio::task::LocalSet::new();
    let (warm, measured, n) = local.block_on(&rt, async {
        let mut s = w
            .open_session(0, 1, Seat::alone(Duration::from_secs(10)))
            .await
            .unwrap();
        // Write every block once, so that every read is of perflab's writes.
        fill(&mut s).await;
        let before = allocations();
        let n = 2000;
        for _ in 0..n {
            let op = s.choose();
            let outcome = s.execute(op).await;
            assert_eq!(outcome.result, crate::measure::OpResult::Ok);
        }
        (before, allocations(), n)
    });
    assert_eq!(
        measured - warm,
        0,
        "{} allocations in {n} I/Os",
        measured - warm
    );
    assert!(check_report(&w.shared).passed);
}

/// The same seed and spec on psync and on io_uring: the same I/Os, so
/// the same counts per line, direction and pattern, and files and
/// ledgers identical byte for byte afterwards.
#[test]
fn psync_and_io_uring_do_the_same_ios_for_a_seed() {
    let spec = "size=4k share=60 read=75 random=100; size=8k share=30 read=50 random=50 burst=3 align=4k; size=16k share=10 read=0 random=0";
    let run = |engine: Engine| {
        let dir = tempfile::tempdir().unwrap();
        let w = writable(dir.path(), spec, engine, false);
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let mut s = w
                .open_session(3, 42, Seat::alone(Duration::from_secs(10)))
                .await
                .unwrap();
            for _ in 0..6000 {
                let op = s.choose();
                let outcome = s.execute(op).await;
                assert_eq!(outcome.result, crate::measure::OpResult::Ok);
            }
        });
        drop(local);
        let tally = w.shared.tally.lock().unwrap().per_line.clone();
        let ledger = std::fs::read(dir.path().join("t.bin.perflab-ledger")).unwrap();
        let file = std::fs::read(dir.path().join("t.bin")).unwrap();
        (tally, ledger, file)
    };
    let (uring, psync) = (run(Engine::Uring), run(Engine::Psync));
    assert_eq!(uring.0, psync.0);
    assert_eq!(uring.0.iter().flatten().sum::<u64>(), 6000);
    // [read random, read sequential, write random, write sequential]
    let t = &uring.0;
    assert!(
        t[0][0] > 0 && t[0][1] == 0 && t[0][2] > 0 && t[0][3] == 0,
        "{t:?}"
    );
    assert!(t[1].iter().all(|n| *n > 0), "{t:?}");
    assert!(t[2][..3].iter().all(|n| *n == 0) && t[2][3] > 0, "{t:?}");
    assert!(uring.1 == psync.1, "the ledgers differ");
    assert!(uring.2 == psync.2, "the files differ");
    assert!(uring.2.iter().any(|b| *b != 0), "nothing was written");
}

/// Offsets are multiples of the line's alignment, inside the file, and
/// two claimed places never overlap; a sequential stream follows on.
#[test]
fn places_are_aligned_claimed_and_never_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let w = writable(
        dir.path(),
        "size=12k align=4k read=100 random=100",
        Engine::Psync,
        false,
    );
    let rt = runtime();
    let mut s = rt
        .block_on(w.open_session(0, 3, Seat::alone(Duration::from_secs(10))))
        .unwrap();
    let line = w.shared.spec.lines[0].clone();
    let mut held = Vec::new();
    // A quarter of the file's chunks held at once, never released.
    for _ in 0..80 {
        s.choose();
        let at = place_of(&mut s, &line).expect("a free place");
        assert_eq!(at % 4096, 0);
        assert!(at + line.size <= 4 << 20);
        for (o, l) in &held {
            assert!(at + line.size <= *o || o + l <= at, "{at} overlaps {o}");
        }
        held.push((at, line.size));
    }
    let seq = AccessSpec::parse_inline("size=8k read=100 random=0")
        .unwrap()
        .lines[0]
        .clone();
    s.random = false;
    let a = place_of(&mut s, &seq).unwrap();
    w.shared.release(a, seq.size);
    let b = place_of(&mut s, &seq).unwrap();
    assert!(b >= a + seq.size, "{a} then {b}");
}
