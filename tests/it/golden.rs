//! Golden snapshots (insta) of what perflab prints and writes for a stored
//! run whose every figure is fixed: `show`, `analyze`, `report --md`,
//! `report --csv` (steps.csv), `compare` (terminal and Markdown). The runs are built here, not copied
//! in: two sweeps of a bank on a 2-CPU database host whose figures follow
//! exact MVA — run 1 limited by its disk (0.5 ms per operation), run 2 on a
//! disk four times faster, limited by its CPUs — with host samples, wait
//! classes, a few deadlocks at high load, and fixed times and host facts,
//! written through the store's own API. A change to any of these outputs
//! shows as a diff to review (`cargo insta review`).

use crate::support::{perflab_ok, tempdir};
use perflab::analyze::mva;
use perflab::engine::{IntervalRecord, StepResult, StepStatus};
use perflab::measure::{Phase, Tally};
use perflab::plan::Level;
use perflab::probe::counters::process::ProcessSample;
use perflab::probe::counters::{
    CpuSample, DiskSample, HostSample, MemorySample, NicSample, TcpSample,
};
use perflab::probe::{DbSample, HostFacts, SelfUsage};
use perflab::store::{NewRun, RunStatus, Store};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

const USERS: [u32; 6] = [1, 2, 4, 8, 16, 32];
const OPS: [(&str, f64); 4] = [
    ("balance", 0.4),
    ("withdraw", 0.2),
    ("deposit", 0.2),
    ("transfer", 0.2),
];
const MEASURED: u32 = 5;

/// One configuration of the fixture: CPU work per operation (all CPUs
/// together) and disk work per operation, seconds.
struct Config {
    cpu_s: f64,
    disk_s: f64,
    started: u64,
}

/// A deterministic wobble of ±1% on interval `i` of step `s`.
fn wobble(s: usize, i: u32) -> f64 {
    1.0 + 0.01 * ((s * 7 + i as usize) as f64).sin()
}

/// Records `count` response times exponentially distributed with mean
/// `mean_s`, at evenly spaced quantiles (no randomness).
fn record(h: &mut hdrhistogram::Histogram<u64>, count: u64, mean_s: f64) {
    for k in 0..count {
        let q = (k as f64 + 0.5) / count as f64;
        let micros = (-(1.0 - q).ln() * mean_s * 1e6).max(1.0) as u64;
        h.record(micros)
            .expect("an auto-resizing histogram takes any value");
    }
}

fn cpu(busy: f64, isr: f64) -> CpuSample {
    let busy = busy.min(0.995);
    CpuSample {
        user: busy * 0.62,
        nice: 0.0,
        system: busy * 0.30 - isr,
        irq: isr * 0.2,
        softirq: isr * 0.8,
        iowait: 0.01,
        steal: busy * 0.08,
        idle: 1.0 - busy - 0.01,
    }
}

fn host(x: f64, users: u32, c: &Config) -> HostSample {
    let u_cpu = x * c.cpu_s / 2.0;
    let u_disk = (x * c.disk_s).min(1.0);
    let isr = 0.04 * u_cpu;
    HostSample {
        seconds: 1.0,
        cpu: Some(cpu(u_cpu, isr)),
        cpus: vec![cpu(u_cpu * 1.02, isr), cpu(u_cpu * 0.98, isr)],
        context_switches_per_s: Some(x * 4.0),
        interrupts_per_s: Some(x * 1.5),
        irqs: Vec::new(),
        procs_running: Some(1 + (f64::from(users) * u_cpu).round() as u32),
        memory: Some(MemorySample {
            total_bytes: 8 << 30,
            available_bytes: Some(5 << 30),
            cached_bytes: 2 << 30,
            dirty_bytes: 12 << 20,
            swap_used_bytes: 0,
            page_faults_per_s: Some(120.0),
            major_faults_per_s: Some(0.0),
            swap_in_per_s: Some(0.0),
            swap_out_per_s: Some(0.0),
            pages_scanned_per_s: Some(0.0),
        }),
        disks: vec![DiskSample {
            name: "vda".to_string(),
            reads_per_s: x * 0.1,
            writes_per_s: x * 0.6,
            read_bytes_per_s: x * 819.2,
            write_bytes_per_s: x * 4915.2,
            busy: u_disk,
            queue: u_disk / (1.0 - u_disk).max(0.05),
            await_ms: Some(c.disk_s * 1e3 / (1.0 - u_disk).max(0.05)),
            lower: Vec::new(),
        }],
        nics: vec![NicSample {
            name: "eth0".to_string(),
            rx_bytes_per_s: x * 420.0,
            tx_bytes_per_s: x * 610.0,
            rx_packets_per_s: x * 2.0,
            tx_packets_per_s: x * 2.0,
            speed_mbps: Some(1000),
            duplex: Some("full".to_string()),
            rx_utilisation: Some(x * 420.0 * 8.0 / 1e9),
            tx_utilisation: Some(x * 610.0 * 8.0 / 1e9),
            ..NicSample::default()
        }],
        tcp: Some(TcpSample {
            segments_out_per_s: x * 2.0,
            retransmits_per_s: 0.0,
            timeouts: Some(0),
            listen_drops: Some(0),
            listen_overflows: Some(0),
        }),
        pressure: Default::default(),
        processes: vec![ProcessSample {
            label: "server".to_string(),
            processes: 1 + users as usize,
            cpu_user: 2.0 * u_cpu * 0.55,
            cpu_system: 2.0 * u_cpu * 0.25,
            rss_bytes: 900 << 20,
            threads: 1 + u64::from(users),
            context_switches_per_s: x * 3.0,
            ..ProcessSample::default()
        }],
        ..HostSample::default()
    }
}

