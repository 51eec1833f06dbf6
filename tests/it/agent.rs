//! `perflab agent` over loopback: samples served to `perflab watch --probe
//! agent://…` with a token; requests without the token or with a wrong one
//! refused (and logged without the token); listening beyond loopback
//! without a token, or without TLS, refused at start-up. In TLS: a
//! self-signed agent reached by its pinned fingerprint, a CA-signed one
//! through `--agent-cacert`, each wrong trust one line; beyond loopback
//! (an address in a network namespace the test makes), TLS is spoken
//! whatever the flags, and a plain-HTTP peer there is refused.

use crate::support::{contains, perflab_expect, tempdir};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub use crate::support::free_port;

/// A running agent; stopped with SIGINT (by its PID) when dropped.
pub struct Agent {
    child: Option<Child>,
    pub port: u16,
    /// The certificate fingerprint it printed, in TLS.
    pub fingerprint: Option<String>,
}

impl Agent {
    pub fn start(dir: &std::path::Path, token_file: &std::path::Path) -> Self {
        Self::start_with(dir, token_file, &[], "127.0.0.1")
    }

    /// An agent with more flags, listening on `ip`.
    pub fn start_with(
        dir: &std::path::Path,
        token_file: &std::path::Path,
        more: &[&str],
        ip: &str,
    ) -> Self {
        Self::start_in(dir, token_file, more, ip, &[])
    }

    /// The same, run after `prefix` (`ip netns exec NS`).
    pub fn start_in(
        dir: &std::path::Path,
        token_file: &std::path::Path,
        more: &[&str],
        ip: &str,
        prefix: &[&str],
    ) -> Self {
        use std::io::BufRead;
        let port = free_port();
        let perflab = assert_cmd::cargo::cargo_bin("perflab");
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = std::process::Command::new(program);
                c.args(rest).arg(&perflab);
                c
            }
            None => std::process::Command::new(&perflab),
        };
        let mut child = command
            .current_dir(dir)
            .args([
                "agent",
                "--listen",
                &format!("{ip}:{port}"),
                "--interval",
                "200ms",
            ])
            .arg("--token-file")
            .arg(token_file)
            .args(more)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The agent says where it listens, then (in TLS) its fingerprint,
        // once it is listening.
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let listening = lines.next().and_then(|l| l.ok()).unwrap_or_default();
        assert!(listening.contains("listening on"), "{listening}");
        let fingerprint = if listening.contains("https://") {
            let line = lines.next().unwrap().unwrap();
            Some(line.rsplit(' ').next().unwrap().to_string())
        } else {
            None
        };
        Agent {
            child: Some(child),
            port,
            fingerprint,
        }
    }

    /// Kills the agent at once (SIGKILL, by its PID): a host that vanished.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the agent with Ctrl-C (exit 130) and returns what it logged.
    pub fn stop(self) -> String {
        let (code, log) = self.stop_with(libc::SIGINT);
        assert_eq!(code, Some(130), "{log}");
        log
    }

    /// Sends the agent `signal` (by its PID); its exit code and its log.
    pub fn stop_with(mut self, signal: i32) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        // SAFETY: signalling the agent this test started, by its PID.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
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

    // A token file others may write is used, with one warning per run
    // however many parts of the run read it.
    let open = dir.path().join("open-token");
    std::fs::write(&open, "t0ken-5ecret-4b1d\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run null --users 1 --warmup 0s --duration 1s --probe agent://127.0.0.1:{} --token-file {}",
            agent.port,
            open.display()
        ),
        0,
    );
    assert_eq!(
        err.matches("may be written by other users").count(),
        1,
        "{err}"
    );

    let log = agent.stop();
    contains(&log, "refused a request");
    assert!(
        !log.contains("guess-w0rk"),
        "the agent logged a token: {log}"
    );
    assert!(!log.contains("t0ken-5ecret-4b1d"));
}

