//! `perflab run web --targets FILE` against a small HTTP/1.1 server the
//! test runs on 127.0.0.1: it counts every request it receives by method,
//! path, a tag header and body, so the test sees that each target went
//! out as written and in its share; the run's export must keep figures
//! per request name. Bad targets files end in one line naming file:line.

use crate::support::{last_export, perflab_expect, perflab_ok, refused, tempdir};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Requests received, by `METHOD path tag=X body=B`.
type Seen = Arc<Mutex<BTreeMap<String, u64>>>;

/// An HTTP/1.1 server on a free loopback port, serving `ok` to anything
/// but `/missing` (404); stopped and joined when dropped.
struct CountingServer {
    port: u16,
    seen: Seen,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl CountingServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&seen), Arc::clone(&stop));
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        CountingServer {
            port,
            seen,
            stop,
            accept: Some(accept),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn seen(&self) -> BTreeMap<String, u64> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for CountingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Serves one connection's requests until the client closes it (or is
/// silent for 30 s).
fn serve(mut conn: TcpStream, seen: &Seen) {
    conn.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let head_end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            assert!(buf.len() < 1 << 20, "a head over 1 MiB");
        };
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(&buf[..head_end]).unwrap().is_complete());
        let header = |name: &str| {
            req.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
        };
        let length: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
        let (method, path) = (
            req.method.unwrap().to_string(),
            req.path.unwrap().to_string(),
        );
        let key = format!(
            "{method} {path} tag={} type={} body={}",
            header("x-tag").unwrap_or_default(),
            header("content-type").unwrap_or_default(),
            header("content-length").unwrap_or_default(),
        );
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        while buf.len() < head_end + length {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
        buf.drain(..head_end + length);
        *seen
            .lock()
            .unwrap()
            .entry(format!("{key}:{body}"))
            .or_default() += 1;
        let status = if path == "/missing" {
            "404 Not Found"
        } else {
            "200 OK"
        };
        let reply = if method == "HEAD" {
            format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\n")
        } else {
            format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok")
        };
        if conn.write_all(reply.as_bytes()).is_err() || close {
            return;
        }
    }
}

const BODY: &str = "{\"name\":\"widget\",\"qty\":3}";

#[test]
fn each_target_goes_out_with_its_method_headers_and_body_in_its_share() {
    let server = CountingServer::start();
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("bodies")).unwrap();
    std::fs::write(dir.path().join("bodies/item.json"), BODY).unwrap();
    let targets = format!(
        "# every kind of request the file may hold\nGET /index.html\nX-Tag: a\n\n# name: create item\nPOST /api/items\nContent-Type: application/json\nX-Tag: b\n@bodies/item.json\n\nPUT http://127.0.0.1:{}/api/items/7?v=2\nX-Tag: c\n@bodies/item.json\n\nDELETE /api/items/7\nX-Tag: d\n\nHEAD /index.html\nX-Tag: e\n\nGET /missing\n",
        server.port
    );
    std::fs::write(dir.path().join("t.txt"), targets).unwrap();
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --target {} --targets t.txt --users 3 --max-error-rate 100% --warmup 1s --duration 2s",
            server.url()
        ),
    );
    let seen = server.seen();
    let len = BODY.len();
    let want = [
        "GET /index.html tag=a type= body=:".to_string(),
        format!("POST /api/items tag=b type=application/json body={len}:{BODY}"),
        format!("PUT /api/items/7?v=2 tag=c type= body={len}:{BODY}"),
        "DELETE /api/items/7 tag=d type= body=:".to_string(),
        "HEAD /index.html tag=e type= body=:".to_string(),
        "GET /missing tag= type= body=:".to_string(),
    ];
    let mut keys: Vec<&String> = seen.keys().collect();
    keys.sort();
    let mut want_sorted: Vec<&String> = want.iter().collect();
    want_sorted.sort();
    assert_eq!(keys, want_sorted, "{seen:?}");
    // Each user sends the targets in turn: per target, the counts differ
    // by at most one per user, and one for the pre-flight request.
    let counts: Vec<u64> = want.iter().map(|k| seen[k]).collect();
    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(*lo > 100 && hi - lo <= 4, "{seen:?}");
    // Figures per request name, the 404s as errors of their own request.
    let ops = crate::support::ops_of_step0(&last_export(dir.path()));
    let names: Vec<&str> = ops.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "DELETE /api/items/7",
            "GET /index.html",
            "GET /missing",
            "HEAD /index.html",
            "PUT /api/items/7",
            "create item"
        ],
        "{out}"
    );
    for (name, (ok, errors)) in &ops {
        if name == "GET /missing" {
            assert_eq!(*ok, 0);
            assert!(errors["http:404"] > 50, "{errors:?}");
        } else {
            assert!(*ok > 50 && errors.is_empty(), "{name}: {ok} {errors:?}");
        }
    }
    assert!(out.contains("create item"), "{out}");
}

