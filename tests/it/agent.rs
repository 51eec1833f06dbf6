//! `perflab agent` over loopback: samples served to `perflab watch --probe
//! agent://…` with a token; requests without the token or with a wrong one
//! refused (and logged without the token); listening beyond loopback
//! without a token refused at start-up.

use crate::support::{contains, perflab_expect, tempdir};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running agent; stopped with SIGINT (by its PID) when dropped.
pub struct Agent {
    child: Option<Child>,
    pub port: u16,
}

impl Agent {
    pub fn start(dir: &std::path::Path, token_file: &std::path::Path) -> Self {
        let port = free_port();
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("perflab"))
            .current_dir(dir)
            .args([
                "agent",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--interval",
                "200ms",
            ])
            .arg("--token-file")
            .arg(token_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the agent did not start listening"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Agent {
            child: Some(child),
            port,
        }
    }

    /// Stops the agent and returns what it logged.
    pub fn stop(mut self) -> String {
        let child = self.child.take().unwrap();
        // SAFETY: signalling the agent this test started, by its PID.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn an_agent_serves_samples_only_to_holders_of_the_token() {
    let dir = tempdir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t0ken-5ecret-4b1d\n").unwrap();
    let agent = Agent::start(dir.path(), &token_file);
    std::thread::sleep(Duration::from_millis(700));

    let (json, _) = perflab_expect(
        dir.path(),
        &format!(
            "watch --probe agent://127.0.0.1:{} --token-file {} --interval 500ms --duration 1s --json",
            agent.port,
            token_file.display()
        ),
        0,
    );
    let samples: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(samples.len() >= 3, "{} samples", samples.len());
    for s in &samples {
        assert!(!s["cpus"].as_array().unwrap().is_empty());
    }

    let url = format!("http://127.0.0.1:{}/v1/samples", agent.port);
    let status = |req: ureq::Request| match req.call() {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(status(ureq::get(&url)), 401);
    assert_eq!(
        status(ureq::get(&url).set("Authorization", "Bearer guess-w0rk")),
        401
    );
    assert_eq!(
        status(ureq::get(&url).set("Authorization", "Bearer t0ken-5ecret-4b1d")),
        200
    );
    assert_eq!(
        status(ureq::post(&url).set("Authorization", "Bearer t0ken-5ecret-4b1d")),
        405
    );

    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "guess-w0rk-0123456789").unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "watch --probe agent://127.0.0.1:{} --token-file {} --duration 1s",
            agent.port,
            wrong.display()
        ),
        2,
    );
    contains(&err, "refused the token");

    let log = agent.stop();
    contains(&log, "refused a request");
    assert!(
        !log.contains("guess-w0rk"),
        "the agent logged a token: {log}"
    );
    assert!(!log.contains("t0ken-5ecret-4b1d"));
}

#[test]
fn an_agent_will_not_listen_beyond_loopback_without_a_token() {
    let dir = tempdir();
    let (_, err) = perflab_expect(dir.path(), "agent --listen 0.0.0.0:0", 2);
    contains(&err, "refusing to listen on 0.0.0.0:0 without a token");
    assert_eq!(err.trim_end().lines().count(), 1);
}

/// The doctor examines the agent's host, with the token; only an agent
/// can be examined.
#[test]
fn the_doctor_examines_an_agents_host() {
    let dir = tempdir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "d0ct0r-t0ken-0123456789\n").unwrap();
    let agent = Agent::start(dir.path(), &token_file);
    let out = crate::support::perflab(dir.path())
        .args(["doctor", "--sample", "0s", "--json", "--probe"])
        .arg(format!("agent://127.0.0.1:{}", agent.port))
        .arg("--token-file")
        .arg(&token_file)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["findings"].is_array() && report["unavailable"].is_array());
    let (_, err) = perflab_expect(
        dir.path(),
        "doctor --sample 0s --probe node-exporter://127.0.0.1:9100",
        2,
    );
    contains(&err, "cannot be examined");
    agent.stop();
}

/// A doctor's examination sleeps through its sample on a thread of its
/// own: samples and snapshots are served meanwhile, a second examination
/// is told to wait (503), and the first answers when done. The `bearer`
/// scheme is taken in any case.
#[test]
fn an_examination_does_not_block_the_agent() {
    let dir = tempdir();
    let token = "ex4m-t0ken-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let agent = Agent::start(dir.path(), &token_file);
    let base = format!("http://127.0.0.1:{}", agent.port);
    let get = move |path: &str, scheme: &str| -> u16 {
        match ureq::get(&format!("{base}{path}"))
            .timeout(Duration::from_secs(60))
            .set("Authorization", &format!("{scheme} {token}"))
            .call()
        {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(code, _)) => code,
            Err(e) => panic!("{path}: {e}"),
        }
    };
    let examination = {
        let get = get.clone();
        std::thread::spawn(move || get("/v1/doctor?sample=8", "Bearer"))
    };
    std::thread::sleep(Duration::from_millis(500));
    let during = Instant::now();
    assert_eq!(get("/v1/snapshot", "bearer"), 200);
    assert_eq!(get("/v1/samples?since=0", "BEARER"), 200);
    assert_eq!(get("/v1/doctor?sample=1", "Bearer"), 503);
    // Served while the examination still slept (it takes 8 s).
    assert!(
        !examination.is_finished(),
        "the examination ended before the other requests were served ({:?})",
        during.elapsed()
    );
    assert_eq!(examination.join().unwrap(), 200);
    assert_eq!(get("/v1/doctor?sample=0", "Bearer"), 200);
    agent.stop();
}
