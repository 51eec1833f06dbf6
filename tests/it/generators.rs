//! Many generators as one run: `perflab agent --generate` processes (one
//! on loopback, two each in a network namespace of its own, all in TLS)
//! offer the load of `perflab run … --generators`; the coordinator merges
//! their intervals into the run's records. The merged counts are the sum
//! of the generators' exactly, their clocks start together after the
//! offset correction, an open loop's superposed arrivals are one Poisson
//! process of the rate asked; and a wrong token, a wrong fingerprint, an
//! agent that is no generator or runs another version are one line each.

use crate::agent::{free_port, Agent};
use crate::support::{contains, perflab_expect, tempdir, Island};

/// Three TLS generators: one on loopback, two in namespaces of their own.
struct Three {
    agents: Vec<Agent>,
    islands: Vec<Island>,
    /// `--generators …` and one `--agent-fingerprint` per generator.
    flags: String,
}

impl Three {
    fn start(dir: &std::path::Path, token: &std::path::Path) -> Three {
        let mut agents = vec![Agent::start_with(
            dir,
            token,
            &["--tls-self-signed", "--generate"],
            "127.0.0.1",
        )];
        let mut addresses = vec![format!("agent://127.0.0.1:{}", agents[0].port)];
        let islands = vec![Island::create(), Island::create()];
        for island in &islands {
            let agent = Agent::start_in(
                dir,
                token,
                &["--tls-self-signed", "--generate"],
                &island.ip,
                &island.exec(),
            );
            addresses.push(format!("agent://{}:{}", island.ip, agent.port));
            agents.push(agent);
        }
        let mut flags = format!(
            "--generators {} --token-file {}",
            addresses.join(","),
            token.display()
        );
        for agent in &agents {
            flags.push_str(&format!(
                " --agent-fingerprint {}",
                agent.fingerprint.as_deref().unwrap()
            ));
        }
        Three {
            agents,
            islands,
            flags,
        }
    }
}

fn token(dir: &std::path::Path) -> std::path::PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d-generators\n").unwrap();
    token
}

/// `n` generators on loopback in plain HTTP, and the run's flags for them.
fn loopback_generators(
    dir: &std::path::Path,
    token: &std::path::Path,
    n: usize,
) -> (Vec<Agent>, Vec<String>, String) {
    let agents: Vec<Agent> = (0..n)
        .map(|_| Agent::start_with(dir, token, &["--generate"], "127.0.0.1"))
        .collect();
    let addresses: Vec<String> = agents
        .iter()
        .map(|a| format!("agent://127.0.0.1:{}", a.port))
        .collect();
    let flags = format!(
        "--generators {} --token-file {}",
        addresses.join(","),
        token.display()
    );
    (agents, addresses, flags)
}

fn export(dir: &std::path::Path) -> serde_json::Value {
    let (json, _) = perflab_expect(dir, "show last --json -", 0);
    serde_json::from_str(&json).unwrap()
}

