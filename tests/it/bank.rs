//! The bank on embedded SQLite, end to end through the CLI: a quick run
//! completes and passes its check, the check catches a corrupted balance,
//! and the ATM mix never overdraws.

use crate::support::{perflab, tempdir};
use predicates_like::contains;

mod predicates_like {
    /// Asserts that output contains a fragment, showing the output if not.
    pub fn contains(output: &[u8], fragment: &str) {
        let text = String::from_utf8_lossy(output);
        assert!(text.contains(fragment), "no '{fragment}' in:\n{text}");
    }
}

#[test]
fn quick_bank_run_completes_checks_and_is_stored() {
    let dir = tempdir();
    let out = perflab(dir.path())
        .args(["run", "bank", "--quick"])
        .assert()
        .success()
        .get_output()
        .clone();
    contains(&out.stdout, "loaded 100011 rows");
    contains(&out.stdout, "check: passed");
    contains(&out.stdout, "money conserved");
    contains(&out.stdout, "history = committed");
    contains(&out.stdout, "    16 ");
    let runs = perflab(dir.path())
        .arg("runs")
        .assert()
        .success()
        .get_output()
        .clone();
    contains(&runs.stdout, "complete");
    contains(&runs.stdout, "sqlite:perflab-bank.db");

    // A second run reuses the loaded bank after checking it.
    let again = perflab(dir.path())
        .args([
            "run",
            "bank",
            "--users",
            "2",
            "--warmup",
            "0s",
            "--duration",
            "1s",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    contains(&again.stdout, "reused the loaded bank");
    contains(&again.stdout, "check: passed");
}

#[test]
fn the_check_catches_a_changed_balance() {
    let dir = tempdir();
    perflab(dir.path())
        .args([
            "run",
            "bank",
            "--users",
            "2",
            "--warmup",
            "0s",
            "--duration",
            "1s",
        ])
        .assert()
        .success();
    perflab(dir.path())
        .args(["check", "bank"])
        .assert()
        .success();
    let conn = rusqlite::Connection::open(dir.path().join("perflab-bank.db")).unwrap();
    conn.execute(
        "UPDATE accounts SET abalance = abalance + 1 WHERE aid = 4242",
        [],
    )
    .unwrap();
    drop(conn);
    let out = perflab(dir.path())
        .args(["check", "bank"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    contains(&out.stdout, "check: FAILED");
    contains(&out.stdout, "FAIL money conserved");
    // A run refuses to build on a broken bank, and says how to fix it.
    let out = perflab(dir.path())
        .args(["run", "bank", "--users", "1", "--duration", "1s"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    contains(&out.stderr, "--reload");
    // --reload loads it afresh.
    perflab(dir.path())
        .args([
            "run",
            "bank",
            "--users",
            "1",
            "--warmup",
            "0s",
            "--duration",
            "1s",
            "--reload",
        ])
        .assert()
        .success();
}

#[test]
fn the_atm_mix_refuses_overdrafts_and_passes_its_check() {
    let dir = tempdir();
    let short = ["--warmup", "0s", "--duration", "500ms", "--users", "1"];
    perflab(dir.path())
        .args(["run", "bank", "--mix", "atm"])
        .args(short)
        .assert()
        .success();
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
    perflab(dir.path())
        .args(["check", "bank"])
        .assert()
        .success();

    let out = perflab(dir.path())
        .args([
            "run",
            "bank",
            "--mix",
            "atm:withdraw=70,transfer=20,deposit=10",
            "--users",
            "4",
            "--warmup",
            "0s",
            "--duration",
            "2s",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    contains(&out.stdout, "ok   no overdraft");
    contains(&out.stdout, "check: passed");
    contains(&out.stdout, "withdraw");
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
