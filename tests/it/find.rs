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

/// The search on a queue whose answer is known: four servers of exp:1 ms
/// (M/M/4), an open loop from 2000/s, 3 s steps in 250 ms intervals. For
/// each objective the highest rate that meets it is exact (Erlang C).
///
/// Alone, on a quiet machine, `bench/find.sh` measures 5 to 7 steps and a
/// capacity (the latency ratio followed to 1 between the loads that met
/// and missed) within 5% of the truth, below or above, in 28 of 30
/// searches (the other two +5.1% and +5.3%, one seed in two runs); a
/// linear sweep at 5% of the answer takes 21 steps, a bisection that
/// decides each level by its point value lands anywhere in the noise band
/// (near ρ = 0.8 the share over the limit of one 3 s window scatters by
/// ±2.5 points, ±4% of the load), and one that counts undecided levels as
/// broken claims the bracket's lower end, up to 10% low.
///
/// The test runs with no other test that loads the machine beside it
/// (`support::alone`), and holds the search to what a quiet machine
/// gives: a bracket within 5%; no rate claimed to meet more than 3% above
/// the truth (the statistics' own error at 97.5%, with correlated
/// windows); the capacity within 5% of the truth either way; at most 8
/// steps, under half the linear sweep's 21 (a quiet machine takes 5 to
/// 7; on the CI host, with 6 to 14% of the CPU stolen by other guests,
/// windows scatter wider, a level too close to call is run again, and
/// both draws of one p50 search took 8 to reach its 5% bracket, 3240 to
/// 3400 against a truth of 3533). A storm from another guest
/// of the host can still spoil one window, and a 3 s step near ρ = 0.9
/// is a short look at a queue with a long memory (at 3,720/s one step's
/// p99 read 10.6 ms where 30 s read 18.0 ms), so a search that misses
/// runs again on other draws (another seed: the same seed would offer
/// the same arrivals and services), at most twice, and the test fails
/// when all three miss. Two in a row have missed on the CI host, on
/// opposite sides of the truth (+5.1% and -7.5% for p99 < 10 ms): noise,
/// where a wrong search would miss on the same side every time.
///
/// The three objectives' searches run at once, each its own perflab: one
/// after another, alone in a cgroup, they used 9.1 CPU-seconds in 60 s
/// (the servers sleep their service times), so three at once keep under
/// half of one CPU busy and leave the timers a CPU free, in a third of
/// the time.
#[test]
fn the_search_finds_the_known_capacity_of_a_queue() {
    let _alone = crate::support::alone();
    let objectives = [
        ("p95<5ms", 0.95, 5.0),
        ("p99<10ms", 0.99, 10.0),
        ("p50<2ms", 0.5, 2.0),
    ];
    let missed: Vec<String> = std::thread::scope(|s| {
        let searches: Vec<_> = objectives
            .into_iter()
            .map(|(objective, q, limit_ms)| {
                s.spawn(move || {
                    // A neighbour's burst of load can storm a window at any
                    // level; a search that is wrong is wrong twice, a storm
                    // seldom repeats.
                    let mut said = Vec::new();
                    for seed in 1..=3 {
                        match one_search(objective, q, limit_ms, seed) {
                            Ok(()) => return None,
                            Err(missed) => said.push(missed),
                        }
                    }
                    Some(said.join("\nand again: "))
                })
            })
            .collect();
        searches
            .into_iter()
            // A search whose run failed panicked: its panic is the test's.
            .filter_map(|search| {
                search
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
            .collect()
    });
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}

/// One search for the queue's capacity under `objective` (the `q`
/// quantile under `limit_ms`) with the draws of `seed`, held to the
/// bounds above; what it said when it missed them.
fn one_search(objective: &str, q: f64, limit_ms: f64, seed: u64) -> Result<(), String> {
    use perflab::workload::null::{theory::max_rate, ServiceDist};
    use std::time::Duration;
    let exp_1ms = ServiceDist::Exponential {
        mean: Duration::from_millis(1),
    };
    let truth =
        max_rate(4, exp_1ms, q, Duration::from_secs_f64(limit_ms / 1e3)).expect("an answer");
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!("run null --servers 4 --service exp:1ms --rate 2000 --slo {objective} --find --warmup 0.3s --duration 3s --interval 250ms --seed {seed}"),
    );
    let export = last_export(dir.path());
    let steps = export["steps"].as_array().map_or(0, Vec::len);
    let slo = &export["verdict"]["slo"];
    let held = slo["max_load"].as_f64().unwrap_or(0.0);
    let above = slo["limit_load"].as_f64().unwrap_or(f64::INFINITY);
    let capacity = slo["capacity"].as_f64().unwrap_or(0.0);
    let said = format!(
        "{objective}, seed {seed}: held {held}, limit {above}, capacity {capacity:.0}, truth {truth:.0}, {steps} steps; {}",
        slo["answer"]
    );
    let answer = out.lines().find(|l| l.starts_with("holds")).unwrap_or("");
    let holds = held <= truth * 1.03
        && above <= held * 1.05 + 1.0
        && capacity >= held
        && capacity <= truth * 1.05
        && capacity >= truth * 0.95
        && steps <= 8
        && answer.starts_with(&format!(
            "holds {} up to ",
            slo["objectives"][0].as_str().unwrap_or("?")
        ))
        && answer.contains(" offered (between ");
    if holds {
        Ok(())
    } else {
        Err(format!("{said}\n{answer}"))
    }
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

/// The search on real servers: a managed PostgreSQL in a closed loop
/// (users) and a managed nginx in an open loop (the rate), each from a
/// load that meets the objective to one that does not, answering with
/// the line that begins `holds` and what stops the server on either side.
#[test]
fn the_search_brackets_a_real_database_and_web_server() {
    // Alone: beside another test that loads the CPUs, nginx read a p95
    // of 5.74 ms at 1000/s, over the objective at every rate.
    let _alone = crate::support::alone();
    // The bank's objective is well above one user's p95 on a busy host
    // (3.6 ms quiet, up to 5.6 ms beside two busy loops), so the search
    // always has a level that meets it to climb from.
    for (args, unit, opening) in [
        (
            "run bank --target postgres:managed --users 1 --slo p95<20ms --find",
            "users",
            "holds p95<20.0ms up to ",
        ),
        (
            "run web --rate 2000 --slo p95<5ms --find",
            "rate",
            "holds p95<5.00ms up to ",
        ),
    ] {
        let dir = tempdir();
        let out = perflab_ok(
            dir.path(),
            &format!("{args} --warmup 0.3s --duration 2s --interval 250ms --max-error-rate 100%"),
        );
        let export = last_export(dir.path());
        let slo = &export["verdict"]["slo"];
        let held = slo["max_load"].as_f64().unwrap_or(0.0);
        let above = slo["limit_load"].as_f64().unwrap_or(0.0);
        let said = format!("{args}: held {held}, limit {above}; {}", slo["answer"]);
        assert!(held > 0.0 && above > held, "{said}");
        // The bracket is within 5%, or one user wide.
        assert!(above <= held * 1.05 + 1.0, "{said}");
        assert_eq!(export["steps"][0]["load"]["kind"], unit, "{said}");
        let answer = out.lines().find(|l| l.starts_with(opening)).unwrap_or("");
        assert!(!answer.is_empty(), "{out}");
        contains(&out, "\n  within      at ");
        contains(&out, "\n  beyond      at ");
    }
}