/// Closed loop on three generators: every step's merged count is the sum
/// of the generators' counts, each generator served its users, and their
/// clocks started within 5 ms of each other by the coordinator's clock.
#[test]
fn three_generators_make_one_run_whose_counts_add_up_exactly() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token = token(dir.path());
    let three = Three::start(dir.path(), &token);
    let (out, _) = perflab_expect(
        dir.path(),
        &format!(
            "run null --service 1ms --users 3,7 --warmup 1s --duration 2s {}",
            three.flags
        ),
        0,
    );
    contains(&out, "clock offset");
    contains(&out, "the generators during each step");
    // The Markdown and HTML reports carry the same table.
    perflab_expect(
        dir.path(),
        "report last --md report.md --html report.html",
        0,
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    contains(&md, "### The generators");
    assert_eq!(md.matches("| agent://").count(), 6, "{md}");
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    contains(&html, "the generators</h3>");
    let run = export(dir.path());
    assert_eq!(crate::support::schema_problems(&run), Vec::<String>::new());
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for step in steps {
        let generators = step["generators"].as_array().unwrap();
        assert_eq!(generators.len(), 3, "{step}");
        let sum = generators_completed(step);
        let merged = step["ops"][0]["response"]["count"].as_u64().unwrap();
        assert_eq!(merged, sum, "merged histogram vs the generators' counts");
        assert_eq!(step["summary"]["completed"].as_u64().unwrap(), sum);
        for g in generators {
            assert!(g["completed"].as_u64().unwrap() > 0, "{g}");
            assert!(g["usage"]["cpu_user"].as_f64().is_some(), "{g}");
            assert!(g["host_steal"].as_f64().is_some(), "{g}");
            // Its own use over every interval but the drain.
            let intervals = step["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["phase"] != "drain")
                .count();
            let used = g["intervals"].as_array().unwrap();
            assert_eq!(used.len(), intervals, "{g}");
            assert!(
                used.iter()
                    .all(|u| u["cpu"].as_f64().unwrap() > 0.0 && u["steal"].as_f64().is_some()),
                "{g}"
            );
            assert!(g["host_busy"].as_f64().unwrap() > 0.0, "{g}");
        }
    }
    // The generators' clocks started within 5 ms of each other by the
    // coordinator's clock. A wake-up can be late when the host is busy
    // with other tests (two run at once on two CPUs): a spread over 5 ms
    // is measured once more before it fails.
    let mut spread = widest_start_spread(&run);
    eprintln!("the generators started {spread} s apart");
    if spread >= 0.005 {
        eprintln!("the generators started {spread} s apart; measuring again");
        perflab_expect(
            dir.path(),
            &format!(
                "run null --service 1ms --users 3,7 --warmup 1s --duration 2s {}",
                three.flags
            ),
            0,
        );
        spread = widest_start_spread(&export(dir.path()));
    }
    assert!(spread < 0.005, "the generators started {spread} s apart");
    for agent in three.agents {
        agent.stop();
    }
}

/// The operations the generators of a step completed, all together.
fn generators_completed(step: &serde_json::Value) -> u64 {
    step["generators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["completed"].as_u64().unwrap())
        .sum()
}

/// The widest spread of the generators' starts in any step, seconds.
fn widest_start_spread(run: &serde_json::Value) -> f64 {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            let starts: Vec<f64> = step["generators"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["started"].as_f64().unwrap())
                .collect();
            starts.iter().cloned().fold(f64::MIN, f64::max)
                - starts.iter().cloned().fold(f64::MAX, f64::min)
        })
        .fold(0.0, f64::max)
}

/// Open loop at 3,000/s over three generators: the merged arrivals are
/// within 2% of the rate times the window, and their counts per interval
/// are dispersed as a Poisson process's (the index of dispersion's χ²
/// test, two-sided at 0.2%): three streams of λ/3 with seeds of their
/// own, not three copies of one (thrice the variance) nor evenly spaced
/// arrivals (none).
///
/// The counts are of operations ended in each interval: where the suite's
/// other tests leave the host short of CPU, a burst of arrivals ends late,
/// in the next interval, and the counts come out more even than the
/// arrivals were. A process that is wrong is wrong twice; such a host
/// seldom is, so one miss is run once more.
#[test]
fn three_generators_offer_one_poisson_process_of_the_rate_asked() {
    let _heavy = crate::support::heavy();
    if let Err(said) = three_generators_once() {
        if let Err(again) = three_generators_once() {
            panic!("{said}\nand again: {again}");
        }
    }
}

