//! A Prometheus node_exporter as a sample source
//! (`--probe node-exporter://HOST:9100`). Its `/metrics` page (the text
//! exposition format, read by [`crate::util::prom_text`]) reports the
//! same kernel counters perflab reads from /proc and /sys, renamed and
//! converted to seconds and bytes. They are converted back into the
//! kernel's own file formats — ticks, sectors, milliseconds, kB — so one
//! parser and one rate computation serve every source.
//!
//! What node_exporter cannot give, and so stays absent in its samples: the
//! CPU, memory and threads of individual processes (it has no per-process
//! collector), interrupts per source (its `interrupts` collector is off by
//! default), CRC and late-collision counters of a link (only through its
//! optional ethtool collector). PSI comes, as from /proc/pressure, from
//! the stall totals: the stalled share between two scrapes.

use super::counters::{HostRoot, HostSample, HostSnapshot, PressureSample};
use crate::util::prom_text::Labels;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One scrape: the counters as kernel files, the exporter's clock, and the
/// PSI stall totals.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub(crate) root: HostRoot,
    /// `node_time_seconds`: the exporter host's clock at the scrape.
    pub(crate) time_s: Option<f64>,
    /// PSI totals in seconds: (cpu some, memory some, memory full, io some, io full).
    pub(crate) stalls: [Option<f64>; 5],
}

/// Metric values by name, then by their labels.
struct Metrics(BTreeMap<String, Vec<(Labels, f64)>>);

impl Metrics {
    fn parse(text: &str) -> anyhow::Result<Self> {
        let samples = crate::util::prom_text::parse(text)
            .map_err(|e| anyhow::anyhow!("not a Prometheus text page: {e}"))?;
        let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for sample in samples {
            // `+Inf`, `-Inf` and `NaN` are valid on a page but are no
            // counter or gauge perflab can use: absent, never zero.
            if !sample.value.is_finite() {
                continue;
            }
            out.entry(sample.name)
                .or_default()
                .push((sample.labels, sample.value));
        }
        Ok(Metrics(out))
    }

    /// The value of an unlabelled metric.
    fn one(&self, name: &str) -> Option<f64> {
        self.0.get(name)?.first().map(|(_, v)| *v)
    }

    /// The value of a metric with `label` = `value`.
    fn with(&self, name: &str, label: &str, value: &str) -> Option<f64> {
        self.0
            .get(name)?
            .iter()
            .find(|(l, _)| l.get(label) == Some(value))
            .map(|(_, v)| *v)
    }

