//! The web workload against real nginx servers on loopback: a managed one
//! (perflab writes the files, starts and removes it) and one a test starts
//! with the library, whose files the test then damages or whose processes
//! it kills. Load is offered at fixed rates (open loop), well under what
//! the machine can serve, so that these tests leave CPU to the tests
//! running beside them.

use crate::support::{
    contains, last_export, perflab_expect, perflab_ok, spawn_until_steps, tempdir,
};
use perflab::sut::managed::nginx::ManagedNginx;
use perflab::workload::web::fileset::{FileSet, FileSetSpec, CLASS_NAMES, SPECWEB_CLASS_SHARES};
use std::collections::BTreeMap;

const SHORT: &str = "--warmup 1s --duration 3s";

/// Requests of each operation over a step's measured intervals, from the export.
fn measured_ops(
    export: &serde_json::Value,
    step: usize,
) -> BTreeMap<String, (u64, u64, BTreeMap<String, u64>)> {
    let mut out = BTreeMap::new();
    for op in export["steps"][step]["ops"].as_array().unwrap() {
        let errors: BTreeMap<String, u64> = op["errors"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect();
        out.insert(
            op["name"].as_str().unwrap().to_string(),
            (
                op["ok"].as_u64().unwrap(),
                op["bytes"].as_u64().unwrap(),
                errors,
            ),
        );
    }
    out
}

/// Sum of a stub_status counter, and of perflab's operations, over every interval of a step.
fn server_and_client_counts(export: &serde_json::Value, step: usize, counter: &str) -> (f64, u64) {
    let mut server = 0.0;
    let mut client = 0;
    for i in export["steps"][step]["intervals"].as_array().unwrap() {
        client += i["ok"].as_u64().unwrap()
            + i["refused"].as_u64().unwrap()
            + i["errors"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>();
        server += i["db"]["counters"][counter].as_f64().unwrap_or(0.0);
    }
    (server, client)
}

/// The directory a managed server's files were in, from its start line.
fn files_dir(out: &str) -> std::path::PathBuf {
    out.lines()
        .find_map(|l| l.split("files in ").nth(1))
        .expect("the server's directory is printed")
        .trim()
        .into()
}

#[test]
fn a_managed_nginx_serves_specweb_with_its_class_shares_and_every_body_verified() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run web --target nginx:managed --fileset specweb:2 --rate 8000 --connections 32 --max-outstanding 100000 --max-error-rate 100% --verify-share 1 --nginx-set worker_processes=2 --warmup 1s --duration 8s",
    );
    contains(&out, "wrote 72 files");
    let export = last_export(dir.path());
    let ops = measured_ops(&export, 0);
    let total: u64 = ops.values().map(|(ok, _, _)| ok).sum();
    assert!(
        total >= 20_000,
        "{total} requests: too few to judge the shares"
    );
    for (name, share) in CLASS_NAMES.iter().zip(SPECWEB_CLASS_SHARES) {
        let (ok, bytes, errors) = &ops[*name];
        assert!(errors.is_empty(), "{name}: {errors:?}");
        let got = *ok as f64 / total as f64 * 100.0;
        // Five standard errors of a share drawn `total` times: 0.35
        // points for a 1% class and 1.8 for a 50% one at 20,000 draws.
        let p = share / 100.0;
        let bound = 5.0 * (p * (1.0 - p) / total as f64).sqrt() * 100.0;
        assert!(
            (got - share).abs() < bound,
            "{name}: {got:.2}% of {total} requests, SPECweb gives {share}% (±{bound:.2})"
        );
        assert!(*bytes > 0);
    }
    // Every class was named as the set names it.
    let names: Vec<&str> = ops.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = CLASS_NAMES.to_vec();
    want.sort();
    assert_eq!(names, want);
    // nginx's own count of requests matches perflab's: the pre-flight
    // request and one status read per interval are nginx's surplus, and
    // the requests perflab sent that nginx had not read yet when the
    // window's last status read came can be short of it, one at most per
    // connection (a request at a time on each: the CI run on record read
    // 56,213 served against 56,215 sent on a busy host).
    let (served, sent) = server_and_client_counts(&export, 0, "requests");
    let intervals = export["steps"][0]["intervals"].as_array().unwrap().len() as f64;
    let connections = 32.0;
    assert!(
        served + connections >= sent as f64 && served - sent as f64 <= intervals + 2.0,
        "nginx counted {served} requests, perflab sent {sent}"
    );
    // The server's processes (master and workers) were followed.
    contains(&out, "server cpu");
    assert_eq!(
        export["run"]["setup"]["fileset"]["files"],
        serde_json::json!(72)
    );
    let files = files_dir(&out);
    assert!(!files.exists(), "{} was left behind", files.display());
}

