//! The files workload on a real directory: a file server lab's clients thinking,
//! then writing, reading, stating and deleting their files; the check
//! after the run naming files altered, removed or added behind perflab's
//! back; think time honoured; bad input refused. On small tmpfs mounts: a
//! full file system stops the initial files in one line and leaves no
//! partial file behind, a read-only one is bad input; a signal stops the
//! preparation and removes what it wrote; a stranger's file is left.

use crate::disk::Tmpfs;
use crate::support::{
    contains, last_export, perflab, perflab_expect, perflab_ok, perflab_process, spawn_until_steps,
    tempdir,
};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Users with exponential think time: X·(R+Z) = N within 5% (Little's
/// law with the think time), every file intact, the run's directory gone.
#[test]
fn users_think_write_and_read_and_leave_an_intact_tree() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run files --target dir:. --users 6 --think exp:100ms --file-size uniform:4k..64k --fsync --warmup 1s --duration 4s",
    );
    contains(
        &out,
        "every file holds what was written (size and CRC-32) all intact",
    );
    contains(&out, "no file is there that was not written none");
    let export = last_export(dir.path());
    let s = &export["steps"][0]["summary"];
    let (x, r, z) = (
        s["throughput"].as_f64().unwrap(),
        s["response"]["mean"].as_f64().unwrap(),
        s["mean_think"].as_f64().unwrap(),
    );
    let n = x * (r + z);
    // Little's law over a window holds to within the cycles that straddle
    // its edges: an operation that began before the window and ended in
    // it counts whole. One stalled fsync at the start (a second, beside
    // the suite's other disk tests) adds its length to every user's sum;
    // the longest response bounds that.
    let longest = s["response"]["max"].as_f64().unwrap();
    let measured = s["measured"].as_f64().unwrap();
    let edge = longest / measured;
    assert!(
        (n / 6.0 - 1.0).abs() < 0.05 + edge,
        "X·(R+Z) = {n:.2} for 6 users (X {x}, R {r}, Z {z}; the longest response {longest} s in {measured} s)"
    );
    // The mean of n exponential draws of mean 0.1 s has a standard error of
    // 0.1/√n: within five of them, never failing by chance.
    let thinks = s["completed"].as_f64().unwrap().max(1.0);
    let bound = 5.0 * 0.1 / thinks.sqrt();
    assert!(
        (z - 0.1).abs() < bound,
        "mean think {z} over {thinks} operations (bound ±{bound:.4})"
    );
    let names: Vec<&str> = export["steps"][0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["write", "read", "stat", "delete"]);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("perflab-files-")
        })
        .collect();
    assert!(left.is_empty(), "the run's directory was left behind");
}

/// Mid-run, one file is altered, one removed and one added behind
/// perflab's back: the check names each, and the run fails its check.
#[test]
fn the_check_names_files_altered_removed_and_added() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let child = spawn_until_steps(
        dir.path(),
        "run files --target dir:. --users 2,2 --mix write=50,read=50 --initial-files 4 --file-size 8k --keep --warmup 0s --duration 2s",
        1,
    );
    let root = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("perflab-files-")
        })
        .expect("the run's directory")
        .path();
    let user = root.join("u00000");
    std::fs::write(user.join("f00000001"), b"not what was written").unwrap();
    std::fs::remove_file(user.join("f00000002")).unwrap();
    std::fs::write(user.join("stranger.txt"), b"hello").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "a failed check fails the run");
    let check = last_export(dir.path())["run"]["check"].to_string();
    contains(&check, "f00000001");
    contains(&check, "f00000002");
    contains(&check, "stranger.txt");
    assert!(root.exists(), "--keep keeps the directory");
}

/// Bad input: one line each, exit 2, nothing created.
#[test]
fn bad_files_input_gets_one_line() {
    let dir = tempdir();
    for (args, says) in [
        ("--target dir:nowhere", "not a directory"),
        ("--target file:x.bin", "is not dir:PATH"),
        (
            "--target dir:. --mix write=60,copy=40",
            "'copy' is not an operation",
        ),
        ("--target dir:. --mix write=0", "every weight is 0"),
        (
            "--target dir:. --mix write=4294967295,read=1",
            "at most 1000000",
        ),
        ("--target dir:. --file-size exp:0", "mean above 0"),
        ("--target dir:. --file-size uniform:64k..4k", "is above"),
        (
            "--target dir:. --mix read=1 --initial-files 0",
            "nothing to read",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), &format!("run files {args}"), 2);
        assert_eq!(err.trim().lines().count(), 1, "{args}: {err}");
        contains(&err, says);
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "something was created"
    );
    // A file where perflab's own directory would be: the fix is never to
    // work in it.
    std::fs::write(dir.path().join("perflab-files"), "mine\n").unwrap();
    let (_, err) = perflab_expect(dir.path(), "run files --quick", 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(
        &err,
        "./perflab-files exists and perflab did not make it: it is not a directory",
    );
    assert!(!err.contains("dir:perflab-files"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("perflab-files")).unwrap(),
        "mine\n"
    );
}

/// The run directories (`perflab-files-…`) under `dir`.
fn run_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("perflab-files-")
        })
        .map(|e| e.path())
        .collect()
}

