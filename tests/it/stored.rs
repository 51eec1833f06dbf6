//! Stores written by a released perflab keep working: a store written by
//! 0.1.0 (kept as SQL text, a null run and a bank run on SQLite with an
//! objective) opens, lists, shows, exports and analyzes, and its plans
//! read back typed — the target's traits from its text, the objectives
//! and the seed from the plan.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};
use perflab::store::Store;
use perflab::sut::TargetKind;

/// A store built from the SQL text of `tests/fixtures/store/NAME.sql`.
fn store_from(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let sql = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/store")
            .join(format!("{name}.sql")),
    )
    .expect("the fixture is readable");
    let path = dir.join("perflab.db");
    rusqlite::Connection::open(&path)
        .expect("a new database")
        .execute_batch(&sql)
        .expect("the fixture's SQL runs");
    path
}

#[test]
fn a_store_written_by_0_1_0_opens_shows_and_analyzes() {
    let dir = tempdir();
    let path = store_from(dir.path(), "v0.1.0-two-runs");
    let runs = perflab_ok(dir.path(), "runs");
    contains(&runs, "in-process");
    contains(&runs, "sqlite:b.db");
    contains(&perflab_ok(dir.path(), "show 2"), "p95");
    contains(&perflab_ok(dir.path(), "show 2 --json -"), "\"seed\": 8");
    let verdict = perflab_ok(dir.path(), "analyze 2");
    contains(&verdict, "holds p95<50.0ms up to ");
    contains(&verdict, " at 2 users; no load run broke them");
    contains(&verdict, "bottleneck");

    let store = Store::open(&path).expect("the store opens");
    let null = store.load_run(1).expect("run 1 loads");
    let plan = null.plan.as_ref().expect("run 1's plan reads typed");
    assert_eq!(plan.workload.name, "null");
    assert_eq!(plan.seed, 7);
    let traits = null.target_traits();
    assert_eq!(traits.kind, TargetKind::InProcess);
    assert!(traits.embedded && !traits.single_writer);

    let bank = store.load_run(2).expect("run 2 loads");
    let plan = bank.plan.as_ref().expect("run 2's plan reads typed");
    assert_eq!((plan.workload.name.as_str(), plan.seed), ("bank", 8));
    assert_eq!(plan.workload.options["target"], "sqlite:b.db");
    assert_eq!(plan.slos.len(), 1);
    let traits = bank.target_traits();
    assert_eq!(traits.kind, TargetKind::Sqlite);
    assert!(traits.embedded && traits.single_writer && !traits.managed);
}

/// Six connections opening one new store at the same moment, three times
/// over: each opens, and the schema is made once.
#[test]
fn stores_opened_at_once_for_the_first_time_all_open() {
    for trial in 0..3 {
        let dir = tempdir();
        let path = dir.path().join("perflab.db");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let openers: Vec<_> = (0..6)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path).map(|_| ()).map_err(|e| format!("{e:#}"))
                })
            })
            .collect();
        for opener in openers {
            let opened = opener.join().expect("no panic");
            assert!(opened.is_ok(), "trial {trial}: {opened:?}");
        }
        let runs = perflab_ok(dir.path(), "runs");
        contains(&runs, "no runs in perflab.db");
    }
}

