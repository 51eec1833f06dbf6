//! The CLI's contract: bad input gets one line and exit 2; a killed run
//! keeps its finished steps and reads as partial; Ctrl-C saves and exits
//! 130; the JSON export matches its published schema.

use crate::support::{
    contains, last_export, perflab, perflab_expect, perflab_ok, spawn_until_steps, stored_steps,
    tempdir,
};
use std::time::Duration;

fn one_error_line(args: &[&str], flag: &str) {
    let dir = tempdir();
    let out = perflab(dir.path())
        .args(args)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(flag), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
}

#[test]
fn bad_flags_get_one_line_and_exit_2() {
    one_error_line(&["run", "bank", "--users", "0"], "--users");
    one_error_line(&["run", "bank", "--users", "10..5/1"], "--users");
    one_error_line(&["run", "bank", "--think", "exp:-1s"], "--think");
    one_error_line(&["run", "bank", "--mix", "tpcc"], "--mix");
    one_error_line(&["run", "bank", "--users", "4", "--rate", "100"], "--rate");
    one_error_line(&["run", "bank", "--target", "sqlite:"], "--target");
    one_error_line(&["run", "bank", "--threads", "many"], "--threads");
    one_error_line(
        &["run", "bank", "--max-error-rate", "five"],
        "--max-error-rate",
    );
    one_error_line(
        &["run", "bank", "--store", "/nonexistent/dir/x.db", "--quick"],
        "--store",
    );
    one_error_line(&["run", "tpcc"], "bank or null");
    one_error_line(
        &["run", "null", "--users", "1", "--server-pid", "999999999"],
        "--server-pid",
    );
    one_error_line(&["show", "7", "--store", "/nonexistent/x.db"], "--store");
}

/// `--pg-cpus` names CPUs the managed server can be moved to; one that
/// this machine does not give perflab is refused in one line, naming the
/// CPUs it does give (perflab's own `taskset` mask is no bound: see
/// postgres.rs).
#[test]
fn pg_cpus_outside_perflabs_cgroup_are_refused() {
    let dir = tempdir();
    let out = crate::support::perflab_on_cpu0(
        dir.path(),
        &[
            "run",
            "bank",
            "--target",
            "postgres:managed",
            "--pg-cpus",
            "0,4095",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    contains(
        &stderr,
        &format!(
            "--pg-cpus: CPU 4095 is not among the CPUs perflab's cgroup lets a server run on ({})",
            online.trim()
        ),
    );
}

#[test]
fn an_unreadable_store_is_bad_input() {
    let dir = tempdir();
    std::fs::write(
        dir.path().join("perflab.db"),
        b"this is not a database, it is a text file",
    )
    .unwrap();
    let (_, err) = perflab_expect(dir.path(), "run null --users 1 --duration 1s", 2);
    contains(&err, "results store");
}

#[test]
fn a_killed_run_keeps_its_finished_steps_and_reads_as_partial() {
    let dir = tempdir();
    let mut child = spawn_until_steps(
        dir.path(),
        "run null --users 1,2,3,4,5,6,7,8,9,10 --warmup 0s --duration 1s --service 1ms",
        2,
    );
    // SIGKILL: no handler runs, nothing is flushed.
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = stored_steps(&dir.path().join("perflab.db"));
    assert!((2..10).contains(&kept), "{kept} steps stored");

    contains(&perflab_ok(dir.path(), "runs"), "partial");
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show 1 --json -")).unwrap();
    assert_eq!(export["run"]["status"], "partial");
    let steps = export["steps"].as_array().unwrap();
    assert_eq!(steps.len() as i64, kept);
    for step in steps {
        assert_eq!(step["status"], "ok");
        assert!(step["summary"]["completed"].as_u64().unwrap() > 100);
    }
}

#[test]
fn ctrl_c_saves_the_finished_steps_and_exits_130() {
    let dir = tempdir();
    let mut child = spawn_until_steps(
        dir.path(),
        "run null --users 1,2,3,4,5,6,7,8 --warmup 0s --duration 2s --service 1ms",
        1,
    );
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: signalling a child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let text = perflab_ok(dir.path(), "show last");
    contains(&text, "partial");
    contains(&text, "interrupted");
    // The step running at Ctrl-C is kept with the intervals it finished.
    assert!(stored_steps(&dir.path().join("perflab.db")) >= 2);
}

#[test]
fn the_json_export_matches_its_schema() {
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        "run null --rate 200,400 --warmup 0s --duration 1s",
    );
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let problems = crate::support::schema_problems(&export);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(export["steps"].as_array().unwrap().len(), 2);
    assert_eq!(export["steps"][1]["load"]["kind"], "rate");

    // And the schema is not a rubber stamp: a broken export fails it.
    let mut broken = export.clone();
    broken["steps"][0]["summary"]["throughput"] = serde_json::json!("fast");
    assert!(!crate::support::schema_problems(&broken).is_empty());
}

/// Every run stores its host's inventory; `diff-hosts` lists what differs
/// between two runs' hosts (here, a fact changed in the store by hand).
#[test]
fn diff_hosts_lists_what_differs_between_two_runs() {
    let dir = tempdir();
    perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    let same = perflab_ok(dir.path(), "diff-hosts 1 2");
    contains(
        &same,
        "the hosts of runs 1 and 2 do not differ in any of the",
    );
    let export = last_export(dir.path());
    assert!(export["run"]["inventory"]["kernel"].is_string());
    let conn = rusqlite::Connection::open(dir.path().join("perflab.db")).unwrap();
    let text: String = conn
        .query_row("SELECT inventory FROM runs WHERE id = 2", [], |r| r.get(0))
        .unwrap();
    let mut inv: std::collections::BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
    inv.insert("sysctl.vm.swappiness".to_string(), "1".to_string());
    inv.insert("nic.eth9.duplex".to_string(), "half".to_string());
    conn.execute(
        "UPDATE runs SET inventory = ?1 WHERE id = 2",
        [serde_json::to_string(&inv).unwrap()],
    )
    .unwrap();
    let out = perflab_ok(dir.path(), "diff-hosts 1 2");
    contains(&out, "differ in 2 of");
    contains(&out, "nic.eth9.duplex");
    contains(&out, "(absent) → half");
    contains(&out, "→ 1");
    let (_, err) = perflab_expect(dir.path(), "diff-hosts 1 9", 2);
    contains(&err, "9");
}
