//! What perflab writes at the user's paths, what it reads from them, and
//! what it never shows: every output flag writes through a link, a FIFO or
//! a device and never renames over one, `-` is standard output for each,
//! no flag writes over a results store; a device given as a file to read
//! is refused at once; a password in a probe's URL and a secret header
//! are never printed or stored; a store on a read-only mount, or with one
//! damaged run, is still read.

use crate::support::{contains, perflab, perflab_expect, perflab_ok, repo_file, tempdir};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// A short stored run in `dir`'s store.
fn one_run(dir: &Path) {
    perflab_ok(
        dir,
        "run null --users 1 --warmup 0s --duration 1s --service 1ms --seed 7",
    );
}

/// What is at `path`, not following a link.
fn kind(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

/// A FIFO at `path`.
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Every output flag writes through a link, a FIFO and a character device
/// and leaves each as it was; `-` puts the text on standard output.
#[test]
fn output_paths_that_are_not_regular_files_are_written_through_never_replaced() {
    let dir = tempdir();
    one_run(dir.path());
    // A link to this process's standard output, as /dev/stdout is.
    let stdout = dir.path().join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout).unwrap();
    for (args, says) in [
        ("show 1 --json", "\"plan_given\""),
        ("report 1 --md", "# perflab report"),
        ("analyze 1 --json", "\"capacity\""),
        ("report 1 --html", "<html"),
    ] {
        let said = perflab_ok(dir.path(), &format!("{args} {}", stdout.display()));
        contains(&said, says);
        assert!(kind(&stdout).is_symlink(), "{args} replaced the link");
        let said = perflab_ok(dir.path(), &format!("{args} -"));
        contains(&said, says);
        assert!(
            !dir.path().join("-").exists(),
            "{args} - made a file named -"
        );
    }

    // A FIFO: its reader gets the report, and it stays a FIFO.
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let (sent, read) = std::sync::mpsc::channel();
    {
        let fifo = fifo.clone();
        std::thread::spawn(move || sent.send(std::fs::read_to_string(fifo).unwrap()));
    }
    perflab_ok(dir.path(), &format!("report 1 --md {}", fifo.display()));
    let was_fifo = kind(&fifo).is_fifo();
    let got = read.recv_timeout(std::time::Duration::from_secs(30));
    if got.is_err() && was_fifo {
        // Nothing was written to it: let the reader go.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
    }
    assert!(was_fifo, "the FIFO was replaced");
    contains(
        &got.expect("the FIFO's reader got the report"),
        "# perflab report",
    );

    // A character device (a node with /dev/null's numbers) stays one, and
    // the manifests with their key went nowhere else.
    let null = dir.path().join("null");
    let status = std::process::Command::new("mknod")
        .args([null.to_str().unwrap(), "c", "1", "3"])
        .status()
        .unwrap();
    assert!(status.success());
    let kube = |out: &Path| {
        format!(
            "kube --generators 1 --image i --out {} -- run null --users 1",
            out.display()
        )
    };
    perflab_ok(dir.path(), &kube(&null));
    assert!(kind(&null).is_char_device());
    let (manifests, said) = perflab_expect(dir.path(), &kube(Path::new("-")), 0);
    contains(&manifests, "\nkind: Secret\n");
    contains(&said, "kubectl apply -f -");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.iter().all(|f| !f.starts_with(".tmp")),
        "a temporary file was left: {files:?}"
    );
}

/// No output flag writes over the results store (kube included), nor
/// through a link to it: one line, exit 2, the store byte for byte.
#[test]
fn no_output_flag_writes_over_a_results_store() {
    let dir = tempdir();
    one_run(dir.path());
    let store = dir.path().join("perflab.db");
    let link = dir.path().join("store-link.yaml");
    std::os::unix::fs::symlink(&store, &link).unwrap();
    let before = std::fs::read(&store).unwrap();
    for path in [&store, &link] {
        for args in [
            "kube --generators 1 --image i --out PATH -- run null --users 1",
            "show 1 --json PATH",
            "analyze 1 --json PATH",
            "report 1 --html PATH",
            "report 1 --md PATH",
        ] {
            let args = args.replace("PATH", path.to_str().unwrap());
            let (_, err) = perflab_expect(dir.path(), &args, 2);
            contains(&err, "would destroy it");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(kind(&link).is_symlink());
            assert_eq!(std::fs::read(&store).unwrap(), before, "{args}");
        }
    }
}

/// `/dev/zero` given as a certificate, a CA, a token, a lab file or the
/// store is refused at once in one line, exit 2, and `/dev/zero-journal`
/// is never made. (Each would have been read for ever.)
#[test]
fn a_device_given_as_a_file_is_refused_at_once() {
    let dir = tempdir();
    let journal = Path::new("/dev/zero-journal");
    let journal_before = journal.exists();
    for (args, says) in [
        (
            "run web --target https://127.0.0.1:1/ --cacert /dev/zero --users 1",
            "is a character device, not a regular file",
        ),
        (
            "run null --users 1 --probe agent://127.0.0.1:1 --agent-cacert /dev/zero",
            "is a character device, not a regular file",
        ),
        (
            "agent --tls-cert /dev/zero --tls-key /dev/zero",
            "is a character device, not a regular file",
        ),
        (
            "run null --users 1 --probe agent://127.0.0.1:1 --token-file /dev/zero",
            "is a character device, not a regular file",
        ),
        ("lab /dev/zero", "is a character device, not a regular file"),
        (
            "run null --users 1 --generators-file /dev/zero",
            "is a character device, not a regular file",
        ),
        (
            "run null --users 1 --duration 1s --store /dev/zero",
            "is a character device, not a file",
        ),
        ("runs --store /dev/zero", "is a character device"),
    ] {
        let mut cmd = perflab(dir.path());
        cmd.args(args.split_whitespace())
            .timeout(std::time::Duration::from_secs(30));
        let out = cmd.assert().code(2).get_output().clone();
        let err = String::from_utf8_lossy(&out.stderr);
        contains(&err, says);
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
    }
    assert_eq!(
        journal.exists(),
        journal_before,
        "/dev/zero-journal was made"
    );
}