/// One open-loop run at 3,000/s on three generators, held to the bounds
/// above; what it measured when it missed them.
fn three_generators_once() -> Result<(), String> {
    let dir = tempdir();
    let token = token(dir.path());
    let three = Three::start(dir.path(), &token);
    perflab_expect(
        dir.path(),
        &format!(
            "run null --rate 3000 --warmup 1s --duration 20s {}",
            three.flags
        ),
        0,
    );
    for agent in three.agents {
        agent.stop();
    }
    let run = export(dir.path());
    let step = &run["steps"][0];
    let counts: Vec<f64> = step["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["phase"] == "measured")
        .map(|i| (i["ok"].as_u64().unwrap() + i["dropped"].as_u64().unwrap()) as f64)
        .collect();
    assert_eq!(counts.len(), 20);
    let total: f64 = counts.iter().sum();
    if (total - 60_000.0).abs() > 1_200.0 {
        return Err(format!("{total} arrivals in 20 s at 3,000/s"));
    }
    let mean = total / counts.len() as f64;
    let dispersion: f64 = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / mean;
    // χ²(19): P(X < 5.407) = P(X > 43.82) = 0.001.
    if !(5.407..43.82).contains(&dispersion) {
        return Err(format!(
            "index of dispersion χ² = {dispersion:.2} over {counts:?}"
        ));
    }
    Ok(())
}

/// Intervals stored in `store` so far.
fn stored_intervals(store: &std::path::Path) -> i64 {
    rusqlite::Connection::open(store)
        .and_then(|c| c.query_row("SELECT COUNT(*) FROM intervals", [], |r| r.get(0)))
        .unwrap_or(0)
}

/// One of three generators killed in the first step: that step is kept,
/// degraded, naming the generator; with `continue` the next step runs on
/// the two left, with `stop` the run ends after it (exit 1), nothing
/// measured lost either way.
#[test]
fn a_generator_lost_mid_step_degrades_that_step_and_the_run_goes_on_or_stops() {
    let _waits = crate::support::waits();
    for (policy, code) in [("continue", 0), ("stop", 1)] {
        let dir = tempdir();
        let token = token(dir.path());
        let (mut agents, addresses, flags) = loopback_generators(dir.path(), &token, 3);
        let lost = addresses[1].clone();
        let store = dir.path().join("perflab.db");
        let run = crate::support::perflab_process(dir.path())
            .args(
                format!(
                    "run null --service 1ms --users 3,3 --warmup 0s --duration 4s {flags} --on-generator-loss {policy}"
                )
                .split_whitespace(),
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while stored_intervals(&store) < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(stored_intervals(&store) >= 2, "no interval was stored");
        agents.remove(1).kill();
        let out = run.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{policy}: {err}");
        let export = export(dir.path());
        let steps = export["steps"].as_array().unwrap();
        let first = &steps[0];
        assert_eq!(first["status"], "degraded", "{first}");
        let reason = first["status_reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("generator {lost} lost")),
            "{reason}"
        );
        let served: Vec<&str> = first["generators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["generator"].as_str().unwrap())
            .collect();
        assert_eq!(served, vec![addresses[0].as_str(), addresses[2].as_str()]);
        let sum = generators_completed(first);
        // The lost one's operations before it went are kept too.
        assert!(
            first["summary"]["completed"].as_u64().unwrap() > sum,
            "{first}"
        );
        match policy {
            "continue" => {
                assert_eq!(steps.len(), 2);
                assert_eq!(steps[1]["status"], "ok");
                assert_eq!(steps[1]["generators"].as_array().unwrap().len(), 2);
            }
            _ => {
                assert_eq!(steps.len(), 1);
                assert_eq!(export["run"]["status"], "failed", "{}", export["run"]);
                contains(
                    export["run"]["status_reason"].as_str().unwrap(),
                    "--on-generator-loss stop",
                );
            }
        }
        for agent in agents {
            agent.stop();
        }
    }
}

/// A wrong token, a wrong fingerprint, an agent that is no generator, and
/// a generator of another version: one line each, exit 2, nothing stored.
#[test]
fn generators_that_cannot_serve_the_run_are_one_line_each() {
    let dir = tempdir();
    let token = token(dir.path());
    let generator = Agent::start_with(
        dir.path(),
        &token,
        &["--tls-self-signed", "--generate"],
        "127.0.0.1",
    );
    let pin = generator.fingerprint.clone().unwrap();
    let at = format!("agent://127.0.0.1:{}", generator.port);
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "guess-w0rk-0123456789\n").unwrap();
    let probe_only = Agent::start(dir.path(), &token);
    let other = crate::support::another_pin(&pin);
    let old = old_generator();
    for (flags, says) in [
        (
            format!(
                "--generators {at} --token-file {} --agent-fingerprint {pin}",
                wrong.display()
            ),
            "refused the token",
        ),
        (
            format!(
                "--generators {at} --token-file {} --agent-fingerprint {other}",
                token.display()
            ),
            "is not the one --agent-fingerprint pins",
        ),
        (
            format!(
                "--generators agent://127.0.0.1:{} --token-file {}",
                probe_only.port,
                token.display()
            ),
            "is not a generator; start it with --generate",
        ),
        (
            format!(
                "--generators agent://127.0.0.1:{old} --token-file {}",
                token.display()
            ),
            "runs perflab 0.0.1 and this is",
        ),
        (
            "--generators agent://127.0.0.1".to_string(),
            "--generators: 'agent://127.0.0.1' is not a generator's address",
        ),
        (format!("--generators {at},{at}"), "is given twice"),
    ] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run null --users 2 --warmup 0s --duration 1s --store g.db {flags}"),
            2,
        );
        contains(&err, says);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert!(!dir.path().join("g.db").exists(), "a store was made");
    // A workload that runs in this process only is refused before any
    // generator is asked and before its file is made.
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run disk --size 1MiB --target file:d.bin --duration 1s --store g.db --generators {at} --token-file {}",
            token.display()
        ),
        2,
    );
    contains(
        &err,
        "--generators: the disk workload runs in this process only, not on generators",
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!dir.path().join("d.bin").exists(), "the disk file was made");
    assert!(!dir.path().join("g.db").exists(), "a store was made");
    // A generator started without a token is refused at start.
    let (_, err) = perflab_expect(dir.path(), "agent --generate", 2);
    contains(
        &err,
        "--generate: a generator runs what it is sent, so it needs a token",
    );
    generator.stop();
    probe_only.stop();
}