    /// Every value of `label` that `name` carries, in order.
    fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .0
            .get(name)
            .map(|all| {
                all.iter()
                    .filter_map(|(l, _)| l.get(label).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out.dedup();
        out
    }

    /// Metrics whose names start with `prefix`, with the prefix cut off.
    fn prefixed<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.0.iter().filter_map(move |(name, values)| {
            let rest = name.strip_prefix(prefix)?;
            Some((rest, values.first()?.1))
        })
    }
}

/// A counter as the kernel's integer.
fn int(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// Clock ticks per second of /proc/stat (USER_HZ).
const TICKS: f64 = 100.0;

impl Scrape {
    /// Reads a `/metrics` page.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let m = Metrics::parse(text)?;
        if !m.0.keys().any(|name| name.starts_with("node_")) {
            anyhow::bail!("the page holds no node_exporter metrics (node_*)");
        }
        let mut files = BTreeMap::new();
        if let Some(stat) = stat_file(&m) {
            files.insert("proc/stat".to_string(), stat);
        }
        let meminfo: String = m
            .prefixed("node_memory_")
            .filter_map(|(rest, v)| {
                let name = rest.strip_suffix("_bytes")?;
                Some(format!("{name}: {} kB\n", int(v) / 1024))
            })
            .collect();
        if !meminfo.is_empty() {
            files.insert("proc/meminfo".to_string(), meminfo);
        }
        let vmstat: String = m
            .prefixed("node_vmstat_")
            .map(|(name, v)| format!("{name} {}\n", int(v)))
            .collect();
        if !vmstat.is_empty() {
            files.insert("proc/vmstat".to_string(), vmstat);
        }
        if let Some(disks) = diskstats_file(&m) {
            files.insert("proc/diskstats".to_string(), disks);
        }
        if let Some(dev) = net_dev_file(&m, &mut files) {
            files.insert("proc/net/dev".to_string(), dev);
        }
        for (file, table, key) in [
            ("proc/net/snmp", "Tcp", "node_netstat_Tcp_"),
            ("proc/net/netstat", "TcpExt", "node_netstat_TcpExt_"),
        ] {
            let pairs: Vec<(&str, f64)> = m.prefixed(key).collect();
            if !pairs.is_empty() {
                let names: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
                let values: Vec<String> = pairs.iter().map(|(_, v)| int(*v).to_string()).collect();
                files.insert(
                    file.to_string(),
                    format!(
                        "{table}: {}\n{table}: {}\n",
                        names.join(" "),
                        values.join(" ")
                    ),
                );
            }
        }
        Ok(Scrape {
            root: HostRoot::Texts(files),
            time_s: m.one("node_time_seconds"),
            stalls: [
                m.one("node_pressure_cpu_waiting_seconds_total"),
                m.one("node_pressure_memory_waiting_seconds_total"),
                m.one("node_pressure_memory_stalled_seconds_total"),
                m.one("node_pressure_io_waiting_seconds_total"),
                m.one("node_pressure_io_stalled_seconds_total"),
            ],
        })
    }

    /// The host's counters at this scrape.
    pub(crate) fn snapshot(&self) -> HostSnapshot {
        HostSnapshot::read(&self.root, &[])
    }

    /// The sample between two scrapes, timed by the exporter's own clock
    /// (`fallback_s` when it does not report one).
    pub fn between(a: &Scrape, b: &Scrape, fallback_s: f64) -> HostSample {
        let seconds = match (a.time_s, b.time_s) {
            (Some(x), Some(y)) if y > x && (y - x).is_finite() => y - x,
            _ => fallback_s,
        };
        let mut sample = HostSample::between_over(&a.snapshot(), &b.snapshot(), seconds);
        let share = |i: usize| {
            let (x, y) = (a.stalls[i]?, b.stalls[i]?);
            (seconds > 0.0).then(|| ((y - x).max(0.0) / seconds * 100.0).min(100.0))
        };
        sample.pressure = PressureSample {
            cpu_some: share(0),
            memory_some: share(1),
            memory_full: share(2),
            io_some: share(3),
            io_full: share(4),
        };
        sample
    }
}

/// /proc/stat from node_cpu_seconds_total and the scheduler counters; none
/// without the per-CPU times and the context switches.
fn stat_file(m: &Metrics) -> Option<String> {
    const MODES: [&str; 8] = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ];
    let mut cpus: Vec<(u32, String)> = m
        .label_values("node_cpu_seconds_total", "cpu")
        .into_iter()
        .filter_map(|c| Some((c.parse().ok()?, c)))
        .collect();
    cpus.sort();
    if cpus.is_empty() {
        return None;
    }
    let ctxt = m.one("node_context_switches_total")?;
    let rows: Vec<[u64; 8]> = cpus
        .iter()
        .map(|(_, cpu)| {
            MODES.map(|mode| {
                let v =
                    m.0.get("node_cpu_seconds_total")
                        .and_then(|all| {
                            all.iter().find(|(l, _)| {
                                l.get("cpu") == Some(cpu.as_str()) && l.get("mode") == Some(mode)
                            })
                        })
                        .map_or(0.0, |(_, v)| *v);
                int(v * TICKS)
            })
        })
        .collect();
    let mut total = [0u64; 8];
    for row in &rows {
        for (t, v) in total.iter_mut().zip(row) {
            // Times near u64::MAX (a page's own absurd figures) stay
            // there rather than wrap.
            *t = t.saturating_add(*v);
        }
    }
    let line = |name: &str, r: &[u64; 8]| {
        let cols: Vec<String> = r.iter().map(u64::to_string).collect();
        format!("{name} {} 0 0\n", cols.join(" "))
    };
    let mut out = line("cpu ", &total);
    for ((index, _), row) in cpus.iter().zip(&rows) {
        out.push_str(&line(&format!("cpu{index}"), row));
    }
    // The kernel's file always has these lines; boot time and forks are
    // not used by any sample, so their absence costs nothing.
    let _ = writeln!(out, "intr {}", int(m.one("node_intr_total").unwrap_or(0.0)));
    let _ = writeln!(out, "ctxt {}", int(ctxt));
    let _ = writeln!(
        out,
        "btime {}",
        int(m.one("node_boot_time_seconds").unwrap_or(0.0))
    );
    let _ = writeln!(
        out,
        "processes {}",
        int(m.one("node_forks_total").unwrap_or(0.0))
    );
    if let Some(v) = m.one("node_procs_running") {
        let _ = writeln!(out, "procs_running {}", int(v));
    }
    if let Some(v) = m.one("node_procs_blocked") {
        let _ = writeln!(out, "procs_blocked {}", int(v));
    }
    Some(out)
}

