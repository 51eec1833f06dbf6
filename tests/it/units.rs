//! Each workload's throughput in its own unit: the bank's transactions
//! (`tps`), the web's requests (`req/s`), the disk's I/Os (`IOPS`), the
//! files' and the null target's operations (`ops/s`). The step table's
//! header, the progress lines, the verdict's capacity line, `show`,
//! `compare`, the CSV and the JSON export all name it.

use crate::support::{contains, last_export, perflab_ok, tempdir};
use std::path::Path;

/// Two short steps of `workload` with `args`, in `dir`; the run's stdout.
fn short_run(dir: &Path, workload: &str, args: &str) -> String {
    perflab_ok(
        dir,
        &format!("run {workload} {args} --users 1,2 --warmup 0s --duration 1s"),
    )
}

/// The step table's header: the first line that starts with the load
/// column and names p50.
fn table_header(out: &str) -> &str {
    out.lines()
        .find(|l| l.trim_start().starts_with("users") && l.contains("p50"))
        .unwrap_or_else(|| panic!("no step table in:\n{out}"))
}

/// The verdict's capacity line.
fn capacity_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.trim_start().starts_with("capacity"))
        .unwrap_or_else(|| panic!("no capacity line in:\n{out}"))
}

/// The table's header, the progress lines, the capacity line (after the
/// run and from `analyze`), `show`, `runs`,
/// the CSV, the Markdown and the export's `rate_unit` all name `unit`; `tps` appears
/// in none of them unless it is the unit.
fn names_its_unit(dir: &Path, out: &str, unit: &str) {
    let header = table_header(out);
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns.get(1), Some(&unit), "the header: {header}");
    let cap = capacity_line(out);
    contains(cap, &format!(" {unit} at "));
    let progress = out
        .lines()
        .find(|l| l.starts_with("step 1/2: 1 user:"))
        .unwrap_or_else(|| panic!("no progress line in:\n{out}"));
    contains(progress, &format!(" {unit} "));
    let shown = perflab_ok(dir, "show last");
    assert_eq!(
        table_header(&shown).split_whitespace().nth(1),
        Some(unit),
        "show: {shown}"
    );
    let analyzed = perflab_ok(dir, "analyze last");
    contains(capacity_line(&analyzed), &format!(" {unit} at "));
    let runs = perflab_ok(dir, "runs");
    contains(&runs, &format!(" {unit}  "));
    perflab_ok(dir, "report last --csv csv");
    for file in ["steps.csv", "intervals.csv"] {
        let csv = std::fs::read_to_string(dir.join("csv").join(file)).expect("the CSV is written");
        contains(
            csv.lines().next().unwrap_or(""),
            "throughput,throughput_unit,",
        );
        contains(&csv, &format!(",{unit},"));
    }
    let md = perflab_ok(dir, "report last --md -");
    contains(&md, "Peak throughput ");
    contains(&md, &format!(" {unit} at "));
    let export = last_export(dir);
    assert_eq!(export["run"]["rate_unit"], unit, "the export's rate_unit");
    assert_eq!(
        export["verdict"]["rate_unit"], unit,
        "the verdict's rate_unit"
    );
    if unit != "tps" {
        for text in [out, shown.as_str(), analyzed.as_str(), runs.as_str()] {
            assert!(
                !text.split_whitespace().any(|w| w == "tps"),
                "'tps' for a {unit} workload:\n{text}"
            );
        }
    }
}

#[test]
fn the_bank_counts_transactions_per_second() {
    let dir = tempdir();
    let out = short_run(dir.path(), "bank", "--scale 1");
    names_its_unit(dir.path(), &out, "tps");
}

#[test]
fn the_null_target_counts_operations_per_second() {
    let dir = tempdir();
    let out = short_run(dir.path(), "null", "");
    names_its_unit(dir.path(), &out, "ops/s");
    let out = short_run(dir.path(), "null", "");
    contains(&out, "ops/s");
    let compared = perflab_ok(dir.path(), "compare 1 2");
    contains(&compared, "run 1 ops/s");
}

#[test]
fn the_disk_counts_iops() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = short_run(
        dir.path(),
        "disk",
        "--target file:t.bin --size 8MiB --spec size=4k",
    );
    names_its_unit(dir.path(), &out, "IOPS");
}

#[test]
fn the_files_count_operations_per_second() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = short_run(dir.path(), "files", "--target dir:.");
    names_its_unit(dir.path(), &out, "ops/s");
}

#[test]
fn the_web_counts_requests_per_second() {
    let dir = tempdir();
    let out = short_run(dir.path(), "web", "--target nginx:managed");
    names_its_unit(dir.path(), &out, "req/s");
}
