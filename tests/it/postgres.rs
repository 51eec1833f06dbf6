//! The bank on a real PostgreSQL server (started by each test in a
//! temporary directory on a free loopback port, and stopped when the test
//! ends, even when it fails): both mixes end to end, pgbench's own tables,
//! the managed target, a server killed mid-run, a server that refuses
//! sessions past its max_connections, bad connection settings,
//! and no password anywhere it could leak.

use crate::support::{
    contains, last_export, perflab_expect, perflab_ok, spawn_until_steps, tempdir,
};
use perflab::sut::managed::postgres::ManagedPostgres;
use std::process::Command;

const SHORT: &str = "--warmup 0s --duration 1s";

fn server() -> ManagedPostgres {
    ManagedPostgres::start(&Default::default())
        .expect("a PostgreSQL server starts (are the server binaries installed?)")
}

/// Runs SQL on the server's perflab database with psql.
fn psql(server: &ManagedPostgres, sql: &str) {
    crate::support::psql(server, sql);
}

/// Creates a role that must log in with its password over TCP (the test
/// server starts with trust), and returns the server's port.
fn password_role(server: &ManagedPostgres, role: &str, password: &str, options: &str) -> String {
    psql(
        server,
        &format!("CREATE ROLE {role} LOGIN {options} PASSWORD '{password}'"),
    );
    let hba = server.dir().join("data/pg_hba.conf");
    let original = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(
        &hba,
        format!("host all {role} 127.0.0.1/32 scram-sha-256\n{original}"),
    )
    .unwrap();
    psql(server, "SELECT pg_reload_conf()");
    let url = server.url();
    url.split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .unwrap()
        .to_string()
}

#[test]
fn both_mixes_run_and_check_on_postgres() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1,4 {SHORT}"),
    );
    contains(&out, "loaded 100011 rows");
    contains(&out, "check: passed");
    // The server's own account of each step: commits counted, and what the
    // benchmark's sessions waited on. PostgreSQL's backends flush their
    // counters at most once a second, so an interval's count lags; over a
    // 3 s step most commits have arrived.
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 2 --warmup 0s --duration 3s"),
    );
    contains(&out, "db wait");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let step = &export["steps"][0];
    let commits = step["db"]["counters"]["commits"].as_f64().unwrap();
    let completed = step["summary"]["completed"].as_f64().unwrap();
    assert!(
        commits >= completed * 0.5,
        "{commits} commits for {completed} transactions"
    );
    let waits: u64 = step["db"]["waits"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(waits > 0, "no wait samples: {}", step["db"]);
    assert!(step["intervals"][0]["db"].is_object());
    // What a cache model needs: the blocks each relation was asked for
    // and its size — the accounts' table of 100,000 rows is some 13 MiB,
    // and a size over the step is the interval's, not their sum.
    let counters = &step["db"]["counters"];
    let accesses = counters["relation_accesses:public.perflab_accounts"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(accesses >= completed * 0.5, "{counters}");
    let bytes = counters["now_relation_bytes:public.perflab_accounts"]
        .as_f64()
        .unwrap_or(0.0);
    assert!((8e6..32e6).contains(&bytes), "{counters}");
    let first = step["intervals"][0]["db"]["counters"]
        ["now_relation_bytes:public.perflab_accounts"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        bytes >= first && bytes < 1.5 * first,
        "the step's {bytes} against its first interval's {first}"
    );
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --mix atm --users 4 {SHORT}"),
    );
    contains(&out, "reused the loaded bank");
    contains(&out, "ok   no overdraft");
    contains(&out, "check: passed");
    // Serializable on one branch: every transaction writes the same branch
    // row, so serialisation failures are certain; they are retried and
    // counted. Pipelined, a failure surfaces at the transaction's end and
    // the whole transaction is tried again; the money checks either way.
    for mix in ["tpcb", "tpcb --pipeline", "atm --pipeline"] {
        let out = perflab_ok(
            dir.path(),
            &format!(
                "run bank --target {url} --mix {mix} --isolation serializable --max-tries 1000 --users 4 {SHORT}"
            ),
        );
        contains(&out, "check: passed");
        let export: serde_json::Value = crate::support::last_export(dir.path());
        let summary = &export["steps"][0]["summary"];
        assert!(summary["retries"].as_u64().unwrap() > 0, "{mix}: {summary}");
        assert!(
            summary["completed"].as_u64().unwrap() > 0,
            "{mix}: {summary}"
        );
    }
    perflab_ok(dir.path(), &format!("check bank --target {url}"));

    // A changed balance is caught on the server too.
    psql(
        &pg,
        "UPDATE perflab_accounts SET abalance = abalance + 1 WHERE aid = 7",
    );
    let (out, _) = perflab_expect(dir.path(), &format!("check bank --target {url}"), 1);
    contains(&out, "FAIL money conserved");
}

