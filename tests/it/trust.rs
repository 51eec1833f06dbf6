//! A signal to a command that only reads a stored run — `report`, `show`,
//! `analyze` — ends it within moments with the exit code every command
//! has for it (130 for Ctrl-C, 143 for SIGTERM and for SIGHUP, a closed
//! terminal), and never leaves part of a file: the file the user named is
//! the one that was there or the whole new one, and no temporary file is
//! left beside it.

use crate::support::{perflab_ok, perflab_process, tempdir};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A bound on a hang, far above the ~2 s a signal may take: never a speed.
const ENDS_WITHIN: Duration = Duration::from_secs(10);

/// What a signal must end a command within, as the project promises.
const OBEYED_WITHIN: Duration = Duration::from_secs(2);

/// The stop signals and the code each exits with.
const SIGNALS: [(i32, &str, i32); 3] = [
    (libc::SIGINT, "SIGINT", 130),
    (libc::SIGTERM, "SIGTERM", 143),
    (libc::SIGHUP, "SIGHUP", 143),
];

/// What the user had at the path a command writes: never to be destroyed.
const USERS_OWN: &str = "the user's own file, not perflab's\n";

/// A stored run with many short intervals, so that its report takes a
/// while: the store's path.
fn big_run(dir: &Path) -> std::path::PathBuf {
    perflab_ok(
        dir,
        "run null --users 1..16/1 --service 1ms --warmup 0s --duration 1s --interval 100ms --store big.db",
    );
    dir.join("big.db")
}

/// The names in `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Starts `args` in `dir`, sends `signal` after `after`: whether it was
/// still running then, its exit code (the signal's number negated when
/// the signal itself ended the process, unhandled), how long
/// it took to end after the signal, and its standard error.
fn signalled(
    dir: &Path,
    args: &[&str],
    signal: i32,
    after: Duration,
) -> (bool, Option<i32>, Duration, String) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = perflab_process(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let running = child.try_wait().unwrap().is_none();
    // SAFETY: a signal to the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, signal) };
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > ENDS_WITHIN {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed();
    let mut err = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
    }
    let exit = status
        .code()
        .or_else(|| status.signal().map(|number| -number));
    (running, exit, took, err)
}

#[test]
fn a_signal_ends_report_show_analyze_and_compare_at_once_and_never_leaves_part_of_a_file() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let store = big_run(dir.path());
    let store = store.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["report", "last", "--store", store, "--html", "out"],
        &["show", "last", "--store", store, "--json", "out"],
        &["analyze", "last", "--store", store],
        &["compare", "last", "last", "--store", store],
        &[
            "compare",
            "last",
            "last",
            "--store",
            store,
            "--fail-on",
            "p95>+10%",
        ],
    ];
    let mut before = names(dir.path());
    before.retain(|n| !n.starts_with("big.db-"));
    let mut caught = 0;
    for args in commands {
        for (signal, name, code) in SIGNALS {
            // Early and late in the command's work.
            for after in [Duration::from_millis(30), Duration::from_millis(120)] {
                std::fs::write(dir.path().join("out"), USERS_OWN).unwrap();
                let (running, exit, took, err) = signalled(dir.path(), args, signal, after);
                let what = format!("{} at {after:?} by {name}", args[0]);
                assert!(!err.contains("panicked"), "{what}: {err}");
                assert!(took < OBEYED_WITHIN, "{what}: took {took:?}");
                if exit == Some(-signal) && err.is_empty() {
                    // The signal came before the process had set its
                    // handlers (its first milliseconds, on a loaded
                    // host: 30 ms was seen): the signal's own action ended
                    // it before any work (a shell says 128 + n, the code
                    // perflab gives), so nothing was written (checked
                    // below).
                } else if exit == Some(code) {
                    assert!(running, "{what}: {err}");
                    caught += 1;
                    assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
                    assert!(err.starts_with("interrupted ("), "{what}: {err}");
                } else {
                    // Done before the signal (or in the instant between
                    // its last look and the exit): done whole.
                    assert_eq!(exit, Some(0), "{what}: {err}");
                }
                // The user's file, or the whole new one; nothing beside it.
                let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
                let whole = out == USERS_OWN
                    || (args[0] == "report" && out.trim_end().ends_with("</html>"))
                    || (args[0] != "report"
                        && serde_json::from_str::<serde_json::Value>(&out).is_ok());
                assert!(whole, "{what}: part of a file: {} bytes", out.len());
                // (The store's own companions, SQLite's, aside.)
                let mut now = names(dir.path());
                now.retain(|n| n != "out" && !n.starts_with("big.db-"));
                assert_eq!(now, before, "{what}: a file left behind");
            }
        }
    }
    // Enough signals came while the work went on for the test to say
    // something (the commands are quick: most come at the first look).
    assert!(caught >= 6, "only {caught} of 30 signals came in time");
}
