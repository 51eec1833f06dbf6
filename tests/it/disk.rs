//! The disk workload on real files in temporary directories: the spec's
//! shares and percentages as done, verification catching a file damaged
//! behind perflab's back, the ledger surviving `kill -9`, both engines,
//! and bad input refused before anything is created. On real loop devices
//! and small tmpfs mounts: what perflab may never write — a device holding
//! anything without `--destroy-data`, a device mounted in another mount
//! namespace or held open, a file it did not make, a size beyond the free
//! space. I/Os are offered at fixed rates (open loop), leaving CPU to the
//! tests running beside them.

use crate::support::{
    contains, last_export, perflab, perflab_expect, perflab_ok, spawn_until_steps, tempdir,
};
use std::path::Path;

/// A joint mix of every kind: random and sequential, reads and writes, a
/// burst and an alignment below the size.
const MIX: &str = "size=4k share=60 read=75 random=100; size=8k share=30 read=50 random=50 burst=3 align=4k; size=16k share=10 read=0 random=0";

/// Runs `run disk` on `t.bin` with `spec` (one argument, spaces and all)
/// and the other arguments; its stdout.
fn run_disk(dir: &Path, spec: &str, args: &str) -> String {
    let out = perflab(dir)
        .args(["run", "disk", "--target", "file:t.bin", "--spec", spec])
        .args(args.split_whitespace())
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The check's line of each spec line: (I/Os, share, read, random), in percent.
fn line_figures(out: &str) -> Vec<(u64, f64, f64, f64)> {
    out.lines()
        .filter(|l| l.contains(" I/Os: share "))
        .map(|l| {
            let tail = &l[l.find(") ").expect("a spec line") + 2..];
            let n: u64 = tail.split_whitespace().next().unwrap().parse().unwrap();
            let pct = |key: &str| -> f64 {
                let at = tail.find(key).unwrap() + key.len();
                tail[at..]
                    .split('%')
                    .next()
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            };
            (n, pct("share "), pct("read "), pct("random "))
        })
        .collect()
}

/// The most I/Os one draw of [`MIX`] makes: its second line comes in
/// bursts of 3.
const MIX_BURST: u64 = 3;

/// Asserts each line's figures as the mix's, within four standard errors
/// of a binomial count (at least a point): the draws are random, and a
/// test may not fail by chance. A burst is one draw of several I/Os, so
/// the draws, not the I/Os, are what is counted: the bound is taken on
/// the I/Os over the longest burst (the line of bursts deviates that much
/// more, in I/Os, than one of single I/Os would). The unit tests hold
/// 200,000 draws to a point.
fn honoured(out: &str, least: u64) {
    let figures = line_figures(out);
    assert_eq!(figures.len(), 3, "{out}");
    let total: u64 = figures.iter().map(|f| f.0).sum();
    assert!(total >= least, "only {total} I/Os:\n{out}");
    let within = |got: f64, want: f64, ios: u64| {
        let p = want / 100.0;
        let draws = (ios / MIX_BURST).max(1) as f64;
        let bound = (400.0 * (p * (1.0 - p) / draws).sqrt()).max(1.0);
        assert!(
            (got - want).abs() < bound,
            "{got} against {want} (bound {bound:.2}):\n{out}"
        );
    };
    for ((n, share, read, random), (s, r, x)) in
        figures
            .iter()
            .zip([(60.0, 75.0, 100.0), (30.0, 50.0, 50.0), (10.0, 0.0, 0.0)])
    {
        assert!(*n > 0, "{out}");
        within(*share, s, total);
        within(*read, r, *n);
        within(*random, x, *n);
    }
}

/// 24,000 I/Os through the page cache on io_uring: every line's share
/// of I/Os, and its read and random percentages, as the spec's; reads and
/// writes are counted apart, with their bytes.
#[test]
fn a_joint_mix_is_honoured_and_counted_by_direction() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = run_disk(
        dir.path(),
        MIX,
        "--size 8MiB --buffered --engine io_uring --rate 6000 --connections 4 --warmup 0s --duration 4s",
    );
    contains(&out, "preconditioning");
    contains(&out, "--buffered: I/O goes through the page cache");
    honoured(&out, 20_000);
    let export = last_export(dir.path());
    let ops = export["steps"][0]["ops"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "4k read",
            "4k write",
            "8k read",
            "8k write",
            "16k read",
            "16k write"
        ]
    );
    // 16k is written only: its reads are none, its bytes 16 KiB each.
    assert_eq!(ops[4]["ok"].as_u64(), Some(0));
    let (n, bytes) = (
        ops[5]["ok"].as_u64().unwrap(),
        ops[5]["bytes"].as_u64().unwrap(),
    );
    assert!(n > 0 && bytes == n * 16384, "{n} writes, {bytes} bytes");
}