#[test]
fn a_connection_per_request_opens_as_many_connections_as_requests() {
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        &format!(
            "run web --fileset webbench --connection close --rate 1000 --connections 4 {SHORT}"
        ),
    );
    let export = last_export(dir.path());
    let (accepts, sent) = server_and_client_counts(&export, 0, "accepts");
    let errors: u64 = measured_ops(&export, 0)
        .values()
        .map(|(_, _, e)| e.values().sum::<u64>())
        .sum();
    assert_eq!(errors, 0);
    assert!(sent > 1000, "{sent}");
    // Plus the pre-flight's connection and one per status read; short of
    // it by the connections perflab opened that nginx had not accepted
    // yet at the window's last status read, one at most per connection.
    let intervals = export["steps"][0]["intervals"].as_array().unwrap().len() as f64;
    assert!(
        accepts + 4.0 >= sent as f64 && accepts - sent as f64 <= intervals + 2.0,
        "nginx accepted {accepts} connections for {sent} requests"
    );
}

#[test]
fn users_are_split_over_two_addresses_and_counted_per_address() {
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!("run web --nginx-listen 127.0.0.1,127.0.0.2 --rate 4000 --connections 4 {SHORT}"),
    );
    contains(&out, "@127.0.0.2:");
    let ops = measured_ops(&last_export(dir.path()), 0);
    let per_address = |a: &str| -> u64 {
        ops.iter()
            .filter(|(k, _)| k.ends_with(&format!("@{a}")) || k.contains(&format!("@{a}:")))
            .map(|(_, v)| v.0)
            .sum()
    };
    let (one, two) = (per_address("127.0.0.1"), per_address("127.0.0.2"));
    assert!(one > 0 && two > 0, "{ops:?}");
    // Two connections on each address; a busy test machine may favour one
    // side, but not by more than twice.
    let ratio = one as f64 / two as f64;
    assert!(
        (0.5..2.0).contains(&ratio),
        "2 users each should do about as much: {one} vs {two}"
    );
}

/// A server the test owns: nginx started with the library, SPECweb's
/// files written into its document root.
fn own_server() -> (ManagedNginx, FileSet) {
    let server = ManagedNginx::start(&perflab::sut::ServerOptions::default())
        .expect("nginx starts (apt-get install nginx-light)");
    let set = FileSet::build(&FileSetSpec::Specweb { dirs: 1 }).unwrap();
    set.write_into(&server.docroot()).unwrap();
    (server, set)
}

