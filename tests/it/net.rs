//! `perflab run net` against a real `perflab agent --echo` the test
//! starts (with a token file, stopped by its PID): rr, crr, stream and
//! maerts end to end on loopback, their table in `show`, `--json` and
//! Markdown; rr and stream across a veth pair into a network namespace the
//! test makes (the agent there in TLS, reached by its pinned fingerprint),
//! and a stream through a tbf on that pair, which the verdict names as
//! held by the link;
//! fake echoes that never answer, answer garbage or close mid-reply end
//! the run in one line with a non-zero exit within a deadline; one that
//! takes the hello and then holds every operation (stops reading a
//! stream, never sends a maerts message or an rr reply) makes a stalled
//! step, its held operation counted, in bounded time; the agent refuses a
//! garbage hello, a wrong ticket and oversized sizes (each logged without
//! the ticket) and goes on serving; it cuts a peer trickling a message
//! and one that stops reading at one whole-message deadline, serving a
//! peer that behaves meanwhile.

use crate::agent::Agent;
use crate::support::{
    contains, last_export, perflab, perflab_expect, perflab_ok, schema_problems, tempdir, Island,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A token file in `dir`.
fn token(dir: &Path) -> PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, "net-test-token-0123456789abcdef\n").unwrap();
    path
}

/// Every hostile run ends within this (the probe's 5 s deadline, or a
/// one-second step, and start-up).
const HOSTILE_DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn rr_crr_stream_and_maerts_run_end_to_end_on_loopback() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let tok = token(dir.path());
    let agent = Agent::start_with(dir.path(), &tok, &["--echo"], "127.0.0.1");
    let target = format!("agent://127.0.0.1:{}", agent.port);
    for (test, sizes) in [
        ("rr", "--request-size 1 --response-size 1"),
        ("crr", "--request-size 64 --response-size 1KiB"),
        ("stream", "--message-size 64KiB"),
        ("maerts", "--message-size 64KiB"),
    ] {
        let out = perflab_ok(
            dir.path(),
            &format!(
                "run net --target {target} --token-file {} --test {test} {sizes} --users 2 --warmup 0s --duration 2s",
                tok.display()
            ),
        );
        contains(&out, "the network path");
        let export = last_export(dir.path());
        assert_eq!(schema_problems(&export), Vec::<String>::new());
        let step = &export["steps"][0];
        assert_eq!(step["status"], "ok", "{test}: {step}");
        let net = &step["net"];
        assert!(
            net["transactions_per_s"].as_f64().unwrap() > 0.0,
            "{test}: {net}"
        );
        assert!(net["bits_per_s"].as_f64().unwrap() > 0.0, "{test}: {net}");
        let unit = if test == "stream" || test == "maerts" {
            "gigabyte"
        } else {
            "transaction"
        };
        assert_eq!(net["unit"], unit, "{test}: {net}");
        // A bulk test's operations are messages, a request/response
        // test's transactions: the run's throughput says which.
        let rate_unit = if unit == "gigabyte" { "msg/s" } else { "tps" };
        assert_eq!(export["run"]["rate_unit"], rate_unit, "{test}");
        contains(&out, &format!("{rate_unit} at"));
        contains(&perflab_ok(dir.path(), "runs"), &format!(" {rate_unit}  "));
        // Both ends' processes and hosts were measured.
        for side in ["perflab", "host", "agent", "agent_host"] {
            assert!(
                net["cpu"][side].as_f64().is_some_and(|c| c > 0.0),
                "{test}: no {side} CPU in {net}"
            );
        }
        assert!(net["retransmits"].is_u64(), "{test}: {net}");
        assert!(net["agent_retransmits"].is_u64(), "{test}: {net}");
        assert_eq!(step["summary"]["errors"], 0, "{test}: {step}");
    }
    perflab_ok(dir.path(), "report last --md net.md --html net.html");
    let md = std::fs::read_to_string(dir.path().join("net.md")).unwrap();
    contains(&md, "### The network path");
    contains(&md, "agent ms/GB");
    let html = std::fs::read_to_string(dir.path().join("net.html")).unwrap();
    contains(&html, "the network path</h3>");
    contains(&html, "agent ms/GB");
    // Two runs compared say which costs less CPU per unit of work.
    let compared = perflab_ok(dir.path(), "compare 3 4");
    contains(&compared, "CPU-ms per gigabyte (perflab + agent)");
    contains(&compared, "vs run 3:");
    agent.stop();
}