#[test]
fn an_agent_will_not_listen_beyond_loopback_without_a_token_or_in_clear() {
    let dir = tempdir();
    let (_, err) = perflab_expect(dir.path(), "agent --listen 0.0.0.0:0", 2);
    contains(&err, "refusing to listen on 0.0.0.0:0 without a token");
    assert_eq!(err.trim_end().lines().count(), 1);
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t0ken-5ecret-4b1d\n").unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "agent --listen 0.0.0.0:0 --token-file {}",
            token_file.display()
        ),
        2,
    );
    contains(&err, "refusing to listen on 0.0.0.0:0 in plain HTTP");
    contains(&err, "--tls-self-signed");
    assert_eq!(err.trim_end().lines().count(), 1);
    for (flags, says) in [
        ("--tls-cert missing.pem --tls-key missing.pem", "--tls-cert"),
        ("--tls-cert missing.pem", "--tls-key"),
        (
            "--tls-self-signed --tls-cert a --tls-key b",
            "cannot be used with",
        ),
    ] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("agent --token-file {} {flags}", token_file.display()),
            2,
        );
        contains(&err, says);
    }
}

/// `watch` of an agent with `trust` flags: its exit code and what it said
/// on standard error.
fn watch_with(
    dir: &std::path::Path,
    address: &str,
    token: &std::path::Path,
    trust: &str,
) -> (i32, String) {
    let out = crate::support::perflab_process(dir)
        .args([
            "watch",
            "--probe",
            &format!("agent://{address}"),
            "--duration",
            "1s",
            "--interval",
            "500ms",
            "--json",
        ])
        .arg("--token-file")
        .arg(token)
        .args(trust.split_whitespace())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.code() == Some(0) {
        let samples = String::from_utf8_lossy(&out.stdout).lines().count();
        assert!(samples >= 2, "{samples} samples: {err}");
    } else {
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    (out.status.code().unwrap_or(-1), err)
}

/// A self-signed agent serves the client that pins its fingerprint, in
/// `watch` and in a run; without a trust, with a wrong fingerprint, with
/// a fingerprint that is none, with a wrong token: one line each, exit 2.
/// A CA-signed agent serves through `--agent-cacert` and refuses trust in
/// another CA.
#[test]
fn an_agent_in_tls_answers_the_client_that_trusts_it_and_no_other() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d\n").unwrap();
    let wrong_token = dir.path().join("wrong");
    std::fs::write(&wrong_token, "guess-w0rk-0123456789\n").unwrap();
    let agent = Agent::start_with(dir.path(), &token, &["--tls-self-signed"], "127.0.0.1");
    let pin = agent.fingerprint.clone().unwrap();
    assert_eq!(pin.len(), 95, "{pin}");
    let at = format!("127.0.0.1:{}", agent.port);
    assert_eq!(
        watch_with(
            dir.path(),
            &at,
            &token,
            &format!("--agent-fingerprint {pin}")
        )
        .0,
        0
    );
    let other = crate::support::another_pin(&pin);
    for (trust, says) in [
        (String::new(), "speaks TLS; give --agent-fingerprint"),
        (
            format!("--agent-fingerprint {other}"),
            "is not the one --agent-fingerprint pins",
        ),
        (
            "--agent-fingerprint 12:34".to_string(),
            "--agent-fingerprint: '12:34' is not a SHA-256 fingerprint",
        ),
    ] {
        let (code, err) = watch_with(dir.path(), &at, &token, &trust);
        assert_eq!(code, 2, "{trust}: {err}");
        contains(&err, says);
    }
    let (code, err) = watch_with(
        dir.path(),
        &at,
        &wrong_token,
        &format!("--agent-fingerprint {pin}"),
    );
    assert_eq!(code, 2, "{err}");
    contains(&err, "refused the token");
    // A run reads the agent through the same flags.
    perflab_expect(
        dir.path(),
        &format!(
            "run null --users 1 --warmup 0s --duration 1s --probe agent://{at} --token-file {} --agent-fingerprint {pin}",
            token.display()
        ),
        0,
    );
    let log = agent.stop();
    assert!(
        !log.contains("t0ken-5ecret") && !log.contains("guess-w0rk"),
        "{log}"
    );

    let certs = tempdir();
    let (ca, cert, key) = crate::web::certificates(certs.path());
    let agent = Agent::start_with(
        dir.path(),
        &token,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        "127.0.0.1",
    );
    let at = format!("127.0.0.1:{}", agent.port);
    let (code, err) = watch_with(
        dir.path(),
        &at,
        &token,
        &format!("--agent-cacert {}", ca.display()),
    );
    assert_eq!(code, 0, "{err}");
    let elsewhere = tempdir();
    let (other_ca, _, _) = crate::web::certificates(elsewhere.path());
    let (code, err) = watch_with(
        dir.path(),
        &at,
        &token,
        &format!("--agent-cacert {}", other_ca.display()),
    );
    assert_eq!(code, 2, "{err}");
    contains(&err, "not trusted");
    agent.stop();
}

