//! Every network client against a peer that misbehaves, on loopback: one
//! that accepts and never answers, one that closes in the middle of its
//! first message, one that sends garbage, one that trickles a byte a
//! second. Each perflab command ends by itself — after its stated deadline
//! at the latest (a database handshake: 10 s; an agent or node_exporter
//! request: 5 s) — with one line naming the peer and exit 2. A watchdog
//! ends a perflab that would hang, and fails the test.

use crate::support::{perflab_process, tempdir};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a fake peer misbehaves.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Accepts, reads, and says nothing.
    Silent,
    /// Sends the start of a plausible first message, then closes.
    CloseMidMessage,
    /// Sends bytes no protocol expects, then waits.
    Garbage,
    /// Sends a plausible message one byte a second.
    Trickle,
}

const FAULTS: [Fault; 4] = [
    Fault::Silent,
    Fault::CloseMidMessage,
    Fault::Garbage,
    Fault::Trickle,
];

/// A peer on a loopback port that serves `fault` to every connection
/// until dropped; `opening` is the start of a plausible first message.
struct Peer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    fn start(fault: Fault, opening: &'static [u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let port = listener.local_addr().expect("its address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            // Bounded: the peer serves at most 2 minutes.
            let end = Instant::now() + Duration::from_secs(120);
            while !stopping.load(Ordering::Relaxed) && Instant::now() < end {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let stop = stopping.clone();
                        held.push(std::thread::spawn(move || {
                            serve(stream, fault, opening, &stop)
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            stopping.store(true, Ordering::Relaxed);
            for h in held {
                let _ = h.join();
            }
        });
        Peer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection's misbehaviour, until `stop`.
fn serve(mut stream: TcpStream, fault: Fault, opening: &[u8], stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 4096];
    let wait = |stream: &mut TcpStream, buf: &mut [u8]| {
        while !stop.load(Ordering::Relaxed) {
            match stream.read(buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            }
        }
    };
    match fault {
        Fault::Silent => wait(&mut stream, &mut buf),
        Fault::CloseMidMessage => {
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(&opening[..opening.len() / 2]);
        }
        Fault::Garbage => {
            let _ = stream.write_all(&[0xff, 0x00, 0x13, 0x37, 0xde, 0xad, 0xbe, 0xef].repeat(64));
            wait(&mut stream, &mut buf);
        }
        Fault::Trickle => {
            for &byte in opening.iter().cycle() {
                if stop.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// Runs perflab with `args` in a fresh directory, ending it after 90 s
/// if it has not ended by itself (then the test fails); its exit code
/// and standard error.
fn perflab_against(args: &str) -> (Option<i32>, String) {
    let dir = tempdir();
    let mut child = perflab_process(dir.path())
        .args(args.split_whitespace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("perflab starts");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("its status") {
            let mut err = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            return (status.code(), err);
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("perflab {args} did not end by itself within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every fault against the client that `command` (with `PORT` in it)
/// starts: one line naming the peer's port, exit 2. The faults are served
/// at once, each on a port of its own: most of the time is a deadline
/// waited out, not work.
fn each_fault_ends_in_one_line(command: &str, opening: &'static [u8]) {
    let ended: Vec<(Fault, String, Option<i32>, String)> = std::thread::scope(|scope| {
        let runs: Vec<_> = FAULTS
            .iter()
            .map(|&fault| {
                scope.spawn(move || {
                    let peer = Peer::start(fault, opening);
                    let port = peer.port.to_string();
                    let (code, err) = perflab_against(&command.replace("PORT", &port));
                    drop(peer);
                    (fault, port, code, err)
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a fault's run ends"))
            .collect()
    });
    for (fault, port, code, err) in ended {
        assert_eq!(code, Some(2), "{fault:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{fault:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(&port),
            "{fault:?}: {err}"
        );
    }
}

#[test]
fn postgres_peers_that_misbehave_end_in_one_line() {
    let _waits = crate::support::waits();
    // The start of an AuthenticationOk message.
    each_fault_ends_in_one_line(
        "run bank --target postgres://perflab@127.0.0.1:PORT/perflab --users 1 --warmup 0s --duration 1s",
        b"R\x00\x00\x00\x08\x00\x00\x00\x00",
    );
}

#[test]
fn mysql_peers_that_misbehave_end_in_one_line() {
    let _waits = crate::support::waits();
    // The start of a protocol 10 greeting.
    each_fault_ends_in_one_line(
        "run bank --target mysql://perflab:pw@127.0.0.1:PORT/perflab --users 1 --warmup 0s --duration 1s",
        b"\x4a\x00\x00\x00\x0a10.11.0-MariaDB\x00",
    );
}

#[test]
fn agent_peers_that_misbehave_end_in_one_line() {
    let _waits = crate::support::waits();
    each_fault_ends_in_one_line(
        "watch --probe agent://127.0.0.1:PORT --duration 1s",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"samples\":",
    );
}

#[test]
fn node_exporter_peers_that_misbehave_end_in_one_line() {
    let _waits = crate::support::waits();
    each_fault_ends_in_one_line(
        "watch --probe node-exporter://127.0.0.1:PORT --duration 1s",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nnode_time_seconds 1\n",
    );
}