#[test]
fn a_damaged_file_is_caught_as_corrupt_and_a_missing_one_as_404() {
    let (server, set) = own_server();
    let root = server.docroot();
    // The most requested file of class 1 gets other bytes of the same
    // length; class 0's most requested is removed.
    let pick = |class: usize| {
        set.files
            .iter()
            .filter(|f| f.class == class)
            .max_by(|a, b| a.weight.total_cmp(&b.weight))
            .unwrap()
            .clone()
    };
    let (damaged, missing) = (pick(1), pick(0));
    let path = root.join(&damaged.path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    std::fs::remove_file(root.join(&missing.path)).unwrap();
    let dir = tempdir();
    let base = &server.base_urls()[0];
    perflab_ok(
        dir.path(),
        &format!("run web --target {base} --fileset specweb:1 --verify-share 1 --rate 3000 --connections 2 --max-error-rate 100% {SHORT}"),
    );
    let ops = measured_ops(&last_export(dir.path()), 0);
    let corrupt = ops["1-10KiB"].2.get("corrupt").copied().unwrap_or(0);
    let not_found = ops["<1KiB"].2.get("http:404").copied().unwrap_or(0);
    assert!(corrupt > 100, "{ops:?}");
    assert!(not_found > 100, "{ops:?}");
    // Nothing else failed.
    assert!(
        ops["10-100KiB"].2.is_empty() && ops[">=100KiB"].2.is_empty(),
        "{ops:?}"
    );
    let shown = perflab_ok(dir.path(), "show last");
    contains(&shown, "corrupt");
}

#[test]
fn a_killed_server_ends_the_run_with_the_steps_before_intact() {
    let (server, _set) = own_server();
    let dir = tempdir();
    let base = &server.base_urls()[0];
    let child = spawn_until_steps(
        dir.path(),
        &format!("run web --target {base} --fileset specweb:1 --rate 1000..8000/1000 --connections 4 --warmup 0s --duration 1s"),
        2,
    );
    // nginx's master and its workers, all killed at once.
    let master = server.pid() as i32;
    let mut victims = vec![master];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(master) {
            victims.push(pid);
        }
    }
    for &pid in &victims {
        // SAFETY: signalling the nginx processes this test started, by PID.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        victims.len() >= 2,
        "nginx's master and a worker: {victims:?}"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = perflab_ok(dir.path(), "runs");
    contains(&runs, "partial");
    let shown = perflab_ok(dir.path(), "show last");
    contains(&shown, "lost the target");
    let export = last_export(dir.path());
    let steps = export["steps"].as_array().unwrap();
    assert!(steps.len() >= 2, "the steps before the kill are kept");
    let first = measured_ops(&export, 0);
    assert!(first.values().all(|(_, _, e)| e.is_empty()), "{first:?}");
}

#[test]
fn bad_web_input_gets_one_line_and_exit_2() {
    let dir = tempdir();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let urls = dir.path().join("urls.txt");
    std::fs::write(&urls, "/index.html 5\n/a.png heavy\n").unwrap();
    let empty = tempdir();
    // A port that speaks something else than HTTP: it answers garbage.
    let garbage = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let garbage_port = garbage.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        // Bounded: serves a few connections, then ends.
        for stream in garbage.incoming().take(4).flatten() {
            let mut s = stream;
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"\x15\x03\x01\x00\x02\x02\x46");
        }
    });
    for (args, says) in [
        (
            "run web --target http://127.0.0.1:notaport/".to_string(),
            "--target",
        ),
        (
            "run web --target https://127.0.0.1:1/ --cacert /nonexistent/ca.pem".to_string(),
            "--cacert",
        ),
        (
            "run web --target https://127.0.0.1:1/ --cacert x --insecure".to_string(),
            "--insecure",
        ),
        (
            format!(
                "run web --target http://127.0.0.1:{closed}/ --urls {}",
                urls.display()
            ),
            "line 2",
        ),
        (
            format!(
                "run web --target http://127.0.0.1:{closed}/ --fileset tree:{}",
                empty.path().display()
            ),
            "holds no files",
        ),
        (
            format!("run web --target http://127.0.0.1:{closed}/ {SHORT}"),
            "nothing accepts connections",
        ),
        (
            format!("run web --target http://127.0.0.1:{garbage_port}/ {SHORT}"),
            "HTTP reply",
        ),
        (
            "run web --target http://127.0.0.1:1/ --nginx-set worker_processes=2".to_string(),
            "--nginx-set",
        ),
        ("run web --nginx-set 'a=b;'".to_string(), "--nginx-set"),
        // Counts nginx would fork or allocate without end, or zero.
        (
            "run web --nginx-set worker_processes=99999999999".to_string(),
            "--nginx-set: worker_processes=99999999999: give auto",
        ),
        (
            "run web --nginx-set worker_processes=0".to_string(),
            "--nginx-set: worker_processes=0: give auto",
        ),
        (
            "run web --nginx-set worker_connections=99999999999".to_string(),
            "--nginx-set: worker_connections=99999999999: give 1 to",
        ),
        ("run web --verify-share 2".to_string(), "--verify-share"),
        ("run web --pipeline 0".to_string(), "--pipeline"),
        (
            "run web --pipeline 4 --connection close".to_string(),
            "--pipeline",
        ),
        ("run web --header Host:x".to_string(), "--header"),
        (
            "run bank --target nginx:managed".to_string(),
            "not a database",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), &args, 2);
        contains(&err, says);
        assert_eq!(err.trim().lines().count(), 1, "{args}: {err}");
    }
    assert!(
        !dir.path().join("perflab.db").exists()
            || crate::support::stored_steps(&dir.path().join("perflab.db")) == 0
    );
}

