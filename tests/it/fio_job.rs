//! `perflab run disk --fio-job FILE`: a fio job file run on a real file
//! perflab makes in a temporary directory — the stored run's mix, depth and
//! window as the job's — and job files perflab does not run refused in one
//! line naming the file and the line, exit 2, nothing created.

use crate::support::{contains, last_export, perflab, perflab_expect, tempdir};
use std::path::Path;

/// Writes `text` as `name` in `dir`.
fn job_file(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("job file written");
}

/// Runs `perflab run disk --fio-job FILE` and the other arguments; stdout.
fn run_job(dir: &Path, file: &str, args: &str) -> String {
    let out = perflab(dir)
        .args(["run", "disk", "--fio-job", file])
        .args(args.split_whitespace())
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The measured I/Os of each operation of the last run's only step, by name.
fn counts(export: &serde_json::Value) -> Vec<(String, u64)> {
    let steps = export["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "one level: {export}");
    steps[0]["ops"]
        .as_array()
        .expect("ops")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap_or("").to_string(),
                o["ok"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// `got` percent against `want`, within four standard errors of a
/// binomial count of `n` (at least a point): the draws are random.
fn within(got: f64, want: f64, n: u64, what: &str) {
    let p = want / 100.0;
    let bound = (400.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt()).max(1.0);
    assert!(
        (got - want).abs() < bound,
        "{what}: {got:.2}% against {want}% (bound {bound:.2}, {n} I/Os)"
    );
}

/// A 70/30 random read/write mix of 4 KiB and 64 KiB in equal shares at
/// depth 32, its runtime the step's window: one level of 32 outstanding
/// I/Os, the stored plan holding the job, and the I/Os done in the job's
/// read share and size shares.
#[test]
fn a_random_mix_with_a_bssplit_runs_as_the_job_says() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    job_file(
        dir.path(),
        "mix.fio",
        "; 70/30 random, two sizes\n[global]\nioengine=io_uring\nsize=32m\nfilename=t.bin\n\n[mix]\nrw=randrw\nrwmixread=70\nbssplit=4k/50:64k/50\niodepth=32\nruntime=2\ntime_based\ndescription=a mixed load\n",
    );
    let out = run_job(dir.path(), "mix.fio", "--warmup 0s --seed 7");
    contains(&out, "fio job mix.fio [mix] mix \"a mixed load\": 32 outstanding I/Os, buffered; size=4k share=50 read=70 random=100");
    assert!(dir.path().join("t.bin").exists(), "perflab made t.bin");
    let export = last_export(dir.path());
    let plan = &export["run"]["plan"];
    assert_eq!(plan["sweep"]["levels"].as_array().map(Vec::len), Some(1));
    assert_eq!(plan["sweep"]["levels"][0]["value"], 32, "{plan}");
    assert_eq!(plan["duration"].as_f64(), Some(2.0), "{plan}");
    let job = &plan["workload"]["fio_job"];
    assert_eq!(job["file"], "mix.fio");
    assert_eq!(job["section"], "mix");
    assert_eq!(job["spec"]["lines"].as_array().map(Vec::len), Some(2));
    assert_eq!(export["run"]["setup"]["fio_job"]["section"], "mix");
    let ops = counts(&export);
    let names: Vec<&str> = ops.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["4k read", "4k write", "64k read", "64k write"]);
    let total: u64 = ops.iter().map(|(_, n)| n).sum();
    assert!(total >= 1000, "only {total} I/Os: {ops:?}");
    let reads = ops[0].1 + ops[2].1;
    let small = ops[0].1 + ops[1].1;
    let share = |n: u64| n as f64 * 100.0 / total as f64;
    within(share(reads), 70.0, total, "reads");
    within(share(small), 50.0, total, "4k I/Os");
}

/// A sequential read job on psync: only reads of its block size, each
/// following the last (the check's random share is 0), at its depth.
#[test]
fn a_sequential_read_job_reads_in_order() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    job_file(
        dir.path(),
        "seq.fio",
        "[global]\nbs=4k\n[seq]\nname=seqread\nreadwrite=read\nbs=128k\nsize=16m\nfilename=s.bin\nioengine=psync\niodepth=2\nruntime=1s\n",
    );
    let out = run_job(dir.path(), "seq.fio", "--warmup 0s");
    contains(&out, "fio job seq.fio [seq] seqread: 2 outstanding I/Os");
    let line = out
        .lines()
        .find(|l| l.contains(" I/Os: share "))
        .unwrap_or_else(|| panic!("no line figures:\n{out}"));
    contains(line, "read 100.00%");
    contains(line, "random 0.00%");
    let export = last_export(dir.path());
    assert_eq!(export["run"]["plan"]["workload"]["engine"], "psync");
    assert_eq!(export["run"]["plan"]["sweep"]["levels"][0]["value"], 2);
    let ops = counts(&export);
    assert_eq!(ops[0].0, "128k read");
    assert!(ops[0].1 > 0, "{ops:?}");
    assert_eq!(ops[1], ("128k write".to_string(), 0));
}

/// A job's `rate_iops` is an open loop at that rate, its iodepth the
/// connections serving it; a `--depth` sweep replaces both: one step per
/// level.
#[test]
fn a_jobs_rate_is_an_open_loop_and_a_depth_sweep_replaces_it() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    job_file(
        dir.path(),
        "r.fio",
        "[r]\nrw=randread\nsize=8m\nfilename=t.bin\niodepth=3\nrate_iops=100\nnumjobs=2\nruntime=300ms\n",
    );
    run_job(dir.path(), "r.fio", "--warmup 0s");
    let plan = &last_export(dir.path())["run"]["plan"];
    assert_eq!(plan["load"]["kind"], "open", "{plan}");
    assert_eq!(plan["load"]["connections"], 6, "{plan}");
    assert_eq!(plan["sweep"]["levels"][0]["value"].as_f64(), Some(200.0));
    run_job(
        dir.path(),
        "r.fio",
        "--depth 1,2 --warmup 0s --duration 300ms",
    );
    let export = last_export(dir.path());
    let levels = &export["run"]["plan"]["sweep"]["levels"];
    assert_eq!(levels.as_array().map(Vec::len), Some(2), "{levels}");
    assert_eq!(export["run"]["plan"]["load"]["kind"], "closed");
    assert_eq!(levels[1]["value"], 2, "{levels}");
    assert_eq!(export["run"]["plan"]["duration"].as_f64(), Some(0.3));
}

