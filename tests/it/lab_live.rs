//! `perflab lab --serve`: a small lab (two variants, one repetition, the
//! embedded SQLite bank: a lab needs a target, and the null workload has
//! none) served live on loopback — its matrix with a running cell, a
//! cell's run at `/run/N` while it runs, the lab's metrics, the report at
//! the end over the event stream and in headless Chromium, and a cell
//! whose setup failed shown failed with its reason.

use crate::live::{dump_dom_when_closed, event_log, follow, get, taken_live, unescape, Served};
use crate::support::{perflab_expect, tempdir};
use std::path::Path;
use std::time::{Duration, Instant};

/// Writes `lab.toml` in `dir`: the bank on a SQLite file, one user then
/// two for 2 s each, two variants (`good` and `other`, or `good` and a
/// `broken` one whose setup fails). With `broken`, the good cell's setup
/// waits (at most 60 s) for a file `go` in `dir`, which the test makes
/// once a browser is connected.
fn lab_file(dir: &Path, broken: bool) -> String {
    let second = if broken {
        format!(
            "setup = \"i=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\"\n[[variant]]\nname = \"broken\"\nsetup = \"echo no such device >&2; exit 3\"\n",
            dir.join("go").display()
        )
    } else {
        "[[variant]]\nname = \"other\"\n\"var.v\" = \"b\"\n".to_string()
    };
    std::fs::write(
        dir.join("lab.toml"),
        format!(
            "workload = \"bank\"\ntarget = \"sqlite:bank.db\"\nargs = \"--scale 1 --users 1,2 --warmup 0s --duration 2s\"\nseed = 1\n[[variant]]\nname = \"good\"\n\"var.v\" = \"a\"\n{second}"
        ),
    )
    .unwrap();
    "lab.toml".to_string()
}

/// Whether a connection to this host's `port` on loopback is established
/// (the server's side of an accepted connection in /proc/net/tcp).
fn accepted(port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == local && f[3] == "01"
        })
    })
}