/// A closed loop of 8 outstanding I/Os through the page cache, over
/// 100,000 I/Os: the mix as the spec's, and never more than 8 I/Os in
/// flight at once.
#[test]
fn a_closed_loop_holds_the_mix_and_never_exceeds_its_depth() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = run_disk(
        dir.path(),
        MIX,
        "--size 8MiB --buffered --engine io_uring --depth 8 --warmup 0s --duration 3s --seed 3",
    );
    honoured(&out, 100_000);
    let line = out
        .lines()
        .find(|l| l.contains("I/Os in flight never above the depth"))
        .unwrap_or_else(|| panic!("no in-flight line:\n{out}"));
    let most: u64 = line
        .split("at most ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((1..=8).contains(&most), "{line}");
    contains(line, "of 8 ");
    contains(line, "ok ");
}

/// The psync engine on the same spec and seed runs the same mix, and the
/// file it leaves reads back intact.
#[test]
fn the_psync_engine_runs_the_same_mix_and_leaves_an_intact_file() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = run_disk(
        dir.path(),
        MIX,
        "--size 8MiB --engine psync --rate 2000 --connections 2 --warmup 0s --duration 3s --seed 5 --verify",
    );
    honoured(&out, 5_000);
    contains(&out, "sectors checked, all intact");
    let check = perflab_ok(dir.path(), "check disk --target file:t.bin");
    contains(&check, "16384 sectors checked (8.0 MiB), all intact");
}

/// A file overwritten behind perflab's back in the middle of a run: the
/// next verified reads are errors of kind corrupt, the check names the
/// offset and what was found there, and `perflab check disk` finds the
/// damage afterwards too.
#[test]
fn verify_catches_a_file_overwritten_mid_run() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let args = "run disk --target file:t.bin --size 1MiB --spec 4k-randread --verify --rate 1000,1000 --connections 2 --warmup 0s --duration 2s";
    let child = spawn_until_steps(dir.path(), args, 1);
    // Zeros over the middle of the file while the second step reads it.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("t.bin"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &vec![0u8; 256 * 1024], 512 * 1024).unwrap();
    file.sync_all().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "a corrupt read fails the run's check"
    );
    let export = last_export(dir.path());
    let errors = &export["steps"][1]["ops"][0]["errors"];
    assert!(errors["corrupt"].as_u64().unwrap_or(0) > 0, "{errors}");
    let check = export["run"]["check"].to_string();
    contains(&check, "no perflab header");
    let (stdout, _) = perflab_expect(dir.path(), "check disk --target file:t.bin", 1);
    contains(
        &stdout,
        "512 of 2048 sectors do not: offset 524288: no perflab header",
    );
}

