//! The bank on embedded SQLite, end to end through the CLI: a quick run
//! completes and passes its check, the check catches a corrupted balance,
//! and the ATM mix never overdraws.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};

const SHORT: &str = "--warmup 0s --duration 1s";

#[test]
fn quick_bank_run_completes_checks_and_is_stored() {
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
        "UPDATE accounts SET abalance = abalance + 1 WHERE aid = 4242",
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
        "UPDATE accounts SET abalance = 50;
         UPDATE tellers SET tbalance = CASE tid WHEN 1 THEN 5000000 ELSE 0 END;
         UPDATE branches SET bbalance = 5000000;
         UPDATE perflab_bank SET initial_total = 5000000 - (SELECT coalesce(sum(delta), 0) FROM history);",
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
            "SELECT count(*) FROM accounts WHERE abalance < 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(negative, 0);
}
