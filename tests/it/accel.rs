//! The caching accelerator end to end on loopback: a managed nginx in
//! front of a second managed nginx serving the web file set, its own log
//! read for the hit ratio and what reached the origin; an origin that
//! does not answer and bad settings refused in one line before anything
//! starts. perflab removes both servers' directories itself, also when a
//! run fails; each test checks that nothing was left behind.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};
use std::path::{Path, PathBuf};

/// The accelerator's directory (its start line) and the origin's (where
/// the files were written), from a run's output; the Varnish tests'
/// too.
pub(crate) fn both_dirs(out: &str) -> (PathBuf, PathBuf) {
    let accelerator = out
        .lines()
        .find_map(|l| l.split("files in ").nth(1))
        .expect("the accelerator's directory is printed")
        .trim()
        .into();
    let origin = out
        .lines()
        .find_map(|l| l.strip_prefix("wrote ")?.split(" into ").nth(1))
        .map(|docroot| Path::new(docroot.trim()).parent().unwrap().to_path_buf())
        .expect("the origin's document root is printed");
    (accelerator, origin)
}

/// What the origin was sent over every interval of a run (warm-up
/// included): requests and bytes.
fn origin_traffic(export: &serde_json::Value) -> (f64, f64) {
    let mut requests = 0.0;
    let mut bytes = 0.0;
    for step in export["steps"].as_array().unwrap() {
        for i in step["intervals"].as_array().unwrap() {
            let c = &i["db"]["counters"];
            requests += c["origin_requests"].as_f64().unwrap_or(0.0);
            bytes += c["origin_bytes"].as_f64().unwrap_or(0.0);
        }
    }
    (requests, bytes)
}

/// The file set's count and bytes, as the run recorded them.
fn fileset_of(export: &serde_json::Value) -> (usize, u64) {
    let set = &export["run"]["setup"]["fileset"];
    (
        set["files"].as_u64().expect("the file set is recorded") as usize,
        set["bytes"].as_u64().expect("the file set is recorded"),
    )
}

fn run_through_cache(dir: &Path, cache: &str) -> (String, serde_json::Value) {
    let out = perflab_ok(
        dir,
        &format!(
            "run web --target nginx:managed --nginx-role accelerator --origin nginx:managed --fileset specweb:2 --nginx-set proxy_cache_max_size={cache} --rate 300,300 --connections 8 --warmup 0s --duration 7s --seed 7 --store {}/{cache}.db",
            dir.display()
        ),
    );
    let export: serde_json::Value = serde_json::from_str(&perflab_ok(
        dir,
        &format!("show last --store {}/{cache}.db --json -", dir.display()),
    ))
    .expect("the export is JSON");
    (out, export)
}

/// A cache that holds the whole file set answers nearly every request
/// once warm, and the origin is sent each file at most once; the same
/// run (the same seed) through a cache of 1 MiB, 10× smaller than the
/// set, answers fewer in the step nginx trimmed it in (where the cache
/// that fits answered every request it had answered before) and sends
/// the origin more — nginx trims a cache to its size every 10 s at most,
/// which the 14 s of load cross. The two steps of 7 s are measured back
/// to back with no warm-up: where a warm-up of 2 s stood between them, a
/// trim in it (the first one 7-9 s into the load, when setting up took
/// longer on a busy host) was refetched there and neither step showed
/// it. The origin's processes are followed, and both servers'
/// directories go.
#[test]
fn a_cache_that_fits_sees_the_set_once_and_a_smaller_one_sends_the_origin_more() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    let (out, fits) = run_through_cache(dir.path(), "256m");
    let (files, set_bytes) = fileset_of(&fits);
    assert_eq!(
        fits["run"]["setup"]["managed_server"]["origin"],
        "a managed origin"
    );
    contains(&out, "caching http://127.0.0.1:");
    contains(
        &out,
        "the cache during each step (the accelerator's own log):",
    );
    contains(&out, "origin cpu");
    let last = fits["steps"].as_array().unwrap().len() - 1;
    let hit_fits = fits["steps"][last]["cache"]["hit_ratio"].as_f64().unwrap();
    assert!(hit_fits >= 0.97, "hit ratio {hit_fits} once warm:\n{out}");
    let (requests, bytes) = origin_traffic(&fits);
    assert!(
        requests >= 1.0 && requests <= files as f64,
        "the origin saw {requests} requests for {files} files:\n{out}"
    );
    // Each reply's headers come with its body.
    assert!(
        bytes <= set_bytes as f64 + files as f64 * 1024.0,
        "the origin sent {bytes} bytes for a set of {set_bytes}:\n{out}"
    );
    let labels: Vec<&str> = fits["steps"][0]["intervals"][1]["host"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["label"].as_str())
        .collect();
    assert!(labels.contains(&"origin"), "{labels:?}");
    let (accelerator, origin) = both_dirs(&out);
    assert!(
        !accelerator.exists(),
        "{} left behind",
        accelerator.display()
    );
    assert!(!origin.exists(), "{} left behind", origin.display());

    let (out, small) = run_through_cache(dir.path(), "1m");
    // The step in which nginx trimmed the small cache: both steps are
    // measured, back to back, so a trim at any time of the load is in one,
    // and with the same seed the two runs' steps ask for the same files.
    let cache = |run: &serde_json::Value, step: usize, what: &str| {
        run["steps"][step]["cache"][what].as_f64().unwrap_or(0.0)
    };
    let trimmed = (0..=last)
        .max_by(|&a, &b| {
            let deficit = |i| cache(&fits, i, "hit_ratio") - cache(&small, i, "hit_ratio");
            deficit(a).total_cmp(&deficit(b))
        })
        .unwrap_or(last);
    let (hit_small, hit_same) = (
        cache(&small, trimmed, "hit_ratio"),
        cache(&fits, trimmed, "hit_ratio"),
    );
    let (_, bytes_small) = origin_traffic(&small);
    assert!(
        hit_small < hit_same,
        "a 1 MiB cache answered {hit_small} in step {}, one that fits {hit_same}:\n{out}",
        trimmed + 1
    );
    assert!(
        bytes_small > bytes,
        "the origin sent {bytes_small} behind a 1 MiB cache, {bytes} behind one that fits:\n{out}"
    );
    assert!(
        cache(&small, trimmed, "origin_requests_per_s")
            > cache(&fits, trimmed, "origin_requests_per_s"),
        "{out}"
    );
    let (accelerator, origin) = both_dirs(&out);
    assert!(!accelerator.exists() && !origin.exists());
}

