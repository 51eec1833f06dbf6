//! Property tests of every parser of outside text (the `proptest` crate,
//! 256 cases each unless said): arbitrary input never panics, and where a
//! value has a written form, writing it and reading it back gives it again.
//! Durations, percentages, sweeps, think times, objectives, targets and
//! their redaction, node_exporter pages, the /proc and /sys files a host
//! sample is read from, and a sample's stored JSON.

use perflab::plan::{Slo, Sweep, ThinkTime};
use perflab::probe::counters::{HostRoot, HostSample, HostSnapshot};
use perflab::probe::node_exporter::Scrape;
use perflab::sut::{redact, Target};
use perflab::units::{format_duration, parse_duration, parse_percent};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// Text that looks like what a user or a peer might send: digits, unit
/// letters, separators and a sprinkle of anything.
fn texty() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-z.,:/=@?&%<>+*_ -]{0,40}",
        any::<String>(),
        "[0-9]{1,30}(\\.[0-9]{0,20})?(ns|us|ms|s|m|h|%|e[0-9]{1,3})?",
    ]
}

proptest! {
    #[test]
    fn unit_parsers_never_panic(text in texty()) {
        let _ = parse_duration(&text);
        let _ = parse_percent(&text);
        let _ = ThinkTime::parse(&text);
        let _ = Slo::parse(&text);
    }

    #[test]
    fn a_written_duration_reads_back(us in 0u64..1_000_000_000_000) {
        let d = Duration::from_micros(us);
        prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
    }

    #[test]
    fn sweeps_never_panic_and_stay_bounded(text in texty()) {
        for sweep in [Sweep::parse_users(&text), Sweep::parse_rates(&text)].into_iter().flatten() {
            prop_assert!(!sweep.levels.is_empty() && sweep.levels.len() <= 10_000, "{}", text);
        }
    }

    #[test]
    fn ranges_with_any_numbers_never_panic(lo in any::<f64>(), hi in any::<f64>(), step in any::<f64>()) {
        let text = format!("{lo}..{hi}/{step}");
        if let Ok(s) = Sweep::parse_users(&text) {
            prop_assert!(s.levels.len() <= 10_000);
        }
        if let Ok(s) = Sweep::parse_rates(&text) {
            prop_assert!(s.levels.len() <= 10_000);
        }
    }

    #[test]
    fn targets_never_panic_and_never_show_a_password(text in texty()) {
        let _ = redact(&text);
        if let Ok(t) = Target::parse(&text) {
            let _ = t.redacted();
        }
    }

    /// A password made of anything URLs delimit with, in either scheme,
    /// is never in the redacted text (nor in a parse error).
    #[test]
    fn passwords_of_any_characters_are_hidden(
        scheme in prop::sample::select(vec!["postgres", "postgresql", "mysql", "mariadb"]),
        user in "[a-y]{1,8}",
        secret in "[A-Z0-9/?#@:;&=%+ ]{0,12}",
        host in "[a-y]{1,8}(\\.[a-y]{1,5})?",
        tail in "(/[a-y]{1,6})?(\\?sslmode=[a-y]{1,8})?",
    ) {
        let password = format!("ZZ{secret}ZZ");
        let url = format!("{scheme}://{user}:{password}@{host}:5432{tail}");
        let shown = redact(&url);
        prop_assert!(!shown.contains(&password), "{} -> {}", url, shown);
        prop_assert!(!shown.contains("ZZ"), "{} -> {}", url, shown);
        // In a query a value cannot hold `&`, `;`, `,` or a space unencoded.
        let plain: String = secret.chars().filter(|c| !matches!(c, '&' | ';' | ',' | ' ')).collect();
        let query = format!("{scheme}://{host}/db?user={user}&Password=ZZ{plain}ZZ&x=1");
        prop_assert!(!redact(&query).contains("ZZ"), "{}", redact(&query));
        if let Err(e) = Target::parse(&url) {
            prop_assert!(!e.contains("ZZ"), "{}", e);
        }
    }

    /// Any text as a node_exporter page: no panic, and a sample between
    /// two such pages stores as JSON that reads back.
    #[test]
    fn node_exporter_pages_never_panic(a in page(), b in page(), seconds in any::<f64>()) {
        if let (Ok(a), Ok(b)) = (Scrape::parse(&a), Scrape::parse(&b)) {
            let sample = Scrape::between(&a, &b, seconds.abs().min(1e6));
            stores_and_reads_back(&sample)?;
        }
    }

    /// Any texts as the /proc and /sys files a host sample is read from:
    /// no panic, and the sample's stored JSON reads back.
    #[test]
    fn proc_and_sys_files_never_panic(
        first in proc_files(),
        second in proc_files(),
        seconds in 0.0f64..1e6,
    ) {
        let a = HostSnapshot::read(&HostRoot::Texts(first), &[]);
        let b = HostSnapshot::read(&HostRoot::Texts(second), &[]);
        let sample = HostSample::between_over(&a, &b, seconds);
        stores_and_reads_back(&sample)?;
    }
}