fn step(index: usize, users: u32, x: f64, r: f64, u_disk: f64, c: &Config) -> StepResult {
    let mut intervals = Vec::new();
    for i in 0..=MEASURED {
        let xi = x * wobble(index, i);
        let mut tally = Tally::new(OPS.len());
        for (k, (name, share)) in OPS.iter().enumerate() {
            let op = &mut tally.ops[k];
            let count = (xi * share).round() as u64;
            // Deadlocks between transfers once the disk queue is long.
            let deadlocks = if *name == "transfer" && users >= 16 {
                u64::from(users / 8) + u64::from(i % 2)
            } else {
                0
            };
            op.ok = count - deadlocks;
            if deadlocks > 0 {
                op.errors.insert("deadlock (40P01)".to_string(), deadlocks);
                op.retries = deadlocks * 2;
            }
            record(&mut op.response, count, r);
            record(&mut op.service, count, r);
            op.bytes = count * 180;
        }
        let mut waits = BTreeMap::new();
        let samples = u64::from(users) * 10;
        let io = (samples as f64 * u_disk * 0.8).round() as u64;
        waits.insert("IO".to_string(), io);
        waits.insert("CPU".to_string(), samples - io);
        let mut counters = BTreeMap::new();
        counters.insert("commits".to_string(), (xi * 0.6).round());
        intervals.push(IntervalRecord {
            phase: if i == 0 {
                Phase::Warmup
            } else {
                Phase::Measured
            },
            start: Duration::from_secs(u64::from(i)),
            length: Duration::from_secs(1),
            tally: (&tally).into(),
            db: Some(DbSample { counters, waits }),
            host: Some(host(xi, users, c)),
            probes: Vec::new(),
        });
    }
    StepResult {
        index,
        level: Level::Users(users),
        started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(c.started + 6 * index as u64 + 1),
        intervals,
        status: StepStatus::Ok,
        usage: SelfUsage {
            wall: Duration::from_secs(6),
            cpu_user: Duration::from_secs_f64(x * 6.0 * 20e-6),
            cpu_system: Duration::from_secs_f64(x * 6.0 * 8e-6),
            rss_bytes: Some(24 << 20),
            cpu_capacity: Some(2.0),
            throttled: None,
        },
        generators: Vec::new(),
    }
}

fn plan_json() -> serde_json::Value {
    let args = [
        "perflab",
        "run",
        "bank",
        "--target",
        "postgres://perflab@127.0.0.1:5432/bank",
        "--users",
        "1,2,4,8,16,32",
        "--warmup",
        "1s",
        "--duration",
        "5s",
        "--seed",
        "20261122",
    ];
    let cli = <perflab::cli::Cli as clap::Parser>::try_parse_from(args).expect("arguments parse");
    let perflab::cli::Command::Run(run) = cli.command else {
        panic!("a run");
    };
    serde_json::to_value(perflab::cli::plan_from(&run).expect("a valid plan").1).expect("JSON")
}

