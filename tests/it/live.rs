//! `--serve`: a run on the null target served live on loopback — its page,
//! its server-sent events (every interval, every step's end, the verdict
//! at the end, the state so far for a late client), its Prometheus
//! metrics scraped by a real Prometheus, the page followed by headless
//! Chromium — and what it refuses: beyond loopback without a token, and
//! garbage, oversized or unknown requests (answered 4xx while the run
//! goes on unaffected).

use crate::support::{perflab_expect, perflab_process, tempdir};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `perflab run … --serve 127.0.0.1:0` process, killed (by its PID) if
/// the test ends before it does.
pub(crate) struct Served {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    stdout: mpsc::Receiver<String>,
}

impl Served {
    pub(crate) fn start(dir: &std::path::Path, args: &str) -> Served {
        let mut child = perflab_process(dir)
            .args(args.split_whitespace())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("perflab starts");
        let (url_tx, url_rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("live view on http://") {
                    let rest = &line[at + "live view on http://".len()..];
                    let addr = rest.split('/').next().unwrap_or_default().to_string();
                    let _ = url_tx.send(addr);
                }
                eprintln!("perflab: {line}");
            }
        });
        let (out_tx, out_rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut all = String::new();
            let _ = BufReader::new(stdout).read_to_string(&mut all);
            let _ = out_tx.send(all);
        });
        let addr = url_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the run prints the live view's URL on stderr");
        Served {
            child,
            addr,
            stdout: out_rx,
        }
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the run to end (bounded): its exit code and stdout.
    pub(crate) fn wait(mut self, bound: Duration) -> (i32, String) {
        let until = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let out = self
                    .stdout
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap_or_default();
                return (status.code().unwrap_or(-1), out);
            }
            assert!(Instant::now() < until, "the run did not end in {bound:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends `request` whole and reads the answer to its end: status, head
/// and body.
fn exchange(addr: &str, request: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(request);
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// A GET that asks the peer to close after its answer: a keep-alive peer
/// (Prometheus) otherwise holds the read open until its timeout.
pub(crate) fn get(addr: &str, path: &str) -> (u16, String, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// One server-sent event: its name and its data as JSON.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) name: String,
    pub(crate) data: serde_json::Value,
}

/// Follows `/events` until the `end` event (or the stream ends, or the
/// bound passes).
pub(crate) fn follow(addr: &str, bound: Duration) -> Vec<Event> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(bound)).unwrap();
    s.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: text/event-stream"), "{head}");
    let until = Instant::now() + bound;
    let mut events = Vec::new();
    let (mut name, mut data) = (String::new(), String::new());
    while Instant::now() < until {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            data = d.to_string();
        } else if line.is_empty() && !data.is_empty() {
            let event = Event {
                name: std::mem::take(&mut name),
                data: serde_json::from_str(&std::mem::take(&mut data)).unwrap(),
            };
            let end = event.name == "end";
            events.push(event);
            if end {
                break;
            }
        }
    }
    events
}

