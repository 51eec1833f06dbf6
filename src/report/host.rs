//! The host tables: what this machine's counters — and each remote probe's
//! host's — did during each step's measured window — CPU busy and `%ISR` (a web lab's column), run queue,
//! context switches, the busiest disk, network throughput and link use, and
//! TCP retransmissions — averaged over the window's intervals, weighted by
//! their length.

use crate::analyze::host::{probe_sources, HostSource, StepHost};
use crate::engine::StepResult;
use crate::plan::Level;
use crate::probe::counters::{HostSample, NicSample};
use crate::units::{Latency, OpsPerSec, Percent};
use std::fmt::Write;

/// This host's table and one per remote probe, each after a blank line;
/// nothing when no step has samples.
pub(crate) fn host_tables(steps: &[StepResult]) -> String {
    let mut out = String::new();
    for source in std::iter::once(HostSource::Local)
        .chain(probe_sources(steps).into_iter().map(HostSource::Probe))
    {
        let table = host_table(steps, source);
        if !table.is_empty() {
            out.push('\n');
            out.push_str(&table);
        }
    }
    out
}

/// One source's table, or nothing when no step has its samples.
pub(crate) fn host_table(steps: &[StepResult], source: HostSource<'_>) -> String {
    let rows: Vec<(Level, StepHost)> = steps
        .iter()
        .filter_map(|s| StepHost::of(s, source).map(|h| (s.level, h)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| Percent(v).to_string());
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| OpsPerSec(v).to_string());
    let server = rows.iter().any(|(_, h)| h.server_cpu.is_some());
    let origin = rows.iter().any(|(_, h)| h.origin_cpu.is_some());
    let own = rows.iter().any(|(_, h)| h.perflab_cpu.is_some());
    let gaps = rows.iter().any(|(_, h)| h.gaps > 0);
    let mut out = match source {
        HostSource::Local => String::from("this host during each step:\n"),
        HostSource::Probe(name) => format!("{name} during each step:\n"),
    };
    let _ = write!(
        out,
        "{:>7} {:>7} {:>7} {:>6} {:>9} {:>14} {:>9} {:>7} {:>10}",
        "load", "cpu", "%isr", "runq", "cs/s", "busiest disk", "net MB/s", "link", "retrans/s"
    );
    if server {
        let _ = write!(out, " {:>11}", "server cpu");
    }
    if origin {
        let _ = write!(out, " {:>11}", "origin cpu");
    }
    if own {
        let _ = write!(out, " {:>12}", "perflab cpu");
    }
    if gaps {
        let _ = write!(out, " {:>5}", "gaps");
    }
    out.push('\n');
    for (level, h) in &rows {
        let level = level_text(*level);
        let disk = h
            .busiest_disk
            .as_ref()
            .map_or("-".to_string(), |(name, busy)| {
                format!("{name} {}", Percent(*busy))
            });
        let _ = write!(
            out,
            "{level:>7} {:>7} {:>7} {:>6} {:>9} {:>14} {:>9.2} {:>7} {:>10}",
            pct(h.cpu_busy),
            pct(h.cpu_isr),
            h.run_queue.map_or("-".to_string(), |q| format!("{q:.1}")),
            num(h.context_switches_per_s),
            disk,
            h.network_bytes_per_s / 1e6,
            pct(h.link_utilisation),
            num(h.retransmits_per_s),
        );
        if server {
            let _ = write!(out, " {:>11}", pct(h.server_cpu));
        }
        if origin {
            let _ = write!(out, " {:>11}", pct(h.origin_cpu));
        }
        if own {
            let _ = write!(out, " {:>12}", pct(h.perflab_cpu));
        }
        if gaps {
            let _ = write!(out, " {:>5}", h.gaps);
        }
        out.push('\n');
    }
    out.push_str(&disk_table(&rows));
    out
}

/// Busy share from which the busiest disk's own figures get a table.
const DISK_TABLE_FROM: f64 = 0.5;

/// The busiest disk's figures step by step — I/Os per second each way,
/// MB/s, busy, queue and await, as iostat gives them — when it was at
/// least half busy at some step; empty otherwise.
fn disk_table(rows: &[(Level, StepHost)]) -> String {
    let busy = |h: &StepHost| h.busiest_disk.as_ref().map_or(0.0, |(_, b)| *b);
    if !rows.iter().any(|(_, h)| busy(h) >= DISK_TABLE_FROM) {
        return String::new();
    }
    let mut out = String::from("\nthe busiest disk during each step:\n");
    let _ = writeln!(
        out,
        "{:>7} {:>8} {:>10} {:>10} {:>9} {:>7} {:>8} {:>9}",
        "load", "disk", "reads/s", "writes/s", "MB/s", "busy", "queue", "await"
    );
    for (level, h) in rows {
        let (Some((name, b)), Some(d)) = (&h.busiest_disk, &h.disk_figures) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:>7} {:>8} {:>10} {:>10} {:>9.2} {:>7} {:>8.2} {:>9}",
            level_text(*level),
            name,
            OpsPerSec(d.reads_per_s).to_string(),
            OpsPerSec(d.writes_per_s).to_string(),
            d.bytes_per_s / 1e6,
            Percent(*b).to_string(),
            d.queue,
            d.await_s
                .map_or("-".to_string(), |s| Latency::secs(s).to_string()),
        );
    }
    out
}

