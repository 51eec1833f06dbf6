//! The CI gate on a real server, durable commits against asynchronous
//! ones through a write throttle: the bottleneck it says moved is judged,
//! so the test holds the machine (the gate's other tests, on the null
//! target, are integration tests).

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};

/// A configuration change on a real server: PostgreSQL's commits through
/// a throttle of 100 write IOPS on its cgroup, asynchronous
/// (`synchronous_commit=off`, the baseline) and durable (the default).
/// Gated against the asynchronous run, the durable one fails, and the
/// gate says the bottleneck moved to commit I/O, naming the throttle; the
/// other way round it passes. The files a CI job keeps: the JUnit XML
/// validates against the JUnit schema, the Markdown renders as tables.
#[test]
fn the_gate_fails_durable_commits_against_asynchronous_ones_and_says_the_bottleneck_moved() {
    // Alone: the throttle is named when the server's writes reach 80% of
    // it, and other tests' writes on the same disk slowed its flushes
    // below that (named "the log's device" in one run of four beside two
    // heavy and two waiting tests); its log what-if once missed with the
    // host's CPUs 86% busy at one user.
    let _machine = super::machine();
    let dir = tempdir();
    let run = "run bank --target postgres:managed --disk-write-iops 100 \
        --mix atm:balance=0,withdraw=0,deposit=100,transfer=0 \
        --users 1,2 --warmup 0s --duration 2s --interval 200ms";
    perflab_ok(
        dir.path(),
        &format!("{run} --pg-set synchronous_commit=off"),
    );
    perflab_ok(dir.path(), run);
    let (out, _) = perflab_expect(
        dir.path(),
        "compare 1 2 --fail-on throughput<-5% --junit gate.xml --markdown gate.md",
        1,
    );
    contains(&out, "gate: run 2 against run 1 (the baseline): FAIL");
    contains(&out, "FAIL throughput<-5%: -");
    contains(&out, " to commit I/O (a ");
    contains(&out, "100 write IOPS on the server's cgroup");
    assert!(
        out.contains("the bottleneck moved from ") && !out.contains("moved from commit I/O"),
        "{out}"
    );
    crate::support::assert_valid_junit(&dir.path().join("gate.xml"));
    let html = crate::support::rendered_markdown(&dir.path().join("gate.md"));
    contains(
        &html,
        "<td><code>throughput&lt;-5%</code></td>\n<td><strong>FAIL</strong></td>",
    );
    contains(
        &html,
        "<th>verdict</th>\n<th>run 1 (baseline)</th>\n<th>run 2</th>",
    );
    contains(&html, "<td>commit I/O (a ");
    let (out, _) = perflab_expect(dir.path(), "compare 2 1 --fail-on throughput<-5%", 0);
    contains(&out, "gate: run 1 against run 2 (the baseline): pass");
    contains(&out, "the bottleneck moved from commit I/O (a ");
    log_on_another_device(dir.path());
}

/// The durable run's log on another device: `analyze --log-flush-dir`
/// times flushes in a directory and predicts from the commits the client
/// timed, above what the throttled log allowed; the asynchronous run, not
/// limited by its log, gets the reason instead. A directory that cannot
/// be probed, and a flush time that is not one, are one line and exit 2,
/// and nothing is left in the directory probed.
fn log_on_another_device(dir: &std::path::Path) {
    let probed = tempdir();
    let asked = format!("analyze 2 --log-flush-dir {}", probed.path().display());
    let (out, _) = perflab_expect(dir, &asked, 0);
    contains(&out, "'s device (its flush ");
    contains(&out, "timed by the client");
    let json = perflab_ok(dir, &format!("{asked} --json -"));
    let verdict: serde_json::Value = serde_json::from_str(&json).unwrap();
    let what_if = &verdict["what_if"];
    let measured = what_if["measured"].as_f64().unwrap();
    let predicted = what_if["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["change"].as_str().unwrap().starts_with("the log on "))
        .and_then(|s| s["throughput"].as_f64())
        .unwrap();
    // The flush the throttle allowed took 10 ms or more; the probed
    // directory's, outside the server's cgroup, far less.
    assert!(
        predicted > 1.5 * measured,
        "{predicted} against {measured}: {json}"
    );
    assert_eq!(std::fs::read_dir(probed.path()).unwrap().count(), 0);
    let (out, _) = perflab_expect(dir, "analyze 1 --log-flush 50us", 0);
    contains(&out, "no prediction for the log on a device whose flush takes 50.0µs (given): the bottleneck is not the commit's flush");
    let (_, err) = perflab_expect(dir, "analyze 2 --log-flush-dir /nonexistent/perflab", 2);
    contains(
        &err,
        "--log-flush-dir: cannot write a probe file in /nonexistent/perflab",
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (_, err) = perflab_expect(dir, "analyze 2 --log-flush soon", 2);
    contains(&err, "--log-flush");
}