/// An echo agent in TLS inside `island`, and its certificate's fingerprint.
fn tls_echo_in(dir: &Path, token: &Path, island: &Island) -> (Agent, String) {
    let agent = Agent::start_in(
        dir,
        token,
        &["--echo", "--tls-self-signed"],
        &island.ip,
        &island.exec(),
    );
    let fingerprint = agent
        .fingerprint
        .clone()
        .expect("a TLS agent's fingerprint");
    (agent, fingerprint)
}

#[test]
fn rr_and_stream_cross_a_veth_pair_into_a_namespace() {
    let dir = tempdir();
    let tok = token(dir.path());
    let island = Island::create();
    let (agent, fingerprint) = tls_echo_in(dir.path(), &tok, &island);
    for test in ["rr", "stream"] {
        perflab_ok(
            dir.path(),
            &format!(
                "run net --target agent://{}:{} --token-file {} --agent-fingerprint {fingerprint} --test {test} --users 1 --warmup 0s --duration 1s",
                island.ip,
                agent.port,
                tok.display()
            ),
        );
        let export = last_export(dir.path());
        let net = &export["steps"][0]["net"];
        assert!(
            net["transactions_per_s"].as_f64().unwrap() > 0.0,
            "{test}: {net}"
        );
        assert!(net["cpu"]["agent"].as_f64().is_some(), "{test}: {net}");
    }
    agent.stop();
}

/// A fake agent: its HTTP port answers every request with the echo's
/// port and a ticket; its echo port does what `echo` does with each
/// connection after the first (the run's probe, answered properly when
/// `probe_ok`).
struct Fake {
    http: u16,
}

impl Fake {
    fn start(probe_ok: bool, echo: fn(TcpStream)) -> Fake {
        let echo_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let echo_port = echo_listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for (n, stream) in echo_listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                if n == 0 && probe_ok {
                    let mut hello = [0u8; 64];
                    let _ = stream.read(&mut hello);
                    let _ = stream.write_all(&[0]);
                    continue;
                }
                std::thread::spawn(move || echo(stream));
            }
        });
        let http = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = http.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in http.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                let body = format!(r#"{{"port":{echo_port},"ticket":"fake"}}"#);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Fake { http: port }
    }

    /// `perflab run net` against it: exit code, stdout and stderr, and
    /// how long it took.
    fn run(&self, dir: &Path, more: &str) -> (Option<i32>, String, String, Duration) {
        let started = Instant::now();
        let out = perflab(dir)
            .args(
                format!(
                    "run net --target agent://127.0.0.1:{} --users 1 --warmup 0s --duration 1s --timeout 1s {more}",
                    self.http
                )
                .split_whitespace(),
            )
            .timeout(HOSTILE_DEADLINE)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            started.elapsed(),
        )
    }
}