/// /proc/diskstats from node_disk_*.
fn diskstats_file(m: &Metrics) -> Option<String> {
    let devices = m.label_values("node_disk_io_time_seconds_total", "device");
    if devices.is_empty() {
        return None;
    }
    let mut out = String::new();
    for dev in devices {
        let v = |name: &str| m.with(name, "device", &dev).unwrap_or(0.0);
        let number = |label: &str| {
            m.0.get("node_disk_info")
                .and_then(|all| all.iter().find(|(l, _)| l.get("device") == Some(&dev)))
                .and_then(|(l, _)| l.get(label)?.parse::<i64>().ok())
                .unwrap_or(0)
        };
        let ms = |name: &str| int(v(name) * 1000.0);
        let _ = writeln!(
            out,
            "{} {} {dev} {} {} {} {} {} {} {} {} {} {} {}",
            number("major"),
            number("minor"),
            int(v("node_disk_reads_completed_total")),
            int(v("node_disk_reads_merged_total")),
            int(v("node_disk_read_bytes_total")) / 512,
            ms("node_disk_read_time_seconds_total"),
            int(v("node_disk_writes_completed_total")),
            int(v("node_disk_writes_merged_total")),
            int(v("node_disk_written_bytes_total")) / 512,
            ms("node_disk_write_time_seconds_total"),
            int(v("node_disk_io_now")),
            ms("node_disk_io_time_seconds_total"),
            ms("node_disk_io_time_weighted_seconds_total"),
        );
    }
    Some(out)
}

