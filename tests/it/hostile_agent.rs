//! A fake perflab agent on loopback that answers with hostile counters: a
//! disk and an interface whose names carry a newline and a terminal's
//! escape, counters that go backwards or leap to 2^64 − 1, a clock that
//! leaps to 1e308, and samples whose figures are 1e308 or below zero.
//! `perflab run … --probe agent://` and `perflab watch --probe agent://`
//! show and store none of it: no control character, no figure below zero
//! or beyond belief, exit 0.

use crate::support::{last_export, perflab_expect, repo_file, tempdir};
use perflab::probe::counters::{
    CpuSample, DiskSample, HostRoot, HostSample, HostSnapshot, NicSample,
};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A name that would forge a line and colour a terminal.
const HOSTILE: &str = "vda\nFORGED 0%\u{1b}[31m\u{7}\u{202e}";

/// The largest figure believed (2^53), as `untrusted::MAX_FIGURE`.
const MAX_FIGURE: f64 = 9_007_199_254_740_992.0;

/// A fake agent serving `/v1/snapshot` from `snapshots` in turn (the last
/// again and again), `/v1/samples` from `samples`, `/v1/inventory` empty.
struct FakeAgent {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeAgent {
    fn start(snapshots: Vec<Value>, samples: Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let port = listener.local_addr().expect("its address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let asked = AtomicUsize::new(0);
        let thread = std::thread::spawn(move || {
            // Bounded: the fake serves at most 2 minutes.
            let end = Instant::now() + Duration::from_secs(120);
            while !stopping.load(Ordering::Relaxed) && Instant::now() < end {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &snapshots, &samples, &asked),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeAgent {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request and its answer, by path.
fn answer(mut stream: TcpStream, snapshots: &[Value], samples: &Value, asked: &AtomicUsize) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let body = if path.starts_with("/v1/snapshot") {
        let i = asked.fetch_add(1, Ordering::Relaxed);
        snapshots[i.min(snapshots.len() - 1)].to_string()
    } else if path.starts_with("/v1/samples") {
        samples.to_string()
    } else {
        "{}".to_string()
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A fixture VM's snapshot at `at` (t0, t1) as an agent sends it.
fn fixture_snapshot(at: &str) -> Value {
    let dir = repo_file("tests/fixtures/host-vm").join(at);
    let root = HostRoot::Dirs {
        proc: dir.join("proc"),
        sys: dir.join("sys"),
    };
    serde_json::to_value(HostSnapshot::read(&root, &[])).expect("a snapshot is JSON")
}

/// `snapshot` with its first disk and interface named [`HOSTILE`].
fn hostile_names(mut snapshot: Value) -> Value {
    snapshot["disks"][0]["name"] = json!(HOSTILE);
    let nics = snapshot["nics"].as_object_mut().expect("interfaces");
    let first = nics.keys().next().expect("an interface").clone();
    let mut nic = nics.remove(&first).expect("its counters");
    nic["dev"]["name"] = json!(HOSTILE);
    nics.insert(HOSTILE.to_string(), nic);
    snapshot
}

/// The four snapshots the fake serves: the fixture's t0; t1 with its
/// counters gone backwards and leapt; then t1 with a clock at 1e308.
fn hostile_snapshots() -> Vec<Value> {
    let t0 = hostile_names(fixture_snapshot("t0"));
    let mut t1 = hostile_names(fixture_snapshot("t1"));
    t1["disks"][0]["reads"] = json!(0);
    t1["disks"][0]["sectors_written"] = json!(u64::MAX);
    t1["disks"][0]["time_in_progress"] = json!(u64::MAX);
    t1["disks"][0]["weighted_time_in_progress"] = json!(u64::MAX);
    t1["disks"][0]["time_writing"] = json!(u64::MAX);
    let nic = &mut t1["nics"][HOSTILE]["dev"];
    nic["recv_bytes"] = json!(0);
    nic["sent_bytes"] = json!(u64::MAX);
    nic["recv_errs"] = json!(u64::MAX);
    t1["nics"][HOSTILE]["speed_mbps"] = json!(0);
    t1["vmstat"]["pgfault"] = json!(-5);
    t1["interrupts"] = json!(u64::MAX);
    let at = |seconds: f64, snapshot: &Value| json!({"seconds": seconds, "snapshot": snapshot});
    let mut snapshots = vec![at(1.0, &t0)];
    for i in 0..40 {
        let snapshot = if i % 2 == 0 { &t1 } else { &t0 };
        snapshots.push(at(1.0 + f64::from(i) * 0.5 + 0.5, snapshot));
    }
    snapshots.push(at(1e308, &t1));
    snapshots.push(at(-1e308, &t0));
    snapshots
}

/// The samples the fake's `/v1/samples` serves: figures of 1e308 and
/// below zero, names and a time with control characters.
fn hostile_samples() -> Value {
    let sample = HostSample {
        seconds: 1.0,
        cpu: Some(CpuSample::default()),
        cpus: vec![CpuSample::default()],
        disks: vec![DiskSample::default()],
        nics: vec![NicSample::default()],
        ..HostSample::default()
    };
    let mut sample = serde_json::to_value(sample).expect("a sample is JSON");
    sample["cpu"]["user"] = json!(1e308);
    sample["cpu"]["idle"] = json!(-3.0);
    sample["cpus"][0]["system"] = json!(1e300);
    sample["context_switches_per_s"] = json!(-1e308);
    sample["interrupts_per_s"] = json!(1e308);
    sample["disks"][0]["name"] = json!(HOSTILE);
    sample["disks"][0]["busy"] = json!(1e308);
    sample["disks"][0]["write_bytes_per_s"] = json!(-7.5);
    sample["nics"][0]["name"] = json!(HOSTILE);
    sample["nics"][0]["rx_bytes_per_s"] = json!(1e308);
    sample["nics"][0]["rx_errors"] = json!(u64::MAX);
    let long = "x".repeat(100_000);
    json!({"samples": [
        {"seq": 1, "at": "2024-01-01T00:00:00Z\n\u{1b}[2J", "sample": sample.clone()},
        {"seq": 2, "at": long, "sample": sample},
    ]})
}

/// Every number in `value` is at least 0 and at most 2^53, and every
/// string and key is free of control characters and at most 256 long.
fn believable(value: &Value, at: &str) {
    let clean = |s: &str| !s.chars().any(char::is_control) && !s.contains('\u{202e}');
    match value {
        Value::Number(n) => {
            let v = n.as_f64().expect("a number");
            assert!((0.0..=MAX_FIGURE).contains(&v), "{at}: {v}");
        }
        Value::String(s) => assert!(clean(s) && s.chars().count() <= 256, "{at}: {s:?}"),
        Value::Array(items) => items.iter().for_each(|i| believable(i, at)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            assert!(clean(k), "{at}: key {k:?}");
            believable(v, &format!("{at}.{k}"));
        }),
        Value::Null | Value::Bool(_) => {}
    }
}

/// `out` holds no control character but line ends, and no line the
/// agent's names forged.
fn shown_cleanly(out: &str) {
    for c in out.chars() {
        assert!(c == '\n' || !c.is_control(), "{c:?} in:\n{out}");
    }
    assert!(!out.contains('\u{202e}'), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("FORGED")), "{out}");
}

/// `text` shows no figure below zero, infinite or not a number.
fn no_absurd_figure(text: &str) {
    for word in [
        "inf", "NaN", "e+", " -0", " -1", " -2", " -3", " -4", " -5", " -6", " -7", " -8", " -9",
    ] {
        assert!(!text.contains(word), "{word} in:\n{text}");
    }
}

#[test]
fn a_run_probing_a_hostile_agent_shows_and_stores_no_forged_name_or_absurd_figure() {
    let agent = FakeAgent::start(hostile_snapshots(), json!({"samples": []}));
    let dir = tempdir();
    let args = format!(
        "run null --users 1 --warmup 0s --duration 3s --interval 500ms --probe agent://127.0.0.1:{}",
        agent.port
    );
    let (out, err) = perflab_expect(dir.path(), &args, 0);
    shown_cleanly(&out);
    shown_cleanly(&err);
    // The agent's own table, from its title to the blank line after it.
    let title = format!("agent://127.0.0.1:{} during each step:", agent.port);
    let table: String = out
        .lines()
        .skip_while(|l| *l != title)
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(table.lines().count() >= 3, "the agent's table:\n{out}");
    no_absurd_figure(&table);
    let export = last_export(dir.path());
    let mut probes = 0;
    for step in export["steps"].as_array().expect("steps") {
        for interval in step["intervals"].as_array().expect("intervals") {
            for probe in interval["probes"].as_array().into_iter().flatten() {
                believable(&probe["sample"], "probe sample");
                probes += 1;
            }
        }
    }
    assert!(probes >= 4, "{probes} probe samples stored");
    let stored = export.to_string();
    assert!(
        stored.contains("vdaFORGED 0%[31m"),
        "the disk's cleaned name is stored"
    );
}

#[test]
fn watching_a_hostile_agent_shows_no_forged_line_or_absurd_figure() {
    let agent = FakeAgent::start(hostile_snapshots(), hostile_samples());
    let dir = tempdir();
    let port = agent.port;
    let watch = format!("watch --probe agent://127.0.0.1:{port} --interval 200ms --duration 1s");
    let (text, err) = perflab_expect(dir.path(), &watch, 0);
    shown_cleanly(&text);
    no_absurd_figure(&text);
    shown_cleanly(&err);
    assert!(text.lines().count() >= 2, "{text}");
    let (json, _) = perflab_expect(dir.path(), &format!("{watch} --json"), 0);
    let mut shown = 0;
    for line in json.lines() {
        let sample: Value = serde_json::from_str(line).expect("one JSON object a line");
        believable(&sample, "watched sample");
        let cpu = &sample["sample"]["cpu"];
        for share in ["user", "idle", "system"] {
            let v = cpu[share].as_f64().unwrap_or(0.0);
            assert!((0.0..=1.0).contains(&v), "cpu {share} {v}");
        }
        shown += 1;
    }
    assert!(shown >= 2, "{json}");
}
