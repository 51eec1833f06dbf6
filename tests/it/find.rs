//! `--slo` judged per step and `--find`: the search for the highest load
//! that meets the objectives, on the null target and on real servers.

use crate::support::{contains, last_export, perflab_expect, perflab_ok, tempdir};

/// Bad objectives and search flags: one line naming the flag, exit 2.
#[test]
fn bad_objectives_and_search_flags_get_one_line() {
    let dir = tempdir();
    for (args, says) in [
        ("run null --find", "--find: a search needs objectives"),
        (
            "run null --slo p95<1ms,p97<1s",
            "--slo: 'p97' is not a metric",
        ),
        (
            "run null --slo p95<1ms --precision 5%",
            "--precision: it sets",
        ),
        (
            "run null --slo p95<1ms --find --precision 50%",
            "--precision: '50%' is not a share above 0% and below 50%",
        ),
        (
            "run null --slo p95<1ms --find --precision 0%",
            "--precision: '0%' is not a share",
        ),
        (
            "run null --users 4 --slo lag<5%",
            "--slo: 'lag<5.0%' judges how far an open loop",
        ),
        (
            "run null --interval 50ms",
            "--interval: 50ms is not between 100ms",
        ),
        (
            "run null --duration 1s --interval 2s",
            "--interval: 2s is not between",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), args, 2);
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
        contains(&err, says);
    }
    // Nothing was run, nothing stored.
    assert!(!dir.path().join("perflab.db").exists());
}

/// Every step of a sweep with objectives is judged in the table, the
/// export and the verdict, whose last line is the answer.
#[test]
fn a_sweep_with_objectives_judges_each_step_and_answers() {
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run null --users 1,2 --service 2ms --warmup 0s --duration 1s --interval 250ms --slo p95<1ms --slo errors<1%",
    );
    // 2 ms per operation against p95 < 1 ms: every step breaks, and says
    // by how much.
    contains(&out, "breaks p95<1.00ms 100.0% over");
    let answer = out.lines().find(|l| l.starts_with("holds")).unwrap_or("");
    assert!(
        answer
            .starts_with("holds p95<1.00ms, errors<1.0% at no load run; breaks at 1 user (p95 2."),
        "{out}"
    );
    let export = last_export(dir.path());
    assert_eq!(export["steps"][0]["slo"]["decision"], "breaks");
    assert_eq!(
        export["steps"][0]["slo"]["objectives"][1]["decision"],
        "meets"
    );
}