/// /proc/net/dev from node_network_*, and each link's speed, duplex and
/// carrier changes as its /sys/class/net files.
fn net_dev_file(m: &Metrics, files: &mut BTreeMap<String, String>) -> Option<String> {
    let devices = m.label_values("node_network_receive_bytes_total", "device");
    if devices.is_empty() {
        return None;
    }
    let mut out = String::from("Inter-|   Receive |  Transmit\n face |bytes packets\n");
    for dev in devices {
        let v = |what: &str| {
            int(m
                .with(&format!("node_network_{what}"), "device", &dev)
                .unwrap_or(0.0))
        };
        let _ = writeln!(
            out,
            "{dev}: {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            v("receive_bytes_total"),
            v("receive_packets_total"),
            v("receive_errs_total"),
            v("receive_drop_total"),
            v("receive_fifo_total"),
            v("receive_frame_total"),
            v("receive_compressed_total"),
            v("receive_multicast_total"),
            v("transmit_bytes_total"),
            v("transmit_packets_total"),
            v("transmit_errs_total"),
            v("transmit_drop_total"),
            v("transmit_fifo_total"),
            v("transmit_colls_total"),
            v("transmit_carrier_total"),
            v("transmit_compressed_total"),
        );
        let sys = |file: &str| format!("sys/class/net/{dev}/{file}");
        // A speed the driver does not know is exported as -1 Mb/s in bytes.
        if let Some(bytes) = m
            .with("node_network_speed_bytes", "device", &dev)
            .filter(|b| *b > 0.0)
        {
            files.insert(sys("speed"), format!("{}\n", int(bytes * 8.0 / 1e6)));
        }
        if let Some(duplex) =
            m.0.get("node_network_info")
                .and_then(|all| all.iter().find(|(l, _)| l.get("device") == Some(&dev)))
                .and_then(|(l, _)| l.get("duplex"))
                .filter(|d| !d.is_empty())
        {
            files.insert(sys("duplex"), format!("{duplex}\n"));
        }
        if let Some(n) = m.with("node_network_carrier_changes_total", "device", &dev) {
            files.insert(sys("carrier_changes"), format!("{}\n", int(n)));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(at: &str) -> Scrape {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/node-exporter")
            .join(format!("{at}.prom"));
        Scrape::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    /// Two scrapes of node_exporter 1.5 on a 2-CPU VM, 2.015 s apart, while
    /// one CPU was burnt and a file was written with O_DIRECT to vda.
    #[test]
    fn a_captured_metrics_page_gives_the_exact_figures() {
        let (a, b) = (fixture("t0"), fixture("t1"));
        let s = Scrape::between(&a, &b, 1.0);
        let seconds = 1_795_314_501.370_805_5 - 1_795_314_499.355_583_4;
        assert!(close(s.seconds, seconds), "{}", s.seconds);
        let cpu = s.cpu.unwrap();
        // Ticks: cpu0 user 1 system 2 idle 193 iowait 5; cpu1 user 199 system 1 idle 1.
        assert!(close(cpu.user, 200.0 / 402.0), "{cpu:?}");
        assert!(close(cpu.idle, 194.0 / 402.0));
        assert_eq!(s.cpus.len(), 2);
        assert!(close(s.cpus[1].user, 199.0 / 201.0));
        assert!(close(s.cpus[0].iowait, 5.0 / 201.0));
        assert!(close(s.context_switches_per_s.unwrap(), 698.0 / seconds));
        assert!(close(s.interrupts_per_s.unwrap(), 1050.0 / seconds));
        let vda = s.disks.iter().find(|d| d.name == "vda").unwrap();
        assert!(close(vda.writes_per_s, 180.0 / seconds));
        assert!(close(vda.write_bytes_per_s, 119_947_264.0 / seconds));
        assert!(close(vda.busy, 56.0 / (seconds * 1000.0)));
        // One read took under 1 ms; 180 writes took 203 ms.
        assert!(close(vda.await_ms.unwrap(), 203.0 / 181.0));
        let tcp = s.tcp.unwrap();
        assert!(close(tcp.segments_out_per_s, 38.0 / seconds));
        assert_eq!(tcp.retransmits_per_s, 0.0);
        assert_eq!(tcp.timeouts, Some(0));
        let memory = s.memory.unwrap();
        assert_eq!(memory.total_bytes, 25_323_552_768 / 1024 * 1024);
        assert!(memory.page_faults_per_s.unwrap() > 0.0);
        // eth0 is virtual: the exporter reports -1 Mb/s, so no speed and no use %.
        let eth0 = s.nics.iter().find(|n| n.name == "eth0").unwrap();
        assert_eq!(eth0.speed_mbps, None);
        assert_eq!(eth0.duplex.as_deref(), Some("unknown"));
        assert_eq!(eth0.rx_utilisation, None);
        // ifb0 reports an empty duplex: absent, not "".
        let ifb0 = s.nics.iter().find(|n| n.name == "ifb0").unwrap();
        assert_eq!(ifb0.duplex, None);
        // PSI from the stall totals: cpu some 2.081 ms over the interval.
        let cpu_some = s.pressure.cpu_some.unwrap();
        assert!(close(
            cpu_some,
            (1_518.357_619 - 1_518.355_538) / seconds * 100.0
        ));
        assert_eq!(s.pressure.memory_full, Some(0.0));
        // What node_exporter cannot give stays absent.
        assert!(s.processes.is_empty());
        assert!(s.irqs.is_empty());
        assert_eq!(eth0.rx_crc_errors, None);
    }

    #[test]
    fn a_physical_link_speed_and_duplex_come_through() {
        let page = "node_network_receive_bytes_total{device=\"eth1\"} 1000\n\
                    node_network_transmit_bytes_total{device=\"eth1\"} 2000\n\
                    node_network_transmit_colls_total{device=\"eth1\"} 7\n\
                    node_network_speed_bytes{device=\"eth1\"} 1.25e+07\n\
                    node_network_info{device=\"eth1\",duplex=\"half\",operstate=\"up\"} 1\n\
                    node_time_seconds 100\n";
        let later = page
            .replace("} 1000\n", "} 626000\n")
            .replace("} 7\n", "} 12\n")
            .replace("node_time_seconds 100", "node_time_seconds 101");
        let s = Scrape::between(
            &Scrape::parse(page).unwrap(),
            &Scrape::parse(&later).unwrap(),
            9.0,
        );
        let eth1 = &s.nics[0];
        assert_eq!(eth1.speed_mbps, Some(100));
        assert_eq!(eth1.duplex.as_deref(), Some("half"));
        assert!(close(eth1.rx_bytes_per_s, 625_000.0));
        assert!(close(eth1.rx_utilisation.unwrap(), 0.05));
        assert_eq!(eth1.collisions, 5);
        // Without per-CPU times there is no CPU sample, not a zero one.
        assert_eq!(s.cpu, None);
        assert_eq!(s.memory, None);
    }

    /// Non-finite values on a page are dropped where they are read: the
    /// exporter's clock at +Inf leaves the sample timed by the fallback,
    /// and a NaN counter is absent rather than a number.
    #[test]
    fn non_finite_values_are_absent() {
        let page = |time: &str, ctxt: &str| {
            format!(
                "node_time_seconds {time}\nnode_context_switches_total {ctxt}\nnode_procs_running 1\nnode_cpu_seconds_total{{cpu=\"0\",mode=\"idle\"}} 10\nnode_cpu_seconds_total{{cpu=\"0\",mode=\"user\"}} 5\nnode_pressure_cpu_waiting_seconds_total NaN\n"
            )
        };
        let a = Scrape::parse(&page("+Inf", "NaN")).unwrap();
        let b = Scrape::parse(&page("+Inf", "100")).unwrap();
        assert_eq!(a.time_s, None);
        assert_eq!(a.stalls[0], None);
        let s = Scrape::between(&a, &b, 2.0);
        assert_eq!(s.seconds, 2.0);
        assert_eq!(s.pressure.cpu_some, None);
        let json = serde_json::to_string(&s).unwrap();
        let back: HostSample = serde_json::from_str(&json).unwrap();
        assert_eq!(back.seconds, 2.0);
    }

    #[test]
    fn a_page_without_node_metrics_is_refused() {
        let e = Scrape::parse("up 1\nprocess_start_time_seconds 1e9\n").unwrap_err();
        assert!(e.to_string().contains("no node_exporter metrics"), "{e}");
    }

    /// An HTML error page (a proxy's 502, a login page) is not read as
    /// an empty scrape: it is refused with the line that is not a sample.
    #[test]
    fn a_page_that_is_not_prometheus_text_is_refused_with_its_line() {
        let e = Scrape::parse("up 1\n<html>hello</html>\n").unwrap_err();
        assert!(
            e.to_string().contains("not a Prometheus text page: line 2"),
            "{e}"
        );
    }
}
