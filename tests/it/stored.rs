//! Stores written by a released perflab keep working: a store written by
//! 0.1.0 (kept as SQL text, a null run and a bank run on SQLite with an
//! objective) opens, lists, shows, exports and analyzes, and its plans
//! read back typed — the target's traits from its text, the objectives
//! and the seed from the plan.

use crate::support::{contains, perflab_ok, tempdir};
use perflab::store::Store;
use perflab::target::Kind;

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
    contains(&verdict, "p95<50.0ms: met up to 2 users");
    contains(&verdict, "bottleneck");

    let store = Store::open(&path).expect("the store opens");
    let null = store.load_run(1).expect("run 1 loads");
    let plan = null.plan.as_ref().expect("run 1's plan reads typed");
    assert_eq!(plan.workload.name, "null");
    assert_eq!(plan.seed, 7);
    let traits = null.target_traits();
    assert_eq!(traits.kind, Kind::InProcess);
    assert!(traits.embedded && !traits.single_writer);

    let bank = store.load_run(2).expect("run 2 loads");
    let plan = bank.plan.as_ref().expect("run 2's plan reads typed");
    assert_eq!((plan.workload.name.as_str(), plan.seed), ("bank", 8));
    assert_eq!(plan.workload.options["target"], "sqlite:b.db");
    assert_eq!(plan.slos.len(), 1);
    let traits = bank.target_traits();
    assert_eq!(traits.kind, Kind::Sqlite);
    assert!(traits.embedded && traits.single_writer && !traits.managed);
}