/// A level as the host tables print it.
fn level_text(level: Level) -> String {
    match level {
        Level::Users(n) => n.to_string(),
        Level::Rate(r) => format!("{}/s", OpsPerSec(r)),
    }
}

/// One sample as a line organised by the USE method: for each resource its
/// utilisation (U), saturation (S) and errors (E). What the host does not
/// report is left out.
pub(crate) fn use_line(s: &HostSample) -> String {
    let mut parts = Vec::new();
    parts.extend(cpu_part(s));
    parts.extend(memory_part(s));
    parts.extend(disk_part(s));
    // Interfaces that moved traffic, counted an error or report a speed.
    let shown = s.nics.iter().filter(|n| {
        n.name != "lo"
            && (n.speed_mbps.is_some()
                || n.rx_bytes_per_s + n.tx_bytes_per_s > 0.0
                || n.rx_errors + n.tx_errors + n.collisions > 0)
    });
    parts.extend(shown.map(nic_part));
    parts.extend(tcp_part(s));
    for proc_ in &s.processes {
        parts.push(format!(
            "{} {} procs cpu {} rss {}",
            proc_.label,
            proc_.processes,
            Percent(proc_.cpu()),
            crate::units::Bytes(proc_.rss_bytes)
        ));
    }
    parts.join(" | ")
}

/// The CPUs: busy, %ISR and steal; run queue and pressure.
fn cpu_part(s: &HostSample) -> Option<String> {
    let cpu = s.cpu?;
    let mut p = format!(
        "cpu U {} (isr {}, steal {})",
        Percent(cpu.busy()),
        Percent(cpu.isr()),
        Percent(cpu.steal)
    );
    if let Some(q) = s.procs_running {
        let _ = write!(p, " S runq {q}");
    }
    if let Some(psi) = s.pressure.cpu_some {
        let _ = write!(p, " psi {psi:.1}%");
    }
    Some(p)
}

/// Memory: the share in use; major faults, scanning, swapping, pressure.
fn memory_part(s: &HostSample) -> Option<String> {
    let m = s.memory.as_ref()?;
    let used = m
        .available_bytes
        .filter(|_| m.total_bytes > 0)
        .map(|a| 1.0 - a as f64 / m.total_bytes as f64);
    let mut p = format!(
        "mem U {}",
        used.map_or("-".to_string(), |u| Percent(u).to_string())
    );
    let _ = write!(
        p,
        " S majflt {}/s scan {}/s swap {}/s",
        fmt_rate(m.major_faults_per_s),
        fmt_rate(m.pages_scanned_per_s),
        fmt_rate(m.swap_in_per_s.zip(m.swap_out_per_s).map(|(i, o)| i + o))
    );
    if let Some(psi) = s.pressure.memory_some {
        let _ = write!(p, " psi {psi:.1}%");
    }
    Some(p)
}

/// The busiest disk: busy share and throughput; queue, wait, pressure.
fn disk_part(s: &HostSample) -> Option<String> {
    let d = s.busiest_disk()?;
    let mut p = format!(
        "disk {} U {} {:.1} MB/s S q {:.2}",
        d.name,
        Percent(d.busy),
        (d.read_bytes_per_s + d.write_bytes_per_s) / 1e6,
        d.queue
    );
    if let Some(aw) = d.await_ms {
        let _ = write!(p, " await {aw:.2}ms");
    }
    if let Some(psi) = s.pressure.io_some {
        let _ = write!(p, " psi {psi:.1}%");
    }
    Some(p)
}

/// One interface: traffic and link use; drops; errors, collisions, late
/// collisions and CRC errors where the driver counts them.
fn nic_part(n: &NicSample) -> String {
    let mut p = format!(
        "net {} U rx {:.2} tx {:.2} MB/s",
        n.name,
        n.rx_bytes_per_s / 1e6,
        n.tx_bytes_per_s / 1e6
    );
    if let (Some(rx), Some(tx)) = (n.rx_utilisation, n.tx_utilisation) {
        let _ = write!(
            p,
            " ({} / {} of {} Mb/s",
            Percent(rx),
            Percent(tx),
            n.speed_mbps.unwrap_or(0)
        );
        if let Some(duplex) = &n.duplex {
            let _ = write!(p, " {duplex}");
        }
        p.push(')');
    }
    let _ = write!(p, " S drops {}", n.rx_drops + n.tx_drops);
    let _ = write!(
        p,
        " E errs {} colls {}",
        n.rx_errors + n.tx_errors,
        n.collisions
    );
    if let Some(late) = n.tx_window_errors {
        let _ = write!(p, " late {late}");
    }
    if let Some(crc) = n.rx_crc_errors {
        let _ = write!(p, " crc {crc}");
    }
    p
}

