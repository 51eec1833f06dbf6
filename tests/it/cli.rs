//! The CLI's contract: bad input gets one line and exit 2; a killed run
//! keeps its finished steps and reads as partial; Ctrl-C saves and exits
//! 130, SIGTERM 143; a closed output pipe stops no run; the JSON export
//! matches its published schema.

use crate::support::{
    contains, last_export, perflab_expect, perflab_ok, perflab_process, refused, spawn_until_steps,
    stored_steps, tempdir,
};
use std::time::Duration;

/// Each refusal names the flag or the thing the user gave: `serve
/// --addr` its own flag (not the live view's `--serve`), a token file's
/// reader no other command's flag, a lab's workload its `workload` line
/// with the workloads there are, a FIFO where a disk target's ledger goes
/// what it is.
#[test]
fn refusals_name_the_flag_or_file_they_are_about() {
    let dir = tempdir();
    let missing = dir.path().join("missing-token");
    let missing = missing.to_str().unwrap();
    refused(
        &["serve", "--addr", "0.0.0.0:0"],
        &["--addr: refusing to serve the stored runs on 0.0.0.0:0 without a token"],
    );
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d-0123\n").unwrap();
    refused(
        &[
            "serve",
            "--addr",
            "0.0.0.0:0",
            "--serve-token-file",
            token.to_str().unwrap(),
        ],
        &["--addr: refusing to serve the stored runs on 0.0.0.0:0 in plain HTTP"],
    );
    refused(
        &["serve", "--serve-token-file", missing],
        &["give --serve-token-file a readable file holding the token"],
    );
    refused(
        &["agent", "--token-file", missing],
        &["give --token-file a readable file holding the token"],
    );
    let lab = dir.path().join("lab.toml");
    std::fs::write(&lab, "workload = \"nope\"\nargs = \"--users 1\"\ntarget = \"sqlite:x.db\"\n[[variant]]\nname = \"a\"\n").unwrap();
    let workloads = perflab::workload::registry_names();
    refused(
        &["lab", lab.to_str().unwrap()],
        &[
            "lab.toml:1:12: 'nope' is not a workload; name one of ",
            &workloads,
        ],
    );
    let fifo = dir.path().join("t.bin.perflab-ledger");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let target = format!("file:{}", dir.path().join("t.bin").display());
    refused(
        &[
            "run",
            "disk",
            "--target",
            &target,
            "--size",
            "1MiB",
            "--spec",
            "4k-randread",
            "--warmup",
            "0s",
            "--duration",
            "1s",
        ],
        &["t.bin.perflab-ledger is a FIFO, not a regular file"],
    );
}

#[test]
fn bad_flags_get_one_line_and_exit_2() {
    refused(&["run", "bank", "--users", "0"], &["--users"]);
    refused(&["run", "bank", "--users", "10..5/1"], &["--users"]);
    refused(&["run", "bank", "--think", "exp:-1s"], &["--think"]);
    refused(&["run", "bank", "--mix", "tpcc"], &["--mix"]);
    refused(
        &["run", "bank", "--users", "4", "--rate", "100"],
        &["--rate"],
    );
    refused(&["run", "bank", "--target", "sqlite:"], &["--target"]);
    refused(&["run", "bank", "--threads", "many"], &["--threads"]);
    refused(
        &["run", "bank", "--max-error-rate", "five"],
        &["--max-error-rate"],
    );
    refused(
        &["run", "bank", "--store", "/nonexistent/dir/x.db", "--quick"],
        &["--store"],
    );
    // The refusal lists every registered workload, as the registry spells them.
    let workloads = perflab::workload::registry_names();
    assert!(workloads.starts_with("bank, "), "{workloads}");
    refused(&["run", "tpcc"], &[&workloads]);
    refused(
        &["run", "null", "--users", "1", "--server-pid", "999999999"],
        &["--server-pid"],
    );
    refused(&["show", "7", "--store", "/nonexistent/x.db"], &["--store"]);
    // Absurd numbers, refused before any arithmetic on them.
    refused(&["run", "null", "--rate", "1e-300"], &["--rate"]);
    refused(
        &["run", "null", "--users", "1..2/0.0000000000000000000001"],
        &["--users"],
    );
    refused(
        &["run", "null", "--duration", "99999999999s"],
        &["--duration"],
    );
    refused(
        &["doctor", "--target", "sqlite:/missing/x.db"],
        &["--target"],
    );
    // A probe that does not answer at the start: exit 2, whatever its kind.
    for probe in ["agent://127.0.0.1:1", "node-exporter://127.0.0.1:1"] {
        refused(&["watch", "--probe", probe, "--duration", "1s"], &[probe]);
    }
    refused(
        &["doctor", "--probe", "agent://127.0.0.1:1", "--sample", "0s"],
        &["agent://127.0.0.1:1"],
    );
    // The target's own file as the store.
    refused(
        &[
            "run",
            "bank",
            "--target",
            "sqlite:x.db",
            "--store",
            "./x.db",
        ],
        &["--store"],
    );
}