/// `--initial-files` far beyond what a small file system holds, full of
/// bytes or of inodes: the preparation stops at the first ENOSPC with one
/// line, exit 2, and removes every file it made.
#[test]
fn initial_files_stop_at_a_full_file_system_and_leave_nothing() {
    for options in ["size=256k", "size=64m,nr_inodes=64"] {
        let fs = Tmpfs::new(options);
        let dir = tempdir();
        let out = perflab(dir.path())
            .args(["run", "files", "--target"])
            .arg(format!("dir:{}", fs.path().display()))
            .args(
                "--users 2 --initial-files 100000 --file-size 4k --warmup 0s --duration 1s"
                    .split(' '),
            )
            .timeout(Duration::from_secs(120))
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{options}: {err}");
        contains(&err, "No space left on device");
        contains(&err, "--initial-files");
        assert_eq!(
            std::fs::read_dir(fs.path()).unwrap().count(),
            0,
            "{options}: files were left behind"
        );
    }
}

/// A SIGINT or SIGTERM while the users write their initial files stops
/// the preparation at once (exit 130 or 143, nothing measured) and
/// removes what it wrote.
#[test]
fn a_signal_during_the_initial_files_stops_them_and_removes_them() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = tempdir();
        let mut child = perflab_process(dir.path())
            .args("run files --target dir:. --users 1 --initial-files 100000000 --file-size 1 --warmup 0s --duration 1s".split(' '))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let guard = KillOnDrop(child.id());
        // Wait until the user's directory holds files.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let written = run_dirs(dir.path())
                .first()
                .and_then(|r| std::fs::read_dir(r.join("u00000")).ok())
                .map_or(0, |d| d.count());
            if written >= 100 {
                break;
            }
            assert!(Instant::now() < deadline, "no initial files were written");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "signal {signal} was not obeyed during the initial files"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(guard);
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(code), "{err}");
        contains(&err, "interrupted while writing the initial files");
        assert!(
            run_dirs(dir.path()).is_empty(),
            "the initial files were left behind"
        );
    }
}

/// Kills a process this test started (by its PID) when dropped, if it is
/// still running: a failed assertion leaves no perflab behind.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: a signal to the child this test started (a PID not yet
        // reaped, so not reused).
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// A directory on a read-only file system is bad input: one line, exit 2.
#[test]
fn a_read_only_directory_is_bad_input() {
    let fs = Tmpfs::new("ro,size=1m");
    let dir = tempdir();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run files --target dir:{} --users 1 --warmup 0s --duration 1s",
            fs.path().display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "read-only");
}

/// Users writing into a file system that fills up mid-run: their writes
/// fail with ENOSPC, and the run's check calls none of perflab's own
/// partly written files foreign (none is left: a failed write removes its
/// file); the directory is removed after.
#[test]
fn a_full_file_system_leaves_no_partial_file_called_foreign() {
    let _heavy = crate::support::heavy();
    let fs = Tmpfs::new("size=1m");
    let dir = tempdir();
    let out = perflab(dir.path())
        .args(["run", "files", "--target"])
        .arg(format!("dir:{}", fs.path().display()))
        .args("--users 2 --initial-files 0 --mix write=100 --file-size 48k --warmup 0s --duration 2s --max-error-rate 100%".split(' '))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let check = last_export(dir.path())["run"]["check"].to_string();
    contains(&check, "no file is there that was not written");
    assert!(
        !check.contains("perflab-files-"),
        "perflab's own files are called foreign: {check}\n{stdout}"
    );
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "the run's directory was left behind"
    );
}

/// A user whose table is empty writes whatever it drew, and its failure
/// on a full file system is counted as the write it was: a read that
/// never happened is never charged with ENOSPC.
#[test]
fn a_full_file_systems_failures_are_charged_to_writes() {
    let fs = Tmpfs::new("size=64k");
    let dir = tempdir();
    perflab(dir.path())
        .args(["run", "files", "--target"])
        .arg(format!("dir:{}", fs.path().display()))
        .args("--users 2 --initial-files 0 --mix write=10,read=90 --file-size 48k --warmup 0s --duration 1s --max-error-rate 100%".split(' '))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let export = last_export(dir.path());
    let ops = &export["steps"][0]["ops"];
    assert_eq!(ops[0]["name"], "write", "{ops}");
    assert_eq!(ops[1]["name"], "read", "{ops}");
    let errors = |op: &serde_json::Value| -> u64 {
        op["errors"].as_object().map_or(0, |kinds| {
            kinds.values().filter_map(serde_json::Value::as_u64).sum()
        })
    };
    assert!(
        errors(&ops[0]) > 0,
        "no write failed on a full file system: {ops}"
    );
    for op in ops.as_array().unwrap().iter().skip(1) {
        assert_eq!(errors(op), 0, "{} charged with failures: {op}", op["name"]);
    }
}

/// A file someone else puts in the run's directory during the run is not
/// perflab's to remove: after the run it is still there (with its
/// directory), perflab's own files and directories are gone, and perflab
/// says what it left.
#[test]
fn a_file_someone_else_puts_in_the_run_directory_is_left() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let child = perflab_process(dir.path())
        .args("run files --target dir:. --users 2,2 --mix write=50,read=50 --initial-files 4 --file-size 8k --warmup 0s --duration 2s".split(' '))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    let user = loop {
        if let Some(root) = run_dirs(dir.path()).first() {
            if root.join("u00001").is_dir() {
                break root.join("u00001");
            }
        }
        assert!(Instant::now() < deadline, "no run directory");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::fs::write(user.join("notes.txt"), b"mine").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(guard);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(std::fs::read(user.join("notes.txt")).unwrap(), b"mine");
    let left: Vec<_> = std::fs::read_dir(&user).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "perflab's files were left: {left:?}");
    let root = user.parent().unwrap();
    assert!(
        !root.join("u00000").exists(),
        "perflab's directory was left"
    );
    contains(&err, "holds files perflab did not write");
}