/// Asks `path` until `done` says the page is what the test waits for
/// (bounded), and gives that page.
fn page_when(addr: &str, path: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let (status, _, body) = get(addr, path);
        if status == 200 && done(&body) {
            return body;
        }
        assert!(Instant::now() < until, "{path} never showed {what}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The number before ` intervals` in a running run's banner.
fn intervals_in_banner(page: &str) -> u64 {
    page.split("<p id=\"running\">")
        .nth(1)
        .and_then(|b| b.split(" intervals").next())
        .and_then(|b| b.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The lab served live: the matrix with a cell running its step, that
/// cell's run with an interval stored while it runs, the lab's progress
/// in the metrics; at the end, over the event stream, the matrix with
/// both cells done and the report the terminal printed; the store whole.
#[test]
fn a_served_lab_shows_its_cells_as_they_run_and_its_report_at_the_end() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let file = lab_file(dir.path(), false);
    let served = Served::start(
        dir.path(),
        &format!("lab {file} --serve 127.0.0.1:0 --serve-linger 5s"),
    );
    let addr = served.addr.clone();
    let follower = {
        let addr = addr.clone();
        std::thread::spawn(move || follow(&addr, Duration::from_secs(120)))
    };
    let page = page_when(&addr, "/", "a running cell", |p| {
        p.contains("<b>running</b>: step ")
    });
    assert!(page.contains("<table id=\"matrix\">"), "{page}");
    assert!(page.contains("new EventSource('/events'"), "{page}");
    assert_eq!(page.matches("<td class=\"l cell ").count(), 2, "{page}");
    let (status, _, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(metrics.contains("perflab_lab_cells_planned 2"), "{metrics}");
    assert!(
        metrics.contains("perflab_lab_cells{state=\"running\"} 1")
            || metrics.contains("perflab_lab_ended 1"),
        "{metrics}"
    );
    // The first cell's run: its stored intervals while it runs, or its
    // report's charts once it ended.
    let run = page_when(&addr, "/run/1", "an interval", |p| {
        intervals_in_banner(p) >= 1 || p.contains("<svg class=\"chart\"")
    });
    assert!(
        run.contains("<title>perflab report: run 1</title>"),
        "{run}"
    );
    assert_eq!(get(&addr, "/run/99").0, 404);

    let events = follower.join().unwrap();
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"state"), "{names:?}");
    assert!(names.contains(&"cell"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    let end = &events.last().unwrap().data;
    assert!(
        end["title"].as_str().unwrap().contains("done · complete"),
        "{end}"
    );
    let html = end["html"].as_str().unwrap();
    assert_eq!(html.matches("<b>done</b>: peak ").count(), 2, "{html}");
    let report = html
        .split("<pre id=\"report\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .map(unescape)
        .expect("the end shows the lab's report");
    let (code, stdout) = served.wait(Duration::from_secs(60));
    assert_eq!(code, 0, "{stdout}");
    // The same report as the terminal's, and no cell served on its own.
    assert!(stdout.contains(report.trim()), "{report}\n---\n{stdout}");
    let (again, _) = perflab_expect(dir.path(), "lab report last", 0);
    assert!(again.contains("other"), "{again}");
}

/// Headless Chromium on the lab's page from its start: it takes each
/// change as it comes and ends on the lab's final state — a cell done
/// with its run, the failed cell with why, the report.
#[test]
fn the_lab_page_reaches_its_end_in_a_browser() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let file = lab_file(dir.path(), true);
    let served = Served::start(
        dir.path(),
        &format!("lab {file} --serve 127.0.0.1:0 --serve-linger 10s"),
    );
    // The good cell waits for Chromium: started late on a busy host, it
    // had come after both cells and taken only the end as it came.
    let browser = {
        let url = format!("http://{}/", served.addr);
        std::thread::spawn(move || dump_dom_when_closed(&url))
    };
    let port: u16 = served
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the lab's port");
    let until = Instant::now() + Duration::from_secs(60);
    while !accepted(port) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    let (dom, stderr) = browser.join().unwrap();
    assert!(!stderr.contains(":CONSOLE"), "console output: {stderr}");
    assert!(
        dom.contains("<title>perflab lab 1 · done · complete</title>"),
        "{dom}"
    );
    assert!(dom.contains("<b>done</b>: peak "), "{dom}");
    assert!(dom.contains("<a href=\"/run/1\">run 1</a>"), "{dom}");
    assert!(
        dom.contains("<b>failed</b>: the setup command failed (exit status: 3): no such device"),
        "{dom}"
    );
    assert!(dom.contains("<pre id=\"report\">"), "{dom}");
    let log = event_log(&dom);
    let live = |kind: &str| taken_live(&log, kind);
    // At least one change taken as it came (how many depends on how
    // soon Chromium starts), then the end.
    assert!(live("cell ") >= 1, "{log:?}");
    assert_eq!(live("end "), 1, "{log:?}");
    // A cell failed: the lab says so in its exit code.
    let (code, _) = served.wait(Duration::from_secs(60));
    assert_eq!(code, 1);
}

/// SIGTERM (to the lab's PID) while a cell runs: the cell's run is cut
/// short and kept, the lab ends partial, and the server stops with it at
/// once, its linger cut short.
#[test]
fn sigterm_ends_a_served_lab_and_its_server() {
    let dir = tempdir();
    let file = lab_file(dir.path(), false);
    let served = Served::start(
        dir.path(),
        &format!("lab {file} --serve 127.0.0.1:0 --serve-linger 10m"),
    );
    let addr = served.addr.clone();
    page_when(&addr, "/", "a running cell", |p| {
        p.contains("<b>running</b>: step ")
    });
    // SAFETY: signalling the lab process this test started, by its PID.
    unsafe { libc::kill(served.pid() as libc::pid_t, libc::SIGTERM) };
    let (code, stdout) = served.wait(Duration::from_secs(60));
    assert_eq!(code, 143, "{stdout}");
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "the server outlived its lab"
    );
    let (report, _) = perflab_expect(dir.path(), "lab report last", 0);
    assert!(report.contains("partial"), "{report}");
}

/// The run's access rules, before anything is made: beyond loopback
/// without a token, an address that is none; and a lab file whose cells
/// would each serve on their own.
#[test]
fn a_served_lab_is_refused_in_one_line_before_anything_runs() {
    let dir = tempdir();
    let file = lab_file(dir.path(), false);
    for (args, says) in [
        ("--serve 0.0.0.0:0", "--serve-token-file"),
        ("--serve localhost-ish", "is not an address"),
    ] {
        let (out, err) = perflab_expect(dir.path(), &format!("lab {file} {args}"), 2);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args}: {err}");
        assert!(!out.contains("cell 1"), "nothing ran: {out}");
    }
    std::fs::write(
        dir.path().join("lab.toml"),
        "workload = \"bank\"\ntarget = \"sqlite:bank.db\"\nargs = \"--users 1 --serve 127.0.0.1:0\"\n[vary]\n\"var.v\" = [\"a\", \"b\"]\n",
    )
    .unwrap();
    let (_, err) = perflab_expect(dir.path(), "lab lab.toml", 2);
    assert!(err.contains("perflab lab FILE --serve"), "{err}");
    assert!(!dir.path().join("perflab.db").exists());
}