/// An agent's address of 53,000 bytes (a generator or a probe that does
/// not resolve): one line naming it by its first characters and its
/// length, never the whole value (twice, in the generator's line).
#[test]
fn a_huge_agent_address_is_clipped_in_its_refusal() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d\n").unwrap();
    let huge = format!("agent://{}:7071", "a".repeat(53_000));
    let token = token.to_str().unwrap();
    for flags in [
        ["--generators", huge.as_str(), "--token-file", token],
        ["--probe", huge.as_str(), "--token-file", token],
    ] {
        let mut args = vec![
            "run",
            "null",
            "--users",
            "1",
            "--warmup",
            "0s",
            "--duration",
            "1s",
        ];
        args.extend(flags);
        let out = crate::support::perflab(dir.path())
            .args(&args)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{}",
            &err[..err.len().min(300)]
        );
        assert!(err.len() < 1_000, "{} bytes: {}", err.len(), &err[..300]);
        assert!(err.contains("(53013 bytes in all)"), "{err}");
    }
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

/// Ctrl-C (SIGINT) and SIGTERM each keep the finished steps, say which
/// signal it was, and exit 130 and 143.
#[test]
fn ctrl_c_and_sigterm_save_the_finished_steps_and_exit_130_and_143() {
    let _waits = crate::support::waits();
    for (signal, code, said) in [
        (libc::SIGINT, 130, "interrupted (Ctrl-C)"),
        (libc::SIGTERM, 143, "interrupted (SIGTERM)"),
    ] {
        let dir = tempdir();
        let mut child = spawn_until_steps(
            dir.path(),
            "run null --users 1,2,3,4,5,6,7,8 --warmup 0s --duration 2s --service 1ms",
            1,
        );
        std::thread::sleep(Duration::from_millis(1200));
        // SAFETY: signalling a child we started, by its PID.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code));
        let text = perflab_ok(dir.path(), "show last");
        contains(&text, "partial");
        contains(&text, said);
        // The step running at the signal is kept with the intervals it finished.
        assert!(stored_steps(&dir.path().join("perflab.db")) >= 2);
    }
}

/// Waits for a child, ending it and failing the test if it has not ended
/// by itself within `bound` (a bound on a hang, not a speed).
fn wait_bounded(child: &mut std::process::Child, bound: Duration, what: &str) -> Option<i32> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: perflab did not end within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With an operation stuck in the target (a stall far longer than the
/// test waits), the first Ctrl-C or SIGTERM ends the run at once —
/// whether it comes in the measured window or in the drain after the
/// last step — not when the operation's timeout expires: the step is
/// kept as partial, the operation abandoned, exit 130 or 143.
#[test]
fn the_first_signal_ends_a_run_with_an_operation_stuck() {
    let _waits = crate::support::waits();
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        for (moment, duration) in [("window", "30s"), ("drain", "1s")] {
            let dir = tempdir();
            let store = dir.path().join("perflab.db");
            let mut child = perflab_process(dir.path())
                .args(
                    format!(
                        "run null --users 1 --warmup 0s --duration {duration} --stall 0s:300s --timeout 600s"
                    )
                    .split(' '),
                )
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            assert!(
                until_running_intervals(&store, 1) >= 1,
                "{moment}: no interval stored"
            );
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: signalling a child we started, by its PID.
            unsafe { libc::kill(child.id() as i32, signal) };
            let what = format!("signal {signal} in the {moment}");
            assert_eq!(
                wait_bounded(&mut child, Duration::from_secs(60), &what),
                Some(code),
                "{what}"
            );
            let export: serde_json::Value =
                serde_json::from_str(&perflab_ok(dir.path(), "show last --json -")).unwrap();
            assert_eq!(export["run"]["status"], "partial", "{what}");
            let step = &export["steps"][0];
            assert_eq!(step["status"], "partial", "{what}: {step}");
            let reason = step["status_reason"].as_str().unwrap_or_default();
            assert!(reason.contains("abandoned"), "{what}: {reason}");
        }
    }
}