/// A writing run killed with SIGKILL: every write it saw acknowledged is
/// in the ledger and on the file, so the check passes.
#[test]
fn a_run_killed_mid_write_leaves_every_acknowledged_write_intact() {
    let dir = tempdir();
    let mut child = spawn_until_steps(
        dir.path(),
        "run disk --target file:t.bin --size 4MiB --spec 4k-randwrite --rate 1000,1000 --connections 4 --warmup 0s --duration 1s",
        1,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let check = perflab_ok(dir.path(), "check disk --target file:t.bin");
    contains(&check, "8192 sectors checked (4.0 MiB), all intact");
}

/// Bad input: one line each, exit 2, and no file created.
#[test]
fn bad_disk_input_gets_one_line_and_creates_nothing() {
    let dir = tempdir();
    for (spec, args, says) in [
        (
            "size=4k share=60; size=8k share=30",
            "--target file:t.bin --size 1MiB",
            "shares sum to 90",
        ),
        (
            "size=1000",
            "--target file:t.bin --size 1MiB",
            "not a multiple of 512",
        ),
        (
            "size=4k align=8k",
            "--target file:t.bin --size 1MiB",
            "larger than the size",
        ),
        (
            "size=2M",
            "--target file:t.bin --size 1MiB",
            "larger than the target",
        ),
        (
            "bogus",
            "--target file:t.bin --size 1MiB",
            "'bogus' is no built-in spec",
        ),
        (
            "4k-randread",
            "--target file:nodir/t.bin --size 1MiB",
            "nodir",
        ),
        ("4k-randread", "--target file:t.bin", "its size is needed"),
        (
            "4k-randread",
            "--target file:t.bin --size 3k",
            "at least 1 MiB",
        ),
        (
            "4k-randread",
            "--target sqlite:t.bin --size 1MiB",
            "not a file",
        ),
    ] {
        let out = perflab(dir.path())
            .args(["run", "disk", "--spec", spec])
            .args(args.split_whitespace())
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{spec} {args}: {err}");
        contains(&err, says);
        assert!(
            !dir.path().join("t.bin").exists(),
            "{spec} {args} created the file"
        );
    }
    // A spec file that never ends (or is far too long) is refused, not read.
    let out = perflab(dir.path())
        .args([
            "run",
            "disk",
            "--target",
            "file:t.bin",
            "--size",
            "1MiB",
            "--spec-file",
            "/dev/zero",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    contains(
        &String::from_utf8_lossy(&out.stderr),
        "/dev/zero: is a character device, not a regular file",
    );
    // A file perflab did not make is never written.
    std::fs::write(dir.path().join("mine.bin"), vec![7u8; 1 << 20]).unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        "run disk --target file:mine.bin --spec 4k-randwrite",
        2,
    );
    contains(&err, "perflab did not make it");
    assert_eq!(
        std::fs::read(dir.path().join("mine.bin")).unwrap(),
        vec![7u8; 1 << 20]
    );
    // Too many I/Os in flight for the file.
    let (_, err) = perflab_expect(
        dir.path(),
        "run disk --target file:t.bin --size 1MiB --spec size=64k --depth 64",
        2,
    );
    contains(&err, "cannot hold 64 I/Os of up to 64.0 KiB in flight");
    assert!(!dir.path().join("t.bin").exists());
}

/// A loop device over a file of `mib` MiB, detached (and its perflab
/// ledger removed) when dropped, even when the test fails.
struct LoopDevice {
    path: String,
    _dir: tempfile::TempDir,
}

impl LoopDevice {
    fn new(mib: u64) -> LoopDevice {
        let dir = tempdir();
        let backing = dir.path().join("backing.img");
        std::fs::File::create(&backing)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&backing)
            .output()
            .expect("losetup runs (util-linux; the tests run as root)");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        LoopDevice {
            path: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            _dir: dir,
        }
    }

    fn ledger(&self) -> std::path::PathBuf {
        let name = self.path.rsplit('/').next().unwrap();
        Path::new("/var/lib/perflab/ledgers").join(format!("{name}.perflab-ledger"))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .output();
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.path])
            .output();
        let _ = std::fs::remove_file(self.ledger());
    }
}