/// An agent started with a CA's own certificate, asked through
/// `--agent-cacert` of that CA: one line saying the agent shows a CA's
/// certificate (rustls' `CaUsedAsEndEntity` in words), with a fix that
/// works, exit 2.
#[test]
fn an_agent_showing_a_ca_certificate_as_its_own_is_named_in_words() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d\n").unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let (ca, ca_key) = (dir.path().join("ca.pem"), dir.path().join("ca-key.pem"));
    std::fs::write(&ca, cert.pem()).unwrap();
    std::fs::write(&ca_key, key.serialize_pem()).unwrap();
    let agent = Agent::start_with(
        dir.path(),
        &token,
        &[
            "--tls-cert",
            ca.to_str().unwrap(),
            "--tls-key",
            ca_key.to_str().unwrap(),
        ],
        "127.0.0.1",
    );
    let at = format!("127.0.0.1:{}", agent.port);
    let (code, err) = watch_with(
        dir.path(),
        &at,
        &token,
        &format!("--agent-cacert {}", ca.display()),
    );
    assert_eq!(code, 2, "{err}");
    contains(&err, "shows a CA's certificate as its own");
    contains(&err, "--tls-self-signed");
    assert!(!err.contains("CaUsedAsEndEntity"), "{err}");
    agent.stop();
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
    let _waits = crate::support::waits();
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

/// Beyond loopback, a client speaks TLS whatever its flags: an agent in a
/// network namespace answers the pinned client, and a plain-HTTP server
/// there is refused in one line (a token is never sent to it in clear).
#[test]
fn beyond_loopback_an_agent_is_asked_in_tls_only() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-5ecret-4b1d\n").unwrap();
    let island = crate::support::Island::create();
    let agent = Agent::start_in(
        dir.path(),
        &token,
        &["--tls-self-signed"],
        &island.ip,
        &island.exec(),
    );
    let at = format!("{}:{}", island.ip, agent.port);
    let pin = agent.fingerprint.clone().unwrap();
    let (code, err) = watch_with(
        dir.path(),
        &at,
        &token,
        &format!("--agent-fingerprint {pin}"),
    );
    assert_eq!(code, 0, "{err}");
    // Without a trust, the system's roots: a self-signed certificate fails.
    let (code, err) = watch_with(dir.path(), &at, &token, "");
    assert_eq!(code, 2, "{err}");
    contains(&err, "not trusted");
    agent.stop();

    // A plain-HTTP server in the namespace, where an old agent would be:
    // a thread that moved into it answers each connection with a 200.
    let port = free_port();
    let (ns, ip) = (island.name.clone(), island.ip.clone());
    let (ready, listening) = std::sync::mpsc::channel();
    let plain = std::thread::spawn(move || {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
        // SAFETY: setns on this thread alone, with a namespace file it holds open.
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0
        );
        let listener = std::net::TcpListener::bind((ip.as_str(), port)).unwrap();
        ready.send(()).unwrap();
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = s.read(&mut [0u8; 4096]);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        }
    });
    listening.recv_timeout(Duration::from_secs(30)).unwrap();
    let (code, err) = watch_with(dir.path(), &format!("{}:{port}", island.ip), &token, "");
    plain.join().unwrap();
    assert_eq!(code, 2, "{err}");
    contains(&err, "does not speak TLS");
}

/// A signal ends the agent and `watch` as it ends a run: 130 for Ctrl-C,
/// 143 for SIGTERM, whichever command it is.
#[test]
fn the_agent_and_watch_exit_130_on_ctrl_c_and_143_on_sigterm() {
    use std::io::BufRead;
    let dir = tempdir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t0ken-5ecret-4b1d\n").unwrap();
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let agent = Agent::start(dir.path(), &token_file);
        let (exit, log) = agent.stop_with(signal);
        assert_eq!(exit, Some(code), "agent, signal {signal}: {log}");

        let mut watch = crate::support::perflab_process(dir.path())
            .args(["watch", "--interval", "100ms", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Signalled once it is sampling.
        let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
        assert!(
            lines.next().is_some_and(|l| l.is_ok()),
            "watch printed no sample"
        );
        // SAFETY: signalling the watch this test started, by its PID.
        unsafe { libc::kill(watch.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = watch.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "watch did not end on signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "watch, signal {signal}");
    }
}
