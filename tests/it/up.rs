//! `perflab up`: a managed database held for a peer tool through the
//! product's lifecycle until SIGTERM, with nothing left behind, and bad
//! input refused before anything starts.

use crate::support::{
    contains, managed_files_removed, perflab_expect, perflab_ok, perflab_process, tempdir,
};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// The server answers a run at the URL it wrote, in a file only its user
/// reads; a SIGTERM stops it, its directory and the file are removed, and
/// perflab exits as after SIGTERM.
#[test]
fn a_server_is_held_until_sigterm_and_nothing_is_left() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let url_file = dir.path().join("pg.url");
    let out_path = dir.path().join("out.txt");
    let mut child = perflab_process(dir.path())
        .args([
            "up",
            "--target",
            "postgres:managed",
            "--pg-set",
            "work_mem=5MB",
            "--url-file",
        ])
        .arg(&url_file)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::metadata(&url_file).map_or(true, |m| m.len() == 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = std::fs::read_to_string(&url_file).unwrap_or_default();
    if url.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no URL written: {}",
            std::fs::read_to_string(&out_path).unwrap_or_default()
        );
    }
    let mode = std::fs::metadata(&url_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let url = url.trim();
    assert!(url.starts_with("postgres://perflab@127.0.0.1:"), "{url}");
    let run = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 --warmup 0s --duration 1s"),
    );
    contains(&run, "stored as run 1");
    // SAFETY: the child is perflab, started above and not yet waited on.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    let out = std::fs::read_to_string(&out_path).unwrap();
    contains(&out, "up until Ctrl-C or SIGTERM");
    contains(&out, url);
    managed_files_removed(&out);
    assert!(!url_file.exists(), "the URL file was left behind");
}

/// No target, one perflab does not manage, or a URL file where a file
/// is: one line, exit 2, and the file as it was.
#[test]
fn bad_up_input_gets_one_line_and_touches_nothing() {
    let dir = tempdir();
    let taken = dir.path().join("taken");
    std::fs::write(&taken, "mine").unwrap();
    for (args, says) in [
        (
            "up".to_string(),
            "--target: perflab up starts the server it names",
        ),
        (
            "up --target sqlite:x.db".to_string(),
            "--target: perflab up starts a server perflab manages, not sqlite:x.db",
        ),
        (
            format!(
                "up --target postgres:managed --url-file {}",
                taken.display()
            ),
            "--url-file: cannot make",
        ),
        (
            "up --target postgres:managed --mariadb-set x=1".to_string(),
            "--mariadb-set: only a managed MariaDB takes it",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), &args, 2);
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
        contains(&err, says);
    }
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "mine");
    assert!(!dir.path().join("x.db").exists());
}