/// HTML text back to what it escaped.
pub(crate) fn unescape(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The run served live: a client that follows from the start gets every
/// interval and every step's end as they happen, then the verdict the
/// terminal prints; the page and the metrics answer meanwhile; garbage,
/// oversized, unknown and non-GET requests get 4xx and the run goes on
/// to its end; a client that comes late gets the final state at once.
#[test]
fn a_served_run_streams_its_intervals_steps_and_verdict() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let served = Served::start(
        dir.path(),
        "run null --service 1ms --users 1,2,3 --warmup 1s --duration 2s --serve 127.0.0.1:0 --serve-linger 4s",
    );
    let addr = served.addr.clone();
    let follower = {
        let addr = addr.clone();
        std::thread::spawn(move || follow(&addr, Duration::from_secs(120)))
    };
    let (status, head, page) = get(&addr, "/");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("Content-Type: text/html"), "{head}");
    assert!(page.contains("<div id=\"live\">"), "{page}");
    assert!(page.contains("new EventSource('/events'"));
    let (status, _, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# TYPE perflab_operations_total counter"),
        "{metrics}"
    );
    // Bad requests: answered, refused, the run unaffected.
    let (status, _, _) = exchange(&addr, b"\x16\x03\x01\x00\xa5garbage\r\n\r\n");
    assert_eq!(status, 400);
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let (status, _, _) = exchange(&addr, &big);
    assert_eq!(status, 431);
    let (status, _, _) = exchange(
        &addr,
        b"POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n",
    );
    assert_eq!(status, 413);
    let (status, _, _) = exchange(&addr, b"DELETE / HTTP/1.1\r\n\r\n");
    assert_eq!(status, 405);
    let (status, _, _) = get(&addr, "/nothing-here");
    assert_eq!(status, 404);

    let events = follower.join().unwrap();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    // Live events (not a replay): an interval of every second, every step.
    let live = |name: &str| {
        events
            .iter()
            .filter(|e| e.name == name && e.data["live"] == true)
            .count()
    };
    assert!(live("interval") >= 6, "{names:?}");
    assert_eq!(live("step"), 3, "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    // Steps follow one another as the sweep goes.
    let steps: Vec<String> = events
        .iter()
        .filter_map(|e| e.data["title"].as_str())
        .filter_map(|t| t.split(" · ").nth(1).map(str::to_string))
        .collect();
    for step in ["step 1 of 3", "step 2 of 3", "step 3 of 3"] {
        assert!(steps.iter().any(|s| s == step), "{step} in {steps:?}");
    }
    let end = events.last().unwrap();
    let html = end.data["html"].as_str().unwrap();
    assert!(end.data["title"].as_str().unwrap().contains("done"));
    let verdict = html
        .split("<pre id=\"verdict\">")
        .nth(1)
        .and_then(|v| v.split("</pre>").next())
        .map(unescape)
        .expect("the end shows the verdict");
    assert!(!verdict.trim().is_empty());
    assert_eq!(
        html.matches("<tr class=\"step\">").count(),
        3,
        "every step's row"
    );
    // A late client: the final state at once, as the end.
    let late = follow(&addr, Duration::from_secs(30));
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].name, "end");
    assert_eq!(late[0].data["live"], false);

    let (code, stdout) = served.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{stdout}");
    // The same verdict as the terminal's.
    assert!(stdout.contains(verdict.trim()), "{verdict}\n---\n{stdout}");
}

/// Beyond loopback without a token, or a token without TLS, or an
/// address that is none: one line, exit 2, nothing run.
#[test]
fn serving_beyond_loopback_needs_a_token_and_tls() {
    let dir = tempdir();
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123\n").unwrap();
    for (args, says) in [
        ("--serve 0.0.0.0:0", "--serve-token-file"),
        (
            &format!("--serve 0.0.0.0:0 --serve-token-file {}", token.display()) as &str,
            "--serve-tls-self-signed",
        ),
        ("--serve localhost-ish", "is not an address"),
    ] {
        let (out, err) = perflab_expect(
            dir.path(),
            &format!("run null --users 1 --warmup 0s --duration 1s {args}"),
            2,
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args}: {err}");
        assert!(
            !err.contains("0123456789abcdef0123"),
            "the token is never shown"
        );
        assert!(!out.contains("step 1"), "nothing ran: {out}");
    }
    assert!(!dir.path().join("perflab.db").exists());
}