#[test]
fn an_echo_that_never_answers_ends_the_run_in_one_line() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let fake = Fake::start(false, |stream| {
        // Holds the connection, reads, says nothing.
        let mut stream = stream;
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    });
    let (code, _, err, took) = fake.run(dir.path(), "--test rr");
    assert_eq!(code, Some(1), "{err}");
    assert!(took < HOSTILE_DEADLINE, "took {took:?}");
    contains(&err, "did not answer a request within 5s");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn an_echo_that_answers_garbage_ends_the_run_in_one_line() {
    let dir = tempdir();
    let fake = Fake::start(false, |mut stream| {
        let mut hello = [0u8; 64];
        let _ = stream.read(&mut hello);
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    let (code, _, err, _) = fake.run(dir.path(), "--test crr");
    assert_eq!(code, Some(1), "{err}");
    contains(&err, "answered with what is not an echo's reply");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn an_echo_that_closes_mid_reply_fails_the_step_not_perflab() {
    let dir = tempdir();
    // The probe is answered; every transaction after gets half its reply.
    let fake = Fake::start(true, |mut stream| {
        let mut request = [0u8; 256];
        let _ = stream.read(&mut request);
        let _ = stream.write_all(&[0u8; 32]);
    });
    let (code, out, err, took) = fake.run(dir.path(), "--test crr --response-size 64");
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(took < HOSTILE_DEADLINE, "took {took:?}");
    contains(&format!("{out}{err}"), "reset");
    assert!(!err.contains("panicked"), "{err}");
}

/// How long a peer of the stream test below holds its connection unread:
/// far beyond the run's window, its drain and its margin.
const HOLD_UNREAD: Duration = Duration::from_secs(40);

#[test]
fn a_stream_into_an_echo_that_stops_reading_is_a_stalled_step_in_bounded_time() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let tok = token(dir.path());
    // The same peer stalls the others: a maerts message never comes, an
    // rr reply never does.
    for test in ["stream", "maerts", "rr"] {
        // The probe is answered; every connection after has its hello
        // read, then nothing more, the socket held open: a stream's
        // writes fill both ends' buffers and the next one never ends.
        let fake = Fake::start(true, |mut stream| {
            let mut hello = [0u8; 14 + 4];
            let _ = stream.read_exact(&mut hello);
            std::thread::sleep(HOLD_UNREAD);
            drop(stream);
        });
        held_step_is_stalled(dir.path(), &tok, fake.http, test);
    }
}

/// One step of `test` against a peer that holds every operation: said
/// stalled, its held operation counted, within the window, the drain's
/// timeout and a margin.
fn held_step_is_stalled(dir: &Path, tok: &Path, http: u16, test: &str) {
    let (window, timeout) = (Duration::from_secs(3), Duration::from_secs(5));
    // Start-up (the probe, the host's first sample) and the report.
    let margin = Duration::from_secs(15);
    let started = Instant::now();
    let out = perflab(dir)
        .args(
            format!(
                "run net --target agent://127.0.0.1:{http} --token-file {} --test {test} --message-size 128KiB --users 1 --warmup 0s --duration 3s --timeout 5s",
                tok.display()
            )
            .split_whitespace(),
        )
        .timeout(HOSTILE_DEADLINE)
        .output()
        .unwrap();
    let took = started.elapsed();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        took < window + timeout + margin,
        "{test}: took {took:?}\n{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The step is not a healthy one: the message held in flight at the
    // window's end counts in it, said on its line.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("step 1/1: 1 user:"))
        .unwrap_or_else(|| panic!("{test}: no step line\n{stdout}\n{stderr}"));
    assert!(
        line.contains("1 operation in flight for the last"),
        "{test}: {line}\n{stdout}\n{stderr}"
    );
    let export = last_export(dir);
    let step = &export["steps"][0];
    assert_ne!(step["status"], "ok", "{test}: {step}");
}

/// The JSON a loopback agent answers to `GET path`, with the token if
/// given (null when it is not JSON).
fn agent_json(agent_port: u16, path: &str, token: Option<&str>) -> serde_json::Value {
    let mut stream = TcpStream::connect(("127.0.0.1", agent_port)).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_default()
}

/// The echo's port and ticket, asked of the agent with the token.
fn echo_of(agent_port: u16, token: Option<&str>) -> (u16, String) {
    let json = agent_json(agent_port, "/v1/echo", token);
    (
        json["port"].as_u64().unwrap_or(0) as u16,
        json["ticket"].as_str().unwrap_or_default().to_string(),
    )
}

/// Sends `bytes` to the echo and reads what it answers until it closes
/// (within the agent's hello deadline and a margin).
fn answer_to(port: u16, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A hello: magic, mode, request and response sizes, the ticket.
fn hello(mode: u8, request: u32, response: u32, ticket: &str) -> Vec<u8> {
    let mut out = b"PLE1".to_vec();
    out.push(mode);
    out.extend_from_slice(&request.to_be_bytes());
    out.extend_from_slice(&response.to_be_bytes());
    out.push(ticket.len() as u8);
    out.extend_from_slice(ticket.as_bytes());
    out
}

#[test]
fn the_echo_refuses_bad_peers_and_goes_on_serving() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let tok = token(dir.path());
    let token_text = std::fs::read_to_string(&tok).unwrap().trim().to_string();
    let agent = Agent::start_with(dir.path(), &tok, &["--echo"], "127.0.0.1");
    // Without the token, no ticket.
    assert_eq!(echo_of(agent.port, None).0, 0);
    let (port, ticket) = echo_of(agent.port, Some(&token_text));
    assert!(port > 0 && ticket.len() == 32, "{port} {ticket}");
    let garbage = answer_to(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    contains(&garbage, "ERR not a perflab echo hello");
    let wrong = answer_to(port, &hello(0, 1, 1, "not-the-ticket"));
    contains(&wrong, "ERR a wrong ticket");
    let oversized = answer_to(port, &hello(0, 1, (16 << 20) + 1, &ticket));
    contains(
        &oversized,
        "ERR a response size of 16777217 bytes; give 1 to 16777216",
    );
    let mode = answer_to(port, &hello(9, 1, 1, &ticket));
    contains(&mode, "ERR mode 9 is none");
    // A peer that says nothing is cut off at the hello's deadline.
    let started = Instant::now();
    assert_eq!(answer_to(port, b""), "");
    assert!(started.elapsed() < Duration::from_secs(15));
    // A good hello and a request are answered.
    let mut good = hello(0, 3, 5, &ticket);
    good.extend_from_slice(b"abc");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&good).unwrap();
    let mut reply = [1u8; 5];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [0u8; 5]);
    drop(stream);
    // And a run still goes through.
    perflab_ok(
        dir.path(),
        &format!(
            "run net --target agent://127.0.0.1:{} --token-file {} --users 1 --warmup 0s --duration 1s",
            agent.port,
            tok.display()
        ),
    );
    let log = agent.stop();
    contains(&log, "echo refused 127.0.0.1:");
    contains(&log, "a wrong ticket");
    assert!(!log.contains(&ticket), "the ticket reached the log:\n{log}");
    assert!(
        !log.contains(&token_text),
        "the token reached the log:\n{log}"
    );
}

/// The echo's deadline for a whole message (each 128 KiB of a longer
/// one) in the test below, set by `--echo-deadline` (the default, 60 s,
/// is the same code with another figure; the flag's bounds are checked
/// on their own).
const ECHO_MESSAGE_DEADLINE: Duration = Duration::from_secs(8);
/// How late past that deadline a cut may be seen: a loaded machine's
/// scheduling and a trickle's period.
const CUT_MARGIN: Duration = Duration::from_secs(5);
/// A slow peer's pace: far under the deadline, so that a deadline per
/// read would never cut it.
const TRICKLE: Duration = Duration::from_millis(100);

/// A connection to the echo at `port` that has sent `hello`, and when.
fn opened(port: u16, hello: &[u8]) -> (TcpStream, Instant) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(hello).unwrap();
    (stream, Instant::now())
}

