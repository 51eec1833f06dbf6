//! The bank on embedded SQLite, end to end through the CLI: a quick run
//! completes and passes its check, the check catches a corrupted balance,
//! and the ATM mix never overdraws.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};

const SHORT: &str = "--warmup 0s --duration 1s";

#[test]
fn quick_bank_run_completes_checks_and_is_stored() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(dir.path(), "run bank --quick");
    contains(&out, "loaded 100011 rows");
    contains(&out, "check: passed");
    contains(&out, "money conserved");
    contains(&out, "history = committed");
    contains(&out, "    16 ");
    let runs = perflab_ok(dir.path(), "runs");
    contains(&runs, "complete");
    contains(&runs, "sqlite:perflab-bank.db");

    // A second run reuses the loaded bank after checking it.
    let again = perflab_ok(dir.path(), &format!("run bank --users 2 {SHORT}"));
    contains(&again, "reused the loaded bank");
    contains(&again, "check: passed");
}

#[test]
fn the_check_catches_a_changed_balance() {
    let dir = tempdir();
    perflab_ok(dir.path(), &format!("run bank --users 2 {SHORT}"));
    perflab_ok(dir.path(), "check bank");
    let conn = rusqlite::Connection::open(dir.path().join("perflab-bank.db")).unwrap();
    conn.execute(
        "UPDATE perflab_accounts SET abalance = abalance + 1 WHERE aid = 4242",
        [],
    )
    .unwrap();
    drop(conn);
    let (out, _) = perflab_expect(dir.path(), "check bank", 1);
    contains(&out, "check: FAILED");
    contains(&out, "FAIL money conserved");
    // A run refuses to build on a broken bank, and says how to fix it.
    let (_, err) = perflab_expect(dir.path(), &format!("run bank --users 1 {SHORT}"), 2);
    contains(&err, "--reload");
    // --reload loads it afresh.
    perflab_ok(dir.path(), &format!("run bank --users 1 {SHORT} --reload"));
}

#[test]
fn the_atm_mix_refuses_overdrafts_and_passes_its_check() {
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        "run bank --mix atm --users 1 --warmup 0s --duration 500ms",
    );
    // Leave every account 0.50 (less than any withdrawal), keeping the
    // books balanced so the check still holds before the run.
    let bank = rusqlite::Connection::open(dir.path().join("perflab-bank.db")).unwrap();
    bank.execute_batch(
        "UPDATE perflab_accounts SET abalance = 50;
         UPDATE perflab_tellers SET tbalance = CASE tid WHEN 1 THEN 5000000 ELSE 0 END;
         UPDATE perflab_branches SET bbalance = 5000000;
         UPDATE perflab_bank_meta SET initial_total = 5000000 - (SELECT coalesce(sum(delta), 0) FROM perflab_history);",
    )
    .unwrap();
    drop(bank);
    perflab_ok(dir.path(), "check bank");

    let out = perflab_ok(
        dir.path(),
        "run bank --mix atm:withdraw=70,transfer=20,deposit=10 --users 4 --warmup 0s --duration 2s",
    );
    contains(&out, "ok   no overdraft");
    contains(&out, "check: passed");
    contains(&out, "withdraw");
    let store = rusqlite::Connection::open(dir.path().join("perflab.db")).unwrap();
    let refused: i64 = store
        .query_row(
            "SELECT sum(o.refused) FROM interval_ops o JOIN steps s ON s.id = o.step_id WHERE s.run_id = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(refused > 100, "only {refused} refusals");
    let bank = rusqlite::Connection::open(dir.path().join("perflab-bank.db")).unwrap();
    let negative: i64 = bank
        .query_row(
            "SELECT count(*) FROM perflab_accounts WHERE abalance < 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(negative, 0);
}

/// The user's own tables, named as a bank's (and one named like
/// perflab's), in the database the bank is pointed at.
const FOREIGN_TABLES: &str = "CREATE TABLE accounts (aid INTEGER PRIMARY KEY, owner TEXT);
     INSERT INTO accounts VALUES (1, 'ada'), (2, 'grace');
     CREATE TABLE history (id INTEGER PRIMARY KEY, what TEXT);
     INSERT INTO history VALUES (1, 'opened');
     CREATE TABLE branches (bid INTEGER, city TEXT);
     INSERT INTO branches VALUES (7, 'Lyon');";

/// Every row of the user's tables, in order, as text.
fn foreign_rows(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut rows = Vec::new();
    for sql in [
        "SELECT aid || ':' || owner FROM accounts ORDER BY aid",
        "SELECT id || ':' || what FROM history ORDER BY id",
        "SELECT bid || ':' || city FROM branches ORDER BY bid",
        "SELECT sql FROM sqlite_master WHERE name IN ('accounts', 'history', 'branches') ORDER BY name",
    ] {
        let mut st = conn.prepare(sql).unwrap();
        rows.extend(st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap));
    }
    rows
}

/// A database of the user's with tables named like the bank's: the bank
/// is made beside them under perflab's own names, `--reload` replaces
/// only perflab's tables, and a table named like perflab's that perflab
/// did not make refuses the run (with or without `--reload`) and leaves
/// the file byte for byte as it was.
#[test]
fn the_bank_never_drops_or_alters_a_table_it_did_not_make() {
    let dir = tempdir();
    let db = dir.path().join("app.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(FOREIGN_TABLES).unwrap();
    conn.execute_batch(
        "CREATE TABLE perflab_accounts (note TEXT); INSERT INTO perflab_accounts VALUES ('mine');",
    )
    .unwrap();
    drop(conn);
    let before = std::fs::read(&db).unwrap();
    let rows = foreign_rows(&db);
    for reload in ["", " --reload"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target sqlite:app.db --users 1 {SHORT}{reload}"),
            2,
        );
        contains(
            &err,
            "already has table perflab_accounts, which perflab did not make",
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "the file changed");
    }
    let (_, err) = perflab_expect(dir.path(), "check bank --target sqlite:app.db", 2);
    contains(&err, "holds no perflab bank");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "check changed the file"
    );

    // Without the look-alike, the bank goes in beside the user's tables.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("DROP TABLE perflab_accounts").unwrap();
    drop(conn);
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target sqlite:app.db --users 1 {SHORT}"),
    );
    contains(&out, "check: passed");
    assert_eq!(foreign_rows(&db), rows);
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target sqlite:app.db --users 1 {SHORT} --reload --scale 2"),
    );
    contains(&out, "loaded 200022 rows");
    perflab_ok(dir.path(), "check bank --target sqlite:app.db");
    assert_eq!(foreign_rows(&db), rows);
    // perflab's ledger names exactly the tables it made.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut st = conn
        .prepare("SELECT table_name FROM perflab_tables ORDER BY table_name")
        .unwrap();
    let listed: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        listed,
        [
            "perflab_accounts",
            "perflab_bank_meta",
            "perflab_branches",
            "perflab_history",
            "perflab_tellers"
        ]
    );
}