#[test]
fn an_open_loop_sends_the_targets_in_order_with_a_connection_per_request() {
    let server = CountingServer::start();
    let dir = tempdir();
    std::fs::write(dir.path().join("body.txt"), "x=1").unwrap();
    std::fs::write(
        dir.path().join("t.txt"),
        "GET /a\nPATCH /b\n@body.txt\nOPTIONS /c\n",
    )
    .unwrap();
    perflab_ok(
        dir.path(),
        &format!(
            "run web --target {} --targets t.txt --rate 300 --connections 2 --connection close --warmup 1s --duration 2s",
            server.url()
        ),
    );
    let seen = server.seen();
    let count = |k: &str| seen.get(k).copied().unwrap_or(0);
    let (a, b, c) = (
        count("GET /a tag= type= body=:"),
        count("PATCH /b tag= type= body=3:x=1"),
        count("OPTIONS /c tag= type= body=:"),
    );
    assert_eq!(seen.len(), 3, "{seen:?}");
    let total = a + b + c;
    assert!((700..=1100).contains(&total), "{seen:?}");
    for n in [a, b, c] {
        assert!(n.abs_diff(total / 3) <= 3, "{seen:?}");
    }
    let ops = crate::support::ops_of_step0(&last_export(dir.path()));
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert!(
        ops.values().all(|(ok, e)| *ok > 100 && e.is_empty()),
        "{ops:?}"
    );
}

#[test]
fn bad_targets_files_are_refused_in_one_line_naming_file_and_line() {
    let dir = tempdir();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let cases = [
        (
            file("method.txt", "GET /a\n\nFETCH /b\n"),
            ":3: unknown method 'FETCH'",
        ),
        (
            file("host.txt", "GET /a\n\nGET http://127.0.0.2:9/x\n"),
            ":3: http://127.0.0.2:9 is not the run's target",
        ),
        (
            file(
                "body.txt",
                "POST /a\nContent-Type: text/plain\n@nothing.json\n",
            ),
            ":3: the body file",
        ),
        (
            file("header.txt", "GET /a\nX-Tag value\n"),
            ":2: the line starting 'X-Tag' is not a header line",
        ),
    ];
    for (path, says) in &cases {
        refused(
            &[
                "run",
                "web",
                "--target",
                "http://127.0.0.1:9/",
                "--targets",
                path,
                "--rate",
                "10",
            ],
            &["--targets: ", &format!("{path}{says}")],
        );
    }
    // A managed server's port is not known before it starts: paths only.
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run web --targets {} --rate 10", cases[1].0),
        2,
    );
    assert!(err.contains("give paths"), "{err}");
}

#[test]
fn a_managed_nginx_takes_paths_into_its_file_set_and_each_request_keeps_its_figures() {
    let dir = tempdir();
    std::fs::write(dir.path().join("b.txt"), "hello").unwrap();
    std::fs::write(
        dir.path().join("t.txt"),
        "GET /webbench/file000.html\n\nHEAD /webbench/file050.html\n\n# name: post\nPOST /webbench/file001.html\nContent-Type: text/plain\n@b.txt\n",
    )
    .unwrap();
    perflab_ok(
        dir.path(),
        "run web --targets t.txt --rate 600 --connections 2 --max-error-rate 100% --warmup 1s --duration 2s",
    );
    let export = last_export(dir.path());
    let ops = crate::support::ops_of_step0(&export);
    let get = &ops["GET /webbench/file000.html"];
    let head = &ops["HEAD /webbench/file050.html"];
    // A static file server refuses a POST: an error of that request only.
    let post = &ops["post"];
    assert!(get.0 > 200 && get.1.is_empty(), "{ops:?}");
    assert!(head.0 > 200 && head.1.is_empty(), "{ops:?}");
    assert_eq!(post.0, 0, "{ops:?}");
    assert!(post.1["http:405"] > 200, "{ops:?}");
    // The file's bytes were read, the same for every reply; a head's not.
    let bytes = |name: &str| {
        export["steps"][0]["ops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    let got = bytes("GET /webbench/file000.html");
    assert!(
        got > 0 && got % get.0 == 0,
        "{got} bytes in {} replies",
        get.0
    );
    assert_eq!(bytes("HEAD /webbench/file050.html"), 0);
    let shown = perflab_ok(dir.path(), "show last");
    for name in ops.keys() {
        assert!(shown.contains(name.as_str()), "no {name} in:\n{shown}");
    }
}