/// A loop device with no file attached holds nothing: refused in one
/// line that says so, not as a transfer larger than the target.
#[test]
fn a_device_that_holds_nothing_is_named_so() {
    // A device freed here is the first one free to the other tests (and
    // to the perflab runs they start), which may attach a file to it
    // before the run opens it: the run then reads their device (the spec
    // only reads) and judges nothing. Such an attempt is made again.
    for _attempt in 0..3 {
        let dev = LoopDevice::new(1);
        let detached = std::process::Command::new("losetup")
            .args(["-d", &dev.path])
            .status()
            .unwrap();
        assert!(detached.success());
        let dir = tempdir();
        let out = perflab(dir.path())
            .args(["run", "disk", "--target"])
            .arg(format!("device:{}", dev.path))
            .args(["--spec", "4k-randread", "--quick"])
            .output()
            .unwrap();
        // (`losetup DEVICE` fails, saying so, for a device with no file.)
        let attached = std::process::Command::new("losetup")
            .arg(&dev.path)
            .output()
            .unwrap()
            .status
            .success();
        if attached {
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        contains(&err, "holds nothing (0 B)");
        contains(&err, "losetup");
        return;
    }
    panic!("another test attached a file to the freed device in each of three attempts");
}

/// A device with a file system: a writing spec is refused in one line
/// naming what was found, a reading one runs, `--destroy-data` writes and
/// the check passes after; mounted, it is refused even with the flag.
#[test]
fn a_device_holding_a_file_system_is_written_only_when_told() {
    let _heavy = crate::support::heavy();
    let dev = LoopDevice::new(64);
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", &dev.path])
        .output()
        .expect("mkfs.ext4 runs (e2fsprogs)");
    assert!(mkfs.status.success());
    let dir = tempdir();
    let target = format!("--target device:{}", dev.path);
    let short = "--depth 2 --warmup 0s --duration 1s";
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run disk {target} --spec 4k-randwrite {short}"),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(
        &err,
        "holds an ext4 file system; the spec writes and would destroy it",
    );
    let out = perflab_ok(
        dir.path(),
        &format!("run disk {target} --spec 4k-randread {short}"),
    );
    contains(&out, "step 1/1: 2 users");
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run disk {target} --spec 4k-randread --verify {short}"),
        2,
    );
    contains(&err, "nothing to check its reads against");
    let out = perflab_ok(
        dir.path(),
        &format!("run disk {target} --spec oltp --destroy-data --verify {short}"),
    );
    contains(&out, "preconditioning");
    contains(&out, "sectors checked, all intact");
    let check = perflab_ok(dir.path(), &format!("check disk {target}"));
    contains(&check, "131072 sectors checked (64.0 MiB), all intact");
    // Formatted and mounted again: never written, whatever the flag.
    assert!(std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", &dev.path])
        .status()
        .unwrap()
        .success());
    let mnt = tempdir();
    assert!(std::process::Command::new("mount")
        .arg(&dev.path)
        .arg(mnt.path())
        .status()
        .unwrap()
        .success());
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run disk {target} --spec 4k-randwrite --destroy-data {short}"),
        2,
    );
    let _ = std::process::Command::new("umount")
        .arg(mnt.path())
        .status();
    contains(&err, "is mounted at");
    // Not a device at all.
    let (_, err) = perflab_expect(
        dir.path(),
        "run disk --target device:/dev/null --spec 4k-randread",
        2,
    );
    contains(&err, "not a block device");
}

/// Writes what a device is to hold before a test: `raw` data with no
/// signature, or a `minix` or `cramfs` file system.
fn fill_device(kind: &str, dev: &str) {
    match kind {
        "raw" => {
            let mut data = vec![0u8; 4 << 20];
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for b in &mut data {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let file = std::fs::OpenOptions::new().write(true).open(dev).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&file, &data, 0).unwrap();
            file.sync_all().unwrap();
        }
        "minix" => {
            let out = std::process::Command::new("mkfs.minix")
                .arg(dev)
                .output()
                .expect("mkfs.minix runs (util-linux)");
            assert!(out.status.success(), "{out:?}");
        }
        "cramfs" => {
            let src = tempdir();
            std::fs::write(src.path().join("hello.txt"), b"hello").unwrap();
            let image = src.path().join("image.cramfs");
            let out = std::process::Command::new("mkfs.cramfs")
                .arg(src.path())
                .arg(&image)
                .output()
                .expect("mkfs.cramfs runs (util-linux)");
            assert!(out.status.success(), "{out:?}");
            let file = std::fs::OpenOptions::new().write(true).open(dev).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&file, &std::fs::read(&image).unwrap(), 0)
                .unwrap();
            file.sync_all().unwrap();
        }
        other => panic!("no such content: {other}"),
    }
}

/// Raw data, a minix and a cramfs file system on a device: a writing spec
/// is refused without `--destroy-data`, in one line naming what blkid
/// found there, and the device is left byte for byte; with the flag it is
/// written.
#[test]
fn a_device_is_written_only_with_destroy_data_whatever_it_holds() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let short = "--depth 2 --warmup 0s --duration 1s";
    for (kind, says) in [
        ("raw", "no signature blkid knows"),
        ("minix", "a minix file system"),
        ("cramfs", "a cramfs file system"),
    ] {
        let dev = LoopDevice::new(16);
        fill_device(kind, &dev.path);
        let before = std::fs::read(&dev.path).unwrap();
        let target = format!("--target device:{}", dev.path);
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run disk {target} --spec 4k-randwrite {short}"),
            2,
        );
        assert_eq!(err.trim().lines().count(), 1, "{kind}: {err}");
        contains(&err, says);
        contains(&err, "--destroy-data");
        assert!(
            std::fs::read(&dev.path).unwrap() == before,
            "{kind}: written without --destroy-data"
        );
        assert!(!dev.ledger().exists(), "{kind}: a ledger was made");
        let out = perflab_ok(
            dir.path(),
            &format!("run disk {target} --spec 4k-randwrite --destroy-data {short}"),
        );
        contains(&out, "preconditioning");
        assert!(
            std::fs::read(&dev.path).unwrap() != before,
            "{kind}: not written with --destroy-data"
        );
    }
}