/// A peer on loopback that says it is a generator of perflab 0.0.1 (it
/// answers every request so, on a thread of the test, until the process
/// ends).
fn old_generator() -> u16 {
    use std::io::{Read, Write};
    let port = free_port();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let _ = s.read(&mut [0u8; 4096]);
            let body = r#"{"version":"0.0.1","roles":["probe","generate"],"workloads":["null"]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// WebBench on a managed nginx offered by two generators: the
/// coordinator starts nginx and writes its files once; each generator
/// builds the workload from what the coordinator sends (files, addresses)
/// and verifies every body; the merged counts add up.
#[test]
fn webbench_on_a_managed_nginx_runs_from_two_generators() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token = token(dir.path());
    let (agents, _, flags) = loopback_generators(dir.path(), &token, 2);
    let (out, _) = perflab_expect(
        dir.path(),
        &format!(
            "run web --target nginx:managed --users 4,8 --warmup 1s --duration 2s --verify-share 1 {flags}"
        ),
        0,
    );
    crate::support::managed_files_removed(&out);
    let run = export(dir.path());
    for step in run["steps"].as_array().unwrap() {
        let generators = step["generators"].as_array().unwrap();
        assert_eq!(generators.len(), 2, "{step}");
        let sum = generators_completed(step);
        assert!(generators
            .iter()
            .all(|g| g["completed"].as_u64().unwrap() > 0));
        assert_eq!(step["summary"]["completed"].as_u64().unwrap(), sum);
        assert_eq!(step["summary"]["errors"].as_u64().unwrap(), 0, "{step}");
    }
    for agent in agents {
        agent.stop();
    }
}