/// A CA and a server certificate for 127.0.0.1 signed by it, as PEM
/// files in `dir`: (ca.pem, cert.pem, key.pem).
pub fn certificates(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "perflab test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    // nginx's workers (www-data) read them.
    for p in [&paths.1, &paths.2] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    (paths.0, paths.1, paths.2)
}

#[test]
fn https_passes_with_the_ca_fails_in_one_line_without_and_passes_insecure_saying_so() {
    let _waits = crate::support::waits();
    let certs = tempdir();
    let (ca, cert, key) = certificates(certs.path());
    let tls = (cert.clone(), key.clone());
    let server = ManagedNginx::start(&perflab::sut::ServerOptions {
        tls_files: Some(tls.clone()),
        ..Default::default()
    })
    .expect("nginx starts with TLS");
    FileSet::build(&FileSetSpec::Webbench)
        .unwrap()
        .write_into(&server.docroot())
        .unwrap();
    let base = &server.base_urls()[0];
    assert!(base.starts_with("https://"), "{base}");
    let dir = tempdir();
    // 300/s, not more: what is judged is the handshake and every reply
    // checked, and beside the suite's heavy tests (the run queue 14 deep)
    // two connections at 1000/s fell behind with 20% of the arrivals
    // dropped, the run failed by its error rate.
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --target {base} --cacert {} --verify-share 1 --rate 300 --connections 2 {SHORT}",
            ca.display()
        ),
    );
    let ops = measured_ops(&last_export(dir.path()), 0);
    let done: u64 = ops.values().map(|(ok, _, _)| ok).sum();
    assert!(
        done > 100 && ops.values().all(|(_, _, e)| e.is_empty()),
        "{ops:?}"
    );
    assert!(!out.contains("--insecure"), "{out}");
    // The system's roots do not know the test's CA.
    let (_, err) = perflab_expect(dir.path(), &format!("run web --target {base} {SHORT}"), 2);
    contains(&err, "its certificate is signed by no CA this side trusts");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = perflab_ok(
        dir.path(),
        &format!("run web --target {base} --insecure --rate 500 --connections 1 {SHORT}"),
    );
    contains(&out, "--insecure: the server's certificate is not checked");
    // Plain HTTP to the TLS port.
    let plain = base.replace("https://", "http://");
    let (_, err) = perflab_expect(dir.path(), &format!("run web --target {plain} {SHORT}"), 2);
    contains(&err, "https://");
    // A managed nginx serves HTTPS with the flags.
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --nginx-tls-cert {} --nginx-tls-key {} --cacert {} --rate 500 --connections 1 {SHORT}",
            cert.display(),
            key.display(),
            ca.display()
        ),
    );
    contains(&out, "https://127.0.0.1:");
    // A CA's certificate served as the server's own, with that CA given:
    // said in words (rustls: `CaUsedAsEndEntity`), with a fix that works.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let own = params.self_signed(&key).unwrap();
    let (own_cert, own_key) = (
        certs.path().join("own.pem"),
        certs.path().join("own-key.pem"),
    );
    std::fs::write(&own_cert, own.pem()).unwrap();
    std::fs::write(&own_key, key.serialize_pem()).unwrap();
    for p in [&own_cert, &own_key] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run web --nginx-tls-cert {} --nginx-tls-key {} --cacert {} --rate 500 --connections 1 {SHORT}",
            own_cert.display(),
            own_key.display(),
            own_cert.display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "shows a CA's certificate as its own");
    contains(&err, "give the server a certificate that its CA signed");
    assert!(!err.contains("CaUsedAsEndEntity"), "{err}");
}

