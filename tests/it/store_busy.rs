//! A results store another process holds, or that cannot be made: a run
//! waits through a lock and loses no step; a store that cannot be made on
//! a full file system is said so in one line and leaves no file behind.

use crate::disk::Tmpfs;
use crate::support::{contains, perflab_expect, perflab_process, stored_steps, tempdir};
use std::time::{Duration, Instant};

/// Another process (this test, through rusqlite) holds the store in an
/// exclusive transaction for longer than SQLite's busy timeout while a
/// run commits its steps: the run says who holds it, waits, and ends
/// complete with every step stored.
#[test]
fn a_store_locked_by_another_process_loses_no_step() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let store = dir.path().join("perflab.db");
    let mut child = perflab_process(dir.path())
        .args("run null --users 1,2,3 --warmup 0s --duration 1s --service 1ms".split_whitespace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("perflab starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored_steps(&store) < 1 {
        assert!(Instant::now() < deadline, "no step was stored");
        std::thread::sleep(Duration::from_millis(20));
    }
    let holder = rusqlite::Connection::open(&store).expect("the store opens");
    holder
        .busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    holder
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("the lock is taken");
    // Past SQLite's own busy timeout (10 s), while the run's later steps end.
    std::thread::sleep(Duration::from_secs(13));
    holder.execute_batch("COMMIT").expect("the lock is let go");
    drop(holder);
    let status = child.wait().expect("perflab ends");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut err)
        .expect("its errors");
    assert_eq!(status.code(), Some(0), "{err}");
    contains(
        &err,
        &format!(
            "the store perflab.db is locked by another process (pid {}): retrying",
            std::process::id()
        ),
    );
    assert_eq!(stored_steps(&store), 3, "{err}");
    let (shown, _) = perflab_expect(dir.path(), "show last", 0);
    contains(&shown, "complete");
}

/// A store that cannot be made on a full file system: one line naming
/// the cause, exit 2, and no file left where perflab made one — while a
/// file that was there before is never removed.
#[test]
fn a_store_on_a_full_file_system_is_refused_and_leaves_nothing() {
    let fs = Tmpfs::new("size=64k");
    // Fill it to the last block.
    let filler = fs.path().join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 256 * 1024]);
    let dir = tempdir();
    let store = fs.path().join("perflab.db");
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run null --users 1 --warmup 0s --duration 1s --store {}",
            store.display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "the file system is full");
    let left: Vec<_> = std::fs::read_dir(fs.path())
        .expect("the file system is readable")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n != "filler")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(filler.exists(), "a file perflab did not make was removed");
}

/// A run whose stored record is damaged, and a store whose pages are
/// malformed, are bad input: one line naming the store and the fix, exit
/// 2, from `show`, `analyze`, `compare` and `runs`.
#[test]
fn a_damaged_run_or_store_is_bad_input_naming_the_store() {
    let dir = tempdir();
    perflab_expect(
        dir.path(),
        "run null --users 1 --warmup 0s --duration 1s --service 1ms",
        0,
    );
    let store = dir.path().join("perflab.db");
    let pristine = std::fs::read(&store).expect("the store");
    rusqlite::Connection::open(&store)
        .and_then(|c| c.execute("UPDATE runs SET host = '{bad' WHERE id = 1", []))
        .expect("the run is damaged");
    for command in ["show 1", "analyze 1", "compare 1 1"] {
        let (_, err) = perflab_expect(dir.path(), command, 2);
        assert_eq!(err.trim().lines().count(), 1, "{command}: {err}");
        contains(&err, "the results store perflab.db is damaged");
        contains(&err, "restore it from a copy");
    }
    // The first page's b-tree header (byte 100 on) made malformed.
    let mut damaged = pristine;
    damaged[100] ^= 0x5a;
    std::fs::write(&store, &damaged).expect("the store is damaged");
    let _ = std::fs::remove_file(dir.path().join("perflab.db-wal"));
    let _ = std::fs::remove_file(dir.path().join("perflab.db-shm"));
    let (_, err) = perflab_expect(dir.path(), "runs", 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "the results store perflab.db is damaged");
}