/// A peer on loopback that plays a generator up to its first interval,
/// then sends `interval` as it (a tally the coordinator must refuse).
fn hostile_generator(interval: String) -> u16 {
    use std::io::{Read, Write};
    let port = free_port();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut head = [0u8; 8192];
            let n = s.read(&mut head).unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let body = if head.starts_with("GET /v1/hello") {
                format!(
                    r#"{{"version":"{}","roles":["probe","generate"],"workloads":["null"]}}"#,
                    env!("CARGO_PKG_VERSION")
                )
            } else if head.starts_with("GET /v1/clock") {
                format!(r#"{{"unix_ns":{now}}}"#)
            } else if head.starts_with("GET /v1/generate/events") {
                format!(r#"{{"events":[[1,{interval}]]}}"#)
            } else {
                "{}".to_string()
            };
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A generator that sends a damaged histogram, or a tally of other
/// operation kinds than the run's, ends the run in one line naming it:
/// nothing it sent is merged, nothing panics.
#[test]
fn a_generator_sending_what_cannot_be_merged_is_named_in_one_line() {
    let damaged = r#"{"Interval":{"index":0,"length":1.0,"tally":{"ops":[{"ok":1,"refused":0,"errors":{},"retries":0,"bytes":0,"service":"AAAA","response":"AAAA"}],"dropped":0,"lag":"AAAA","think_total":0.0,"thinks":0}}}"#;
    let empty = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(perflab::measure::encode_histogram(
            &perflab::measure::new_histogram(),
        ))
    };
    let extra = format!(
        r#"{{"Interval":{{"index":0,"length":1.0,"tally":{{"ops":[],"dropped":0,"lag":"{empty}","think_total":0.0,"thinks":0}}}}}}"#
    );
    for (interval, says) in [
        (damaged.to_string(), "sent a damaged interval"),
        (
            extra,
            "sent an interval of 0 operation kinds; this run has 1",
        ),
    ] {
        let dir = tempdir();
        let port = hostile_generator(interval);
        let out = crate::support::perflab_process(dir.path())
            .args(
                format!(
                    "run null --users 2 --warmup 0s --duration 2s --generators agent://127.0.0.1:{port}"
                )
                .split_whitespace(),
            )
            .output()
            .unwrap();
        let all = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{all}");
        assert!(out.status.code().is_some(), "killed by a signal: {all}");
        contains(&all, &format!("generator agent://127.0.0.1:{port}: {says}"));
    }
}

/// A histogram header of HdrHistogram's V2 compressed format asking for
/// 5 significant figures over every `u64` and 100 MB of counts: what
/// hdrhistogram would allocate as asked.
fn histogram_asking_for_100_mb() -> String {
    use base64::Engine;
    use std::io::Write;
    let mut inner = Vec::new();
    inner.extend(0x1c84_9313u32.to_be_bytes());
    inner.extend(100_000_000u32.to_be_bytes());
    inner.extend(0u32.to_be_bytes());
    inner.extend(5u32.to_be_bytes());
    inner.extend(1u64.to_be_bytes());
    inner.extend(u64::MAX.to_be_bytes());
    inner.extend(1.0f64.to_be_bytes());
    inner.extend([2u8; 64]);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&inner).unwrap();
    let deflated = z.finish().unwrap();
    let mut bytes = 0x1c84_9314u32.to_be_bytes().to_vec();
    bytes.extend(u32::try_from(deflated.len()).unwrap().to_be_bytes());
    bytes.extend(deflated);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A generator sending a histogram whose header asks for more than
/// perflab ever writes (5 significant figures, 100 MB of counts) is
/// refused in one line before anything is allocated for it: the
/// coordinator's peak memory stays far below what the header asked.
#[test]
fn a_generator_histogram_asking_for_100_mb_is_refused_before_it_is_allocated() {
    let h = histogram_asking_for_100_mb();
    let interval = format!(
        r#"{{"Interval":{{"index":0,"length":1.0,"tally":{{"ops":[{{"ok":1,"refused":0,"errors":{{}},"retries":0,"bytes":0,"service":"{h}","response":"{h}"}}],"dropped":0,"lag":"{h}","think_total":0.0,"thinks":0}}}}}}"#
    );
    let dir = tempdir();
    let port = hostile_generator(interval);
    let mut child = crate::support::perflab_process(dir.path())
        .args(
            format!(
                "run null --users 2 --warmup 0s --duration 2s --generators agent://127.0.0.1:{port}"
            )
            .split_whitespace(),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut o, mut e) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        use std::io::Read;
        let mut all = String::new();
        let _ = o.read_to_string(&mut all);
        let _ = e.read_to_string(&mut all);
        all
    });
    // The coordinator's own high-water mark, read while it runs (its
    // rusage would carry this test process's, which it was spawned from).
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let hwm = std::fs::read_to_string(&status_file)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let all = out.join().unwrap();
    assert!(status.code().is_some(), "killed by a signal: {all}");
    assert_ne!(status.code(), Some(0), "{all}");
    contains(
        &all,
        &format!("generator agent://127.0.0.1:{port}: sent a damaged interval: a histogram of 5 significant figures; perflab writes 3"),
    );
    assert!(peak_kib > 0, "the coordinator's memory was never read");
    let peak_mib = peak_kib / 1024;
    assert!(
        peak_mib < 60,
        "the coordinator's peak memory was {peak_mib} MiB"
    );
}

