//! The first Ctrl-C, SIGTERM or SIGHUP ends every phase of a command
//! within moments, with its exit code and one line: preparing and loading
//! the bank on a server that logs in and then says nothing (a fake peer on
//! loopback written here), a long SQLite load, `check bank`, the live
//! view's linger. SIGHUP (a closed terminal) is treated as SIGTERM.

use crate::support::{contains, perflab_expect, perflab_process, tempdir};
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A bound on a hang, far above the ~2 s a signal may take: never a speed.
const ENDS_WITHIN: Duration = Duration::from_secs(10);

/// A database server on loopback that accepts every connection, answers
/// its login with `login`, and then never says another word (reading and
/// dropping whatever it is sent). Returns its port.
fn silent_server(login: fn(&mut TcpStream) -> std::io::Result<()>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                if login(&mut stream).is_ok() {
                    let mut sink = [0u8; 4096];
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                }
            });
        }
    });
    port
}

/// PostgreSQL's login: the startup message (after a refused SSL request),
/// then authentication ok and ready for queries.
fn postgres_login(stream: &mut TcpStream) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len)?;
        let mut body = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
        stream.read_exact(&mut body)?;
        // The SSL request's code: refuse it, the startup message follows.
        if body.get(..4) == Some(&80_877_103u32.to_be_bytes()[..]) {
            stream.write_all(b"N")?;
            continue;
        }
        break;
    }
    stream.write_all(b"R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I")
}

/// A MySQL packet: length, sequence number, payload.
fn my_packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(payload);
    p
}

/// MariaDB's login: its greeting (mysql_native_password), the client's
/// reply read, then OK.
fn mysql_login(stream: &mut TcpStream) -> std::io::Result<()> {
    let caps: u32 = 1 | 8 | 0x200 | 0x2000 | 0x8000 | 0x8_0000 | 0x100_0000;
    let mut g = vec![10];
    g.extend_from_slice(b"10.11.19-MariaDB\0");
    g.extend_from_slice(&9u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(45);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ij0123456789\0mysql_native_password\0");
    stream.write_all(&my_packet(0, &g))?;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut reply = vec![0u8; len];
    stream.read_exact(&mut reply)?;
    stream.write_all(&my_packet(2, &[0, 0, 0, 2, 0, 0, 0]))
}

/// A perflab this test started, killed (by its PID) and reaped when
/// dropped unless it has ended: a failing test leaves no process behind.
struct Started(std::process::Child);

impl std::ops::Deref for Started {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Started {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// perflab started in `dir` with `args`, its output piped.
fn spawn(dir: &std::path::Path, args: &str) -> Started {
    Started(
        perflab_process(dir)
            .args(args.split_whitespace())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("perflab starts"),
    )
}

/// Reads `child`'s standard output (on a thread) until a line holding
/// `line` appears, then waits `settle` so that the phase has begun.
fn wait_for_stdout(child: &mut std::process::Child, line: &'static str, settle: Duration) {
    let out = child.stdout.take().expect("piped");
    let (seen, saw) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut found = false;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if !found && l.contains(line) {
                found = true;
                let _ = seen.send(());
            }
        }
    });
    saw.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("perflab never printed '{line}'"));
    std::thread::sleep(settle);
}

/// Reads `child`'s standard error (on a thread) until a line holding
/// `line` appears, then waits `settle`: that line, and the thread, which
/// goes on reading and hands back all it read once the child has ended.
fn wait_for_stderr(
    child: &mut std::process::Child,
    line: &'static str,
    settle: Duration,
) -> (String, std::thread::JoinHandle<String>) {
    let err = child.stderr.take().expect("piped");
    let (seen, saw) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if l.contains(line) {
                let _ = seen.send(l.clone());
            }
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let said = saw
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("perflab never said '{line}'"));
    std::thread::sleep(settle);
    (said, reader)
}

/// The `HOST:PORT` of the first `http://` URL in `line`.
fn address_in(line: &str) -> String {
    line.split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// Neither a panic nor a backtrace in `err`.
fn no_panic(err: &str, what: &str) {
    for word in ["panicked", "backtrace", "RUST_BACKTRACE"] {
        assert!(!err.contains(word), "{what}: {err}");
    }
}

/// Sends `signal` to the child this test started and waits, within
/// [`ENDS_WITHIN`], for it to end: its exit code and standard error.
fn signal_and_wait(child: &mut std::process::Child, signal: libc::c_int) -> (Option<i32>, String) {
    signal_and_wait_within(child, signal, ENDS_WITHIN)
}

/// As [`signal_and_wait`], within `bound`.
fn signal_and_wait_within(
    child: &mut std::process::Child,
    signal: libc::c_int,
    bound: Duration,
) -> (Option<i32>, String) {
    // SAFETY: a signal to the child this test started, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if sent.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("perflab did not end within {bound:?} of signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut err);
    }
    (status.code(), err)
}