/// A job file perflab does not run: exit 2, one line naming the file and
/// the line, and nothing created.
#[test]
fn what_a_job_asks_that_perflab_does_not_run_is_refused_on_its_line() {
    for (text, args, place, says) in [
        (
            "[j]\nrw=randread\nverify=md5\n",
            "",
            "bad.fio:3:",
            "the option 'verify' is not one perflab runs",
        ),
        ("[j]\nrw=randtrim\n", "", "bad.fio:2:", "rw=randtrim"),
        (
            "[a]\nrw=read\n\n[b]\nrw=write\n",
            "",
            "bad.fio:4:",
            "choose one with --section NAME",
        ),
        (
            "[j]\nbs=99999999999999999999g\n",
            "",
            "bad.fio:2:",
            "not a size",
        ),
        (
            "[j]\nsize=12qb\n",
            "",
            "bad.fio:2:",
            "size=12qb: not a size",
        ),
        ("[a]\n[b]\n", "--section c", "bad.fio:1:", "no section [c]"),
    ] {
        let dir = tempdir();
        job_file(dir.path(), "bad.fio", &format!("{text}filename=t.bin\n"));
        let cmd = format!("run disk --fio-job bad.fio {args}");
        let (_, stderr) = perflab_expect(dir.path(), &cmd, 2);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{text}: {stderr}");
        contains(lines[0], place);
        contains(lines[0], says);
        assert!(!dir.path().join("t.bin").exists(), "{text}: t.bin made");
    }
}

/// A job's `filename=` is a target like `--target`: a file perflab did
/// not make is refused without `--destroy-data` and left as it was.
#[test]
fn a_jobs_file_perflab_did_not_make_is_left_alone() {
    let dir = tempdir();
    let theirs = vec![7u8; 2 << 20];
    std::fs::write(dir.path().join("theirs.bin"), &theirs).unwrap();
    job_file(
        dir.path(),
        "w.fio",
        "[w]\nrw=randwrite\nfilename=theirs.bin\nruntime=1\n",
    );
    let (_, stderr) = perflab_expect(dir.path(), "run disk --fio-job w.fio", 2);
    contains(&stderr, "--destroy-data");
    assert_eq!(
        std::fs::read(dir.path().join("theirs.bin")).unwrap(),
        theirs
    );
    let (_, stderr) = perflab_expect(
        dir.path(),
        "run disk --fio-job w.fio --target file:other.bin",
        2,
    );
    contains(&stderr, "sets filename= too");
}
