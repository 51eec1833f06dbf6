//! Helpers shared by the integration tests.

use perflab::engine::{
    run_sweep, FinishedStep, IntervalRecord, IntervalSpec, Schedule, StepResult, SweepEnd,
    SweepObserver,
};
use perflab::measure::Tally;
use perflab::plan::{Level, LoadModel, Plan, Sweep, WorkloadSpec};
use perflab::workload::null::{NullSpec, ServiceDist};
use perflab::workload::Workload;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub use crate::slots::{heavy, waits};

/// Keeps every finished step, whole.
#[derive(Default)]
pub struct Collect {
    pub steps: Vec<StepResult>,
    /// The running step's intervals as they were handed over.
    running: Vec<IntervalRecord>,
}

impl SweepObserver for Collect {
    fn step_started(&mut self, _: usize, _: Level, _: &Schedule) -> anyhow::Result<()> {
        self.running.clear();
        Ok(())
    }
    fn interval(
        &mut self,
        _: &IntervalSpec,
        _: &Tally,
        record: IntervalRecord,
    ) -> anyhow::Result<()> {
        self.running.push(record);
        Ok(())
    }
    fn step_finished(&mut self, step: &mut FinishedStep) -> anyhow::Result<()> {
        let mut intervals = std::mem::take(&mut self.running);
        intervals.push(step.drain.clone());
        self.steps.push(StepResult {
            index: step.index,
            level: step.level,
            started_at: step.started_at,
            intervals,
            status: step.status.clone(),
            usage: step.usage,
            generators: step.generators.clone(),
        });
        Ok(())
    }
    fn step_dropped(&mut self) -> anyhow::Result<()> {
        self.running.clear();
        Ok(())
    }
}

/// A plan for the null workload.
pub fn null_plan(load: LoadModel, sweep: Sweep, warmup: Duration, duration: Duration) -> Plan {
    Plan {
        workload: WorkloadSpec::new(
            "null",
            &NullSpec {
                service: ServiceDist::default(),
                stall: None,
                servers: None,
                steps: None,
            },
        )
        .expect("a null spec records"),
        target: Some(perflab::sut::Target::InProcess.traits()),
        load,
        sweep,
        warmup,
        duration,
        interval: Duration::from_secs(1),
        threads: 2,
        alone_up_to: 0,
        timeout: Duration::from_secs(30),
        max_error_rate: 0.05,
        seed: 42,
        server: None,
        slos: Vec::new(),
        max_cv: 0.05,
        repeat: 1,
        max_repeat: 1,
        generators: Vec::new(),
        on_generator_loss: Default::default(),
        find: None,
    }
}

/// Runs a sweep in process and returns its steps.
pub fn sweep<W: Workload>(workload: W, plan: &Plan) -> (SweepEnd, Vec<StepResult>) {
    let mut collect = Collect::default();
    let (end, _) = run_sweep(
        Arc::new(workload),
        plan,
        &Arc::new(AtomicBool::new(false)),
        &mut collect,
    )
    .expect("sweep runs");
    (end, collect.steps)
}

/// The perflab binary, run in `dir`.
pub fn perflab(dir: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("perflab").expect("binary built");
    cmd.current_dir(dir).env("CI", "true");
    cmd
}

/// The perflab binary as a std command (for tests that signal it).
pub fn perflab_process(dir: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("perflab"));
    cmd.current_dir(dir).env("CI", "true");
    cmd
}