/// Sends a zero byte every [`TRICKLE`] until a write fails: how long
/// after `since` that was; none when the echo still took bytes at the
/// deadline and its margin.
fn trickled_until_cut(mut stream: TcpStream, since: Instant) -> Option<Duration> {
    while since.elapsed() < ECHO_MESSAGE_DEADLINE + CUT_MARGIN {
        if stream.write_all(&[0]).is_err() {
            return Some(since.elapsed());
        }
        std::thread::sleep(TRICKLE);
    }
    None
}

/// One transaction of a peer that behaves, on a connection of its own,
/// within `within`: whether its reply came whole.
fn served_within(port: u16, ticket: &str, within: Duration) -> bool {
    let mut bytes = hello(0, 1, 1, ticket);
    bytes.push(7);
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(within));
    let mut reply = [9u8; 1];
    stream.write_all(&bytes).is_ok() && stream.read_exact(&mut reply).is_ok() && reply == [0]
}

#[test]
fn the_echo_cuts_slow_and_stuck_peers_at_one_message_deadline_and_serves_others() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let tok = token(dir.path());
    let token_text = std::fs::read_to_string(&tok).unwrap().trim().to_string();
    let agent = Agent::start_with(
        dir.path(),
        &tok,
        &["--echo", "--echo-deadline", "8s"],
        "127.0.0.1",
    );
    let (port, ticket) = echo_of(agent.port, Some(&token_text));
    // Slow lorises after a good hello: a request of 4 KiB (rr) and a
    // stream message of 64 KiB, a byte every 100 ms: whole only after
    // minutes, progress all along.
    let slow: Vec<_> = [hello(0, 4096, 1, &ticket), hello(1, 64 << 10, 1, &ticket)]
        .into_iter()
        .map(|bytes| {
            let (stream, since) = opened(port, &bytes);
            std::thread::spawn(move || trickled_until_cut(stream, since))
        })
        .collect();
    // A maerts peer that reads its first message and then stops reading.
    let (mut stuck, _) = opened(port, &hello(2, 1, 64 << 10, &ticket));
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut message = vec![0u8; 64 << 10];
    stuck.read_exact(&mut message).unwrap();
    let stopped = Instant::now();
    // Meanwhile, a peer that behaves is served, again and again.
    let mut served = 0;
    while slow.iter().any(|t| !t.is_finished()) {
        assert!(
            served_within(port, &ticket, Duration::from_secs(5)),
            "a behaving peer was not served after {served} transactions"
        );
        served += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    for (what, thread) in ["rr", "stream"].into_iter().zip(slow) {
        let cut = thread.join().unwrap();
        // Cut at the deadline (not before: it is one instant, not a time
        // per read), and not much after.
        assert!(
            cut.is_some_and(|at| at >= ECHO_MESSAGE_DEADLINE - TRICKLE * 2),
            "{what}: trickling peer cut after {cut:?}, the deadline is {ECHO_MESSAGE_DEADLINE:?}"
        );
    }
    assert!(served >= 5, "only {served} transactions served meanwhile");
    // The stuck reader: by its deadline and the margin, the echo has cut
    // it; what it had queued is read, then the close.
    let wait = (ECHO_MESSAGE_DEADLINE + CUT_MARGIN).saturating_sub(stopped.elapsed());
    std::thread::sleep(wait);
    let (mut queued, until) = (0u64, Instant::now() + Duration::from_secs(10));
    let closed = loop {
        match stuck.read(&mut message) {
            Ok(0) | Err(_) => break true,
            Ok(n) => queued += n as u64,
        }
        // A writer not cut would go on at loopback's pace.
        if queued > 64 << 20 || Instant::now() > until {
            break false;
        }
    };
    assert!(closed, "the maerts peer not cut: {queued} bytes more");
    let log = agent.stop();
    contains(&log, "reading a request: not whole within 8s");
    contains(&log, "reading a stream: not whole within 8s");
    contains(&log, "writing a stream: not whole within 8s");
}

