//! `perflab report`: the HTML file opened in headless Chromium (no console
//! errors, every chart present and drawn, a screenshot taken), text from
//! outside escaped, several runs overlaid, Markdown and CSV, and the same
//! report rebuilt from the store file alone.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};
use std::process::Command;

fn chromium(args: &[&str], page: &std::path::Path) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium is installed (scripts/test.sh installs it)")
}

#[test]
fn the_html_report_loads_in_a_browser_with_every_chart_drawn() {
    let _waits = crate::support::waits();
    let dir = tempdir();
    for service in ["2ms", "1ms"] {
        perflab_ok(
            dir.path(),
            &format!("run null --service {service} --users 1,2 --warmup 0s --duration 4s"),
        );
    }
    let page = dir.path().join("report.html");
    perflab_ok(dir.path(), &format!("report 1 --html {}", page.display()));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"), "the report runs no script");
    // The step table has the host's columns, the utilisation chart the
    // CPU split.
    contains(&html, "<th>user</th><th>system</th>");
    contains(&html, "cpu user");
    contains(&html, "cpu system");
    // Nothing is fetched: the only URL is the SVG namespace.
    assert_eq!(
        html.matches("http").count(),
        html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    // The browser: loads it without a console message, draws every chart.
    let dom = chromium(&["--enable-logging=stderr", "--v=0", "--dump-dom"], &page);
    assert!(dom.status.success());
    let stderr = String::from_utf8_lossy(&dom.stderr);
    assert!(!stderr.contains(":CONSOLE"), "console output: {stderr}");
    let dom = String::from_utf8_lossy(&dom.stdout);
    // Throughput, latency, utilisation, two time series, distribution (the
    // null target has no database waits: that chart says so).
    assert_eq!(dom.matches("<svg class=\"chart\"").count(), 6, "{dom}");
    assert!(dom.matches("<polyline").count() >= 6);
    contains(
        &dom,
        "Database sessions by wait class against load: no data in this run.",
    );
    let shot = dir.path().join("shot.png");
    let out = chromium(
        &[
            "--window-size=1000,2400",
            &format!("--screenshot={}", shot.display()),
        ],
        &page,
    );
    assert!(out.status.success());
    let size = std::fs::metadata(&shot).unwrap().len();
    assert!(size > 30_000, "a {size}-byte screenshot is an empty page");

    // Two runs overlay their curves.
    let both = dir.path().join("both.html");
    perflab_ok(dir.path(), &format!("report 1 2 --html {}", both.display()));
    let both = std::fs::read_to_string(both).unwrap();
    contains(&both, "run 1 throughput");
    contains(&both, "run 2 throughput");
    // With the comparison: half the service time is significantly faster.
    contains(&both, "<h2>Comparison with run 1</h2>");
    contains(&both, "<td>+ ");
}

#[test]
fn text_from_outside_is_escaped_and_the_store_alone_rebuilds_the_report() {
    let dir = tempdir();
    perflab_ok(dir.path(), "run null --users 1,2 --warmup 0s --duration 1s");
    let conn = rusqlite::Connection::open(dir.path().join("perflab.db")).unwrap();
    conn.execute(
        "UPDATE runs SET target = '<script>alert(1)</script>' WHERE id = 1",
        [],
    )
    .unwrap();
    drop(conn);
    let page = dir.path().join("r.html");
    perflab_ok(
        dir.path(),
        &format!("report 1 --html {} --md r.md --csv csv", page.display()),
    );
    let html = std::fs::read_to_string(&page).unwrap();
    contains(&html, "&lt;script&gt;alert(1)&lt;/script&gt;");
    assert!(!html.contains("<script>alert"));
    let md = std::fs::read_to_string(dir.path().join("r.md")).unwrap();
    contains(&md, "### Verdict");
    // The step table carries the server host's columns.
    contains(
        &md,
        "| load | ops/s | p50 | p95 | p99 | max | errors | retries | cpu | user | system |",
    );
    let steps = std::fs::read_to_string(dir.path().join("csv/steps.csv")).unwrap();
    assert_eq!(steps.lines().count(), 3, "{steps}");
    assert!(steps.starts_with("run,step,load_kind,load,status,throughput"));
    // Only the store file, somewhere else: the same report.
    let other = tempdir();
    std::fs::copy(
        dir.path().join("perflab.db"),
        other.path().join("perflab.db"),
    )
    .unwrap();
    let again = other.path().join("r.html");
    perflab_ok(
        other.path(),
        &format!("report 1 --html {}", again.display()),
    );
    assert_eq!(std::fs::read_to_string(again).unwrap(), html);
    let (_, err) = perflab_expect(dir.path(), "report 1", 2);
    contains(&err, "--html FILE, --md FILE or --csv DIR");
    // The latency distribution of chosen steps; a level the run lacks is
    // one line naming the levels it has.
    perflab_ok(dir.path(), "report 1 --html steps.html --step 1 --step 2");
    let steps = std::fs::read_to_string(dir.path().join("steps.html")).unwrap();
    contains(&steps, "Latency distribution at 1 user, 2 users");
    let (_, err) = perflab_expect(dir.path(), "report 1 --html x.html --step 3", 2);
    contains(&err, "--step: run 1 has no step at 3 (its levels: 1, 2)");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!dir.path().join("x.html").exists());
}
