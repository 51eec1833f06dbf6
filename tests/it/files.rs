//! The files workload on a real directory: seed 004's clients thinking,
//! then writing, reading, stating and deleting their files; the check
//! after the run naming files altered, removed or added behind perflab's
//! back; think time honoured; bad input refused.

use crate::support::{
    contains, last_export, perflab_expect, perflab_ok, spawn_until_steps, tempdir,
};

/// Users with exponential think time: X·(R+Z) = N within 5% (Little's
/// law with the think time), every file intact, the run's directory gone.
#[test]
fn users_think_write_and_read_and_leave_an_intact_tree() {
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
    assert!(
        (n / 6.0 - 1.0).abs() < 0.05,
        "X·(R+Z) = {n:.2} for 6 users (X {x}, R {r}, Z {z})"
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
}