/// The echo's deadline out of its bounds is refused in one line, exit 2.
#[test]
fn an_echo_deadline_out_of_its_bounds_is_refused() {
    let dir = tempdir();
    for deadline in ["500ms", "2h"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("agent --token-file t --echo --echo-deadline {deadline}"),
            2,
        );
        contains(&err, "--echo-deadline");
        contains(&err, "outside 1s to 1h");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn a_run_with_more_users_than_the_echo_serves_is_refused_naming_how_many() {
    let dir = tempdir();
    let tok = token(dir.path());
    let agent = Agent::start_with(dir.path(), &tok, &["--echo"], "127.0.0.1");
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run net --target agent://127.0.0.1:{} --token-file {} --users 100,300 --warmup 0s --duration 1s",
            agent.port,
            tok.display()
        ),
        2,
    );
    contains(
        &err,
        "would refuse 44 of 300 connections: it serves at most 256 at once; run at most 256 users, or more agents",
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    drop(agent);
}

/// The host's end of an island's veth pair: the interface holding its
/// address.
fn host_end(island: &Island) -> String {
    let out = std::process::Command::new("ip")
        .args([
            "-o",
            "-4",
            "addr",
            "show",
            "to",
            &format!("{}/32", island.host_ip),
        ])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .expect("the host's end of the pair")
        .to_string()
}

/// The host's end of an island's veth pair, shaped by a tbf of `rate`
/// and `burst` from the host into the namespace. The qdisc goes with the
/// pair when the island is dropped.
fn shaped_host_end(island: &Island, rate: &str, burst: &str) -> String {
    let dev = host_end(island);
    let status = std::process::Command::new("tc")
        .args([
            "qdisc", "add", "dev", &dev, "root", "tbf", "rate", rate, "burst", burst, "latency",
            "50ms",
        ])
        .status()
        .expect("tc runs");
    assert!(status.success(), "tc qdisc add: {status}");
    dev
}