/// TCP: retransmissions, timeouts and listen drops.
fn tcp_part(s: &HostSample) -> Option<String> {
    let t = s.tcp?;
    let mut p = format!("tcp E retrans {:.1}/s", t.retransmits_per_s);
    if let Some(timeouts) = t.timeouts {
        let _ = write!(p, " timeouts {timeouts}");
    }
    if let Some(drops) = t.listen_drops {
        let _ = write!(p, " listen drops {drops}");
    }
    Some(p)
}

fn fmt_rate(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| OpsPerSec(v).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::counters::process::ProcessSample;
    use crate::probe::counters::{CpuSample, DiskSample, MemorySample, PressureSample, TcpSample};

    /// A 100 Mb/s NIC at half duplex, counting drops, errors, collisions,
    /// late collisions and CRC errors.
    fn eth0() -> NicSample {
        NicSample {
            name: "eth0".to_string(),
            rx_bytes_per_s: 5.0e6,
            tx_bytes_per_s: 1.0e6,
            speed_mbps: Some(100),
            duplex: Some("half".to_string()),
            rx_utilisation: Some(0.4),
            tx_utilisation: Some(0.08),
            rx_drops: 2,
            tx_drops: 1,
            rx_errors: 4,
            tx_errors: 3,
            collisions: 12,
            tx_window_errors: Some(5),
            rx_crc_errors: Some(7),
            ..NicSample::default()
        }
    }

    /// A host whose half-duplex NIC counts late collisions and CRC errors
    /// (a duplex mismatch), with a busy disk and a
    /// server process; `lo` and an idle NIC without a speed stay out.
    fn sample() -> HostSample {
        let nic = |name: &str| NicSample {
            name: name.to_string(),
            ..NicSample::default()
        };
        HostSample {
            seconds: 1.0,
            cpu: Some(CpuSample {
                user: 0.40,
                system: 0.20,
                softirq: 0.05,
                irq: 0.01,
                steal: 0.02,
                idle: 0.32,
                ..CpuSample::default()
            }),
            procs_running: Some(3),
            memory: Some(MemorySample {
                total_bytes: 8 << 30,
                available_bytes: Some(6 << 30),
                major_faults_per_s: Some(1.5),
                pages_scanned_per_s: Some(0.0),
                swap_in_per_s: Some(2.0),
                swap_out_per_s: Some(3.0),
                ..MemorySample::default()
            }),
            disks: vec![DiskSample {
                name: "vda".to_string(),
                read_bytes_per_s: 1.5e6,
                write_bytes_per_s: 2.5e6,
                busy: 0.625,
                queue: 1.25,
                await_ms: Some(0.75),
                ..DiskSample::default()
            }],
            nics: vec![
                NicSample {
                    rx_bytes_per_s: 9e6,
                    ..nic("lo")
                },
                nic("eth1"),
                eth0(),
            ],
            tcp: Some(TcpSample {
                retransmits_per_s: 12.5,
                timeouts: Some(2),
                listen_drops: Some(0),
                ..TcpSample::default()
            }),
            pressure: PressureSample {
                cpu_some: Some(12.5),
                memory_some: Some(0.0),
                io_some: Some(3.25),
                ..PressureSample::default()
            },
            processes: vec![ProcessSample {
                label: "server".to_string(),
                processes: 9,
                cpu_user: 0.5,
                cpu_system: 0.25,
                rss_bytes: 900 << 20,
                ..ProcessSample::default()
            }],
            ..HostSample::default()
        }
    }

    #[test]
    fn a_sample_reads_as_use_per_resource() {
        let line = use_line(&sample());
        let parts: Vec<&str> = line.split(" | ").collect();
        assert_eq!(
            parts,
            [
                "cpu U 68.0% (isr 6.0%, steal 2.0%) S runq 3 psi 12.5%",
                "mem U 25.0% S majflt 1.5/s scan 0.0/s swap 5.0/s psi 0.0%",
                "disk vda U 62.5% 4.0 MB/s S q 1.25 await 0.75ms psi 3.2%",
                "net eth0 U rx 5.00 tx 1.00 MB/s (40.0% / 8.0% of 100 Mb/s half) \
                 S drops 3 E errs 7 colls 12 late 5 crc 7",
                "tcp E retrans 12.5/s timeouts 2 listen drops 0",
                "server 9 procs cpu 75.0% rss 900.0 MiB",
            ],
            "{line}"
        );
    }

    #[test]
    fn what_the_host_does_not_report_is_left_out() {
        assert_eq!(use_line(&HostSample::default()), "");
        let only_tcp = HostSample {
            tcp: Some(TcpSample {
                retransmits_per_s: 0.0,
                ..TcpSample::default()
            }),
            ..HostSample::default()
        };
        assert_eq!(use_line(&only_tcp), "tcp E retrans 0.0/s");
    }
}