#[test]
fn pipelined_requests_are_all_answered_and_checked() {
    let dir = tempdir();
    perflab_ok(
        dir.path(),
        &format!("run web --fileset specweb:1 --pipeline 8 --rate 4000 --connections 2 --verify-share 1 {SHORT}"),
    );
    let export = last_export(dir.path());
    let ops = measured_ops(&export, 0);
    let errors: u64 = ops.values().map(|(_, _, e)| e.values().sum::<u64>()).sum();
    assert_eq!(errors, 0, "{ops:?}");
    // nginx served what perflab read, plus the requests still in flight
    // when the step ended (8 per user), the pre-flight and the status reads.
    let (served, read) = server_and_client_counts(&export, 0, "requests");
    let intervals = export["steps"][0]["intervals"].as_array().unwrap().len() as f64;
    assert!(
        served >= read as f64 && served - read as f64 <= 2.0 * 8.0 + intervals + 2.0,
        "nginx served {served}, perflab read {read}"
    );
}

/// A key file that nginx's user cannot read (0600, root's) stops a
/// managed nginx: the one line quotes nginx's own error once and says
/// who must read the file, and names no --nginx-set when none was given.
/// With a setting nginx refuses at start, the line names --nginx-set.
#[test]
fn a_managed_nginx_that_cannot_start_quotes_nginx_and_blames_only_what_was_given() {
    use std::os::unix::fs::PermissionsExt;
    let certs = tempdir();
    let (_, cert, key) = certificates(certs.path());
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tempdir();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run web --nginx-tls-cert {} --nginx-tls-key {} --insecure --users 1 {SHORT}",
            cert.display(),
            key.display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "cannot load certificate key");
    assert_eq!(
        err.matches("cannot load certificate key").count(),
        1,
        "{err}"
    );
    contains(&err, "Permission denied");
    contains(&err, "www-data");
    assert!(!err.contains("--nginx-set"), "{err}");
    // A setting `nginx -t` takes (run as root) but nginx's user cannot
    // follow at start: a log in a directory it cannot write.
    let closed = tempdir();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!(
            "run web --nginx-set access_log={}/a.log --users 1 {SHORT}",
            closed.path().display()
        ),
        2,
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    contains(&err, "--nginx-set");
}

/// The processes of the session `sid` (a managed server's), from /proc.
fn session_members(sid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            fields.first() != Some(&"Z") && fields.get(3) == Some(&sid.to_string().as_str())
        })
        .collect()
}

/// Every process a managed nginx forks is held together — its session,
/// and its cgroup as root — and killed as one on stop: workers whose
/// master was killed (left to PID 1, as 602 of them once were) do not
/// survive the server's drop.
#[test]
fn a_managed_nginx_leaves_no_process_behind_even_when_its_master_dies_first() {
    let server = ManagedNginx::start(&perflab::sut::ServerOptions {
        settings: vec![("worker_processes".to_string(), "4".to_string())],
        ..Default::default()
    })
    .expect("nginx starts");
    let master = server.pid();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while session_members(master).len() < 5 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let members = session_members(master);
    assert_eq!(members.len(), 5, "the master and 4 workers: {members:?}");
    // As root, its cgroup holds them all.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let held = server
            .cgroup()
            .and_then(|c| c.holding_dir())
            .expect("a managed server runs in a cgroup as root")
            .to_path_buf();
        let procs = std::fs::read_to_string(held.join("cgroup.procs")).unwrap();
        for pid in &members {
            assert!(
                procs.lines().any(|l| l.trim() == pid.to_string()),
                "{pid} is not in {}: {procs}",
                held.display()
            );
        }
    }
    // The master dies first: its workers are orphans.
    // SAFETY: signalling the nginx master this test started, by its PID.
    unsafe { libc::kill(master as i32, libc::SIGKILL) };
    let dir = server.dir().to_path_buf();
    drop(server);
    assert!(
        session_members(master).is_empty(),
        "left behind: {:?}",
        session_members(master)
    );
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

/// The ledger entry of the perflab process `pid`, once it names a
/// process (nginx has been spawned): its parts as JSON.
fn ledger_parts(pid: u32) -> Option<Vec<serde_json::Value>> {
    let dir = perflab::sut::managed::ledger::ledger_dir();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{pid}-")) && name.ends_with(".json") {
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let json: serde_json::Value = serde_json::from_str(&text).ok()?;
            let parts = json["parts"].as_array()?.clone();
            if parts.iter().any(|p| p["kind"] == "process") {
                return Some(parts);
            }
        }
    }
    None
}