#[test]
fn a_stream_through_a_shaped_veth_names_the_links_bandwidth() {
    let dir = tempdir();
    let tok = token(dir.path());
    let island = Island::create();
    // 100 Mbit/s from the host into the namespace: the stream's way.
    let dev = shaped_host_end(&island, "100mbit", "64kb");
    let (agent, fingerprint) = tls_echo_in(dir.path(), &tok, &island);
    perflab_ok(
        dir.path(),
        &format!(
            "run net --target agent://{}:{} --token-file {} --agent-fingerprint {fingerprint} --test stream --message-size 64KiB --users 1 --warmup 1s --duration 2s",
            island.ip,
            agent.port,
            tok.display()
        ),
    );
    let verdict = perflab_ok(dir.path(), "analyze last");
    contains(
        &verdict,
        &format!("the tbf on {dev} shapes to 100.0 Mbit/s"),
    );
    contains(&verdict, "the link's bandwidth is the limit");
    agent.stop();
}

/// The interfaces and the host's qdiscs a run's intervals sampled.
fn sampled_links(export: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let (mut nics, mut qdiscs) = (Vec::new(), Vec::new());
    for step in export["steps"].as_array().unwrap() {
        for interval in step["intervals"].as_array().unwrap() {
            let host = &interval["host"];
            let names = |list: &serde_json::Value, key: &str| -> Vec<String> {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n[key].as_str().map(str::to_string))
                    .collect()
            };
            nics.extend(names(&host["nics"], "name"));
            qdiscs.extend(names(&host["qdiscs"], "interface"));
        }
    }
    nics.sort();
    nics.dedup();
    qdiscs.sort();
    qdiscs.dedup();
    (nics, qdiscs)
}

/// A link the run's traffic cannot cross is not the run's: with a tbf
/// shaping another veth of the host (a namespace's, as another run's
/// shaped link is), a net run to an echo on loopback samples `lo` and
/// not that veth, neither its counters nor its qdisc, and a run that
/// sends nothing over a network (the null target) samples no link. The
/// run through that veth (the test above) still names it.
#[test]
fn a_shaped_link_the_run_does_not_cross_is_not_sampled_as_its_own() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let tok = token(dir.path());
    let island = Island::create();
    let dev = shaped_host_end(&island, "10mbit", "32kb");
    let agent = Agent::start_with(dir.path(), &tok, &["--echo"], "127.0.0.1");
    perflab_ok(
        dir.path(),
        &format!(
            "run net --target agent://127.0.0.1:{} --token-file {} --users 1 --warmup 0s --duration 1s",
            agent.port,
            tok.display()
        ),
    );
    let (nics, qdiscs) = sampled_links(&crate::support::last_export(dir.path()));
    assert_eq!(nics, ["lo"], "{dev} is another link");
    assert!(
        !qdiscs.contains(&dev),
        "{dev}'s tbf was sampled: {qdiscs:?}"
    );
    agent.stop();
    perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    let (nics, qdiscs) = sampled_links(&crate::support::last_export(dir.path()));
    assert!(nics.is_empty() && qdiscs.is_empty(), "{nics:?} {qdiscs:?}");
}

/// The labels of the process groups an agent's `/v1/snapshot` follows.
fn followed(agent_port: u16, token: &str) -> Vec<String> {
    let json = agent_json(agent_port, "/v1/snapshot", Some(token));
    json["snapshot"]["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes in the snapshot: {json}"))
        .iter()
        .filter_map(|p| p[0]["label"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn an_echo_agent_follows_itself_as_the_server_under_test() {
    let dir = tempdir();
    let tok = token(dir.path());
    let token_text = std::fs::read_to_string(&tok).unwrap().trim().to_string();
    // With the echo on, the agent is the far end a net run loads: a run
    // that probes it reads the echo's CPU, threads and cgroup as the
    // server's.
    let echo = Agent::start_with(dir.path(), &tok, &["--echo"], "127.0.0.1");
    assert_eq!(followed(echo.port, &token_text), ["agent", "server"]);
    echo.stop();
    // Without it, the agent only watches a host: it serves nothing.
    let plain = Agent::start(dir.path(), &tok);
    assert_eq!(followed(plain.port, &token_text), ["agent"]);
    plain.stop();
}
