//! A managed server behind a shaped link (`--link-rate`, `--link-loss`,
//! `--link-delay`): the namespace, the veth pair, its qdiscs and drop rules
//! are made for the run, seen by `ip`, `tc` and `nft` while it runs,
//! recorded in the run, and gone after; a run killed with SIGKILL leaves
//! them in the ledger, and `perflab lab cleanup` removes every one. These
//! tests make namespaces and cgroups: they need root, and fail without it.

use crate::support::{contains, perflab_expect, perflab_process, tempdir};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn assert_root() {
    // SAFETY: geteuid reads the process's own credentials.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "a shaped link is a namespace and qdiscs: run the tests as root"
    );
}

/// A network tool's output (`ip …`, `tc …`).
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts perflab with `args` in `dir` (stdout to `dir`/out.txt) and waits
/// until it prints a line holding `marker`; returns the child and the
/// output so far.
fn spawn_until(dir: &Path, args: &str, marker: &str) -> (std::process::Child, String) {
    let out_path = dir.join("out.txt");
    let mut child = perflab_process(dir)
        .args(args.split_whitespace())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut out = String::new();
    while !out.contains(marker) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        out = std::fs::read_to_string(&out_path).unwrap_or_default();
    }
    if !out.contains(marker) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("no '{marker}' in:\n{out}");
    }
    (child, out)
}

/// The namespace and host interface a run printed (`its link: … (network
/// namespace NS, veth IF at …`).
fn printed_link(out: &str) -> (String, String) {
    let line = out
        .lines()
        .find(|l| l.starts_with("its link: "))
        .unwrap_or_else(|| panic!("no link line in:\n{out}"));
    let after = |word: &str| {
        line.split(word)
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .unwrap()
            .to_string()
    };
    (after("network namespace "), after("veth "))
}

fn namespace_exists(name: &str) -> bool {
    tool("ip", &["netns", "list"])
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// A run behind a 2 Mbit/s link that loses 1% toward the server: its data
/// are loaded on the bare link; while its steps run, the namespace, the
/// tbf at that rate on both ends and the drop rule are there; the run
/// records the link; after it, nothing of it is left.
#[test]
fn a_shaped_link_is_made_for_the_run_and_removed_after() {
    let _waits = crate::support::waits();
    assert_root();
    let dir = tempdir();
    let (child, out) = spawn_until(
        dir.path(),
        "run bank --target postgres:managed --link-rate 2mbit --link-loss 1%:0% --users 1,2 --warmup 0s --duration 2s",
        "step 1/2",
    );
    contains(
        &out,
        "its link: 2mbit each way, 1.0% lost toward the server",
    );
    let (namespace, host_if) = printed_link(&out);
    assert!(namespace_exists(&namespace), "{namespace}\n{out}");
    let qdisc = tool("tc", &["-s", "qdisc", "show", "dev", &host_if]);
    contains(&qdisc, "tbf");
    contains(&qdisc, "rate 2Mbit");
    // The bank's 100,000 accounts went in on the bare link: the shaper put
    // back for the steps has passed what a step sent so far, not the
    // 1.7 MB of rows perflab sends toward the server to load them.
    contains(
        &out,
        "its link is unshaped while the data are prepared, and shaped from the first step",
    );
    let sent: u64 = qdisc
        .split("Sent ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of bytes sent:\n{qdisc}"));
    assert!(
        sent < 1_000_000,
        "the rows went through the shaper:\n{qdisc}"
    );
    let inside = tool("ip", &["netns", "exec", &namespace, "tc", "qdisc", "show"]);
    contains(&inside, "rate 2Mbit");
    let rules = tool(
        "ip",
        &["netns", "exec", &namespace, "nft", "list", "ruleset"],
    );
    contains(&rules, "numgen random mod 100000 < 1000");
    assert!(
        !rules.contains("hook output"),
        "no loss from the server:\n{rules}"
    );
    let result = child.wait_with_output().unwrap();
    assert!(result.status.success());
    let out = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    contains(&out, "check: passed");
    let export = crate::support::last_export(dir.path());
    let link = &export["run"]["setup"]["managed_server"]["link"];
    assert_eq!(link["rate_bits_per_sec"], 2_000_000, "{link}");
    assert_eq!(link["loss_to_server"], 0.01, "{link}");
    assert_eq!(link["loss_from_server"], 0.0, "{link}");
    assert_eq!(link["namespace"], namespace.as_str());
    assert!(!namespace_exists(&namespace), "{namespace} was left");
    assert!(!interface_exists(&host_if), "{host_if} was left");
    crate::support::managed_files_removed(&out);
}