/// The bank on a managed PostgreSQL and on a managed MariaDB, offered by
/// two generators: the coordinator loads it once, each generator attaches
/// its sessions to the server the coordinator started, and the check
/// after the sweep (money conserved, history = committed transactions)
/// passes with every generator's transactions counted in. An embedded
/// bank is refused before anything is loaded.
#[test]
fn the_bank_runs_from_two_generators_and_its_check_passes() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token = token(dir.path());
    let (agents, _, flags) = loopback_generators(dir.path(), &token, 2);
    for target in ["postgres:managed", "mariadb:managed"] {
        let (out, _) = perflab_expect(
            dir.path(),
            &format!(
                "run bank --target {target} --scale 1 --users 4 --warmup 0s --duration 2s {flags}"
            ),
            0,
        );
        contains(&out, "check: passed");
        crate::support::managed_files_removed(&out);
        let run = export(dir.path());
        let step = &run["steps"][0];
        let generators = step["generators"].as_array().unwrap();
        assert_eq!(generators.len(), 2, "{target}: {step}");
        assert!(generators
            .iter()
            .all(|g| g["completed"].as_u64().unwrap() > 0));
        // The password crossed to the generators, never to the store.
        assert!(!run.to_string().contains("password\":\""), "{target}");
    }
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run bank --target sqlite:bank.db --users 2 --duration 1s {flags}"),
        2,
    );
    contains(&err, "--generators: an embedded target (sqlite:)");
    assert!(!dir.path().join("bank.db").exists(), "the bank was loaded");
    for agent in agents {
        agent.stop();
    }
}

/// WebBench against one nginx from three generators in TLS: one on
/// loopback and two each in a network namespace of its own, routed to the
/// nginx through the host. Every body is verified; the merged counts are
/// the generators' sum; each generator served its users.
#[test]
fn three_generators_in_their_own_namespaces_load_one_nginx() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token = token(dir.path());
    let three = Three::start(dir.path(), &token);
    for island in &three.islands {
        island.route_to_host();
    }
    // nginx on the host's end of the first island: a host address that
    // every generator reaches (loopback's would be each namespace's own).
    let ip = three.islands[0].host_ip.clone();
    let nginx = crate::support::OwnNginx::start(&ip);
    perflab_expect(
        dir.path(),
        &format!(
            "run web --target http://{ip}:{}/ --fileset webbench --users 6 --warmup 1s --duration 2s --verify-share 1 {}",
            nginx.port, three.flags
        ),
        0,
    );
    let run = export(dir.path());
    let step = &run["steps"][0];
    let generators = step["generators"].as_array().unwrap();
    assert_eq!(generators.len(), 3, "{step}");
    let sum = generators_completed(step);
    assert!(
        generators
            .iter()
            .all(|g| g["completed"].as_u64().unwrap() > 0),
        "{step}"
    );
    assert_eq!(step["summary"]["completed"].as_u64().unwrap(), sum);
    assert_eq!(step["summary"]["errors"].as_u64().unwrap(), 0, "{step}");
    drop(nginx);
    for agent in three.agents {
        agent.stop();
    }
}

/// POSTs `body` to a generator's `path` with the token: the status and
/// the body of the answer.
fn post_to(port: u16, path: &str, body: &serde_json::Value) -> (u16, String) {
    let answer = ureq::post(&format!("http://127.0.0.1:{port}{path}"))
        .set("Authorization", "Bearer t0ken-5ecret-4b1d-generators")
        .timeout(std::time::Duration::from_secs(150))
        .send_json(body.clone());
    match answer {
        Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
        Err(e) => panic!("{path}: {e}"),
    }
}

/// A share of the null workload, one user for a second.
fn null_share() -> serde_json::Value {
    serde_json::json!({
        "index": 0,
        "level": {"kind": "users", "value": 1},
        "split": {
            "load": {"kind": "closed", "think": {"kind": "zero"}},
            "threads": 1,
            "seed": 7,
            "timeout": 5.0,
            "part": {"k": 0, "n": 1}
        },
        "warmup": 0.0,
        "duration": 1.0,
        "interval": 1.0
    })
}

/// Sets `value` at the JSON pointer `at` of a copy of `json`.
fn with(json: &serde_json::Value, at: &str, value: serde_json::Value) -> serde_json::Value {
    let mut out = json.clone();
    *out.pointer_mut(at).unwrap_or_else(|| panic!("no {at}")) = value;
    out
}