/// Whether the ledger still has an entry of the perflab process `pid`.
fn ledger_has(pid: u32) -> bool {
    std::fs::read_dir(perflab::sut::managed::ledger::ledger_dir())
        .map(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{pid}-"))
            })
        })
        .unwrap_or(false)
}

/// The status of the store's newest run, if it has one.
fn newest_status(store: &std::path::Path) -> Option<String> {
    let conn = rusqlite::Connection::open(store).ok()?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    conn.query_row(
        "SELECT status FROM runs ORDER BY id DESC LIMIT 1",
        [],
        |r| r.get(0),
    )
    .ok()
}

/// Intervals stored so far, over all runs.
fn stored_intervals(store: &std::path::Path) -> i64 {
    let Ok(conn) = rusqlite::Connection::open(store) else {
        return 0;
    };
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    conn.query_row("SELECT count(*) FROM intervals", [], |r| r.get(0))
        .unwrap_or(0)
}

/// A run on a managed nginx, signalled by the test at three moments —
/// while nginx starts, under load, and as the run ends and nginx is
/// stopped — in four ways: two quick SIGTERMs, two quick Ctrl-Cs,
/// SIGTERM to perflab then to its whole process group (what `timeout`
/// does), and one SIGHUP (a closed terminal, taken as SIGTERM). Each time perflab ends by itself with nothing left behind:
/// nginx and every process of its session stopped, its directory and its
/// cgroup removed, its ledger entry cleared, and no run left `running`.
#[test]
fn whatever_signals_come_and_whenever_a_managed_nginx_is_stopped_and_removed() {
    let _waits = crate::support::waits();
    use std::os::unix::process::CommandExt;
    // Two signals of a kind sent at once may merge into one delivery: the
    // second is sent a moment after, as a user's second Ctrl-C is.
    let moment = || std::thread::sleep(std::time::Duration::from_millis(100));
    type Signals = fn(i32, &dyn Fn());
    let term_twice: Signals = |pid, moment| {
        // SAFETY: signalling the perflab this test started, by its PID.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        moment();
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    };
    let int_twice: Signals = |pid, moment| {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGINT) };
        moment();
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGINT) };
    };
    let as_timeout_does: Signals = |pid, moment| {
        // SAFETY: as above; the group is perflab's own (process_group(0)).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        moment();
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGTERM) };
    };
    // A closed terminal: one SIGHUP, taken as SIGTERM.
    let hangup: Signals = |pid, _| {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGHUP) };
    };
    for when in ["start", "load", "stop"] {
        for (how, send) in [
            ("two SIGTERMs", term_twice),
            ("two Ctrl-Cs", int_twice),
            ("as timeout does", as_timeout_does),
            ("a hangup", hangup),
        ] {
            let case = format!("{how} at {when}");
            let dir = tempdir();
            let store = dir.path().join("perflab.db");
            let log = std::fs::File::create(dir.path().join("out.txt")).unwrap();
            let duration = if when == "stop" { "1s" } else { "20s" };
            let mut child = crate::support::perflab_process(dir.path())
                .args([
                    "run",
                    "web",
                    "--target",
                    "nginx:managed",
                    "--rate",
                    "200",
                    "--connections",
                    "1",
                    "--warmup",
                    "0s",
                    "--duration",
                    duration,
                ])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0)
                .spawn()
                .unwrap();
            let pid = child.id();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let mut parts = None;
            // Until the moment comes (or perflab ended by itself).
            loop {
                assert!(std::time::Instant::now() < deadline, "{case}: no moment");
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if parts.is_none() {
                    parts = ledger_parts(pid);
                }
                let ready = parts.is_some()
                    && match when {
                        "start" => true,
                        "load" => stored_intervals(&store) >= 1,
                        _ => newest_status(&store).is_some_and(|s| s != "running"),
                    };
                if ready {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let parts = parts.unwrap_or_else(|| panic!("{case}: no ledger entry"));
            send(pid as i32, &moment);
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{case}: perflab did not end"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let said = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
            assert!(status.code().is_some(), "{case}: killed ({status}): {said}");
            if when != "stop" {
                let code = if how == "two Ctrl-Cs" { 130 } else { 143 };
                assert_eq!(status.code(), Some(code), "{case}: {said}");
            }
            assert!(!ledger_has(pid), "{case}: the ledger entry is left: {said}");
            for part in &parts {
                match part["kind"].as_str() {
                    Some("process") => {
                        let master = part["id"]["pid"].as_u64().unwrap() as u32;
                        assert!(
                            session_members(master).is_empty(),
                            "{case}: nginx's processes are left: {:?}",
                            session_members(master)
                        );
                    }
                    Some("dir" | "cgroup") => {
                        let path = std::path::Path::new(part["path"].as_str().unwrap());
                        assert!(!path.exists(), "{case}: {} is left", path.display());
                    }
                    _ => {}
                }
            }
            assert_ne!(
                newest_status(&store).as_deref(),
                Some("running"),
                "{case}: the run is left running: {said}"
            );
        }
    }
}