/// WebBench on a managed nginx behind a 10 Mbit/s link, held to 64 MiB:
/// the replies cannot pass the link faster than its rate, the verdict
/// names the shaped link, the run records the link and the memory limit,
/// and nothing of the link is left after.
#[test]
fn a_managed_nginx_behind_a_shaped_link_is_held_to_its_rate() {
    let _heavy = crate::support::heavy();
    assert_root();
    let dir = tempdir();
    let (out, _) = perflab_expect(
        dir.path(),
        "run web --target nginx:managed --link-rate 10mbit --nginx-memory 64MiB --users 8 --warmup 1s --duration 3s",
        0,
    );
    contains(&out, "its link: 10mbit each way");
    contains(&out, "its memory (page cache included) held to 64.0 MiB");
    let (namespace, host_if) = printed_link(&out);
    let export = crate::support::last_export(dir.path());
    let server = &export["run"]["setup"]["managed_server"];
    assert_eq!(server["link"]["rate_bits_per_sec"], 10_000_000, "{server}");
    assert_eq!(server["memory_bytes"], 64 << 20, "{server}");
    // The replies' bytes over the measured window, against the rate.
    let step = &export["steps"][0];
    let bytes: f64 = step["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["bytes"].as_f64().unwrap())
        .sum();
    let measured = step["summary"]["measured"].as_f64().unwrap();
    let bytes_per_s = bytes / measured;
    assert!(bytes_per_s > 0.0, "{step}");
    // A reply counts in the window it ends in, whole: each of the 8 users
    // may have had up to the set's largest file (169 KB) on its way when
    // the window opened.
    let in_flight = 8.0 * 168_649.0 / measured;
    assert!(
        bytes_per_s * 8.0 <= 10e6 * 1.05 + in_flight * 8.0,
        "{bytes_per_s} B/s through a 10 Mbit/s link in {measured} s"
    );
    let verdict = perflab_expect(dir.path(), "analyze last", 0).0;
    contains(&verdict, "bottleneck  link pl");
    contains(&verdict, "(tbf)");
    assert!(!namespace_exists(&namespace), "{namespace} was left");
    assert!(!interface_exists(&host_if), "{host_if} was left");
}

/// SIGKILL of a run mid-step leaves its managed server, directory, memory
/// cgroup, namespace and veth pair; `perflab lab cleanup` lists and removes
/// each, and each is then gone.
#[test]
fn what_a_killed_run_left_is_removed_by_lab_cleanup() {
    assert_root();
    let _ledger = crate::support::ledger();
    let dir = tempdir();
    let (mut child, out) = spawn_until(
        dir.path(),
        "run bank --target postgres:managed --link-rate 10mbit --pg-memory 256MiB --users 2 --warmup 0s --duration 60s",
        "step 1/1",
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (namespace, host_if) = printed_link(&out);
    let server_pid: u32 = out
        .lines()
        .find_map(|l| l.split(", pid ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no server pid in:\n{out}"));
    let files = out
        .lines()
        .find_map(|l| l.split("files in ").nth(1))
        .unwrap()
        .trim()
        .to_string();
    let cgroup = out
        .lines()
        .find_map(|l| l.split("by the cgroup ").nth(1))
        .unwrap_or_else(|| panic!("no cgroup in:\n{out}"))
        .trim()
        .to_string();
    let server_runs = || {
        std::fs::read_to_string(format!("/proc/{server_pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    // Left behind, every one.
    assert!(server_runs(), "the server {server_pid} ended with its run");
    assert!(namespace_exists(&namespace));
    assert!(interface_exists(&host_if));
    assert!(Path::new(&cgroup).exists(), "{cgroup}");
    assert!(Path::new(&files).exists(), "{files}");

    let (cleaned, _) = perflab_expect(dir.path(), "lab cleanup", 0);
    for part in [
        format!("removed the PostgreSQL's process {server_pid}"),
        format!("removed the PostgreSQL's network namespace {namespace}"),
        format!("removed the PostgreSQL's cgroup {cgroup}"),
        format!("removed the PostgreSQL's directory {files}"),
    ] {
        contains(&cleaned, &part);
    }
    assert!(!server_runs(), "the server {server_pid} still runs");
    assert!(!namespace_exists(&namespace), "{namespace}");
    assert!(!interface_exists(&host_if), "{host_if}");
    assert!(!Path::new(&cgroup).exists(), "{cgroup}");
    assert!(!Path::new(&files).exists(), "{files}");
    // Nothing of this run is left in the ledger.
    let ledger = std::fs::read_dir("/run/perflab/leftovers")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect::<String>()
        })
        .unwrap_or_default();
    assert!(!ledger.contains(&namespace), "{ledger}");
}

/// Link flags that cannot apply: one line each, exit 2, no namespace made.
#[test]
fn link_flags_that_cannot_apply_are_refused_in_one_line() {
    assert_root();
    let dir = tempdir();
    for (args, fragment) in [
        (
            "run bank --target sqlite:x.db --link-rate 1mbit",
            "--link-rate: perflab shapes the link of a server it manages",
        ),
        (
            "run bank --target postgres:managed --link-loss 60%",
            "--link-loss: 60% of the packets lost leaves no connection standing",
        ),
        (
            "run bank --target postgres:managed --link-rate 1mbps",
            "--link-rate: '1mbps' is not a link rate",
        ),
        (
            "run bank --target postgres:managed --link-delay 1h",
            "--link-delay: 1h is longer than a link's delay",
        ),
        (
            "run bank --target sqlite:x.db --disk-write-iops 100",
            "--disk-write-iops: perflab throttles the disk of a server it manages",
        ),
        (
            "run bank --target sqlite:x.db --log-dir /dev/shm",
            "--log-dir: perflab moves the log of a managed database only",
        ),
        (
            "run bank --target postgres:managed --log-dir shm",
            "--log-dir: shm is not a directory given by its absolute path",
        ),
        (
            "run bank --target postgres:managed --disk-read-bps 12",
            "--disk-read-bps: 12 B a second is less than one page",
        ),
        (
            "run web --target http://127.0.0.1:9/ --link-rate 1mbit",
            "--link-rate: perflab shapes the link of a server it manages",
        ),
        (
            "run web --target http://127.0.0.1:9/ --nginx-memory 64MiB",
            "--nginx-memory: only a managed nginx takes it",
        ),
        (
            "run web --target nginx:managed --link-rate 1mbit --nginx-listen 127.0.0.2",
            "--nginx-listen: a managed nginx behind a shaped link listens on its link's address",
        ),
        (
            "run web --target nginx:managed --nginx-memory lots",
            "--nginx-memory:",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), args, 2);
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
        contains(&err, fragment);
    }
    // A disk throttle needs a block device under the server's files: with
    // them on a tmpfs, one line, and nothing of the server left there.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let out = perflab_process(dir.path())
        .args("run bank --target postgres:managed --disk-write-iops 100".split_whitespace())
        .env("TMPDIR", shm.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    contains(&err, "--disk-write-iops: the server's files in");
    contains(&err, "on no block device");
    assert_eq!(
        std::fs::read_dir(shm.path()).unwrap().count(),
        0,
        "the server's directory was left"
    );
    // A delay needs netem: on a kernel without it, one line naming it and
    // nothing left; on a kernel with it, the delay is in the run's record.
    let child = perflab_process(dir.path())
        .args("run bank --target postgres:managed --link-delay 2ms --users 1 --warmup 0s --duration 1s".split_whitespace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let its_namespaces = format!("perflab-link-{}-", child.id());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(2) => {
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            contains(
                &err,
                "--link-delay: this kernel does not take the netem qdisc",
            );
        }
        Some(0) => {
            let export = crate::support::last_export(dir.path());
            assert_eq!(
                export["run"]["setup"]["managed_server"]["link"]["delay_us"],
                2000
            );
        }
        code => panic!("exit {code:?}: {err}"),
    }
    let left = tool("ip", &["netns", "list"]);
    assert!(
        !left.contains(&its_namespaces),
        "a namespace was left:\n{left}"
    );
}

/// Without root, a link is refused before anything is made.
#[test]
fn a_link_without_root_is_refused() {
    assert_root();
    let dir = tempdir();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("perflab"))
        .args("run bank --target postgres:managed --link-rate 1mbit".split_whitespace())
        .current_dir(dir.path())
        .env("CI", "true")
        .output()
        .expect("setpriv runs (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    contains(&err, "--link-rate: a shaped link is a network namespace");
    contains(&err, "only root can make");
}
