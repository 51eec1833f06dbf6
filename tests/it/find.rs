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
            "run null --slo p95<1ms --max-steps 3",
            "--max-steps: it sets how long --find searches, and --find is not given",
        ),
        (
            "run null --slo p95<1ms --find --max-steps 0",
            "--max-steps: 0 is not between 1 and 1000",
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
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run null --users 1,2 --service 2ms --warmup 0s --duration 1s --interval 250ms --slo p95<1ms --slo errors<1%",
    );
    // 2 ms per operation against p95 < 1 ms: every step breaks, and says
    // by how much.
    contains(&out, "breaks p95<1.00ms 100.0% over");
    // The p95 of a 2 ms service: 2 ms and over (a loaded machine wakes
    // the timer late: 3.19 ms was seen beside the suite's other tests).
    let answer = out.lines().find(|l| l.starts_with("holds")).unwrap_or("");
    let p95 = answer
        .strip_prefix("holds p95<1.00ms, errors<1.0% at no load run; breaks at 1 user (p95 ")
        .and_then(|rest| rest.split("ms").next())
        .and_then(|ms| ms.parse::<f64>().ok());
    assert!(p95.is_some_and(|ms| (2.0..20.0).contains(&ms)), "{out}");
    let export = last_export(dir.path());
    assert_eq!(export["steps"][0]["slo"]["decision"], "breaks");
    assert_eq!(
        export["steps"][0]["slo"]["objectives"][1]["decision"],
        "meets"
    );
}

/// A search cut by its budget of steps runs no more than it, keeps every
/// step it ran, and says in its answer that its bracket is the one it
/// reached, not one as narrow as asked.
#[test]
fn a_search_stops_at_its_budget_of_steps_and_says_so() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run null --servers 4 --service exp:1ms --rate 100 --slo p95<50ms --find --max-steps 3 --warmup 0.2s --duration 1s --interval 250ms --seed 1",
    );
    let export = last_export(dir.path());
    let steps = export["steps"].as_array().map_or(0, Vec::len);
    // From 100/s, doubling: 100, 200, 400 all meet p95 < 50 ms by far (the
    // queue holds about 3,900/s; a share over 50 ms of e^-50 at the least
    // load, and a timer late by less than 50 ms changes none of it), so
    // the budget ends it before a break.
    assert_eq!(steps, 3, "{out}");
    let answer = out.lines().find(|l| l.starts_with("holds")).unwrap_or("");
    assert!(
        answer.ends_with(
            "; the search stopped at its budget of 3 steps (--max-steps) before its bracket was within 5%"
        ),
        "{answer}"
    );
    let plan = &export["run"]["plan"];
    assert_eq!(plan["find"]["max_steps"], 3, "{plan}");
}

/// A level placed on purpose at the known answer (the rate at which the
/// M/M/4 queue's p95 is exactly 5 ms) is too close to call: its share
/// over 5 ms sits on 5%. It is never shown to meet; the search says so,
/// runs it again only when another run is expected to decide it, and
/// never claims to have met a rate above the answer. (On a loaded machine
/// the queue's timers wake late and the queue is a little slower than its
/// theory, so the level may break instead: never meet.)
///
/// The decision is a statistical one: at the answer itself its bound
/// excludes 5% by chance in about one window in forty (97.5%, one side),
/// as one CI run saw (3.2% over 5 ms, bound 4.3%). A level called met is
/// run again with other arrivals, where such a chance is not repeated;
/// a search that claims the answer twice is wrong.
#[test]
fn a_level_at_the_known_answer_is_too_close_to_call_and_not_claimed() {
    let _heavy = crate::support::heavy();
    let first = at_the_answer(2);
    if let Err(said) = first {
        eprintln!("the first search claimed too much: {said}");
        if let Err(again) = at_the_answer(3) {
            panic!("{said}\nand again, other arrivals: {again}");
        }
    }
}

/// One search from the known answer with the arrivals of `seed`; what it
/// said when it claimed that level or a rate above the answer.
fn at_the_answer(seed: u32) -> Result<(), String> {
    use perflab::workload::null::{theory::max_rate, ServiceDist};
    use std::time::Duration;
    let exp_1ms = ServiceDist::Exponential {
        mean: Duration::from_millis(1),
    };
    let truth = max_rate(4, exp_1ms, 0.95, Duration::from_millis(5)).expect("an answer");
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!("run null --servers 4 --service exp:1ms --rate {truth:.0} --slo p95<5ms --find --warmup 0.3s --duration 3s --interval 250ms --seed {seed}"),
    );
    let export = last_export(dir.path());
    let first = &export["steps"][0]["slo"];
    let slo = &export["verdict"]["slo"];
    let said = format!("truth {truth:.0}: {first} / {}", slo["answer"]);
    let held = slo["max_load"].as_f64().unwrap_or(0.0);
    let capacity = slo["capacity"].as_f64().unwrap_or(0.0);
    if first["decision"] == "meets"
        || !(held > 0.0 && held < truth)
        || !(capacity >= held && capacity <= truth * 1.05)
    {
        return Err(said);
    }
    if first["decision"] == "undecided" {
        contains(&out, "too close to call");
    }
    Ok(())
}