/// A target that answers nothing for a whole step: no operation ended,
/// no error either. That step failed (exit 1); it did not serve 0/s.
#[test]
fn a_step_in_which_no_operation_ended_failed() {
    let dir = tempdir();
    let (out, _) = perflab_expect(
        dir.path(),
        "run null --users 1 --warmup 0s --duration 1s --stall 0s:3s --timeout 30s",
        1,
    );
    contains(&out, "no operation ended");
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show last --json -")).unwrap();
    assert_eq!(export["run"]["status"], "failed");
    assert_eq!(export["steps"][0]["status"], "failed");
}

/// A target that stalls 0.5 s into a 2 s window, past its end: the
/// operation it holds is the step's — in its latency from the store, its
/// timeout in the drain an error of the step — and the step says it
/// stalled, on its line, in the export and in the verdict.
#[test]
fn a_step_whose_target_stalled_says_so_from_the_store() {
    let dir = tempdir();
    let (out, _) = perflab_expect(
        dir.path(),
        "run null --users 1 --service 1ms --stall 0.5s:20s --warmup 0s --duration 2s --timeout 3s",
        0,
    );
    contains(
        &out,
        "errors 1  stalled: 1 operation in flight for the last 1.",
    );
    contains(&out, "caveat      the target stalled in step 1 (1 user)");
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show last --json -")).unwrap();
    let step = &export["steps"][0];
    assert_eq!(step["status"], "stalled", "{step}");
    let summary = &step["summary"];
    assert_eq!(summary["unfinished"], 1, "{summary}");
    assert_eq!(summary["late_errors"], 1, "{summary}");
    assert_eq!(summary["errors"], 1, "{summary}");
    assert!(
        summary["longest_unfinished"].as_f64().unwrap_or(0.0) >= 1.4,
        "{summary}"
    );
    assert!(
        summary["response"]["max"].as_f64().unwrap_or(0.0) >= 1.4,
        "{summary}"
    );
    assert_eq!(export["run"]["status"], "complete");
}

/// Intervals of the running step in the newest run of a store, and the
/// rows of the store's steps and intervals in all.
fn running_intervals(store: &std::path::Path) -> (i64, i64, i64) {
    let Ok(conn) = rusqlite::Connection::open(store) else {
        return (0, 0, 0);
    };
    let _ = conn.busy_timeout(Duration::from_secs(5));
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get(0)).unwrap_or(0);
    (
        count(
            "SELECT count(*) FROM intervals i JOIN steps s ON s.id = i.step_id
             WHERE s.status = 'running'",
        ),
        count("SELECT count(*) FROM steps"),
        count("SELECT count(*) FROM intervals"),
    )
}