/// A managed nginx held to 16 connections a worker (`worker_connections`)
/// swept past them: it answers most requests and closes the connections
/// of the rest. The step says so in those words (not "lost the target"),
/// and the verdict is the admission limit named by the setting, with its
/// value and the steps below it; never the CPU the steps below showed.
#[test]
fn an_nginx_past_its_worker_connections_is_its_admission_limit() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let (out, _) = perflab_expect(
        dir.path(),
        "run web --target nginx:managed --nginx-set worker_connections=16 --users 4,36 --warmup 0.5s --duration 2s",
        1,
    );
    contains(&out, "the server reset or refused the connections of ");
    assert!(!out.contains("lost the target"), "{out}");
    let verdict = perflab_ok(dir.path(), "analyze last");
    contains(&verdict, "bottleneck  admission limit (worker_connections)");
    contains(
        &verdict,
        "at 36 users the server reset or refused the connection of ",
    );
    contains(&verdict, "worker_connections = 16 per worker");
    contains(&verdict, "the steps below it showed: ");
    contains(&verdict, "raise the server's limit on connections");
}

/// An nginx whose `limit_req` holds requests to 100/s (a burst of 5, the
/// rest answered 503): a rate sweep past it is the admission limit, with
/// the replies counted and the rate served stated, held while the load
/// doubled, never a resource; a first step turned away is still said.
#[test]
fn an_nginx_rate_limit_is_its_admission_limit_with_the_rate_it_served() {
    let _heavy = crate::support::heavy();
    let nginx = crate::support::OwnNginx::start_with(
        "127.0.0.1",
        "limit_req_zone $host zone=held:1m rate=100r/s;",
        "limit_req zone=held burst=5 nodelay;",
    );
    let dir = tempdir();
    let target = format!("http://127.0.0.1:{}/", nginx.port);
    let pid = nginx.pid();
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run web --target {target} --server-pid {pid} --rate 50,300,600 --max-error-rate 100% --warmup 0s --duration 2s"
        ),
    );
    contains(
        &out,
        "bottleneck  admission limit (requests turned away: 503 Service Unavailable)",
    );
    contains(
        &out,
        "at 300 req/s the server answered 503 Service Unavailable to ",
    );
    contains(
        &out,
        "while the load grew from 300 req/s to 600 req/s: a limit on the request rate",
    );
    let served: Vec<f64> = out
        .match_indices("), serving ")
        .map(|(i, m)| {
            let rest = &out[i + m.len()..];
            rest[..rest.find(' ').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(served.len(), 2, "{out}");
    for s in served {
        assert!(
            (90.0..=115.0).contains(&s),
            "served {s}/s against 100/s: {out}"
        );
    }
    contains(
        &out,
        "what if     past its admission limit the server turned the work away",
    );
    // Closed loop, one user: the first step fails on its errors, and the
    // verdict still names the limit.
    let (out, _) = perflab_expect(
        dir.path(),
        &format!("run web --target {target} --users 1 --warmup 0s --duration 2s"),
        1,
    );
    contains(&out, "no complete step to analyse");
    contains(
        &out,
        "bottleneck  admission limit (requests turned away: 503 Service Unavailable)",
    );
    contains(&out, "what it served is the limit's rate, not its capacity");
}