/// A sample written as the store writes it reads back: no value that JSON
/// cannot hold (a NaN or an infinity would be written as null).
fn stores_and_reads_back(sample: &HostSample) -> Result<(), TestCaseError> {
    let json = serde_json::to_string(sample).expect("a sample serialises");
    let back: Result<HostSample, _> = serde_json::from_str(&json);
    prop_assert!(back.is_ok(), "{:?}: {}", back.err(), json);
    Ok(())
}

/// Lines of a Prometheus page, some node_exporter's, with any values.
fn page() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "node_time_seconds",
        "node_context_switches_total",
        "node_procs_running",
        "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"}",
        "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"}",
        "node_cpu_seconds_total{cpu=\"1\",mode=\"system\"}",
        "node_memory_MemTotal_bytes",
        "node_disk_io_time_seconds_total{device=\"vda\"}",
        "node_disk_reads_completed_total{device=\"vda\"}",
        "node_network_receive_bytes_total{device=\"eth0\"}",
        "node_network_speed_bytes{device=\"eth0\"}",
        "node_netstat_Tcp_RetransSegs",
        "node_pressure_cpu_waiting_seconds_total",
        "# TYPE node_cpu_seconds_total counter",
    ]);
    let value = prop_oneof![
        any::<f64>().prop_map(|v| v.to_string()),
        Just("+Inf".to_string()),
        Just("NaN".to_string()),
        "[0-9e.+-]{1,12}",
    ];
    let line = (name, value).prop_map(|(n, v)| format!("{n} {v}"));
    prop_oneof![
        prop::collection::vec(line, 0..30).prop_map(|l| l.join("\n")),
        any::<String>(),
    ]
}

/// /proc and /sys files with texts shaped like theirs and with anything.
fn proc_files() -> impl Strategy<Value = BTreeMap<String, String>> {
    let number = prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        "[0-9a-z.-]{0,8}",
    ];
    let numbers = prop::collection::vec(number, 0..20).prop_map(|v| v.join(" "));
    let stat = (numbers.clone(), numbers.clone(), numbers.clone()).prop_map(|(a, b, c)| {
        format!("cpu  {a}\ncpu0 {b}\nctxt {c}\nbtime 1\nprocs_running 2\nintr 5 1 2\n")
    });
    let diskstats = numbers
        .clone()
        .prop_map(|n| format!("   8       0 vda {n}\n"));
    let net_dev = numbers
        .clone()
        .prop_map(|n| format!("Inter-|\n face |\n  eth0: {n}\n    lo: {n}\n"));
    let snmp = (numbers.clone(), numbers.clone()).prop_map(|(a, b)| {
        format!("Tcp: RtoAlgorithm ActiveOpens RetransSegs OutSegs\nTcp: {a}\nIp: x\nIp: {b}\n")
    });
    let kv = numbers.clone().prop_map(|n| {
        n.split(' ')
            .enumerate()
            .map(|(i, v)| format!("k{i} {v}\n"))
            .collect::<String>()
    });
    let meminfo = numbers
        .clone()
        .prop_map(|n| format!("MemTotal: {n} kB\nMemAvailable: {n} kB\nCached: x kB\n"));
    let pressure = numbers.prop_map(|n| {
        format!("some avg10={n} avg60=1 avg300=1 total=5\nfull avg10=0.00 total=x\n")
    });
    (
        stat,
        diskstats,
        net_dev,
        snmp,
        kv,
        meminfo,
        pressure,
        any::<String>(),
    )
        .prop_map(
            |(stat, disks, dev, snmp, vmstat, meminfo, pressure, speed)| {
                BTreeMap::from([
                    ("proc/stat".to_string(), stat),
                    ("proc/diskstats".to_string(), disks),
                    ("proc/net/dev".to_string(), dev),
                    ("proc/net/snmp".to_string(), snmp),
                    ("proc/vmstat".to_string(), vmstat),
                    ("proc/meminfo".to_string(), meminfo),
                    ("proc/pressure/cpu".to_string(), pressure),
                    ("sys/class/net/eth0/speed".to_string(), speed),
                ])
            },
        )
}