#[test]
fn the_pgbench_mix_runs_on_tables_pgbench_loaded() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let init = Command::new("pgbench")
        .args(["-i", "-s", "1", "-q"])
        .arg(pg.url())
        .output()
        .expect("pgbench runs");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let url = pg.url();
    // pgbench made them: perflab neither drops nor reloads them.
    let tables = [
        "pgbench_branches",
        "pgbench_tellers",
        "pgbench_accounts",
        "pgbench_history",
    ];
    let made = dump(&pg, &tables);
    for other in ["--scale 2", "--reload"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target {url} --mix pgbench {other} --users 1 {SHORT}"),
            2,
        );
        contains(&err, "hold scale 1");
        contains(&err, "perflab did not make them");
        assert_eq!(dump(&pg, &tables), made, "{other}");
    }
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --mix pgbench --users 2,4 {SHORT}"),
    );
    contains(&out, "reused the loaded bank");
    contains(&out, "check: passed");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    assert_eq!(export["run"]["op_names"][0], "tpcb-like");
    perflab_ok(dir.path(), &format!("check bank --pgbench --target {url}"));
    // And pgbench itself still runs on what perflab used.
    let run = Command::new("pgbench")
        .args(["-t", "50", "-c", "2", "-n"])
        .arg(pg.url())
        .output()
        .expect("pgbench runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    perflab_ok(dir.path(), &format!("check bank --pgbench --target {url}"));
}

/// `pg_dump` of some tables: their definitions and every row.
fn dump(server: &ManagedPostgres, tables: &[&str]) -> String {
    let mut cmd = Command::new("pg_dump");
    cmd.args(["--no-owner", "--no-comments"]);
    for t in tables {
        cmd.args(["-t", t]);
    }
    let out = cmd.arg(server.url()).output().expect("pg_dump runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the random key of each dump's \restrict guard.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The user's tables named like a bank's, and one named like perflab's:
/// a look-alike refuses the load (`--reload` too) with everything left as
/// it was; without it the bank goes in beside the user's tables, and
/// `--reload` replaces only perflab's own.
#[test]
fn the_bank_never_drops_a_postgres_table_it_did_not_make() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    psql(
        &pg,
        "CREATE TABLE accounts (aid int PRIMARY KEY, owner text);
         INSERT INTO accounts VALUES (1, 'ada'), (2, 'grace');
         CREATE TABLE history (id int, what text);
         INSERT INTO history VALUES (1, 'opened');
         CREATE TABLE perflab_history (note text);
         INSERT INTO perflab_history VALUES ('mine');",
    );
    let users = ["accounts", "history"];
    let before = dump(&pg, &["accounts", "history", "perflab_history"]);
    for reload in ["", " --reload"] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target {url} --users 1 {SHORT}{reload}"),
            2,
        );
        contains(
            &err,
            "already has table perflab_history, which perflab did not make",
        );
        assert_eq!(
            dump(&pg, &["accounts", "history", "perflab_history"]),
            before
        );
    }
    psql(&pg, "DROP TABLE perflab_history");
    let mine = dump(&pg, &users);
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT}"),
    );
    contains(&out, "check: passed");
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT} --reload"),
    );
    assert_eq!(dump(&pg, &users), mine);
}

