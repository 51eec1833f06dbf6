//! The bank through a real pgbouncer in front of a real PostgreSQL (both
//! started by the test on free loopback ports, pgbouncer as the
//! `postgres` user it insists on, and stopped when the test ends): a
//! session pool whose connections are all taken is the sweep's admission
//! limit, the pool's size, with its settings as its console said them; a
//! pool that hands transactions to other sessions' server connections is
//! refused in one line, exit 2, before anything is loaded (its console
//! read) or at the first statement it loses (not read).

use crate::support::{contains, last_export, perflab_expect, tempdir};
use perflab::sut::managed::postgres::ManagedPostgres;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

/// A pgbouncer the test starts in front of `server`, until dropped.
struct OwnPgbouncer {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl OwnPgbouncer {
    /// Pools `server`'s perflab database in `mode` with `size` server
    /// connections; `console` lets the server's user read its console.
    fn start(server: &ManagedPostgres, mode: &str, size: u32, console: bool) -> OwnPgbouncer {
        let dir = tempdir();
        let url = server.url();
        let server_port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .expect("the managed server's URL names its port");
        let port = crate::support::free_port();
        let d = dir.path().display();
        std::fs::write(dir.path().join("users.txt"), "\"perflab\" \"\"\n").unwrap();
        std::fs::write(
            dir.path().join("pgbouncer.ini"),
            format!(
                "[databases]\nperflab = host=127.0.0.1 port={server_port} dbname=perflab user=perflab\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {d}/users.txt\n{}pool_mode = {mode}\ndefault_pool_size = {size}\nquery_wait_timeout = 2\nlogfile = {d}/pgbouncer.log\n",
                if console { "admin_users = perflab\n" } else { "" }
            ),
        )
        .unwrap();
        for entry in ["", "users.txt", "pgbouncer.ini"] {
            let path = dir.path().join(entry);
            let mode = if entry.is_empty() { 0o777 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        // SAFETY: getpwnam with a NUL-terminated name; the entry is read
        // at once, before any other call could reuse its storage.
        let uid = unsafe {
            let pw = libc::getpwnam(c"postgres".as_ptr());
            assert!(!pw.is_null(), "the postgres user exists");
            ((*pw).pw_uid, (*pw).pw_gid)
        };
        let child = std::process::Command::new("/usr/sbin/pgbouncer")
            .arg(dir.path().join("pgbouncer.ini"))
            .uid(uid.0)
            .gid(uid.1)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("pgbouncer starts (apt-get install pgbouncer)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pgbouncer did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        OwnPgbouncer {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("postgres://perflab@127.0.0.1:{}/perflab", self.port)
    }
}

impl Drop for OwnPgbouncer {
    fn drop(&mut self) {
        // SAFETY: signalling the pgbouncer this test started, by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn server() -> ManagedPostgres {
    ManagedPostgres::start(&Default::default())
        .expect("a PostgreSQL server starts (are the server binaries installed?)")
}

/// A server with the bank loaded on it directly, behind its own pgbouncer
/// in session pooling with three server connections (perflab's
/// statistics session holds one), and the directory the runs work in.
fn full_session_pool() -> (ManagedPostgres, OwnPgbouncer, tempfile::TempDir) {
    let server = server();
    let pool = OwnPgbouncer::start(&server, "session", 3, true);
    let dir = tempdir();
    perflab_expect(
        dir.path(),
        &format!(
            "run bank --target {} --users 1 --warmup 0s --duration 1s",
            server.url()
        ),
        0,
    );
    (server, pool, dir)
}

/// Three server connections in session pooling, perflab's statistics
/// session holding one: the third user waits in the pool's queue until
/// pgbouncer ends it (its FATAL query_wait_timeout). The run is partial,
/// refused past the pool's size, never "lost the target", and the verdict
/// names the pool with what its console said.
#[test]
fn a_full_session_pool_is_the_sweeps_admission_limit() {
    let _heavy = crate::support::heavy();
    let (_server, pool, dir) = full_session_pool();
    let (out, err) = perflab_expect(
        dir.path(),
        &format!(
            "run bank --target {} --users 1,2,4 --warmup 0s --duration 1s",
            pool.url()
        ),
        1,
    );
    let said = format!("{out}{err}");
    contains(
        &said,
        "the server refused a session past its pool size at step 3 (4 users)",
    );
    contains(&said, "query_wait_timeout");
    assert!(!said.contains("lost the target"), "{said}");
    let export = last_export(dir.path());
    assert_eq!(
        export["steps"].as_array().map(Vec::len),
        Some(2),
        "{export}"
    );
    let b = &export["verdict"]["bottleneck"];
    assert_eq!(b["kind"], "admission_limit", "{b}");
    assert_eq!(b["name"], "admission limit (pool size)", "{b}");
    let evidence = b["evidence"].to_string();
    contains(
        &evidence,
        &format!("perflab connected to port {}", pool.port),
    );
    contains(
        &evidence,
        "pgbouncer's console said: pool_mode = session, default_pool_size = 3",
    );
    contains(&evidence, "perflab's statistics session one of them");
}

/// Transaction pooling is refused in one line, exit 2: from the console
/// before anything is loaded, or, the console closed to the user, at the
/// first statement a session lost to another's server connection.
#[test]
fn a_transaction_pool_is_refused_in_one_line() {
    let _heavy = crate::support::heavy();
    let server = server();
    let dir = tempdir();
    for console in [true, false] {
        let pool = OwnPgbouncer::start(&server, "transaction", 3, console);
        let (out, err) = perflab_expect(
            dir.path(),
            &format!(
                "run bank --target {} --users 1,2 --warmup 0s --duration 1s",
                pool.url()
            ),
            2,
        );
        contains(&err, "pools by transaction or statement");
        contains(&err, "pool_mode = session");
        if console {
            contains(&err, "pgbouncer's console said pool_mode = transaction");
        }
        assert!(!out.contains("step 1/"), "{console}: {out}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A session the full pool keeps waiting (perflab gives it 10 s) does not
/// hold a Ctrl-C: the run ends as interrupted (130), its first step kept,
/// not refused when the wait runs out.
#[test]
fn a_signal_while_the_pool_keeps_a_session_waiting_ends_the_run() {
    let _heavy = crate::support::heavy();
    let (_server, pool, dir) = full_session_pool();
    let mut child = crate::support::spawn_until_steps(
        dir.path(),
        &format!(
            "run bank --target {} --users 1,4 --warmup 0s --duration 1s",
            pool.url()
        ),
        1,
    );
    // Step 2's third user is in the pool's queue by now.
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: signalling the perflab this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("perflab ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
    let export = last_export(dir.path());
    assert_eq!(
        export["steps"].as_array().map(Vec::len),
        Some(1),
        "{export}"
    );
    let reason = export["run"]["status_reason"].to_string();
    assert!(reason.contains("interrupted"), "{export}");
}