/// Hostile requests, each with the token, to a real generator on
/// loopback: a part count past `u32` (which divided by zero and wedged
/// the agent), a zero interval (which ran it out of memory), NaN and
/// infinite rates, zero and endless numbers everywhere, a request header
/// holding CRLF (which was sent on to the target as a header of its own),
/// a start a century ahead. Each is a 400 with one line naming the field;
/// nothing reaches the target; and the generator takes a good share after
/// them, and after a share that was prepared and never started.
#[test]
fn hostile_shares_are_a_400_in_one_line_and_never_wedge_the_generator() {
    let dir = tempdir();
    let token = token(dir.path());
    let generator = Agent::start_with(dir.path(), &token, &["--generate"], "127.0.0.1");
    let port = generator.port;
    let null = |share: serde_json::Value| {
        serde_json::json!({
            "workload": "null",
            "form": {"service": 0.001, "stall": null},
            "share": share,
        })
    };
    let share = null_share();
    let rate = with(
        &with(
            &share,
            "/split/load",
            serde_json::json!({"kind": "open", "arrivals": "poisson", "connections": 2, "max_outstanding": 8}),
        ),
        "/level",
        serde_json::json!({"kind": "rate", "value": 100.0}),
    );
    let cases = [
        (
            null(with(
                &rate,
                "/split/part/n",
                serde_json::json!(4_294_967_296u64),
            )),
            "share: part.n is 4294967296",
        ),
        (
            null(with(&share, "/split/part/n", serde_json::json!(0))),
            "share: part.n is 0",
        ),
        (
            null(with(&share, "/split/part/k", serde_json::json!(1))),
            "share: part.k is 1",
        ),
        (
            null(with(&share, "/interval", serde_json::json!(0.0))),
            "share: interval is 0ns",
        ),
        (
            null(with(&share, "/duration", serde_json::json!(1e12))),
            "share: warmup and duration add up to more than 30 days",
        ),
        (
            null(with(&share, "/split/threads", serde_json::json!(1_000_000))),
            "share: threads is 1000000",
        ),
        (
            null(with(&share, "/split/timeout", serde_json::json!(0.0))),
            "share: timeout is 0ns",
        ),
        (
            null(with(
                &share,
                "/level/value",
                serde_json::json!(4_000_000_000u64),
            )),
            "share: level is 4000000000 users",
        ),
        (
            null(with(&rate, "/level/value", serde_json::json!(1e300))),
            "share: level is a rate of",
        ),
        (
            null(with(
                &rate,
                "/split/load/max_outstanding",
                serde_json::json!(0),
            )),
            "share: load.max_outstanding is 0",
        ),
        (
            serde_json::json!({"workload": "null", "form": {"service": 1e15, "stall": null}, "share": share}),
            "form.service is",
        ),
        (
            serde_json::json!({"workload": "disk", "form": {}, "share": share}),
            "workload: disk does not run on generators",
        ),
        (
            serde_json::json!({"workload": "nope", "form": {}, "share": share}),
            "workload: 'nope' is not a workload",
        ),
    ];
    for (body, says) in &cases {
        let (status, answer) = post_to(port, "/v1/generate/prepare", body);
        assert_eq!(status, 400, "{says}: {answer}");
        contains(&answer, says);
        assert!(!answer.contains('\n'), "{answer}");
    }
    // NaN is not JSON: serde refuses it as it is sent.
    let nan = ureq::post(&format!("http://127.0.0.1:{port}/v1/generate/prepare"))
        .set("Authorization", "Bearer t0ken-5ecret-4b1d-generators")
        .send_string(
            &null(rate.clone())
                .to_string()
                .replace("\"value\":100.0", "\"value\":NaN"),
        );
    assert!(matches!(nan, Err(ureq::Error::Status(400, _))), "{nan:?}");

    // A web share whose header holds CRLF, aimed at a listener of the
    // test: refused, and the listener is never reached.
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let at = target.local_addr().unwrap();
    use clap::Parser;
    let cli = perflab::cli::Cli::try_parse_from([
        "perflab",
        "run",
        "web",
        "--target",
        &format!("http://{at}/"),
    ])
    .unwrap();
    let perflab::cli::Command::Run(run) = cli.command else {
        panic!("not run")
    };
    let Ok((perflab::workload::Validated::Web(spec), _)) = perflab::cli::plan_from(&run) else {
        panic!("not a web run")
    };
    let form = |headers: serde_json::Value, path: &str| {
        serde_json::json!({
            "spec": spec,
            "headers": headers,
            "files": [{"path": path, "size": null, "checksum": null, "class": 0, "weight": 1.0, "source": null, "seed": null}],
            "bases": [[{"tls": false, "host": "127.0.0.1", "port": at.port(), "path": "/"}, at.to_string()]],
        })
    };
    let web = |form: serde_json::Value| serde_json::json!({"workload": "web", "form": form, "share": share});
    for (body, says) in [
        (
            web(form(
                serde_json::json!([["X-A", "b\r\nInjected: yes"]]),
                "a",
            )),
            "form.headers[0] (X-A): the value holds a line break",
        ),
        (
            web(form(serde_json::json!([["X-A\r\nInjected", "yes"]]), "a")),
            "form.headers[0]: the name is not an HTTP token",
        ),
        (
            web(form(
                serde_json::json!([]),
                "a HTTP/1.1\r\nInjected: yes\r\n\r\nGET /b",
            )),
            "form.files[0].path holds a space",
        ),
        (
            web(with(
                &form(serde_json::json!([]), "a"),
                "/bases/0/0/host",
                serde_json::json!("h\r\nInjected: yes"),
            )),
            "form.bases[0]: the host is not a name or an address",
        ),
        (
            web(with(
                &form(serde_json::json!([]), "a"),
                "/files/0/class",
                serde_json::json!(9),
            )),
            "form.files[0].class is 9",
        ),
        (
            web(with(
                &form(serde_json::json!([]), "a"),
                "/files/0/weight",
                serde_json::json!(-1.0),
            )),
            "form.files[0].weight is -1",
        ),
    ] {
        let (status, answer) = post_to(port, "/v1/generate/prepare", &body);
        assert_eq!(status, 400, "{says}: {answer}");
        contains(&answer, says);
    }
    assert!(
        matches!(target.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a refused share reached the target"
    );

    // A start centuries ahead would hold the share asleep past any stop.
    let (status, answer) = post_to(port, "/v1/generate/prepare", &null(share.clone()));
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = post_to(
        port,
        "/v1/generate/start",
        &serde_json::json!({"at_unix_ns": u64::MAX}),
    );
    assert_eq!(status, 400, "{answer}");
    contains(&answer, "at_unix_ns is");
    // Prepared and never started: stopped, it ends, and the next prepare
    // is taken (this one then runs to its end).
    post_to(port, "/v1/generate/stop", &serde_json::json!({}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (status, answer) = loop {
        let (status, answer) = post_to(port, "/v1/generate/prepare", &null(share.clone()));
        if status != 409 || std::time::Instant::now() > deadline {
            break (status, answer);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status, 200, "the generator is wedged: {answer}");
    generator.stop();
}

/// Two generators' users held by a target that stalls 0.5 s into a 2 s
/// window: each generator counts the operation it holds at the window's
/// end, and its timeout in the drain, in its share; the merged step has
/// both, and says it stalled.
#[test]
fn operations_generators_hold_at_the_windows_end_count_in_the_step() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let token = token(dir.path());
    let (agents, _, flags) = loopback_generators(dir.path(), &token, 2);
    let (out, _) = perflab_expect(
        dir.path(),
        &format!(
            "run null --service 1ms --stall 0.5s:20s --users 2 --warmup 0s --duration 2s --timeout 3s {flags}"
        ),
        0,
    );
    contains(&out, "stalled: 2 operations in flight at the window's end");
    let run = export(dir.path());
    assert_eq!(crate::support::schema_problems(&run), Vec::<String>::new());
    let step = &run["steps"][0];
    assert_eq!(step["status"], "stalled", "{step}");
    let summary = &step["summary"];
    assert_eq!(summary["unfinished"], 2, "{summary}");
    assert_eq!(summary["late_errors"], 2, "{summary}");
    assert_eq!(summary["errors"], 2, "{summary}");
    for agent in agents {
        agent.stop();
    }
}