/// An origin that refuses connections, and one that accepts and never
/// answers, are each one line and exit 2, before any load and with
/// nothing made.
#[test]
fn an_origin_that_does_not_answer_is_one_line_before_any_load() {
    let dir = tempdir();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [refused, silent_port] {
        let (out, err) = perflab_expect(
            dir.path(),
            &format!(
                "run web --target nginx:managed --nginx-role accelerator --origin http://127.0.0.1:{port}/ --rate 100 --duration 2s"
            ),
            2,
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: --origin: the origin http://127.0.0.1:")
                && err.contains("does not answer"),
            "{err}"
        );
        assert!(!out.contains("step 1/"), "{out}");
        assert!(!out.contains("files in"), "{out}");
    }
    drop(silent);
}

/// Bad settings and roles are refused in one line, exit 2, before a
/// server starts.
#[test]
fn bad_accelerator_settings_are_refused_before_anything_starts() {
    let dir = tempdir();
    for (args, says) in [
        (
            "--origin nginx:managed",
            "--origin: only an accelerator has an origin",
        ),
        (
            "--nginx-role accelerator",
            "--nginx-role: a managed nginx as an accelerator caches an origin",
        ),
        (
            "--nginx-role accelerator --origin ftp://127.0.0.1/",
            "--origin: 'ftp://127.0.0.1/' is not an http://",
        ),
        (
            "--nginx-role accelerator --origin https://127.0.0.1:1/",
            "over plain HTTP",
        ),
        (
            "--nginx-role accelerator --origin nginx:managed --nginx-set proxy_cache_max_size=lots",
            "proxy_cache_max_size=lots: give e.g. proxy_cache_max_size=64m",
        ),
        (
            "--nginx-role accelerator --origin nginx:managed --nginx-set proxy_cache_path=/etc",
            "proxy_cache_path is perflab's",
        ),
        (
            "--nginx-role accelerator --origin nginx:managed --nginx-set proxy_cache_valid=bogus",
            "--nginx-set: invalid time value",
        ),
        (
            "--nginx-set proxy_cache_max_size=64m",
            "sizes an accelerator's cache",
        ),
        (
            "--target http://127.0.0.1:1/ --nginx-role accelerator --origin nginx:managed",
            "--nginx-role: only a managed nginx",
        ),
    ] {
        let (out, err) = perflab_expect(
            dir.path(),
            &format!("run web {args} --rate 100 --duration 2s"),
            2,
        );
        assert_eq!(err.trim().lines().count(), 1, "{args}: {err}");
        assert!(err.contains(says), "{args}: {err}");
        assert!(!out.contains("starting a managed"), "{args}: {out}");
    }
}

/// Behind a shaped link the accelerator runs in a network namespace of
/// its own, whose loopback is not this host's: its managed origin listens
/// on the link's end on this host, where the accelerator reaches it. An
/// origin URL on this host's loopback, which that namespace cannot
/// reach, is one line before anything starts.
#[test]
fn an_accelerator_behind_a_shaped_link_reaches_its_managed_origin() {
    let dir = tempdir();
    let store = format!("{}/link.db", dir.path().display());
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --target nginx:managed --nginx-role accelerator --origin nginx:managed --link-rate 50mbit --fileset specweb:1 --rate 100 --warmup 1s --duration 3s --store {store}"
        ),
    );
    contains(&out, "its link: 50mbit each way");
    assert!(!out.contains("caching http://127.0.0.1:"), "{out}");
    let export: serde_json::Value = serde_json::from_str(&perflab_ok(
        dir.path(),
        &format!("show last --store {store} --json -"),
    ))
    .expect("the export is JSON");
    let step = &export["steps"][0];
    assert_eq!(step["status"], "ok", "{out}");
    assert_eq!(step["summary"]["errors"], 0, "{out}");
    let hits = step["cache"]["hit_ratio"].as_f64().unwrap_or(0.0);
    assert!(hits > 0.5, "hit ratio {hits} behind the link:\n{out}");
    let (requests, _) = origin_traffic(&export);
    assert!(requests >= 1.0, "the origin saw no request:\n{out}");
    let (accelerator, origin) = both_dirs(&out);
    assert!(!accelerator.exists() && !origin.exists(), "{out}");

    // An origin that answers here, on loopback, but not from the link's
    // namespace.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        use std::io::{Read, Write};
        // The origin's check is one GET; a few more are allowed for.
        for _ in 0..3 {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            // The whole request head, then the answer.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let (out, err) = perflab_expect(
        dir.path(),
        &format!(
            "run web --target nginx:managed --nginx-role accelerator --origin http://127.0.0.1:{port}/ --link-rate 50mbit --rate 100 --duration 2s"
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --origin: ") && err.contains("cannot reach"),
        "{err}"
    );
    assert!(!out.contains("step 1/"), "{out}");
    // Unblock the origin's accept if fewer than three requests came.
    for _ in 0..3 {
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
    }
    let _ = answering.join();
}