/// Headless Chromium on the live page during the run: it loads, takes
/// each update as it comes (its hidden log lists the live ones) and at
/// the end shows the verdict; were the updates to stop, the page would
/// keep its first state and the test fail.
#[test]
fn the_live_page_updates_in_a_browser_until_the_verdict() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let served = Served::start(
        dir.path(),
        "run null --service 1ms --users 1,2 --warmup 0s --duration 3s --serve 127.0.0.1:0 --serve-linger 10s",
    );
    let (dom, stderr) = dump_dom_when_closed(&format!("http://{}/", served.addr));
    assert!(!stderr.contains(":CONSOLE"), "console output: {stderr}");
    assert!(
        dom.contains("<title>perflab live: run 1 · done · complete</title>"),
        "{dom}"
    );
    assert!(dom.contains("<pre id=\"verdict\">"), "{dom}");
    assert_eq!(dom.matches("<tr class=\"step\">").count(), 2, "{dom}");
    assert!(dom.matches("<svg class=\"chart\"").count() >= 4, "{dom}");
    // The updates it took as they came: intervals of both steps, both
    // steps' ends, the end.
    let log = event_log(&dom);
    let live = |kind: &str| taken_live(&log, kind);
    assert!(live("interval ") >= 4, "{log:?}");
    assert_eq!(live("step "), 2, "{log:?}");
    assert_eq!(live("end "), 1, "{log:?}");
    let (code, _) = served.wait(Duration::from_secs(60));
    assert_eq!(code, 0);
}

/// The page's log of the events it received (one `<li>` each).
pub(crate) fn event_log(dom: &str) -> Vec<&str> {
    dom.split("<li>")
        .skip(1)
        .filter_map(|l| l.split("</li>").next())
        .collect()
}

/// How many events of `kind` the log shows taken live, as they came
/// (not from the state a late page is first given).
pub(crate) fn taken_live(log: &[&str], kind: &str) -> usize {
    log.iter()
        .filter(|l| l.starts_with(kind) && l.ends_with("live"))
        .count()
}

/// Headless Chromium on `url`: the DOM (and Chromium's standard error)
/// once the page has closed its event stream, or once 120 s of virtual
/// time have passed. Virtual time waits for an open event stream, so the
/// page is followed to its end.
pub(crate) fn dump_dom_when_closed(url: &str) -> (String, String) {
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            "--virtual-time-budget=120000",
        ])
        .arg(url)
        .output()
        .expect("chromium is installed (scripts/test.sh installs it)");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Prometheus server started by a test on loopback, its storage in a