/// The codes each stop signal exits with: SIGHUP as SIGTERM.
const SIGNALS: [(libc::c_int, i32, &str); 3] = [
    (libc::SIGINT, 130, "Ctrl-C"),
    (libc::SIGTERM, 143, "SIGTERM"),
    (libc::SIGHUP, 143, "SIGHUP"),
];

/// A PostgreSQL or MariaDB server that logs in and then goes silent holds
/// the bank's preparation; each stop signal ends it at once with its code
/// and one line, nothing measured.
#[test]
fn a_signal_ends_the_preparation_on_a_silent_server() {
    let servers = [
        (
            "postgres://perflab@127.0.0.1:{port}/bank",
            silent_server(postgres_login),
        ),
        (
            "mysql://perflab:pw@127.0.0.1:{port}/bank",
            silent_server(mysql_login),
        ),
    ];
    for (url, port) in servers {
        let url = url.replace("{port}", &port.to_string());
        for (signal, code, name) in SIGNALS {
            let dir = tempdir();
            let mut child = spawn(
                dir.path(),
                &format!("run bank --target {url} --users 1 --warmup 0s --duration 1s"),
            );
            wait_for_stdout(&mut child, "preparing the bank", Duration::from_millis(300));
            let (exit, err) = signal_and_wait(&mut child, signal);
            assert_eq!(exit, Some(code), "{url} {name}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            contains(
                &err,
                &format!("interrupted while preparing the bank ({name})"),
            );
        }
    }
}

/// `check bank` on a server gone silent ends at the first signal too.
#[test]
fn a_signal_ends_check_bank_on_a_silent_server() {
    let port = silent_server(postgres_login);
    for (signal, code, name) in SIGNALS {
        let dir = tempdir();
        let mut child = spawn(
            dir.path(),
            &format!("check bank --target postgres://perflab@127.0.0.1:{port}/bank"),
        );
        std::thread::sleep(Duration::from_millis(800));
        let (exit, err) = signal_and_wait(&mut child, signal);
        assert_eq!(exit, Some(code), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        contains(&err, &format!("({name}); nothing was checked"));
    }
}

/// With no signal, a server that logs in and then goes silent is given up
/// at a look's deadline (10 s) on its catalog, not the load's 30 minutes:
/// one line naming it, exit 2.
#[test]
fn a_silent_server_is_given_up_at_the_look_deadline() {
    let _waits = crate::support::waits();
    let port = silent_server(postgres_login);
    let dir = tempdir();
    let started = Instant::now();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run bank --target postgres://perflab@127.0.0.1:{port}/bank --users 1 --duration 1s"
        ),
        2,
    );
    assert!(started.elapsed() < Duration::from_secs(120), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "did not answer a look at its catalog within 10 s");
}

/// A SQLite bank large enough to take many seconds to load stops loading
/// at Ctrl-C; SIGTERM then Ctrl-C (which ends the process at once) exits
/// as the first signal would (143), not as the second.
#[test]
fn a_signal_ends_a_long_sqlite_load_and_the_first_signal_decides() {
    for (signals, code, name) in [
        (vec![libc::SIGINT], 130, "Ctrl-C"),
        (vec![libc::SIGTERM, libc::SIGINT], 143, "SIGTERM"),
    ] {
        let dir = tempdir();
        let mut child = spawn(
            dir.path(),
            "run bank --target sqlite:bank.db --scale 200 --users 1 --warmup 0s --duration 1s",
        );
        wait_for_stdout(&mut child, "preparing the bank", Duration::from_millis(500));
        for &signal in &signals[..signals.len() - 1] {
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            std::thread::sleep(Duration::from_millis(100));
        }
        let (exit, err) = signal_and_wait(&mut child, signals[signals.len() - 1]);
        assert_eq!(exit, Some(code), "{name}: {err}");
        // A second signal ends the process at once, saying nothing more.
        if signals.len() == 1 {
            assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
            contains(
                &err,
                &format!("interrupted while loading the bank ({name})"),
            );
        }
    }
}

/// A signal while the live view serves the final page ends the linger
/// with the signal's code (the run is stored complete all the same).
#[test]
fn a_signal_during_the_linger_exits_with_its_code() {
    for (signal, code, name) in SIGNALS {
        let dir = tempdir();
        let mut child = spawn(
            dir.path(),
            "run null --users 1 --warmup 0s --duration 1s --serve 127.0.0.1:0 --serve-linger 5m",
        );
        wait_for_stdout(&mut child, "stored as run", Duration::from_millis(500));
        let (exit, err) = signal_and_wait(&mut child, signal);
        assert_eq!(exit, Some(code), "{name}: {err}");
        contains(&err, &format!("interrupted ({name}) after the sweep"));
        let (shown, _) = perflab_expect(dir.path(), "show last", 0);
        contains(&shown, "complete");
    }
}

