//! The bank on a real MariaDB server, started by the test in a temporary
//! directory on a free loopback port and stopped when the test ends. One
//! test starts it with performance_schema collecting current waits, the
//! others with the server's default (off), so both ways of sampling the
//! sessions' waits run.

use crate::support::{contains, perflab_expect, perflab_ok, tempdir};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SHORT: &str = "--warmup 0s --duration 1s";

/// A MariaDB server of the test's own.
pub(crate) struct MariaDb {
    dir: PathBuf,
    child: Child,
    port: u16,
}

/// performance_schema ON, with every wait instrument and the
/// events_waits_current consumer (both need a server start to take effect).
const PERFORMANCE_SCHEMA: [&str; 3] = [
    "--performance-schema=ON",
    "--performance-schema-consumer-events-waits-current=ON",
    "--performance-schema-instrument=wait/%=ON",
];

// Started by hand, not as a managed server: these tests reach a MariaDB
// perflab did not start (`--target mysql://`, its credentials, its
// performance_schema as its operator set it), which the managed kind's
// own tests do not.
impl MariaDb {
    pub(crate) fn start() -> Self {
        Self::start_with(&[])
    }

    fn start_with(options: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("perflab-mariadb-")
            .tempdir()
            .unwrap()
            .keep();
        let as_root = unsafe { libc::geteuid() } == 0;
        if as_root {
            let status = Command::new("chown")
                .arg("mysql:mysql")
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let data = dir.join("data");
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=mysql", "--skip-test-db"])
            // Its own temporary directory: installs running side by side
            // in one /tmp now and then lost each other's temporary tables.
            .arg(format!("--tmpdir={}", dir.display()))
            .output()
            .expect("mariadb-install-db runs (is mariadb-server installed?)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--log-error={}", dir.join("log").display()))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--user=mysql", "--skip-log-bin"])
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd starts");
        let server = MariaDb { dir, child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let setup = server.sql(
                "CREATE USER 'perflab'@'127.0.0.1' IDENTIFIED BY 'bank-pw';
                 CREATE DATABASE perflab;
                 GRANT ALL ON *.* TO 'perflab'@'127.0.0.1';",
            );
            if setup {
                return server;
            }
            assert!(Instant::now() < deadline, "MariaDB did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs SQL as root over the server's socket.
    pub(crate) fn sql(&self, sql: &str) -> bool {
        Command::new("mariadb")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .args(["-u", "root", "-e", sql])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// One value of a query on the perflab database, as root.
    pub(crate) fn value(&self, sql: &str) -> String {
        let out = Command::new("mariadb")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .args(["-u", "root", "-N", "-B", "perflab", "-e", sql])
            .output()
            .expect("mariadb runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `mariadb-dump` of some tables of the perflab database: their
    /// definitions and every row.
    fn dump(&self, tables: &[&str]) -> String {
        let out = Command::new("mariadb-dump")
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .args([
                "-u",
                "root",
                "--skip-dump-date",
                "--skip-comments",
                "perflab",
            ])
            .args(tables)
            .output()
            .expect("mariadb-dump runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn url(&self, password: &str) -> String {
        format!("mysql://perflab:{password}@127.0.0.1:{}/perflab", self.port)
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        // SAFETY: signalling the server this test started, by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn both_mixes_run_and_check_on_mariadb() {
    let _heavy = crate::support::heavy();
    let db = MariaDb::start();
    let dir = tempdir();
    let url = db.url("bank-pw");
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1,4 {SHORT}"),
    );
    contains(&out, "loaded 100011 rows");
    contains(&out, "check: passed");
    // The server's counters are stored with every interval.
    let export: serde_json::Value = crate::support::last_export(dir.path());
    // The server's settings are in the run's inventory.
    assert_eq!(export["run"]["inventory"]["db.engine"], "mariadb");
    assert!(export["run"]["inventory"]["db.innodb_buffer_pool_size"].is_string());
    // The doctor reads them too: the test server's buffer pool is small.
    let doctor = crate::support::perflab(dir.path())
        .args(["doctor", "--sample", "0s", "--json", "--target", &url])
        .output()
        .unwrap();
    assert!(matches!(doctor.status.code(), Some(0 | 1)), "{doctor:?}");
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["area"] == "database"
                && f["title"]
                    .as_str()
                    .unwrap()
                    .starts_with("the InnoDB buffer pool is")),
        "{report}"
    );
    let step = &export["steps"][1];
    let commits = step["db"]["counters"]["commits"].as_f64().unwrap();
    assert!(commits >= step["summary"]["completed"].as_f64().unwrap() * 0.9);
    assert!(
        step["db"]["counters"]["now_threads_running"]
            .as_f64()
            .unwrap()
            >= 1.0
    );
    assert!(step["intervals"][0]["db"].is_object());
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --mix atm --users 4 {SHORT}"),
    );
    contains(&out, "reused the loaded bank");
    contains(&out, "ok   no overdraft");
    contains(&out, "check: passed");
    let check = perflab_ok(dir.path(), &format!("check bank --target {url}"));
    contains(&check, "check: passed");
    for (what, text) in [
        ("run", &out),
        ("check", &check),
        ("runs", &perflab_ok(dir.path(), "runs")),
    ] {
        assert!(!text.contains("bank-pw"), "the password is in {what}");
    }
    assert!(db.sql("UPDATE perflab.perflab_tellers SET tbalance = tbalance - 5 WHERE tid = 3"));
    let (out, _) = perflab_expect(dir.path(), &format!("check bank --target {url}"), 1);
    contains(&out, "FAIL money conserved");
}

/// Wait samples of every measured interval of the newest run's first step,
/// summed by class.
fn sampled_waits(dir: &std::path::Path) -> BTreeMap<String, u64> {
    let export = crate::support::last_export(dir);
    let mut waits = BTreeMap::new();
    for interval in export["steps"][0]["intervals"].as_array().unwrap() {
        if interval["phase"] != "measured" {
            continue;
        }
        for (class, n) in interval["db"]["waits"].as_object().unwrap() {
            *waits.entry(class.clone()).or_insert(0) += n.as_u64().unwrap();
        }
    }
    waits
}

/// TPC-B at scale 1 puts every user on one branch row: the sampler sees
/// sessions waiting for row locks. Balance inquiries lock nothing.
/// `performance_schema` is the server setting the run's inventory must show.
fn row_lock_waits_are_sampled(db: &MariaDb, performance_schema: &str) -> BTreeMap<String, u64> {
    let dir = tempdir();
    let url = db.url("bank-pw");
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --scale 1 --users 24 --warmup 0s --duration 3s"),
    );
    let locked = sampled_waits(dir.path());
    assert!(
        locked.get("Lock:row lock").copied().unwrap_or(0) > 0,
        "{locked:?}"
    );
    let export = crate::support::last_export(dir.path());
    assert_eq!(
        export["run"]["inventory"]["db.performance_schema"],
        performance_schema
    );
    let counters = &export["steps"][0]["db"]["counters"];
    assert!(
        counters["row_lock_waits"].as_f64().unwrap() > 0.0,
        "{counters}"
    );
    assert!(
        counters["log_write_requests"].as_f64().unwrap() > 0.0,
        "{counters}"
    );
    assert!(
        counters["now_row_lock_current_waits"].is_number(),
        "{counters}"
    );
    // MariaDB's own account of its flushes and commits: the fsyncs (its
    // log's among the data files' on 10.8+), the storage engine's commits,
    // and the fsyncs and reads in flight looked at ten times a second.
    for name in ["data_fsyncs", "handler_commits", "pending_looks"] {
        assert!(
            counters[name].as_f64().unwrap_or(0.0) > 0.0,
            "{name}: {counters}"
        );
    }
    for name in ["data_fsyncs_pending", "data_reads_pending"] {
        assert!(counters[name].is_number(), "{name}: {counters}");
    }
    perflab_ok(
        dir.path(),
        &format!(
            "run bank --target {url} --mix atm:balance=1,withdraw=0,deposit=0,transfer=0 --users 8 --warmup 0s --duration 2s"
        ),
    );
    let reading = sampled_waits(dir.path());
    assert!(!reading.contains_key("Lock:row lock"), "{reading:?}");
    // The sessions were sampled all the same.
    let seen = reading.get("CPU").copied().unwrap_or(0)
        + reading.get("Client:ClientRead").copied().unwrap_or(0);
    assert!(seen >= 8, "{reading:?}");
    locked
}

/// Whether the sampler of `db` reads performance_schema's current waits.
fn sampler_uses_performance_schema(db: &MariaDb) -> bool {
    let env = |_: &str| None;
    let target = perflab::sut::mysql::resolve(&db.url("bank-pw"), &env).unwrap();
    perflab::sut::mysql::stats::MyStats::connect(&target)
        .unwrap()
        .uses_performance_schema()
}

#[test]
fn row_lock_waits_are_sampled_without_performance_schema() {
    let _heavy = crate::support::heavy();
    let db = MariaDb::start();
    assert!(!sampler_uses_performance_schema(&db));
    let waits = row_lock_waits_are_sampled(&db, "OFF");
    // Without performance_schema a running statement is CPU, nothing finer.
    assert!(
        waits
            .keys()
            .all(|k| ["Lock:row lock", "CPU", "Client:ClientRead"].contains(&k.as_str())),
        "{waits:?}"
    );
}

#[test]
fn row_lock_waits_are_sampled_with_performance_schema() {
    let _heavy = crate::support::heavy();
    let db = MariaDb::start_with(&PERFORMANCE_SCHEMA);
    assert!(sampler_uses_performance_schema(&db));
    let waits = row_lock_waits_are_sampled(&db, "ON");
    eprintln!("wait classes with performance_schema: {waits:?}");
}

/// The user's tables named like a bank's, and one named like perflab's:
/// the look-alike refuses the load (`--reload` too) with everything left
/// as it was; without it the bank goes in beside the user's tables, and
/// `--reload` replaces only perflab's own.
#[test]
fn the_bank_never_drops_a_mariadb_table_it_did_not_make() {
    let _heavy = crate::support::heavy();
    let db = MariaDb::start();
    let dir = tempdir();
    let url = db.url("bank-pw");
    assert!(db.sql(
        "CREATE TABLE perflab.accounts (aid INT PRIMARY KEY, owner TEXT);
         INSERT INTO perflab.accounts VALUES (1, 'ada'), (2, 'grace');
         CREATE TABLE perflab.history (id INT, what TEXT);
         INSERT INTO perflab.history VALUES (1, 'opened');
         CREATE TABLE perflab.perflab_tellers (note TEXT);
         INSERT INTO perflab.perflab_tellers VALUES ('mine');"
    ));
    let all = ["accounts", "history", "perflab_tellers"];
    let before = db.dump(&all);
    for reload in ["", " --reload"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target {url} --users 1 {SHORT}{reload}"),
            2,
        );
        contains(
            &err,
            "already has table perflab_tellers, which perflab did not make",
        );
        assert_eq!(db.dump(&all), before);
    }
    assert!(db.sql("DROP TABLE perflab.perflab_tellers"));
    let users = ["accounts", "history"];
    let mine = db.dump(&users);
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT}"),
    );
    contains(&out, "check: passed");
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT} --reload"),
    );
    assert_eq!(db.dump(&users), mine);
}

