//! The search for the highest load that meets an objective (`--find`),
//! judged against a known answer and on real servers. These were
//! integration tests that ran alone; here, among the tests that hold the
//! machine, they need no other test drained before them (the integration
//! suite took 262 s without them where it took 389 s with them, holding
//! them 101 s).

use crate::support::{contains, last_export, perflab_ok, tempdir};

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
/// The test holds the whole machine (it is a verdict test), and holds the search to what a quiet machine
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
    let _machine = super::machine();
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
                            Err(missed) => {
                                // In the suite's output when it passes too:
                                // a search run again costs 20 s or more.
                                println!("missed, run again: {missed}");
                                said.push(missed);
                            }
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

/// The search on real servers: a managed PostgreSQL in a closed loop
/// (users) and a managed nginx in an open loop (the rate), each from a
/// load that meets the objective to one that does not, answering with
/// the line that begins `holds` and what stops the server on either side.
#[test]
fn the_search_brackets_a_real_database_and_web_server() {
    // The machine held: beside another test that loads the CPUs, nginx
    // read a p95 of 5.74 ms at 1000/s, over the objective at every rate.
    let _machine = super::machine();
    // Each search starts where a quiet machine meets its objective well
    // (the bank's p95 1.4 ms at one user and 3.6 ms at four against
    // 20 ms; nginx's 0.3 ms at 2000/s and 8000/s against 5 ms): the
    // doublings below that are steps the answer does not need (9 and 12
    // steps of 2.3 s from one user and from 2000/s).
    for (args, unit, opening) in [
        (
            "run bank --target postgres:managed --users 4 --slo p95<20ms --find",
            "users",
            "holds p95<20.0ms up to ",
        ),
        (
            "run web --rate 8000 --slo p95<5ms --find",
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