/// SIGHUP (the terminal closed) in a sweep: the run keeps its finished
/// steps, is marked partial, and exits as SIGTERM does.
#[test]
fn sighup_ends_a_run_as_sigterm_does() {
    let dir = tempdir();
    let mut child = spawn(
        dir.path(),
        "run null --users 1,2,3,4,5,6 --warmup 0s --duration 1s --service 1ms",
    );
    wait_for_stdout(&mut child, "run 1:", Duration::from_millis(1500));
    let (exit, _) = signal_and_wait(&mut child, libc::SIGHUP);
    assert_eq!(exit, Some(143));
    let (shown, _) = perflab_expect(dir.path(), "show last", 0);
    contains(&shown, "partial");
    contains(&shown, "interrupted (SIGHUP)");
}

/// SIGHUP to a lab (its terminal closed) while a cell runs on a managed
/// PostgreSQL: the cell's run ends partial (never left `running`), the
/// server's directory is removed, and the lab exits as after SIGTERM.
#[test]
fn sighup_ends_a_lab_and_its_running_cell_leaving_nothing() {
    let _heavy = crate::support::heavy();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    // The managed server's directory is made here, to be looked at after.
    let servers = tempdir();
    std::fs::set_permissions(servers.path(), std::fs::Permissions::from_mode(0o755))
        .expect("the servers' directory is opened to the server's user");
    std::fs::write(
        dir.path().join("lab.toml"),
        "workload = \"bank\"\ntarget = \"postgres:managed\"\nargs = \"--users 1,2,3 --warmup 0s --duration 2s\"\n[vary]\n\"pg.synchronous_commit\" = [\"on\", \"off\"]\n",
    )
    .expect("the lab file is written");
    let mut child = perflab_process(dir.path())
        .args(["lab", "lab.toml"])
        .env("TMPDIR", servers.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("perflab starts");
    let store = dir.path().join("perflab.db");
    let deadline = Instant::now() + Duration::from_secs(90);
    while crate::support::stored_steps(&store) < 1 {
        assert!(Instant::now() < deadline, "the first cell stored no step");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A managed server's stop takes its own moments: a wider bound.
    let (exit, err) = signal_and_wait_within(&mut child, libc::SIGHUP, Duration::from_secs(30));
    assert_eq!(exit, Some(143), "{err}");
    let (report, _) = perflab_expect(dir.path(), "lab report last --json", 0);
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["status"], "partial");
    let (runs, _) = perflab_expect(dir.path(), "runs", 0);
    contains(&runs, "partial");
    assert!(!runs.contains("running"), "{runs}");
    let left: Vec<_> = std::fs::read_dir(servers.path())
        .expect("readable")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `perflab watch` between samples (a long interval) and while sampling
/// often: each stop signal ends it at once with its code, no panic.
#[test]
fn a_signal_ends_a_watch() {
    for interval in ["1h", "100ms"] {
        for (signal, code, name) in SIGNALS {
            let dir = tempdir();
            let mut child = spawn(dir.path(), &format!("watch --interval {interval}"));
            // Registered before the source opens; the first sample comes
            // after an interval, so a moment is all a watch of 1h shows.
            if interval == "1h" {
                std::thread::sleep(Duration::from_millis(800));
            } else {
                wait_for_stdout(&mut child, " cpu U ", Duration::from_millis(300));
            }
            let (exit, err) = signal_and_wait(&mut child, signal);
            assert_eq!(exit, Some(code), "--interval {interval} {name}: {err}");
            no_panic(&err, name);
        }
    }
}

/// A token file in `dir`, for an agent.
fn token_file(dir: &std::path::Path) -> std::path::PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, "s1gnal-t0ken-0123456789\n").expect("the token file is written");
    token
}

/// `perflab agent` in each of its roles (samples; echo; generator), with
/// a client holding a connection open that says nothing: each stop
/// signal ends it at once with its code, no panic.
#[test]
fn a_signal_ends_an_agent_in_every_role() {
    let _waits = crate::support::waits();
    for role in ["", "--echo", "--generate", "--echo --generate"] {
        for (signal, code, name) in SIGNALS {
            let dir = tempdir();
            let token = token_file(dir.path());
            let mut child = spawn(
                dir.path(),
                &format!(
                    "agent --listen 127.0.0.1:0 --interval 200ms --token-file {} {role}",
                    token.display()
                ),
            );
            let out = child.stdout.take().expect("piped");
            let mut out = std::io::BufReader::new(out);
            let mut listening = String::new();
            out.read_line(&mut listening)
                .expect("the agent's first line");
            let at = address_in(&listening);
            // The rest of its output is drained, so it never blocks on it.
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            let _idle = TcpStream::connect(&at).expect("the agent takes a connection");
            std::thread::sleep(Duration::from_millis(500));
            let (exit, err) = signal_and_wait(&mut child, signal);
            assert_eq!(exit, Some(code), "agent {role} {name}: {err}");
            no_panic(&err, name);
        }
    }
}