/// A process in a mount namespace of its own (`unshare -m`) that holds a
/// mount of a device there; killed (by its PID) and waited for when
/// dropped.
struct NamespaceMount {
    child: std::process::Child,
}

impl NamespaceMount {
    fn new(dev: &str, at: &Path) -> NamespaceMount {
        use std::io::BufRead;
        let mut child = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount \"$0\" \"$1\" && echo mounted && exec sleep 600")
            .arg(dev)
            .arg(at)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("unshare runs (util-linux)");
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let holder = NamespaceMount { child };
        assert_eq!(line.trim(), "mounted", "the namespace's mount failed");
        holder
    }
}

impl Drop for NamespaceMount {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ext4 file system mounted only in another mount namespace: a writing
/// spec is refused with and without `--destroy-data`, naming the mount and
/// its namespace's process; nothing is written.
#[test]
fn a_device_mounted_in_another_mount_namespace_is_never_written() {
    let dev = LoopDevice::new(32);
    assert!(std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", &dev.path])
        .status()
        .expect("mkfs.ext4 runs (e2fsprogs)")
        .success());
    let mnt = tempdir();
    let holder = NamespaceMount::new(&dev.path, mnt.path());
    let ours = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !ours.contains(&mnt.path().display().to_string()),
        "the mount is visible here: the test would prove nothing"
    );
    let dir = tempdir();
    for flag in ["", "--destroy-data"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!(
                "run disk --target device:{} --spec 4k-randwrite {flag} --depth 2 --warmup 0s --duration 1s",
                dev.path
            ),
            2,
        );
        assert_eq!(err.trim().lines().count(), 1, "{flag}: {err}");
        contains(&err, &format!("is mounted at {}", mnt.path().display()));
        contains(&err, &format!("process {}", holder.child.id()));
        assert!(!dev.ledger().exists(), "{flag}: a ledger was made");
    }
    drop(holder);
}

/// A device another program holds open exclusively (as a mount, swap or
/// device-mapper does) is refused whatever the flags.
#[test]
fn a_device_held_open_exclusively_is_never_written() {
    use std::os::unix::fs::OpenOptionsExt;
    let dev = LoopDevice::new(16);
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&dev.path)
        .unwrap();
    let dir = tempdir();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run disk --target device:{} --spec 4k-randwrite --destroy-data --depth 2 --warmup 0s --duration 1s",
            dev.path
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "is busy");
    assert!(!dev.ledger().exists());
    drop(held);
}

/// A disk run made `x.bin`; the user removed it and wrote a file of their
/// own there, of the same size or another: the next run refuses it (the
/// stale ledger notwithstanding) and leaves it as it was; `--destroy-data`
/// lets perflab take it over.
#[test]
fn a_file_replaced_behind_perflabs_back_is_never_overwritten() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let short = "--spec 4k-randwrite --depth 2 --warmup 0s --duration 1s";
    perflab_ok(
        dir.path(),
        &format!("run disk --target file:x.bin --size 1MiB {short}"),
    );
    assert!(dir.path().join("x.bin.perflab-ledger").exists());
    for (size, extra) in [(1u64 << 20, ""), (1 << 20, "--size 1MiB"), (3 << 19, "")] {
        let x = dir.path().join("x.bin");
        std::fs::remove_file(&x).unwrap();
        let mine = vec![7u8; size as usize];
        std::fs::write(&x, &mine).unwrap();
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run disk --target file:x.bin {extra} {short}"),
            2,
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        contains(&err, "perflab did not make it");
        contains(&err, "--destroy-data");
        assert!(std::fs::read(&x).unwrap() == mine, "{extra}: overwritten");
    }
    let out = perflab_ok(
        dir.path(),
        &format!("run disk --target file:x.bin --size 1MiB --destroy-data {short}"),
    );
    contains(&out, "preconditioning");
    let check = perflab_ok(dir.path(), "check disk --target file:x.bin");
    contains(&check, "all intact");
    // Taken over, the file is perflab's: the next run reuses it.
    let out = perflab_ok(dir.path(), &format!("run disk --target file:x.bin {short}"));
    contains(&out, "reusing");
}