/// temporary directory; killed (by its PID) when dropped.
struct Prometheus {
    child: Child,
    /// `127.0.0.1:PORT` of its HTTP API.
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` (`HOST:PORT`) every second.
    fn start(target: &str) -> Prometheus {
        let dir = tempdir();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: perflab\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is installed (scripts/test.sh installs Debian's package)");
        let prometheus = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(&prometheus.addr).is_ok()
                && get(&prometheus.addr, "/-/ready").0 == 200
            {
                break prometheus;
            }
            assert!(Instant::now() < until, "prometheus did not get ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The value of an instant PromQL query that gives one number.
    fn query(&self, promql: &str) -> Option<f64> {
        let encoded: String = promql
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let (status, _, body) = get(&self.addr, &format!("/api/v1/query?query={encoded}"));
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse().ok())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus scrapes the run's /metrics each second; once the run
/// ended (its last scrape taken while the final page lingers), PromQL
/// gives the run's operations within 1% of what perflab stored.
#[test]
fn prometheus_scrapes_the_runs_operations() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let served = Served::start(
        dir.path(),
        "run null --service 1ms --users 1,2 --warmup 1s --duration 3s --serve 127.0.0.1:0 --serve-linger 6s",
    );
    let prometheus = Prometheus::start(&served.addr);
    let (code, out) = served.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}");
    // Served operations by every kind, as last scraped (a range function
    // skips the staleness marker the ended target left).
    let scraped = prometheus
        .query(r#"sum(last_over_time(perflab_operations_total{job="perflab",outcome=~"ok|refused"}[10m]))"#)
        .expect("prometheus scraped perflab's operations");
    let conn = rusqlite::Connection::open(dir.path().join("perflab.db")).unwrap();
    let stored: i64 = conn
        .query_row(
            "SELECT sum(o.ok + o.refused) FROM interval_ops o JOIN steps s ON s.id = o.step_id WHERE s.run_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(stored > 1000, "{stored}");
    let off = (scraped - stored as f64).abs() / stored as f64;
    assert!(off <= 0.01, "scraped {scraped}, stored {stored}");
    // perflab's own CPU and the histograms reached it too.
    assert!(prometheus
        .query(r#"max(last_over_time(perflab_process_cpu_seconds_total[10m]))"#)
        .is_some_and(|cpu| cpu > 0.0));
    assert!(prometheus
        .query(r#"sum(last_over_time(perflab_response_time_seconds_count[10m]))"#)
        .is_some_and(|n| (n - stored as f64).abs() / (stored as f64) <= 0.01));
}

/// `perflab serve` of the store in `dir` on a port of its choosing: the
/// process (ended when dropped) and the address it printed.
fn serve_stored(dir: &std::path::Path) -> (KillOnDrop, String) {
    let mut child = perflab_process(dir)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let guard = KillOnDrop(child);
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (guard, addr)
}

/// `perflab serve`: the stored runs listed, each run's page the report,
/// an unknown run a 404; stopped by SIGTERM (by its PID).
#[test]
fn perflab_serve_browses_the_stored_runs() {
    let dir = tempdir();
    crate::support::perflab_ok(dir.path(), "run null --users 1,2 --warmup 0s --duration 1s");
    let (guard, addr) = serve_stored(dir.path());
    let (status, _, list) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(list.contains("<a href=\"/run/1\">1</a>"), "{list}");
    let (status, _, report) = get(&addr, "/run/1");
    assert_eq!(status, 200);
    assert!(report.contains("<title>perflab report: run 1</title>"));
    assert!(report.matches("<svg class=\"chart\"").count() >= 4);
    assert_eq!(get(&addr, "/run/2").0, 404);
    assert_eq!(get(&addr, "/run/../etc").0, 404);
    drop(guard);
}

/// `perflab serve --addr` on an address already taken: one line naming
/// `--addr` (the flag given, not the run's `--serve`), exit 2.
#[test]
fn perflab_serve_on_a_taken_address_names_its_own_flag() {
    let dir = tempdir();
    crate::support::perflab_ok(dir.path(), "run null --users 1 --warmup 0s --duration 1s");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let (_, err) = crate::support::perflab_expect(dir.path(), &format!("serve --addr {addr}"), 2);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("error: --addr: cannot listen on {addr}")),
        "{err}"
    );
}

/// A stored run with a field of the wrong type (a step's level made
/// text, in a store a real `perflab run null` wrote): `show` and
/// `analyze` say in one line, exit 2, which run, step and field is
/// damaged — no SQLite column index — and `perflab serve` answers that
/// run's page with 500 and the same words.
#[test]
fn a_damaged_stored_field_is_named_by_run_step_and_field_and_served_as_500() {
    let dir = tempdir();
    crate::support::perflab_ok(dir.path(), "run null --users 1,2 --warmup 0s --duration 1s");
    rusqlite::Connection::open(dir.path().join("perflab.db"))
        .unwrap()
        .execute_batch("UPDATE steps SET level = 'abc' WHERE run_id = 1 AND idx = 1")
        .unwrap();
    let says = "run 1's step 2 has a damaged field `level`: it holds text where perflab writes a number; the store was written by something else or is damaged";
    for command in ["show 1", "analyze 1"] {
        let (_, err) = crate::support::perflab_expect(dir.path(), command, 2);
        assert_eq!(err.trim_end().lines().count(), 1, "{command}: {err}");
        assert!(err.contains(says), "{command}: {err}");
        assert!(!err.contains("index"), "{command}: {err}");
    }
    let (guard, addr) = serve_stored(dir.path());
    let (status, _, page) = get(&addr, "/run/1");
    assert_eq!(status, 500, "{page}");
    assert!(page.contains("has a damaged field `level`"), "{page}");
    assert!(!page.contains("index"), "{page}");
    drop(guard);
}

/// A child process, killed (by its PID) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