/// `perflab serve` of a stored run, with a client holding a connection
/// open that says nothing: each stop signal ends it at once with its
/// code, no panic.
#[test]
fn a_signal_ends_perflab_serve() {
    let dir = tempdir();
    perflab_expect(
        dir.path(),
        "run null --users 1 --warmup 0s --duration 1s",
        0,
    );
    for (signal, code, name) in SIGNALS {
        let mut child = spawn(dir.path(), "serve --addr 127.0.0.1:0");
        let (serving, said) = wait_for_stderr(&mut child, "http://", Duration::ZERO);
        let _idle = TcpStream::connect(address_in(&serving)).expect("serve takes a connection");
        std::thread::sleep(Duration::from_millis(500));
        let (exit, _) = signal_and_wait(&mut child, signal);
        let err = said.join().expect("standard error is read");
        assert_eq!(exit, Some(code), "{name}: {err}");
        no_panic(&err, name);
    }
}

/// A generator (`perflab agent --generate`) on loopback with `token`:
/// the process and its `agent://HOST:PORT`.
fn generator(dir: &std::path::Path, token: &std::path::Path) -> (Started, String) {
    let mut child = spawn(
        dir,
        &format!(
            "agent --listen 127.0.0.1:0 --interval 200ms --token-file {} --generate",
            token.display()
        ),
    );
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut listening = String::new();
    out.read_line(&mut listening)
        .expect("the generator's first line");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let at = format!("agent://{}", address_in(&listening));
    (child, at)
}

/// A run of the null workload on the generator at `at`, one long step,
/// once its share has stored an interval.
fn run_on_generator(dir: &std::path::Path, at: &str, token: &std::path::Path) -> Started {
    let mut run = spawn(
        dir,
        &format!(
            "run null --service 1ms --users 2 --warmup 0s --duration 5m --generators {at} --token-file {}",
            token.display()
        ),
    );
    let out = run.stdout.take().expect("piped");
    std::thread::spawn(move || std::io::copy(&mut { out }, &mut std::io::sink()));
    let store = dir.join("perflab.db");
    let deadline = Instant::now() + Duration::from_secs(60);
    let intervals = || {
        rusqlite::Connection::open(&store)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM intervals", [], |r| r.get(0)))
            .unwrap_or(0i64)
    };
    while intervals() < 1 {
        assert!(Instant::now() < deadline, "the share stored no interval");
        std::thread::sleep(Duration::from_millis(50));
    }
    run
}

/// `run … --generators` mid-step: each stop signal to the coordinator
/// ends it at once with its code (its generator then taking the signal
/// as an idle agent does); each stop signal to the generator serving
/// its share ends the generator at once with its code. No panic.
#[test]
fn a_signal_ends_a_run_on_generators_and_a_generator_mid_share() {
    let _waits = crate::support::waits();
    for (signal, code, name) in SIGNALS {
        let dir = tempdir();
        let token = token_file(dir.path());
        let (mut generator_process, at) = generator(dir.path(), &token);
        let mut run = run_on_generator(dir.path(), &at, &token);
        let (exit, err) = signal_and_wait(&mut run, signal);
        assert_eq!(exit, Some(code), "the coordinator, {name}: {err}");
        no_panic(&err, name);
        let (shown, _) = perflab_expect(dir.path(), "show last", 0);
        contains(&shown, &format!("interrupted ({name})"));
        // The step cut short: its one generator's rate is the step's, over
        // the window that ran, not the five minutes planned.
        let (json, _) = perflab_expect(dir.path(), "show last --json -", 0);
        let export: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        let step = &export["steps"][0];
        let merged = step["summary"]["throughput"].as_f64().expect("a rate");
        let served = step["generators"][0]["throughput"]
            .as_f64()
            .expect("the generator's rate");
        assert!(
            merged > 0.0 && (served - merged).abs() <= merged * 0.01,
            "{name}: the generator served {served}/s of a step of {merged}/s"
        );
        let (exit, err) = signal_and_wait(&mut generator_process, signal);
        assert_eq!(
            exit,
            Some(code),
            "the generator after the run, {name}: {err}"
        );
        no_panic(&err, name);

        let dir = tempdir();
        let token = token_file(dir.path());
        let (mut generator_process, at) = generator(dir.path(), &token);
        let _run = run_on_generator(dir.path(), &at, &token);
        let (exit, err) = signal_and_wait(&mut generator_process, signal);
        assert_eq!(exit, Some(code), "the generator mid-share, {name}: {err}");
        no_panic(&err, name);
    }
}
