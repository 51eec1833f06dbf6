//! Every workload starts without `--target`, as the bank does on
//! `perflab-bank.db`: the disk on perflab's own `./perflab-disk.bin`
//! (made at 1 GiB, then reused), the files on perflab's own
//! `./perflab-files/` (made if absent). Each run says where it went; a
//! file or directory of that name that perflab did not make is refused in
//! one line and left as it was; a file system without room is refused
//! before anything is written.

use crate::disk::Tmpfs;
use crate::support::{contains, perflab_expect, perflab_ok, tempdir};

/// A short sweep: one step of one second.
const SHORT: &str = "--users 1 --warmup 0s --duration 1s";

#[test]
fn the_disk_starts_on_its_own_file_and_reuses_it() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(dir.path(), &format!("run disk {SHORT}"));
    contains(
        &out,
        "no --target: using ./perflab-disk.bin (1.0 GiB, perflab's own)",
    );
    let file = dir.path().join("perflab-disk.bin");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 30);
    // The second run reuses it (no second preconditioning) and says so.
    let again = perflab_ok(dir.path(), &format!("run disk {SHORT}"));
    contains(&again, "no --target: using ./perflab-disk.bin");
    contains(&again, "reus");
    // `perflab check disk` reads the same file back.
    let check = perflab_ok(dir.path(), "check disk");
    contains(&check, "perflab-disk.bin");
}

#[test]
fn a_perflab_disk_bin_perflab_did_not_make_is_left_alone() {
    let dir = tempdir();
    let file = dir.path().join("perflab-disk.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let (out, err) = perflab_expect(dir.path(), &format!("run disk {SHORT}"), 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "perflab-disk.bin exists and perflab did not make it");
    contains(&err, "--target");
    assert!(out.is_empty(), "{out}");
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20]);
}

#[test]
fn the_disk_refuses_its_own_file_where_it_does_not_fit() {
    let fs = Tmpfs::new("size=64m");
    let (_, err) = perflab_expect(fs.path(), &format!("run disk {SHORT}"), 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "free");
    assert_eq!(std::fs::read_dir(fs.path()).unwrap().count(), 0);
}

#[test]
fn the_files_start_in_their_own_directory_and_reuse_it() {
    let dir = tempdir();
    let out = perflab_ok(dir.path(), &format!("run files {SHORT}"));
    contains(&out, "no --target: using ./perflab-files/ (perflab's own)");
    contains(&out, "all intact");
    let own = dir.path().join("perflab-files");
    assert!(own.is_dir());
    // Only perflab's mark is left: the run's own directory is removed.
    let left: Vec<String> = std::fs::read_dir(&own)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [".perflab-files"]);
    let again = perflab_ok(dir.path(), &format!("run files {SHORT}"));
    contains(
        &again,
        "no --target: using ./perflab-files/ (perflab's own)",
    );
}

#[test]
fn a_perflab_files_directory_perflab_did_not_make_is_left_alone() {
    let dir = tempdir();
    let theirs = dir.path().join("perflab-files");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    let (_, err) = perflab_expect(dir.path(), &format!("run files {SHORT}"), 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "perflab-files exists and perflab did not make it");
    contains(&err, "--target dir:");
    let names: Vec<_> = std::fs::read_dir(&theirs).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "something was written in their directory");
    // A plain file of that name is someone else's too.
    let dir = tempdir();
    std::fs::write(dir.path().join("perflab-files"), "x").unwrap();
    let (_, err) = perflab_expect(dir.path(), &format!("run files {SHORT}"), 2);
    contains(&err, "perflab did not make it");
}

#[test]
fn the_files_refuse_their_own_directory_where_the_initial_files_do_not_fit() {
    let fs = Tmpfs::new("size=1m");
    let (_, err) = perflab_expect(
        fs.path(),
        &format!("run files {SHORT} --initial-files 1000 --file-size 64k"),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "free");
    assert!(!fs.path().join("perflab-files").exists());
}