/// Waits (at most 30 s) until the running step has `n` intervals stored.
fn until_running_intervals(store: &std::path::Path, n: i64) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (running, _, _) = running_intervals(store);
        if running >= n || std::time::Instant::now() > deadline {
            return running;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A step's intervals reach the store as each ends, so a long step holds
/// none in memory: readers pass over the running step; a kill -9 leaves
/// the run readable (partial, that step unshown); a step interrupted in
/// its warm-up is removed whole.
#[test]
fn a_running_steps_intervals_are_stored_as_they_end() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let store = dir.path().join("perflab.db");
    let mut child = perflab_process(dir.path())
        .args("run null --users 2 --service 1ms --warmup 0s --duration 60s".split(' '))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let seen = until_running_intervals(&store, 3);
    let export = last_export(dir.path());
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen >= 3, "{seen} intervals of the running step stored");
    assert_eq!(export["steps"].as_array().unwrap().len(), 0, "{export}");
    let text = perflab_ok(dir.path(), "show last");
    contains(&text, "partial");

    let dir = tempdir();
    let store = dir.path().join("perflab.db");
    let mut child = perflab_process(dir.path())
        .args("run null --users 2 --service 1ms --warmup 60s --duration 1s".split(' '))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let seen = until_running_intervals(&store, 2);
    // SAFETY: signalling a child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(seen >= 2, "{seen} warm-up intervals stored");
    assert_eq!(status.code(), Some(130));
    assert_eq!(running_intervals(&store), (0, 0, 0));
}

#[test]
fn the_json_export_matches_its_schema() {
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        "run null --rate 200,400 --warmup 0s --duration 1s --interval 250ms --slo p95<50ms,errors<5%",
    );
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let problems = crate::support::schema_problems(&export);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(export["steps"].as_array().unwrap().len(), 2);
    assert_eq!(export["steps"][1]["load"]["kind"], "rate");
    // Each step is judged by the objectives, and the verdict answers.
    assert_eq!(export["steps"][1]["slo"]["decision"], "meets");
    assert_eq!(
        export["steps"][1]["slo"]["objectives"][1]["objective"],
        "errors<5.0%"
    );
    let answer = export["verdict"]["slo"]["answer"].as_str().unwrap_or("");
    assert!(
        answer.starts_with("holds p95<50.0ms, errors<5.0% up to "),
        "{answer}"
    );
    assert_eq!(
        export["verdict"]["slo"]["levels"].as_array().map(Vec::len),
        Some(2)
    );

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

/// A reader that goes away after one byte (`perflab run … | head -c1`)
/// neither panics nor stops the run: it measures every step into its store
/// and exits 0. Standard error closed too, the same.
#[test]
fn a_closed_output_pipe_does_not_stop_a_run() {
    let _heavy = crate::support::heavy();
    use std::io::Read;
    use std::process::Stdio;
    for close_stderr in [false, true] {
        let dir = tempdir();
        let mut child = crate::support::perflab_process(dir.path())
            .args("run null --users 1,2,3 --warmup 0s --duration 1s".split_whitespace())
            .stdout(Stdio::piped())
            .stderr(if close_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("perflab starts");
        let mut stdout = child.stdout.take().expect("its output");
        let mut byte = [0u8; 1];
        stdout.read_exact(&mut byte).expect("a first byte");
        drop(stdout);
        drop(child.stderr.take());
        let status = child.wait().expect("perflab ends");
        assert_eq!(status.code(), Some(0), "close stderr {close_stderr}");
        assert_eq!(stored_steps(&dir.path().join("perflab.db")), 3);
        let export = last_export(dir.path());
        assert_eq!(export["run"]["status"], "complete", "{}", export["run"]);
    }
}

/// Output into a pipe whose reader is already gone ends quietly for
/// the commands that only print: exit 0, no panic message.
#[test]
fn printing_commands_end_quietly_when_the_reader_is_gone() {
    use std::process::Stdio;
    let dir = tempdir();
    perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    for args in [
        "show last --json -",
        "analyze last",
        "show last",
        "runs",
        "--help",
    ] {
        for close_stderr in [false, true] {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            let (err_reader, err_writer) = std::io::pipe().expect("a pipe");
            if close_stderr {
                drop(err_reader);
            }
            let status = crate::support::perflab_process(dir.path())
                .args(args.split_whitespace())
                .stdout(Stdio::from(writer))
                .stderr(Stdio::from(err_writer))
                .status()
                .expect("perflab runs");
            assert_eq!(
                status.code(),
                Some(0),
                "{args} (stderr closed: {close_stderr})"
            );
        }
    }
    // A command that fails with its reader gone still exits with its code.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let status = crate::support::perflab_process(dir.path())
        .args(["show", "99"])
        .stderr(Stdio::from(writer))
        .status()
        .expect("perflab runs");
    assert_eq!(status.code(), Some(2));
}