#[test]
fn a_managed_server_runs_the_sweep_and_is_removed() {
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run bank --target postgres:managed --pg-set synchronous_commit=off --users 2 {SHORT}"
        ),
    );
    contains(&out, "check: passed");
    // The managed server's processes are followed with the host's counters.
    contains(&out, "server cpu");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let interval = &export["steps"][0]["intervals"][0]["host"];
    let server = interval["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == "server")
        .expect("the server's processes are sampled");
    assert!(server["processes"].as_u64().unwrap() >= 3, "{server}");
    assert!(server["cpu_user"].as_f64().unwrap() + server["cpu_system"].as_f64().unwrap() > 0.0);
    crate::support::managed_files_removed(&out);
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run bank --target postgres:managed --pg-set no_such_setting=1 --users 1 {SHORT}"),
        2,
    );
    contains(&err, "no_such_setting");
}

/// `--pg-memory`: the managed server runs in a memory cgroup of its own,
/// held to the limit (the probe reads the limit and the usage at it from
/// the server's cgroup), which is removed with the server; a limit too
/// small, no size, or the other server's flag is one line, exit 2.
#[test]
fn a_managed_server_held_to_a_memory_limit_runs_in_its_own_cgroup() {
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        &format!("run bank --target postgres:managed --pg-memory 128MiB --users 2 {SHORT}"),
    );
    contains(&out, "check: passed");
    let cgroup_dir = out
        .lines()
        .find_map(|l| l.split("held to 128.0 MiB by the cgroup ").nth(1))
        .expect("the cgroup is named")
        .trim()
        .to_string();
    assert!(cgroup_dir.contains("perflab-server-"), "{cgroup_dir}");
    assert!(
        !std::path::Path::new(&cgroup_dir).exists(),
        "{cgroup_dir} was left behind"
    );
    let export: serde_json::Value = crate::support::last_export(dir.path());
    assert_eq!(
        export["run"]["setup"]["managed_server"]["memory_bytes"],
        134_217_728
    );
    let cgroup = &export["steps"][0]["intervals"][0]["host"]["server_cgroup"];
    assert_eq!(cgroup["memory_limit_bytes"], 134_217_728, "{cgroup}");
    assert!(
        cgroup["path"].as_str().unwrap().contains("perflab-server-"),
        "{cgroup}"
    );
    assert!(
        cgroup["memory_usage_bytes"].as_u64().unwrap() <= 134_217_728,
        "{cgroup}"
    );
    for (flag, fragment) in [
        ("--pg-memory 1MiB", "less than a managed server needs"),
        ("--pg-memory lots", "is not a size"),
        ("--mariadb-memory 1GiB", "--mariadb-memory"),
    ] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target postgres:managed {flag} --users 1 {SHORT}"),
            2,
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{flag}: {err}");
        contains(&err, fragment);
    }
}

/// `--disk-read-iops` holds the managed server's reads from the first
/// step on, and not while the bank is loaded: the run says the limit is
/// lifted while the data are prepared, and every interval of every step
/// reads the throttle of 300 reads a second back from the server's cgroup.
/// The bank (about 120 MiB) does not fit in the server's 96 MiB, so the
/// steps read from the disk through the throttle.
#[test]
fn a_disk_throttle_holds_from_the_first_step_and_not_while_the_bank_loads() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    let out = perflab_ok(
        dir.path(),
        "run bank --target postgres:managed --scale 8 --pg-memory 96MiB --pg-set shared_buffers=16MB --disk-read-iops 300 --mix atm:balance=100,withdraw=0,deposit=0,transfer=0 --users 1,2 --warmup 0s --duration 1s",
    );
    contains(&out, "held to 300 reads/s by the cgroup");
    contains(
        &out,
        "its I/O limit is lifted while the data are prepared, and holds from the first step",
    );
    contains(&out, "check: passed");
    let export = crate::support::last_export(dir.path());
    assert_eq!(
        export["run"]["setup"]["managed_server"]["io"]["read_iops"],
        300
    );
    let steps = export["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for step in steps {
        let measured = step["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["phase"] == "measured");
        for interval in measured {
            let limits = &interval["host"]["server_cgroup"]["io_limits"];
            assert_eq!(limits[0]["read_iops"], 300, "{limits}");
        }
    }
}