/// Steps ended so far for the newest run in a store (not the one running).
pub fn stored_steps(store: &Path) -> i64 {
    let Ok(conn) = rusqlite::Connection::open(store) else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_secs(5));
    conn.query_row(
        "SELECT count(*) FROM steps WHERE run_id = (SELECT max(id) FROM runs) AND status != 'running'",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

/// A SHA-256 fingerprint (`AB:CD:…`) other than `pin`: its first byte
/// made 00, or 01 where it was 00 (as it is for one certificate in 256).
pub fn another_pin(pin: &str) -> String {
    let first = if pin.starts_with("00") { "01" } else { "00" };
    format!("{first}{}", pin.get(2..).unwrap_or(""))
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

/// Held by the tests that sweep the host's ledger of what managed servers
/// left (`lab cleanup`, `lab resume`) and by the one that kills a run to
/// find its parts swept: another test's sweep between its kill and its own
/// would take them (a CI run's cleanup found the killed run's cgroups
/// already gone, removed by a `lab resume` of the lab tests). Taken after
/// any slot, held to the test's end.
pub fn ledger() -> std::sync::MutexGuard<'static, ()> {
    static LEDGER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LEDGER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Path of a file in the repository.
pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs perflab in `dir` (arguments split on spaces), expects `code`, and
/// returns stdout and stderr.
pub fn perflab_expect(dir: &Path, args: &str, code: i32) -> (String, String) {
    let out = perflab(dir)
        .args(args.split_whitespace())
        .assert()
        .code(code)
        .get_output()
        .clone();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs perflab in `dir`, expects success, returns stdout.
pub fn perflab_ok(dir: &Path, args: &str) -> String {
    perflab_expect(dir, args, 0).0
}

/// The newest run in `dir`'s store, as `perflab show last --json -` exports it.
pub fn last_export(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&perflab_ok(dir, "show last --json -")).expect("the export is JSON")
}

/// Asserts that a text contains a fragment, showing the text if not.
pub fn contains(text: &str, fragment: &str) {
    if text.contains(fragment) {
        return;
    }
    // The verdict's first lines first: a failure's log keeps the head of
    // a long output and cuts its middle.
    let verdict = text.find("\nverdict").map_or("", |at| {
        let rest = &text[at + 1..];
        let end = rest
            .match_indices('\n')
            .nth(12)
            .map_or(rest.len(), |(i, _)| i);
        &rest[..end]
    });
    panic!("no '{fragment}' in:\n{verdict}\n--- the whole output:\n{text}");
}

/// The newest run's id in a store (0 when there is none).
fn newest_run(store: &Path) -> i64 {
    let Ok(conn) = rusqlite::Connection::open(store) else {
        return 0;
    };
    conn.query_row("SELECT coalesce(max(id), 0) FROM runs", [], |r| r.get(0))
        .unwrap_or(0)
}

/// Starts perflab in `dir` and waits until its run (a run newer than any
/// already in the store) has committed `steps` steps.
pub fn spawn_until_steps(dir: &Path, args: &str, steps: i64) -> std::process::Child {
    let store = dir.join("perflab.db");
    let before = if store.exists() {
        newest_run(&store)
    } else {
        0
    };
    let child = perflab_process(dir)
        .args(args.split_whitespace())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("perflab starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while (!store.exists() || newest_run(&store) <= before || stored_steps(&store) < steps)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// What the JSON schema of an export (`schema/run.schema.json`) finds
/// wrong with `export`: nothing when it is valid.
pub fn schema_problems(export: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo_file("schema/run.schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(export)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// perflab run on CPU 0 alone (`taskset -c 0`) in `dir`, with `args`.
pub fn perflab_on_cpu0(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(assert_cmd::cargo::cargo_bin("perflab"))
        .args(args)
        .current_dir(dir)
        .env("CI", "true")
        .output()
        .expect("taskset runs (util-linux)")
}

/// Asserts that the directory a managed server's run printed (`files in
/// DIR`) is gone.
pub fn managed_files_removed(out: &str) {
    let files = out
        .lines()
        .find_map(|l| l.split("files in ").nth(1))
        .expect("the server's directory is printed")
        .trim();
    assert!(!Path::new(files).exists(), "{files} was left behind");
}

/// A network namespace joined to this host by a veth pair: the host's
/// end at `host_ip`, the namespace's at `ip`, a /30 of 10.218.0.0/16 of
/// its own. Removed (with its pair) when dropped, also on a failed test.
pub struct Island {
    pub name: String,
    pub ip: String,
    pub host_ip: String,
}

impl Island {
    pub fn create() -> Island {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        assert_eq!(
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() },
            0,
            "this test makes network namespaces: run it as root"
        );
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = std::process::id();
        let (third, fourth) = (id % 250, (n % 64) * 4);
        let island = Island {
            name: format!("perflab-island-{id}-{n}"),
            ip: format!("10.218.{third}.{}", fourth + 2),
            host_ip: format!("10.218.{third}.{}", fourth + 1),
        };
        let host_end = format!("pli{}x{n}", id % 100_000);
        let ns = island.name.clone();
        for cmd in [
            format!("ip netns add {ns}"),
            format!("ip link add {host_end} type veth peer name eth0 netns {ns}"),
            format!("ip addr add {}/30 dev {host_end}", island.host_ip),
            format!("ip link set {host_end} up"),
            format!("ip -n {ns} addr add {}/30 dev eth0", island.ip),
            format!("ip -n {ns} link set eth0 up"),
            format!("ip -n {ns} link set lo up"),
        ] {
            let mut parts = cmd.split_whitespace();
            let status = std::process::Command::new(parts.next().unwrap())
                .args(parts)
                .status()
                .unwrap_or_else(|e| panic!("{cmd}: {e} (the test needs iproute2)"));
            assert!(status.success(), "{cmd}: {status}");
        }
        island
    }

    /// Routes everything from inside through the host's end, so that
    /// the host's own addresses (another island's end among them) are
    /// reached from inside; nothing is forwarded beyond the host.
    pub fn route_to_host(&self) {
        let status = std::process::Command::new("ip")
            .args([
                "-n",
                &self.name,
                "route",
                "add",
                "default",
                "via",
                &self.host_ip,
            ])
            .status()
            .expect("ip runs");
        assert!(status.success(), "ip route add default: {status}");
    }

    /// The prefix that runs a command inside: `ip netns exec NAME`.
    pub fn exec(&self) -> [&str; 4] {
        ["ip", "netns", "exec", &self.name]
    }
}

impl Drop for Island {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// `perflab ARGS` refused as bad input: exit 2, one line on standard
/// error starting `error: ` and holding each of `says`, and no step run.
pub fn refused(args: &[&str], says: &[&str]) {
    let dir = tempdir();
    let out = perflab(dir.path())
        .args(args)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: {err}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("step 1/"), "{args:?}: {stdout}");
}

/// Runs `sql` with psql on a managed PostgreSQL's perflab database (stopping
/// at the first error) and returns what it printed, unaligned and trimmed.
pub fn psql(server: &perflab::sut::managed::postgres::ManagedPostgres, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(server.url())
        .args(["-v", "ON_ERROR_STOP=1", "-tAc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Checks `xml` against the common JUnit schema (Jenkins' junit-4.xsd,
/// which `scripts/test.sh` fetches) with xmllint, failing the test with
/// what the validator said.
pub fn assert_valid_junit(xml: &Path) {
    let schema = std::env::var("PERFLAB_JUNIT_XSD").map_or_else(
        |_| repo_file("target/tools/junit-schema/JUnit.xsd"),
        PathBuf::from,
    );
    assert!(
        schema.exists(),
        "the JUnit schema is missing: run scripts/test.sh, which fetches it"
    );
    let out = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&schema)
        .arg(xml)
        .output()
        .expect("xmllint runs (libxml2-utils)");
    assert!(
        out.status.success(),
        "{} does not validate against {}: {}",
        xml.display(),
        schema.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Markdown file `md` rendered to HTML by GitHub's renderer
/// (cmark-gfm with its table extension), as a job summary shows it.
pub fn rendered_markdown(md: &Path) -> String {
    let out = std::process::Command::new("cmark-gfm")
        .args(["--extension", "table"])
        .arg(md)
        .output()
        .expect("cmark-gfm runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the rendering is UTF-8")
}

/// An nginx the test starts (not managed: a managed nginx listens on
/// loopback only), serving WebBench's files on `ip`, until dropped.
pub struct OwnNginx {
    child: std::process::Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl OwnNginx {
    pub fn start(ip: &str) -> OwnNginx {
        Self::start_with(ip, "", "")
    }

    /// As [`OwnNginx::start`], with directives added to its `http` block
    /// and to its server's.
    pub fn start_with(ip: &str, http: &str, server: &str) -> OwnNginx {
        use perflab::workload::web::fileset::{FileSet, FileSetSpec};
        use std::os::unix::fs::PermissionsExt;
        let dir = tempdir();
        let root = dir.path().join("html");
        std::fs::create_dir_all(&root).unwrap();
        FileSet::build(&FileSetSpec::Webbench)
            .unwrap()
            .write_into(&root)
            .unwrap();
        // Its workers (nobody) read the files.
        for entry in [
            dir.path().to_path_buf(),
            root.clone(),
            root.join("webbench"),
        ] {
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let port = free_port();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let conf = dir.path().join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\nhttp {{\n access_log off;\n client_body_temp_path {t}/body;\n proxy_temp_path {t}/proxy;\n fastcgi_temp_path {t}/fastcgi;\n uwsgi_temp_path {t}/uwsgi;\n scgi_temp_path {t}/scgi;\n {http}\n server {{ listen {ip}:{port}; root {r}; {server} }}\n}}\n",
                d = dir.path().display(),
                t = tmp.display(),
                r = root.display(),
            ),
        )
        .unwrap();
        let child = std::process::Command::new("/usr/sbin/nginx")
            .arg("-c")
            .arg(&conf)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx starts (apt-get install nginx-light)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect((ip, port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "nginx did not listen");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        OwnNginx {
            child,
            port,
            _dir: dir,
        }
    }
}

impl OwnNginx {
    /// Its master process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for OwnNginx {
    fn drop(&mut self) {
        // SAFETY: signalling the nginx this test started, by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGQUIT) };
        let _ = self.child.wait();
    }
}

/// A TCP port free on loopback when asked.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Each operation of step 0 of an export, by name: (ok, errors by kind).
pub fn ops_of_step0(
    export: &serde_json::Value,
) -> std::collections::BTreeMap<String, (u64, std::collections::BTreeMap<String, u64>)> {
    export["steps"][0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            let errors = op["errors"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect();
            (
                op["name"].as_str().unwrap().to_string(),
                (op["ok"].as_u64().unwrap(), errors),
            )
        })
        .collect()
}