/// When a run ends, perflab holds nothing of the target's file system: it
/// can be unmounted at once (the ring's registered file was given back
/// only when the kernel tore the ring down, after perflab had exited, and
/// `umount` right after a run failed as busy).
#[test]
fn the_file_system_can_be_unmounted_as_soon_as_a_run_ends() {
    let fs = Tmpfs::new("size=16m");
    let dir = tempdir();
    let target = fs.path().join("t.bin");
    perflab_ok(
        dir.path(),
        &format!(
            "run disk --target file:{} --size 4MiB --spec 4k-randwrite --depth 2 --warmup 0s --duration 1s",
            target.display()
        ),
    );
    assert!(fs.unmount(), "the file system is busy after the run");
}

/// A tmpfs mounted on a fresh temporary directory with `options`
/// (size=…, nr_inodes=…, ro), unmounted when dropped.
pub(crate) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    pub(crate) fn new(options: &str) -> Tmpfs {
        let dir = tempdir();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "perflab-test"])
            .arg(dir.path())
            .status()
            .expect("mount runs (the tests run as root)");
        assert!(status.success(), "cannot mount a tmpfs");
        Tmpfs { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Unmounts it now: whether `umount` succeeded.
    pub(crate) fn unmount(&self) -> bool {
        std::process::Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmpfs {
    /// Unmounts it, waiting up to 5 s for whatever still holds it, then
    /// detaching it lazily: a test leaves no mount behind.
    fn drop(&mut self) {
        let mounted = || {
            std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
                m.lines()
                    .any(|l| l.split(' ').nth(1) == self.dir.path().to_str())
            })
        };
        for _ in 0..50 {
            if !mounted() || self.unmount() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A `--size` beyond the free space of the file's file system is refused
/// before anything is written: one line, exit 2, no file and no ledger.
#[test]
fn a_size_beyond_the_free_space_is_refused_before_writing() {
    let fs = Tmpfs::new("size=8m");
    let dir = tempdir();
    let target = fs.path().join("t.bin");
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run disk --target file:{} --size 64MiB --spec 4k-randwrite --depth 2 --warmup 0s --duration 1s",
            target.display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "free");
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "something was written"
    );
    // The size it offers fits (a rounded "8.0 MiB" would not).
    let offered = err
        .split("give --size ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no size offered: {err}"));
    perflab_ok(
        dir.path(),
        &format!(
            "run disk --target file:{} --size {offered} --spec 4k-randwrite --depth 2 --warmup 0s --duration 1s",
            target.display()
        ),
    );
}

/// Ctrl-C while a new file is preconditioned stops the pass at once (exit
/// 130, nothing measured) and removes the file and its ledger.
#[test]
fn a_signal_during_preconditioning_stops_it_and_removes_the_file() {
    use std::io::BufRead;
    let dir = tempdir();
    let mut child = crate::support::perflab_process(dir.path())
        .args(
            "run disk --target file:x.bin --size 4GiB --spec 4k-randwrite --depth 2 --warmup 0s --duration 1s"
                .split(' '),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with("preconditioning"));
    // SAFETY: a signal to the child this test started, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Ctrl-C was not obeyed during preconditioning");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(started, "no preconditioning line: {err}");
    assert_eq!(status.code(), Some(130), "{err}");
    contains(&err, "interrupted while preconditioning the target");
    assert!(!dir.path().join("x.bin").exists(), "the file was left");
    assert!(!dir.path().join("x.bin.perflab-ledger").exists());
}

/// A file target in a directory on a read-only file system is bad input:
/// one line, exit 2.
#[test]
fn a_file_on_a_read_only_file_system_is_bad_input() {
    let fs = Tmpfs::new("ro,size=1m");
    let dir = tempdir();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run disk --target file:{}/t.bin --size 1MiB --spec 4k-randread --depth 2 --warmup 0s --duration 1s",
            fs.path().display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "read-only file system");
}