fn store_run(store: &mut Store, c: &Config) {
    let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    let id = store
        .create_run(&NewRun {
            started_at: at(c.started),
            workload: "bank".to_string(),
            target: "postgres://perflab@127.0.0.1:5432/bank".to_string(),
            op_names: OPS.iter().map(|(n, _)| n.to_string()).collect(),
            plan_given: vec!["run".to_string(), "bank".to_string()],
            plan_resolved: plan_json(),
            host: HostFacts {
                hostname: Some("db-lab-1".to_string()),
                kernel: Some("6.1.0-18-amd64".to_string()),
                cpu_model: Some("Fixture CPU @ 2.00GHz".to_string()),
                cpus: Some(2),
                memory_bytes: Some(8 << 30),
            },
            setup: None,
        })
        .expect("run created");
    let demands = [c.cpu_s / 2.0, c.disk_s];
    let solved = mva::solve(&demands, 0.0, 32);
    for (index, users) in USERS.iter().enumerate() {
        let m = &solved[*users as usize - 1];
        let s = step(
            index,
            *users,
            m.throughput,
            m.response_s,
            m.utilisation[1],
            c,
        );
        store.commit_step(id, &s).expect("step stored");
    }
    store
        .finish_run(id, RunStatus::Complete, None, None)
        .expect("run finished");
    let mut inventory = BTreeMap::new();
    inventory.insert("cpu.count".to_string(), "2".to_string());
    inventory.insert("disk.vda.scheduler".to_string(), "mq-deadline".to_string());
    store.save_inventory(id, &inventory).expect("inventory");
    // The finishing time is the clock's: fix it.
    let conn = rusqlite::Connection::open(store.path()).expect("store opens");
    conn.execute(
        "UPDATE runs SET finished_at = ?2, pid = 4242 WHERE id = ?1",
        rusqlite::params![
            id,
            humantime::format_rfc3339_millis(at(c.started + 37)).to_string()
        ],
    )
    .expect("finish time fixed");
}

fn fixture(dir: &Path) {
    let mut store = Store::open(&dir.join("perflab.db")).expect("store");
    store_run(
        &mut store,
        &Config {
            cpu_s: 0.0006,
            disk_s: 0.0005,
            started: 1_795_000_000,
        },
    );
    store_run(
        &mut store,
        &Config {
            cpu_s: 0.0005,
            disk_s: 0.000125,
            started: 1_795_003_600,
        },
    );
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    // The tool's version is stored with each run and printed.
    s.add_filter(&literal(env!("CARGO_PKG_VERSION")), "[version]");
    s
}

/// The version as a literal pattern.
fn literal(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

#[test]
fn show_analyze_report_and_compare_match_their_snapshots() {
    let dir = tempdir();
    fixture(dir.path());
    let _guard = settings().bind_to_scope();
    insta::assert_snapshot!("show", perflab_ok(dir.path(), "show 1"));
    insta::assert_snapshot!("analyze", perflab_ok(dir.path(), "analyze 1"));
    perflab_ok(dir.path(), "report 1 --md run1.md --step 1 --step peak");
    insta::assert_snapshot!(
        "report_md",
        std::fs::read_to_string(dir.path().join("run1.md")).expect("written")
    );
    perflab_ok(dir.path(), "report 1 2 --csv csv");
    insta::assert_snapshot!(
        "steps_csv",
        std::fs::read_to_string(dir.path().join("csv/steps.csv")).expect("written")
    );
    insta::assert_snapshot!("compare", perflab_ok(dir.path(), "compare 1 2"));
    // The export of the run, what-if included, matches the schema.
    let export: serde_json::Value =
        serde_json::from_str(&perflab_ok(dir.path(), "show 1 --json -")).expect("JSON");
    let problems = crate::support::schema_problems(&export);
    assert!(problems.is_empty(), "{problems:#?}");
    let verdict = &export["verdict"];
    assert_eq!(verdict["bottleneck"]["resource"], "disk vda");
    assert_eq!(
        verdict["what_if"]["scenarios"][0]["change"],
        "disk vda twice as fast"
    );
    insta::assert_snapshot!("compare_md", perflab_ok(dir.path(), "compare 1 2 --md"));
}