#[test]
fn a_wrong_mariadb_password_gets_one_line_and_exit_2() {
    let db = MariaDb::start();
    let dir = tempdir();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run bank --target {} --users 1 {SHORT}", db.url("not-it")),
        2,
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    contains(&err, "refused the password");
    assert!(!err.contains("not-it"));
}

/// `mariadb:managed`: perflab installs a MariaDB in a fresh directory
/// (its redo log in another, on a tmpfs: `--log-dir`),
/// starts it with the `--mariadb-set` options and on its CPUs, runs the
/// bank on it, follows its processes, and removes it all afterwards; a
/// password drawn for the server reaches neither the output nor the store.
#[test]
fn a_managed_mariadb_runs_the_sweep_and_is_removed() {
    let _heavy = crate::support::heavy();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_ne!(online.trim(), "0", "this test needs two CPUs");
    let dir = tempdir();
    // Its redo log on another device (a tmpfs), in a directory of its own.
    let logs = tempfile::tempdir_in("/dev/shm").unwrap();
    let args = format!(
        "run bank --target mariadb:managed --mariadb-set innodb_buffer_pool_size=64M --mariadb-cpus 1 --log-dir {} --users 1,2 {SHORT}",
        logs.path().display()
    );
    let mut child = crate::support::perflab_process(dir.path())
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The password drawn for the server is in its init file, read while
    // the server runs.
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut out = String::new();
    let mut password = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if let Some(files) = line.split("files in ").nth(1) {
            let init =
                std::fs::read_to_string(PathBuf::from(files.trim()).join("init.sql")).unwrap();
            password = init
                .split("IDENTIFIED BY '")
                .nth(1)
                .and_then(|r| r.split('\'').next())
                .map(str::to_string);
            break;
        }
    }
    let password = password.expect("the server's init file names its password");
    assert_eq!(password.len(), 32);
    for line in lines {
        out.push_str(&line.unwrap());
        out.push('\n');
    }
    assert!(child.wait().unwrap().success(), "{out}");
    contains(&out, "starting a managed MariaDB");
    contains(&out, "check: passed");
    contains(&out, "server cpu");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let plan = &export["run"]["plan"];
    assert_eq!(plan["workload"]["target"], "mariadb:managed", "{plan}");
    assert_eq!(plan["target"]["managed"], true, "{plan}");
    let text = export.to_string();
    contains(&text, "innodb_buffer_pool_size=64M");
    // The server saw the option and ran where it was told.
    assert_eq!(
        export["run"]["inventory"]["db.innodb_buffer_pool_size"],
        "67108864"
    );
    // A managed server collects its waits: performance_schema is on.
    assert_eq!(export["run"]["inventory"]["db.performance_schema"], "ON");
    let server = export["steps"][0]["intervals"][0]["host"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == "server")
        .expect("the server's processes are sampled")
        .clone();
    assert!(server["cpu_user"].as_f64().unwrap() + server["cpu_system"].as_f64().unwrap() > 0.0);
    crate::support::managed_files_removed(&out);
    contains(
        &out,
        &format!("its log in {}/perflab-mariadb-redo-", logs.path().display()),
    );
    assert_eq!(export["run"]["inventory"]["db.wal_on_data_device"], "no");
    assert_eq!(
        std::fs::read_dir(logs.path()).unwrap().count(),
        0,
        "the redo log's directory was left"
    );
    let pid: u32 = out
        .lines()
        .find_map(|l| l.split(", pid ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .and_then(|p| p.parse().ok())
        .expect("the server's pid is printed");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| !c.starts_with("mariadbd")),
        "mariadbd {pid} still runs"
    );
    // The password was neither printed nor stored.
    let store = std::fs::read(dir.path().join("perflab.db")).unwrap();
    assert!(!out.contains(&password), "the password is in the output");
    assert!(
        !store.windows(32).any(|w| w == password.as_bytes()),
        "the password is in the store"
    );
}