/// A stand-in node_exporter on loopback: serves a captured page to every
/// request, and keeps each request's head. Ends with the test.
fn fake_node_exporter() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let page = std::fs::read_to_string(repo_file("tests/fixtures/node-exporter/t0.prom")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (port, heads)
}

/// A password in a probe's URL is used (basic authentication) but never
/// printed, stored, exported or reported; an agent's address with one is
/// refused without showing it; a rejected secret header is not echoed.
#[test]
fn passwords_in_probe_urls_and_secret_headers_are_never_shown_or_stored() {
    let dir = tempdir();
    let (port, heads) = fake_node_exporter();
    let probe = format!("node-exporter://bob:SECRETPW@127.0.0.1:{port}");
    let said = perflab_ok(
        dir.path(),
        &format!("run null --users 1 --warmup 0s --duration 2s --service 1ms --probe {probe}"),
    );
    assert!(
        heads
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.contains("Authorization: Basic")),
        "the probe's password was not used"
    );
    let mut shown = said;
    for args in [
        "show 1",
        "show 1 --json -",
        "analyze 1",
        "analyze 1 --json -",
        "runs",
    ] {
        shown.push_str(&perflab_ok(dir.path(), args));
    }
    perflab_ok(dir.path(), "report 1 --html r.html --md r.md");
    shown.push_str(&std::fs::read_to_string(dir.path().join("r.html")).unwrap());
    shown.push_str(&std::fs::read_to_string(dir.path().join("r.md")).unwrap());
    assert!(!shown.contains("SECRETPW"), "the password was shown");
    contains(&shown, &format!("node-exporter://bob:***@127.0.0.1:{port}"));
    let store = std::fs::read(dir.path().join("perflab.db")).unwrap();
    assert!(
        !store.windows(8).any(|w| w == b"SECRETPW"),
        "the password is in the store"
    );

    for args in [
        "run null --users 1 --probe agent://bob:SECRETPW@127.0.0.1:1".to_string(),
        "watch --probe agent://bob:SECRETPW@127.0.0.1:1 --duration 1s".to_string(),
        "run null --users 1 --generators agent://bob:SECRETPW@127.0.0.1:1".to_string(),
    ] {
        let (out, err) = perflab_expect(dir.path(), &args, 2);
        assert!(!(out + &err).contains("SECRETPW"), "{args}: {err}");
    }
    let out = perflab(dir.path())
        .args([
            "run",
            "web",
            "--target",
            "http://127.0.0.1:1/",
            "--header",
            "Authorization: Bearer SECRETPW\u{1}",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    contains(&err, "Authorization: ***");
    assert!(!err.contains("SECRETPW"), "{err}");
}

/// A read-only bind mount of a directory, unmounted on drop.
struct ReadOnlyView(std::path::PathBuf);

impl ReadOnlyView {
    fn of(dir: &Path, at: &Path) -> Self {
        std::fs::create_dir(at).unwrap();
        let bind = std::process::Command::new("mount")
            .args(["--bind", dir.to_str().unwrap(), at.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(bind.success(), "mount --bind (this test needs root)");
        let view = ReadOnlyView(at.to_path_buf());
        let ro = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro", at.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(ro.success(), "remount read-only");
        view
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A store on a read-only mount is read by every reading command, and
/// left as it was; `runs` names a damaged run and lists the others.
#[test]
fn a_store_on_a_read_only_mount_and_a_damaged_run_are_still_read() {
    let root = tempdir();
    let dir = root.path().join("rw");
    std::fs::create_dir(&dir).unwrap();
    one_run(&dir);
    one_run(&dir);
    one_run(&dir);
    let view = ReadOnlyView::of(&dir, &root.path().join("ro"));
    let store = view.0.join("perflab.db");
    let s = store.display();
    for args in [
        format!("runs --store {s}"),
        format!("show 2 --store {s}"),
        format!("show 2 --json - --store {s}"),
        format!("analyze 2 --store {s}"),
        format!("compare 1 2 --store {s}"),
        format!("report 1 --md - --store {s}"),
        format!("diff-hosts 1 2 --store {s}"),
    ] {
        let (out, err) = perflab_expect(root.path(), &args, 0);
        assert!(!out.is_empty(), "{args}: {err}");
    }
    drop(view);

    // Run 2's status becomes a blob: run 2 is named, 1 and 3 listed.
    let db = rusqlite::Connection::open(dir.join("perflab.db")).unwrap();
    db.execute("UPDATE runs SET status = X'00ff' WHERE id = 2", [])
        .unwrap();
    drop(db);
    let said = perflab_ok(&dir, "runs");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 4, "{said}");
    assert!(lines[1].trim_start().starts_with("1  "), "{said}");
    assert!(lines[2].trim_start().starts_with("2  damaged"), "{said}");
    assert!(lines[3].trim_start().starts_with("3  "), "{said}");
}
