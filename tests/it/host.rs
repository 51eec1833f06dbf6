//! The host probe on this machine's live /proc and /sys: a CPU burner
//! pinned to one CPU shows on that CPU, an O_DIRECT write shows on a disk,
//! loopback traffic shows on `lo`, and a run stores a host sample with
//! every interval.

use crate::support::{contains, perflab_ok, tempdir};
use perflab::probe::counters::{HostRoot, HostSample, HostSnapshot};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn sample_while(work: impl FnOnce()) -> HostSample {
    let before = HostSnapshot::read(&HostRoot::live(), &[]);
    work();
    HostSample::between(&before, &HostSnapshot::read(&HostRoot::live(), &[]))
}

#[test]
fn a_cpu_burner_pinned_to_one_cpu_shows_on_that_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "this test needs two CPUs");
    let s = sample_while(|| {
        std::thread::spawn(|| {
            // SAFETY: pinning this new thread to CPU 1; the set is zeroed first.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(1, &mut set);
                assert_eq!(
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                    0
                );
            }
            let until = Instant::now() + Duration::from_millis(1500);
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        })
        .join()
        .unwrap();
    });
    let cpu1 = s.cpus[1];
    assert!(
        cpu1.busy() > 0.9,
        "CPU 1 was {:.0}% busy",
        cpu1.busy() * 100.0
    );
    let total = s.cpu.unwrap().busy();
    assert!(total > 0.45, "all CPUs {:.0}% busy", total * 100.0);
}

#[test]
fn an_o_direct_write_shows_on_a_disk() {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("o_direct.bin");
    const BYTES: usize = 32 << 20;
    let s = sample_while(|| {
        let layout = std::alloc::Layout::from_size_align(1 << 20, 4096).unwrap();
        // SAFETY: a 1 MiB, 4 KiB-aligned buffer, zeroed, freed below.
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        let chunk = unsafe { std::slice::from_raw_parts(buf, 1 << 20) };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .expect("O_DIRECT is supported where the test build lives");
        for _ in 0..(BYTES >> 20) {
            f.write_all(chunk).unwrap();
        }
        drop(f);
        unsafe { std::alloc::dealloc(buf, layout) };
    });
    let _ = std::fs::remove_file(&path);
    let written = s
        .disks
        .iter()
        .map(|d| d.write_bytes_per_s * s.seconds)
        .fold(0.0, f64::max);
    // The sample holds rates: rate × seconds can round a hair below the count.
    assert!(
        written + 1.0 >= BYTES as f64,
        "the busiest writer wrote {written} bytes"
    );
    assert!(s.disks.iter().any(|d| d.busy > 0.0));
}

#[test]
fn loopback_traffic_shows_on_lo() {
    const BYTES: usize = 16 << 20;
    let s = sample_while(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0;
            while got < BYTES {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0);
                got += n;
            }
        });
        let mut out = std::net::TcpStream::connect(addr).unwrap();
        let chunk = vec![7u8; 1 << 16];
        for _ in 0..(BYTES >> 16) {
            out.write_all(&chunk).unwrap();
        }
        reader.join().unwrap();
    });
    let lo = s
        .nics
        .iter()
        .find(|n| n.name == "lo")
        .expect("lo is listed");
    assert!(lo.rx_bytes_per_s * s.seconds >= BYTES as f64);
    assert!(lo.tx_bytes_per_s * s.seconds >= BYTES as f64);
}

#[test]
fn a_run_stores_a_host_sample_with_every_interval() {
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run null --users 2 --service 1ms --warmup 0s --duration 2s",
    );
    contains(&out, "this host during each step");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let intervals = export["steps"][0]["intervals"].as_array().unwrap();
    let measured: Vec<_> = intervals
        .iter()
        .filter(|i| i["phase"] == "measured")
        .collect();
    assert_eq!(measured.len(), 2);
    for i in measured {
        let cpus = i["host"]["cpus"].as_array().unwrap();
        assert_eq!(
            cpus.len(),
            std::thread::available_parallelism().unwrap().get()
        );
        assert!(i["host"]["seconds"].as_f64().unwrap() > 0.5);
    }
}