/// A managed MariaDB whose buffer pool (12 MiB) holds a share of the
/// bank's tables (scale 2, about 25 MiB), its disk held to 300 reads a
/// second: the sessions wait on reads, the verdict names the pool with
/// its size against the tables', and the what-if predicts the run with a
/// pool twice as large, from the relations performance_schema reported
/// (each table's rows asked for, and its bytes). The page cleaner is
/// told to keep 128 pages free (`innodb_lru_scan_depth`, 1536 by
/// default): with its default, an 8 MiB pool held 25 to 45 pages of data
/// on this machine and read more pages per operation than the rows asked
/// for, which no cache size explains (the verdict says so instead, see
/// `analyze::memory`'s tests); with 128, 8 MiB read 0.95 to 1.00 pages
/// per row, on that edge, and 12 MiB 0.86.
#[test]
fn a_buffer_pool_short_of_the_tables_is_named_and_its_size_predicted() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run bank --target mariadb:managed --mariadb-set innodb_buffer_pool_size=12M \
         --mariadb-set innodb_lru_scan_depth=128 --scale 2 \
         --mix atm:balance=100,withdraw=0,deposit=0,transfer=0 --disk-read-iops 300 \
         --users 1,4 --warmup 1s --duration 2s --seed 3",
    );
    contains(&out, "memory → disk reads");
    contains(
        &out,
        "InnoDB's buffer pool of 11.8 MiB (innodb_buffer_pool_size) for its tables' ",
    );
    contains(
        &out,
        "a buffer pool (innodb_buffer_pool_size) of 23.7 MiB in place of 11.8 MiB: the cache reads",
    );
    let export = crate::support::last_export(dir.path());
    let counters = &export["steps"][1]["intervals"][0]["db"]["counters"];
    let number = |key: &str| {
        counters[key]
            .as_f64()
            .unwrap_or_else(|| panic!("no {key}: {counters}"))
    };
    assert!(number("relation_accesses:perflab_accounts") > 0.0);
    assert!(number("now_relation_bytes:perflab_accounts") > 16.0 * 1048576.0);
    assert_eq!(number("now_page_bytes"), 16384.0);
    assert!(number("buffer_pool_reads") > 0.0);
}