/// The managed server is moved to `--pg-cpus` after it starts, so it may
/// run on a CPU outside perflab's own `taskset` mask: the way to keep the
/// load generator off the server's CPU.
#[test]
fn a_managed_server_may_run_outside_perflabs_own_cpus() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_ne!(online.trim(), "0", "this test needs two CPUs");
    let dir = tempdir();
    let mut args = vec![
        "run",
        "bank",
        "--target",
        "postgres:managed",
        "--pg-cpus",
        "1",
    ];
    args.extend(["--users", "1"]);
    args.extend(SHORT.split_whitespace());
    let out = crate::support::perflab_on_cpu0(dir.path(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = crate::support::last_export(dir.path());
    assert_eq!(
        export["run"]["setup"]["managed_server"]["cpus"],
        serde_json::json!([1])
    );
}

#[test]
fn a_killed_server_ends_the_run_partial_and_loses_nothing_committed() {
    let _heavy = crate::support::heavy();
    let mut pg = server();
    let dir = tempdir();
    let url = pg.url();
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT}"),
    );
    let child = spawn_until_steps(
        dir.path(),
        &format!("run bank --target {url} --users 1,2,3,4,5,6,7,8 --warmup 0s --duration 1s"),
        2,
    );
    // SAFETY: signalling the postmaster this test started, by its PID.
    unsafe { libc::kill(pg.pid() as i32, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let runs = perflab_ok(dir.path(), "runs");
    contains(&runs, "partial");
    let shown = perflab_ok(dir.path(), "show last");
    contains(&shown, "lost the target");
    pg.restart().expect("the server restarts after the crash");
    let check = perflab_ok(dir.path(), &format!("check bank --target {url}"));
    contains(&check, "check: passed");
}

/// While the sweep runs, the server holds perflab's user sessions (named
/// `perflab`, the ones the wait samples count) and its statistics session
/// (`perflab-probe`), nothing else: the session that loaded the bank is
/// closed before the first step, where it used to stay open, idle in
/// `ClientRead`, as half the wait samples of a one-user step.
#[test]
fn while_the_sweep_runs_perflab_holds_its_users_sessions_and_its_probe_only() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    let mut child = crate::support::perflab_process(dir.path())
        .args(["run", "bank", "--target", &url, "--users", "1"])
        .args(["--warmup", "0s", "--duration", "3s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("perflab starts");
    let sessions = "SELECT application_name || '=' || count(*) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND application_name LIKE 'perflab%' \
         GROUP BY application_name ORDER BY 1";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = std::collections::BTreeSet::new();
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        let now = crate::support::psql(&pg, sessions);
        if now.contains("perflab-probe=") {
            seen.insert(now.replace('\n', " "));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(child.wait().unwrap().success());
    // While the probe looks: the user's session once it opened (the
    // probe may look before it opens, and after it closes), never a
    // second session under the sampled name. The bank's figures, read
    // before the first step and after the last, use a session of their
    // own (`perflab-admin`), never open beside a user's.
    // Two administrative sessions one after the other may show together
    // for a moment (the first's backend ends after its client said
    // Terminate), never beside a user's.
    assert!(seen.contains("perflab-probe=1 perflab=1"), "{seen:?}");
    let admin_alone = |look: &str| {
        look.strip_suffix(" perflab-probe=1")
            .and_then(|a| a.strip_prefix("perflab-admin="))
            .is_some_and(|n| n == "1" || n == "2")
    };
    for look in &seen {
        assert!(
            look == "perflab-probe=1" || look == "perflab-probe=1 perflab=1" || admin_alone(look),
            "{seen:?}"
        );
    }
}

/// A server whose `max_connections` is below the sweep's users refuses a
/// session: the run ends there, partial, with the steps below it kept,
/// says the server refused (not that it was lost), and the verdict is the
/// admission limit with the setting's value.
#[test]
fn a_server_that_refuses_sessions_past_max_connections_is_its_admission_limit() {
    let dir = tempdir();
    let (out, err) = perflab_expect(
        dir.path(),
        "run bank --target postgres:managed --pg-set max_connections=8 --users 1,2,40 --warmup 0s --duration 1s",
        1,
    );
    let said = format!("{out}{err}");
    contains(
        &said,
        "the server refused a session past its max_connections at step 3 (40 users)",
    );
    contains(&said, "53300");
    assert!(!said.contains("lost the target"), "{said}");
    let export = last_export(dir.path());
    assert_eq!(export["run"]["status"], "partial", "{export}");
    assert_eq!(
        export["steps"].as_array().map(Vec::len),
        Some(2),
        "{export}"
    );
    let b = &export["verdict"]["bottleneck"];
    assert_eq!(b["kind"], "admission_limit", "{b}");
    assert_eq!(b["name"], "admission limit (max_connections)", "{b}");
    let evidence = b["evidence"].to_string();
    contains(&evidence, "max_connections = 8");
    // The slots the server keeps for superusers, and the sessions open
    // before the first user, perflab's statistics among them.
    contains(
        &evidence,
        "3 of them are kept for privileged roles (superuser_reserved_connections = 3): other roles may open 5",
    );
    contains(&evidence, "when the run started the server ");
    contains(&evidence, "besides perflab's look at its settings");
    contains(
        &evidence,
        "the highest load every session of which opened: 2 users",
    );
}

#[test]
fn bad_connection_settings_get_one_line_and_exit_2() {
    let pg = server();
    let port = password_role(&pg, "teller", "right-one", "");

    let dir = tempdir();
    let cases = [
        (
            format!("postgres://teller:wrong@127.0.0.1:{port}/perflab"),
            "password",
        ),
        (
            format!("postgres://perflab@127.0.0.1:{port}/no_such_db"),
            "does not exist",
        ),
        (
            "postgres://perflab@127.0.0.1:1/perflab".to_string(),
            "nothing answers",
        ),
    ];
    for (url, expect) in cases {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run bank --target {url} --users 1 {SHORT}"),
            2,
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        contains(&err, expect);
        assert!(!err.contains("wrong"), "the password leaked: {err}");
    }
    // A server that is not PostgreSQL.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake = listener.local_addr().unwrap().port();
    let responder = std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run bank --target postgres://perflab@127.0.0.1:{fake}/perflab --users 1 {SHORT}"),
        2,
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    contains(&err, "PostgreSQL");
    responder.join().unwrap();
}

#[test]
fn passwords_never_reach_the_store_the_terminal_or_the_export() {
    let pg = server();
    let port = password_role(&pg, "clerk", "pw-7f3a9c-secret", "SUPERUSER");
    let url = format!("postgres://clerk:pw-7f3a9c-secret@127.0.0.1:{port}/perflab");
    let dir = tempdir();
    let (out, err) = perflab_expect(
        dir.path(),
        &format!("run bank --target {url} --users 2 {SHORT}"),
        0,
    );
    let export = perflab_ok(dir.path(), "show last --json -");
    let shown = perflab_ok(dir.path(), "show last");
    let runs = perflab_ok(dir.path(), "runs");
    for (what, text) in [
        ("stdout", &out),
        ("stderr", &err),
        ("export", &export),
        ("show", &shown),
        ("runs", &runs),
    ] {
        assert!(
            !text.contains("pw-7f3a9c-secret"),
            "the password is in {what}"
        );
    }
    contains(&export, "clerk:***@");
    let store = std::fs::read(dir.path().join("perflab.db")).unwrap();
    let wal = std::fs::read(dir.path().join("perflab.db-wal")).unwrap_or_default();
    for bytes in [&store, &wal] {
        assert!(
            !bytes.windows(16).any(|w| w == b"pw-7f3a9c-secret"),
            "the password is in the store"
        );
    }
}

/// Loads the bank on a fresh server, starts `run` (stored steps to wait
/// for first: `steps`), lets it run 1.5 s more, disturbs the server with
/// `sql`, and checks the run ends with status 0, still serving in its last
/// measured interval of step `step`, and the bank checks. That step's errors.
fn disturbed_run(run: &str, steps: i64, sql: &str, step: usize) -> serde_json::Value {
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --users 1 {SHORT}"),
    );
    let child = crate::support::spawn_until_steps(
        dir.path(),
        &format!("run bank --target {url} {run}"),
        steps,
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    psql(&pg, sql);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the run survives: {sql}");
    let export: serde_json::Value = crate::support::last_export(dir.path());
    let step = &export["steps"][step];
    // Operations went on after the disturbance: the last interval served some.
    let intervals = step["intervals"].as_array().unwrap();
    let last_measured = intervals
        .iter()
        .rev()
        .find(|i| i["phase"] == "measured")
        .unwrap();
    assert!(last_measured["ok"].as_u64().unwrap() > 0, "it went on");
    contains(
        &perflab_ok(dir.path(), &format!("check bank --target {url}")),
        "check: passed",
    );
    step["ops"][0]["errors"].clone()
}

#[test]
fn connections_killed_by_the_server_are_reopened_and_counted() {
    let _heavy = crate::support::heavy();
    // Step 2 (4 users) is running: the server ends every benchmark session.
    let errors = disturbed_run(
        "--users 1,4 --warmup 0s --duration 3s --max-error-rate 50%",
        1,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'perflab'",
        1,
    );
    let lost = errors["connect"].as_u64().unwrap_or(0);
    assert!(lost >= 1, "no connect errors counted: {errors}");
}

/// A server that stops answering a user alone on its thread (whose socket
/// is held, read with blocking calls): each operation ends at its timeout,
/// counted as a timeout on the same connection, and the user goes on once
/// the server answers again, with nothing lost.
#[test]
fn a_server_that_stops_answering_a_held_user_gives_timeouts_then_goes_on() {
    let _heavy = crate::support::heavy();
    // For 3 s every teller-and-branch update waits on this lock.
    let errors = disturbed_run(
        "--users 1 --threads 1 --warmup 0s --duration 6s --timeout 1s --max-error-rate 50%",
        0,
        "BEGIN; LOCK TABLE perflab_branches IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT;",
        0,
    );
    let timeouts = errors["timeout"].as_u64().unwrap_or(0);
    assert!(
        (2..=4).contains(&timeouts),
        "3 s of silence at a 1 s timeout: {errors}"
    );
    assert_eq!(
        errors["connect"].as_u64().unwrap_or(0),
        0,
        "the connection kept its place: {errors}"
    );
}

/// The doctor reads a real server's settings: durability switched off, too
/// few connections for the planned users, and the WAL beside the data.
#[test]
fn the_doctor_finds_a_servers_traps() {
    let server = ManagedPostgres::start(&perflab::sut::ServerOptions {
        settings: vec![("fsync".to_string(), "off".to_string())],
        ..Default::default()
    })
    .expect("a PostgreSQL server starts");
    let dir = tempdir();
    let (out, _) = perflab_expect(
        dir.path(),
        &format!("doctor --sample 0s --users 500 --target {}", server.url()),
        1,
    );
    contains(
        &out,
        "CRITICAL database   fsync is off: durability traded for speed",
    );
    contains(
        &out,
        "CRITICAL database   max_connections is 100, the sweep needs 500 users",
    );
    contains(
        &out,
        "WARNING  database   PostgreSQL's WAL is on the data directory's device",
    );
    contains(&out, "postgresql setting fsync = off");
    let (json, _) = perflab_expect(
        dir.path(),
        &format!("doctor --sample 0s --json --target {}", server.url()),
        1,
    );
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["area"] == "database" && f["severity"] == "critical"));
}

/// Sixteen users on one branch (tpcb, scale 1) queue on its row and on the
/// WAL: the wait samples name the event (`Lock:transactionid`,
/// `LWLock:WALWrite`), not only its class. The run follows the server's
/// processes, so its cgroup and storage I/O reach the export. A second,
/// in-process sampler on the same server shows what polling at 10 Hz costs
/// its thread (printed; the test asserts only that it is measured).
#[test]
fn wait_events_are_named_and_the_server_is_followed() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    perflab_ok(
        dir.path(),
        &format!("run bank --target {url} --scale 1 --users 1 {SHORT}"),
    );
    let mut child = crate::support::perflab_process(dir.path())
        .args(
            format!(
                "run bank --target {url} --scale 1 --users 16 --warmup 0s --duration 4s --server-pid {}",
                pg.pid()
            )
            .split_whitespace(),
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sampler_cpu = sampler_cpu_while_loaded(&url, std::time::Duration::from_secs(3));
    assert!(child.wait().unwrap().success());
    eprintln!(
        "the 10 Hz wait sampler used {:.2} ms of CPU per second over {:.1} s ({} session samples)",
        sampler_cpu.0 * 1e3,
        sampler_cpu.1,
        sampler_cpu.2
    );
    let export = crate::support::last_export(dir.path());
    let step = &export["steps"][0];
    let waits = step["db"]["waits"].as_object().unwrap();
    eprintln!("wait samples of the step: {waits:?}");
    assert!(
        waits.keys().any(|k| {
            let (class, event) = k.split_once(':').unwrap_or((k, ""));
            (class == "Lock" || class == "LWLock") && !event.is_empty()
        }),
        "no named lock waits: {waits:?}"
    );
    assert!(
        waits.keys().all(|k| k == "CPU" || k.contains(':')),
        "{waits:?}"
    );
    let host = &step["intervals"][1]["host"];
    let server = host["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == "server")
        .unwrap_or_else(|| panic!("the server's processes are followed: {host}"));
    assert!(server["major_faults_per_s"].is_number(), "{server}");
    assert!(server["write_bytes_per_s"].is_number(), "{server}");
    let cgroup = &host["server_cgroup"];
    assert!(cgroup["path"].is_string(), "{host}");
    assert!(
        cgroup["cpu_used_cpus"].as_f64().unwrap_or(0.0) > 0.0,
        "{cgroup}"
    );
}

/// Runs a wait sampler against `url` for `window`, and returns the CPU its
/// thread used per second of it (from /proc/self/task/TID/schedstat, ns on
/// CPU), the window in seconds, and the wait samples it took.
fn sampler_cpu_while_loaded(url: &str, window: std::time::Duration) -> (f64, f64, u64) {
    use perflab::probe::DbProbe;
    use perflab::sut::postgres::{self as config, stats::PgStats};
    let tasks = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let on_cpu_ns = |tid: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    // Let the load start (16 connections open) before sampling.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let target = config::resolve(url, &|_| None, None).unwrap();
    let before = tasks();
    let probe = DbProbe::start(PgStats::connect(&target).unwrap()).unwrap();
    // The thread names itself once it runs: look for a while.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let tid = loop {
        let found = tasks()
            .difference(&before)
            .find(|t| {
                std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                    .is_ok_and(|c| c.trim() == "perflab-dbprobe")
            })
            .cloned();
        if let Some(tid) = found {
            break tid;
        }
        assert!(std::time::Instant::now() < deadline, "the sampler's thread");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let _ = probe.take();
    let (start, cpu0) = (std::time::Instant::now(), on_cpu_ns(&tid));
    std::thread::sleep(window);
    let cpu1 = on_cpu_ns(&tid);
    let seconds = start.elapsed().as_secs_f64();
    let sample = probe.take().unwrap_or_default();
    let samples = sample.waits.values().sum::<u64>();
    assert!(cpu1 > cpu0, "the sampler's thread ran");
    ((cpu1 - cpu0) as f64 / 1e9 / seconds, seconds, samples)
}

/// SIGTERM while a managed server starts and loads a large bank is
/// honoured there, not after the load: one line saying what was under
/// way, exit 143, the server stopped and its directory removed.
#[test]
fn sigterm_while_preparing_ends_the_run_and_removes_the_managed_server() {
    use std::io::{BufRead, BufReader};
    let dir = tempdir();
    let mut child = crate::support::perflab_process(dir.path())
        .args(
            "run bank --target postgres:managed --scale 200 --users 1 --warmup 0s --duration 1s"
                .split_whitespace(),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("perflab starts");
    // Until it names the managed server's directory (signals are honoured
    // by then), at most 60 s of lines.
    let mut lines = BufReader::new(child.stdout.take().expect("its output")).lines();
    let mut files = None;
    for line in lines.by_ref().take(50) {
        let line = line.expect("a line");
        if let Some(f) = line.split("files in ").nth(1) {
            files = Some(f.trim().to_string());
            break;
        }
    }
    let files = files.expect("the managed server's directory is printed");
    // SAFETY: signalling the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("perflab ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    contains(&err, "interrupted while");
    contains(&err, "(SIGTERM); nothing was measured");
    assert!(
        !std::path::Path::new(&files).exists(),
        "{files} was left behind"
    );
}