/// A store a newer perflab wrote is refused with that reason, not told to
/// be writable.
#[test]
fn a_store_from_a_newer_perflab_is_named_as_such() {
    let dir = tempdir();
    let path = dir.path().join("perflab.db");
    drop(Store::open(&path).expect("a new store"));
    rusqlite::Connection::open(&path)
        .expect("the store")
        .pragma_update(None, "user_version", 999)
        .expect("a newer schema");
    let (_, err) = perflab_expect(dir.path(), "runs", 2);
    contains(&err, "written by a newer perflab (schema 999");
    assert!(!err.contains("writable"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// Values no writer of this build stores — a length of 1e300 seconds, a
/// disk 1e300 busy, a sample holding a null where a number belongs (what
/// an older writer made of a non-finite probe value) — never panic a
/// reader: the run reads as damaged, naming the run, step, interval and
/// field, or the sample reads as absent.
#[test]
fn damaged_stored_values_are_named_or_read_as_absent_never_a_panic() {
    let dir = tempdir();
    let path = store_from(dir.path(), "v0.1.0-two-runs");
    let db = rusqlite::Connection::open(&path).expect("the store");
    // A sample with a null number: the run still reads, that sample absent.
    db.execute_batch(
        "UPDATE interval_host SET sample = json_set(sample, '$.cpu.user', json('null'))
         WHERE step_id = (SELECT min(id) FROM steps WHERE run_id = 2)",
    )
    .expect("a null in a host sample");
    perflab_ok(dir.path(), "show 2");
    perflab_ok(dir.path(), "analyze 2");
    // A disk 1e300 busy: analysis and every report format still work.
    db.execute_batch(
        "UPDATE interval_host SET sample = json_set(sample, '$.disks[0].busy', 1e300)",
    )
    .expect("a damaged disk");
    perflab_ok(dir.path(), "analyze 2");
    perflab_ok(dir.path(), "analyze 2 --json -");
    perflab_ok(dir.path(), "report 2 --html r.html --md r.md --csv csv");
    // An interval 1e300 s long: one line naming where, exit 2 (a damaged
    // store is bad input), everywhere.
    db.execute_batch(
        "UPDATE intervals SET length_s = 1e300
         WHERE step_id = (SELECT id FROM steps WHERE run_id = 1 AND idx = 0) AND idx = 0",
    )
    .expect("a damaged length");
    for command in ["show 1", "analyze 1", "report 1 --md r1.md", "compare 1 2"] {
        let (_, err) = perflab_expect(dir.path(), command, 2);
        contains(
            &err,
            "run 1 in the store is damaged: step 1: interval 0: length_s = 1e300",
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{command}: {err}");
    }
    // The other run is untouched.
    perflab_ok(dir.path(), "show 2");
}

/// A step status or level kind no perflab writes is named, never read
/// as a step that went well or as a rate.
#[test]
fn unknown_stored_words_are_named_never_guessed() {
    let dir = tempdir();
    let path = store_from(dir.path(), "v0.1.0-two-runs");
    let db = rusqlite::Connection::open(&path).expect("the store");
    db.execute_batch("UPDATE steps SET status = 'finished' WHERE run_id = 1 AND idx = 0")
        .expect("a step status from nowhere");
    let (_, err) = perflab_expect(dir.path(), "show 1", 2);
    contains(&err, "step 1: unknown step status 'finished' in the store");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    db.execute_batch("UPDATE steps SET level_kind = 'threads' WHERE run_id = 2 AND idx = 0")
        .expect("a level kind from nowhere");
    let (_, err) = perflab_expect(dir.path(), "show 2", 2);
    contains(&err, "step 1: unknown level kind 'threads' in the store");
}

/// A run left `running` by a killed perflab whose pid now belongs to
/// another process reads as partial: the stored writer's start time no
/// longer matches. A run whose writer is that very process still runs.
#[test]
fn a_killed_run_whose_pid_was_reused_reads_as_partial() {
    let dir = tempdir();
    perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    let db = rusqlite::Connection::open(dir.path().join("perflab.db")).expect("the store");
    let writer: String = db
        .query_row("SELECT writer FROM runs WHERE id = 1", [], |r| r.get(0))
        .expect("the writer is stored");
    assert!(writer.contains(':'), "{writer}");
    // This test's own process stands for the process that got the pid.
    let me = std::process::id();
    db.execute(
        "UPDATE runs SET status = 'running', finished_at = NULL, pid = ?1, writer = 'another-boot:1' WHERE id = 1",
        [me],
    )
    .expect("a run left running");
    contains(&perflab_ok(dir.path(), "runs"), "partial");
    let mine = format!(
        "{}:{}",
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap()
            .trim(),
        std::fs::read_to_string("/proc/self/stat")
            .unwrap()
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(19)
            .unwrap()
    );
    db.execute("UPDATE runs SET writer = ?1 WHERE id = 1", [mine])
        .expect("this process as the writer");
    contains(&perflab_ok(dir.path(), "runs"), "running");
}

/// Reading commands never turn a file into a store, and `check` never
/// touches a file that holds no bank: an empty file, a text file and a
/// foreign SQLite database are refused in one line naming the file, and
/// are left byte for byte as they were.
#[test]
fn reading_a_file_that_is_no_store_or_bank_leaves_it_as_it_was() {
    let dir = tempdir();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a store\n").unwrap();
    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    for file in [&empty, &text, &foreign] {
        let before = std::fs::read(file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for command in [
            format!("runs --store {name}"),
            format!("show 1 --store {name}"),
            format!("analyze 1 --store {name}"),
            format!("check bank --target sqlite:{name}"),
        ] {
            let (_, err) = perflab_expect(dir.path(), &command, 2);
            contains(&err, &name);
            assert_eq!(err.trim_end().lines().count(), 1, "{command}: {err}");
            assert_eq!(
                std::fs::read(file).unwrap(),
                before,
                "{command} changed {name}"
            );
        }
    }
    // A directory, or a file in a directory that does not exist, as the
    // bank's database: one line naming it, before anything is run.
    let (_, err) = perflab_expect(dir.path(), "run bank --target sqlite:. --quick", 2);
    contains(&err, "is a directory");
    let (_, err) = perflab_expect(
        dir.path(),
        "run bank --target sqlite:no/such/x.db --quick",
        2,
    );
    contains(&err, "does not exist");
}
