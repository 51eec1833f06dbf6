//! TCP retransmissions while sampling, the signature of a lossy link or a
//! duplex mismatch: /proc/net/snmp's `Tcp:` RetransSegs against OutSegs
//! (RFC 4022's tcpRetransSegs and tcpOutSegs), with TcpExt TCPTimeouts of
//! /proc/net/netstat (retransmissions after the retransmission timer ran
//! out, each one at least RtoMin, 200 ms on Linux) when the host has it.

use super::{Finding, Report, Root, Severity};
use crate::probe::counters::snmp_table;

/// Retransmitted segments below this many over the window are noise (one
/// lost SYN, a peer that went away).
const MIN_RETRANSMITS: u64 = 10;
/// The share of sent segments retransmitted from which loss is reported.
const MIN_RETRANSMIT_SHARE: f64 = 0.01;

/// A counter of one snmp-style table in both readings.
fn both(before: &Root, after: &Root, file: &str, section: &str, name: &str) -> Option<(u64, u64)> {
    let read = |root: &Root| {
        root.read(file)
            .and_then(|text| snmp_table(&text, section).get(name).copied())
    };
    Some((read(before)?, read(after)?))
}

/// Reports retransmissions of at least 1% of the segments sent (and at
/// least [`MIN_RETRANSMITS`]) between the two readings.
pub(crate) fn check(before: &Root, after: &Root, report: &mut Report) {
    let (Some((r0, r1)), Some((o0, o1))) = (
        both(before, after, "proc/net/snmp", "Tcp", "RetransSegs"),
        both(before, after, "proc/net/snmp", "Tcp", "OutSegs"),
    ) else {
        if after.read("proc/net/snmp").is_none() {
            report.missing("/proc/net/snmp (TCP retransmissions)");
        }
        return;
    };
    let retransmitted = r1.saturating_sub(r0);
    let sent = o1.saturating_sub(o0);
    if retransmitted < MIN_RETRANSMITS || sent == 0 {
        return;
    }
    let share = retransmitted as f64 / sent as f64;
    if share < MIN_RETRANSMIT_SHARE {
        return;
    }
    let mut evidence = vec![
        format!("/proc/net/snmp Tcp RetransSegs: {r0} → {r1} while sampling"),
        format!("/proc/net/snmp Tcp OutSegs: {o0} → {o1} while sampling"),
    ];
    if let Some((t0, t1)) = both(before, after, "proc/net/netstat", "TcpExt", "TCPTimeouts") {
        evidence.push(format!(
            "/proc/net/netstat TcpExt TCPTimeouts: {t0} → {t1} while sampling ({} after a timeout)",
            t1.saturating_sub(t0)
        ));
    }
    report.add(Finding {
        severity: Severity::Warning,
        area: "network".to_string(),
        title: format!(
            "TCP retransmitted {:.1}% of the segments it sent ({retransmitted} of {sent})",
            share * 100.0
        ),
        evidence,
        why: "segments are being lost on the way: a lossy link or a duplex mismatch (one end at half duplex). Each loss recovered by the retransmission timer stalls its connection for at least 200 ms (RtoMin), doubling on repeats, so throughput falls while the latency tail grows in RTO-sized steps (200 ms, 400 ms…)".to_string(),
        fix: "check both ends of each link: speed and duplex must agree (ethtool DEV, and the switch port), error counters (ip -s link, ethtool -S DEV); ss -ti shows which connections retransmit".to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(dir: &std::path::Path, retrans: u64, out: u64) -> Root {
        std::fs::create_dir_all(dir.join("proc/net")).unwrap();
        std::fs::write(
            dir.join("proc/net/snmp"),
            format!("Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 {out} {retrans}\n"),
        )
        .unwrap();
        Root::fixture(dir)
    }

    fn findings(r0: u64, o0: u64, r1: u64, o1: u64) -> Vec<Finding> {
        let dir = tempfile::tempdir().unwrap();
        let before = host(&dir.path().join("t0"), r0, o0);
        let after = host(&dir.path().join("t1"), r1, o1);
        let mut report = Report::default();
        check(&before, &after, &mut report);
        report.findings
    }

    #[test]
    fn retransmissions_need_both_a_share_and_a_count() {
        // 2% but only 4 segments: noise.
        assert!(findings(0, 0, 4, 200).is_empty());
        // 20 segments but 0.2%: a healthy busy host.
        assert!(findings(0, 0, 20, 10_000).is_empty());
        let f = findings(100, 1_000, 130, 2_000);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].title,
            "TCP retransmitted 3.0% of the segments it sent (30 of 1000)"
        );
        // Counters that went backwards (a reboot between readings) are not loss.
        assert!(findings(500, 9_000, 10, 100).is_empty());
    }
}
