//! Labels and `perflab history` on real runs of the null target: runs
//! carry their labels into `runs`, `show` and the export; a service made
//! twice as slow is a change point in the history, told with the first
//! run after it and its labels; the gate writes JUnit XML that validates
//! against the JUnit schema and Markdown that GitHub's renderer makes
//! into tables; bad input (a malformed label, an unknown run, a history of one
//! run) is one line and exit 2.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};

const STEPS: &str = "--users 1,2 --warmup 0s --duration 1s --interval 100ms";

#[test]
fn a_slower_service_is_a_change_point_at_the_first_slower_run() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    for (service, commit) in [
        ("1ms", "a1"),
        ("1ms", "a2"),
        ("1ms", "a3"),
        ("2ms", "b1"),
        ("2ms", "b2"),
        ("2ms", "b3"),
    ] {
        perflab_ok(
            dir.path(),
            &format!(
                "run null --service {service} {STEPS} --label commit={commit} --label branch=main"
            ),
        );
    }
    let runs = perflab_ok(dir.path(), "runs");
    contains(&runs, "      branch=main commit=b1");
    contains(
        &perflab_ok(dir.path(), "show 4"),
        "labels branch=main commit=b1",
    );
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show 4 --json -")).unwrap();
    assert_eq!(export["run"]["labels"]["commit"], "b1", "{}", export["run"]);
    assert!(crate::support::schema_problems(&export).is_empty());
    let out = perflab_ok(dir.path(), "history --label branch=main --html h.html");
    contains(
        &out,
        "history of the plan of run 6: 6 runs (1 … 6), labelled branch=main",
    );
    contains(&out, "throughput at 2 users: -");
    contains(&out, "from run 4 (branch=main commit=b1)");
    let html = std::fs::read_to_string(dir.path().join("h.html")).unwrap();
    contains(&html, "<svg");
    contains(&html, "class=\"mark\"");
    let (json, _) = perflab_expect(dir.path(), "history 2 --json -", 0);
    let h: serde_json::Value = serde_json::from_str(&json).unwrap();
    let throughput = h["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "throughput" && s["level"] == "2 users")
        .unwrap();
    assert_eq!(throughput["changes"][0]["run"], 4, "{throughput}");
    assert!(
        throughput["changes"][0]["change"].as_f64().unwrap() < -0.3,
        "{throughput}"
    );
}

#[test]
fn the_gate_writes_junit_xml_and_a_markdown_summary() {
    let dir = tempdir();
    perflab_ok(dir.path(), &format!("run null --service 1ms {STEPS}"));
    perflab_ok(dir.path(), &format!("run null --service 2ms {STEPS}"));
    let (out, _) = perflab_expect(
        dir.path(),
        "compare 1 2 --fail-on throughput<-5%,p95>+500% --junit gate.xml --markdown gate.md",
        1,
    );
    contains(&out, "gate: wrote junit to gate.xml");
    let xml = std::fs::read_to_string(dir.path().join("gate.xml")).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    contains(&xml, "name=\"throughput&lt;-5%\"");
    crate::support::assert_valid_junit(&dir.path().join("gate.xml"));
    let md = std::fs::read_to_string(dir.path().join("gate.md")).unwrap();
    contains(&md, "| `throughput<-5%` | **FAIL** |");
    contains(&md, "| `p95>+500%` | pass |");
    // As a job summary shows it: a table of a row per threshold.
    let html = crate::support::rendered_markdown(&dir.path().join("gate.md"));
    contains(&html, "<th>threshold</th>\n<th>result</th>\n<th>line</th>");
    contains(
        &html,
        "<td><code>throughput&lt;-5%</code></td>\n<td><strong>FAIL</strong></td>",
    );
    contains(&html, "<td><code>p95&gt;+500%</code></td>\n<td>pass</td>");
    let (out, _) = perflab_expect(
        dir.path(),
        &format!(
            "run null --service 2ms {STEPS} --baseline 1 --fail-on throughput<-5% --junit run.xml"
        ),
        1,
    );
    contains(&out, "gate: wrote junit to run.xml");
    contains(
        &std::fs::read_to_string(dir.path().join("run.xml")).unwrap(),
        "<failure ",
    );
    crate::support::assert_valid_junit(&dir.path().join("run.xml"));
}

#[test]
fn a_bad_label_an_unknown_run_and_a_history_of_one_run_are_refused() {
    let dir = tempdir();
    let (_, err) = perflab_expect(dir.path(), &format!("run null {STEPS} --label commit"), 2);
    contains(&err, "--label");
    contains(&err, "'commit' is not KEY=VALUE");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        !dir.path().join("perflab.db").exists(),
        "refused before any load"
    );
    let (_, err) = perflab_expect(dir.path(), &format!("run null {STEPS} --label a%b=1"), 2);
    contains(&err, "is not a label key");
    perflab_ok(dir.path(), &format!("run null {STEPS} --label commit=a1"));
    let (_, err) = perflab_expect(dir.path(), "history", 2);
    contains(&err, "the plan of run 1 has 1 complete run in");
    contains(&err, "a history needs two or more");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (_, err) = perflab_expect(dir.path(), "history 9", 2);
    contains(&err, "run 9 is not in");
    let (_, err) = perflab_expect(dir.path(), "history --label commit=zz", 2);
    contains(&err, "has 0 complete runs with commit=zz");
    let (_, err) = perflab_expect(dir.path(), "history --label =x", 2);
    contains(&err, "is not a label key");
}