#[test]
fn watch_prints_use_lines_or_json_samples() {
    let dir = tempdir();
    let text = perflab_ok(dir.path(), "watch --duration 2s");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    contains(lines[0], "cpu U ");
    contains(lines[0], "mem U ");
    let json = perflab_ok(
        dir.path(),
        "watch --duration 1500ms --interval 500ms --json",
    );
    let samples: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(samples.len(), 3);
    for s in samples {
        assert!(s["seconds"].as_f64().unwrap() > 0.3);
        assert!(!s["cpus"].as_array().unwrap().is_empty());
        assert!(s["at"].is_string());
    }
    let (_, err) = crate::support::perflab_expect(dir.path(), "watch --interval 1ms", 2);
    contains(&err, "--interval");
}

/// `perflab doctor` on this machine: it runs, reports what it finds and
/// lists what this VM does not expose, without an error.
#[test]
fn the_doctor_examines_this_machine() {
    let dir = crate::support::tempdir();
    let out = crate::support::perflab(dir.path())
        .args(["doctor", "--sample", "1s", "--json"])
        .output()
        .unwrap();
    // 0, or 1 when a critical trap is found; never a usage or internal error.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in report["findings"].as_array().unwrap() {
        assert!(["critical", "warning", "info"].contains(&f["severity"].as_str().unwrap()));
        assert!(!f["evidence"].as_array().unwrap().is_empty(), "{f}");
        assert!(!f["fix"].as_str().unwrap().is_empty());
    }
    assert!(report["unavailable"].is_array());
    // A SQLite target: its filesystem's mount options and free space.
    let code = crate::support::perflab(dir.path())
        .args(["doctor", "--sample", "0s", "--target", "sqlite:bank.db"])
        .output()
        .unwrap()
        .status
        .code();
    assert!(matches!(code, Some(0 | 1)));
    let (_, err) = crate::support::perflab_expect(dir.path(), "doctor --sample soon", 2);
    crate::support::contains(&err, "--sample");
    let (_, err) =
        crate::support::perflab_expect(dir.path(), "doctor --sample 0s --target redis://x", 2);
    crate::support::contains(&err, "--target");
}

/// `perflab doctor --flush-latency DIR` times flushes in a file of its
/// own in DIR and removes it: the finding and the JSON's figures; a path
/// that is no directory, or a directory asked of another host, is one
/// line and exit 2 before anything is sampled.
#[test]
fn the_doctor_times_flushes_in_a_directory_and_leaves_it_as_it_was() {
    let dir = crate::support::tempdir();
    let logs = dir.path().join("log");
    std::fs::create_dir(&logs).unwrap();
    std::fs::write(logs.join("000000010000000000000001"), "theirs").unwrap();
    let out = crate::support::perflab(dir.path())
        .args(["doctor", "--sample", "0s", "--json", "--flush-latency"])
        .arg(&logs)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flush = &report["flush"];
    assert!(flush["flushes"].as_u64().unwrap() >= 1, "{flush}");
    let p50 = flush["p50"].as_f64().unwrap();
    assert!(
        p50 > 1e-7 && p50 <= flush["p99"].as_f64().unwrap(),
        "{flush}"
    );
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["title"]
                .as_str()
                .unwrap()
                .starts_with("flush latency of ")
        })
        .expect("a flush finding");
    contains(
        finding["why"].as_str().unwrap(),
        "a commit waits for its log's flush",
    );
    let left: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["000000010000000000000001"]);
    let file = logs.join("000000010000000000000001");
    let (_, err) = crate::support::perflab_expect(
        dir.path(),
        &format!("doctor --sample 0s --flush-latency {}", file.display()),
        2,
    );
    contains(&err, "--flush-latency: ");
    contains(&err, "is not a directory");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (_, err) = crate::support::perflab_expect(
        dir.path(),
        &format!(
            "doctor --sample 0s --flush-latency {} --probe agent://127.0.0.1:1",
            logs.display()
        ),
        2,
    );
    contains(&err, "flushes are timed in a directory of this host");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "theirs");
}