/// An option the server refuses ends the run before anything is made, in
/// one line with the server's own complaint, and leaves nothing behind; the
/// other server's flags are refused on this one.
#[test]
fn a_managed_mariadb_refuses_what_is_not_its_own_in_one_line() {
    let dir = tempdir();
    // Its own temporary directory, open to the server's user, to see
    // that nothing is left in it.
    let tmp = tempdir();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = crate::support::perflab(dir.path())
        .env("TMPDIR", tmp.path())
        .args(["run", "bank", "--target", "mariadb:managed"])
        .args(["--mariadb-set", "no_such_option=1", "--users", "1"])
        .args(SHORT.split_whitespace())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Asked of mariadbd before anything is installed.
    contains(&err, "--mariadb-set: ");
    contains(&err, "unknown variable 'no_such_option=1'");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for (args, flag) in [
        ("--target mariadb:managed --pg-set fsync=off", "--pg-set"),
        (
            "--target postgres:managed --mariadb-set a=1",
            "--mariadb-set",
        ),
        (
            "--target postgres:managed --mariadb-cpus 0",
            "--mariadb-cpus",
        ),
        (
            "--target mysql://u@127.0.0.1:1/x --mariadb-set a=1",
            "--mariadb-set",
        ),
        ("--target mariadb:managed --mariadb-set =1", "--mariadb-set"),
        (
            "--target mariadb:managed --mariadb-set a;b=1",
            "--mariadb-set",
        ),
    ] {
        let (_, err) = perflab_expect(dir.path(), &format!("run bank {args} --users 1 {SHORT}"), 2);
        assert_eq!(err.trim_end().lines().count(), 1, "{args}: {err}");
        contains(&err, flag);
    }
}

/// A MariaDB whose `max_connections` (10, the least it takes) is below
/// the sweep's users refuses a session (error 1040): the run ends there,
/// partial, its steps below kept, and the verdict is the admission limit
/// in the same words as on PostgreSQL.
#[test]
fn a_mariadb_that_refuses_sessions_past_max_connections_is_its_admission_limit() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let (out, err) = perflab_expect(
        dir.path(),
        "run bank --target mariadb:managed --mariadb-set max_connections=10 --users 1,2,40 --warmup 0s --duration 1s",
        1,
    );
    let said = format!("{out}{err}");
    contains(
        &said,
        "the server refused a session past its max_connections at step 3 (40 users)",
    );
    contains(&said, "1040");
    assert!(!said.contains("lost the target"), "{said}");
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show last --json -")).unwrap();
    assert_eq!(
        export["steps"].as_array().map(Vec::len),
        Some(2),
        "{export}"
    );
    let b = &export["verdict"]["bottleneck"];
    assert_eq!(b["kind"], "admission_limit", "{b}");
    assert_eq!(b["name"], "admission limit (max_connections)", "{b}");
    contains(&b["evidence"].to_string(), "max_connections = 10");
}
