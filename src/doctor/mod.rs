//! `perflab doctor`: audits a host for the classic performance traps — a
//! NIC at half duplex or showing a duplex mismatch's late collisions and
//! CRC errors, TCP retransmitting its segments, MTUs that differ along one
//! path, a PCIe link trained below its capability, one device's
//! interrupts all on one CPU, ring buffers below their maximum, a CPU
//! governor that is not `performance`, a VM's steal time, swapping, a
//! database's log on the data's device, durability switched off, and
//! (`--flush-latency DIR`) how long a flush takes on a directory's
//! device. Each
//! finding carries its severity, the evidence (the file and the value
//! read), why it matters, and the command that fixes it.
//!
//! Every path is read through a [`Root`], so a fixture tree stands in for
//! `/`; counters that must move to mean something (errors, carrier changes,
//! retransmissions, swapping, steal) are read twice, `--sample` apart (on fixtures: the
//! trees `t0` and `t1`).

mod cpu;
pub(crate) mod database;
pub(crate) mod flush;
pub(crate) mod inventory;
mod memory;
mod mtu;
mod nic;
mod pcie;
pub(crate) mod storage;
mod tcp;

pub(crate) use database::database_findings;
pub(crate) use storage::target_filesystem;

use serde::Serialize;
use std::path::{Path, PathBuf};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One trap found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    /// `network`, `interrupts`, `pcie`, `cpu`, `storage`, `memory`, `database`.
    pub(crate) area: String,
    pub(crate) title: String,
    /// What was read: `file = value`.
    pub(crate) evidence: Vec<String>,
    pub(crate) why: String,
    pub(crate) fix: String,
}

/// Everything the doctor found, and what it could not look at.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, Default)]
pub(crate) struct Report {
    pub(crate) findings: Vec<Finding>,
    /// What this host does not expose (a virtual NIC's speed, cpufreq).
    pub(crate) unavailable: Vec<String>,
    /// The flush latency of `--flush-latency DIR`, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) flush: Option<crate::probe::flush::FlushLatency>,
}

impl Report {
    fn add(&mut self, f: Finding) {
        self.findings.push(f);
    }

    fn missing(&mut self, what: impl Into<String>) {
        self.unavailable.push(what.into());
    }

    /// The worst severity found.
    pub(crate) fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).min()
    }
}

/// Where the host's files are: `/` on a live host, a fixture tree in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root {
    pub(crate) dir: PathBuf,
    /// A live host (ioctl for what no file shows) or a fixture tree.
    pub(crate) live: bool,
}

impl Root {
    /// This host.
    pub(crate) fn live() -> Self {
        Root {
            dir: PathBuf::from("/"),
            live: true,
        }
    }

    /// A fixture tree standing in for `/`.
    pub(crate) fn fixture(dir: &Path) -> Self {
        Root {
            dir: dir.to_path_buf(),
            live: false,
        }
    }

    /// A file's text, trimmed; none when missing or unreadable.
    pub(crate) fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(rel.trim_start_matches('/')))
            .ok()
            .map(|t| t.trim().to_string())
    }

    /// A file's value as a number.
    pub(crate) fn number(&self, rel: &str) -> Option<i64> {
        self.read(rel)?.parse().ok()
    }

    /// Names in a directory, sorted; empty when missing.
    pub(crate) fn list(&self, rel: &str) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.dir.join(rel.trim_start_matches('/')))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// The path of a file under the root.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel.trim_start_matches('/'))
    }
}

/// What the doctor is asked to look at beyond the host.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// The server under test's pid, for its cgroup limits.
    pub(crate) server_pid: Option<u32>,
}

/// Audits a host from two readings of it (`before`, then `after`).
pub(crate) fn examine(before: &Root, after: &Root, scope: &Scope) -> Report {
    let mut report = Report::default();
    nic::check(before, after, &mut report);
    tcp::check(before, after, &mut report);
    mtu::check(after, &mut report);
    nic::interrupts(after, &mut report);
    pcie::check(after, &mut report);
    cpu::check(before, after, scope, &mut report);
    storage::check(after, &mut report);
    memory::check(before, after, scope, &mut report);
    report
        .findings
        .sort_by(|a, b| a.severity.cmp(&b.severity).then(a.area.cmp(&b.area)));
    report
}

/// `file = value` for the evidence.
fn shown(rel: &str, value: impl std::fmt::Display) -> String {
    format!("{rel} = {value}")
}

/// Copies the counters that must move to mean something (interfaces'
/// statistics and carrier changes, /proc/stat, /proc/vmstat, TCP's
/// /proc/net/snmp and /proc/net/netstat) from a live
/// host into `dir`, a tree [`examine`] can take as its first reading.
pub(crate) fn snapshot(live: &Root, dir: &Path) -> std::io::Result<Root> {
    let copy = |rel: &str| -> std::io::Result<()> {
        if let Ok(text) = std::fs::read_to_string(live.path(rel)) {
            let to = dir.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(to, text)?;
        }
        Ok(())
    };
    copy("proc/stat")?;
    copy("proc/vmstat")?;
    copy("proc/net/snmp")?;
    copy("proc/net/netstat")?;
    for dev in live.list("sys/class/net") {
        let base = format!("sys/class/net/{dev}");
        copy(&format!("{base}/carrier_changes"))?;
        for name in live.list(&format!("{base}/statistics")) {
            copy(&format!("{base}/statistics/{name}"))?;
        }
    }
    Ok(Root::fixture(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> (Root, Root) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        (
            Root::fixture(&dir.join("t0")),
            Root::fixture(&dir.join("t1")),
        )
    }

    fn found<'a>(r: &'a Report, start: &str) -> &'a Finding {
        r.findings
            .iter()
            .find(|f| f.title.starts_with(start))
            .unwrap_or_else(|| panic!("no finding '{start}' in {:#?}", r.findings))
    }

    /// Each trap of the fixture host is found with its severity.
    #[test]
    fn every_trap_is_found_with_its_severity() {
        let (t0, t1) = fixture("doctor-traps");
        let r = examine(&t0, &t1, &Scope::default());
        let half = found(&r, "eth1 runs at half duplex at 100 Mb/s");
        assert_eq!(half.severity, Severity::Critical);
        assert!(half
            .evidence
            .contains(&"/sys/class/net/eth1/duplex = half".to_string()));
        assert!(half.fix.starts_with("ethtool -s eth1"));
        assert_eq!(
            found(&r, "eth1 counts late collisions").severity,
            Severity::Warning
        );
        let crc = found(&r, "eth2's CRC errors are rising");
        assert_eq!(crc.severity, Severity::Warning);
        assert!(crc.evidence[0].contains("10 → 25"), "{crc:?}");
        let ring = found(&r, "eth2's receive ring is 256 of a possible 4096");
        assert_eq!(ring.fix, "ethtool -G eth2 rx 4096");
        let pcie = found(&r, "0000:03:00.0 (network controller) runs its PCIe link at 2.5 GT/s PCIe x4 of a possible 8.0 GT/s PCIe x8");
        assert_eq!(pcie.severity, Severity::Warning);
        let irq = found(&r, "40:eth2-rx-0: 100% of its interrupts on CPU0");
        assert_eq!(irq.severity, Severity::Warning);
        assert_eq!(
            found(&r, "irqbalance is not running").severity,
            Severity::Warning
        );
        // eth1's interrupts are spread: not reported.
        assert!(!r.findings.iter().any(|f| f.title.starts_with("41:")));
        // MTUs: the bridge's port veth0 (1450) differs from br0 and eth3
        // (1500); eth1.20 (9000) sits on eth1 (1500); eth2.100 at 9000 on
        // eth2 at 9000 is fine, and eth1 beside eth2 is no path at all.
        let bridge = found(&r, "bridge br0 and its ports use different MTUs");
        assert_eq!(bridge.severity, Severity::Warning);
        assert!(
            bridge.evidence.contains(&"mtu 1450: veth0".to_string()),
            "{bridge:?}"
        );
        assert!(
            bridge.evidence.contains(&"mtu 1500: br0, eth3".to_string()),
            "{bridge:?}"
        );
        found(
            &r,
            "eth1.20's MTU 9000 is above that of eth1 beneath it (1500)",
        );
        let mtu_findings: Vec<&str> = r
            .findings
            .iter()
            .map(|f| f.title.as_str())
            .filter(|t| t.contains("MTU"))
            .collect();
        assert_eq!(mtu_findings.len(), 2, "{mtu_findings:?}");
        // TCP lost 300 of 10,000 segments while sampling.
        let tcp = found(
            &r,
            "TCP retransmitted 3.0% of the segments it sent (300 of 10000)",
        );
        assert_eq!(tcp.area, "network");
        assert!(
            tcp.evidence
                .iter()
                .any(|e| e.contains("TCPTimeouts: 400 → 520")),
            "{tcp:?}"
        );
        // The software interfaces get no hardware advice, though the
        // fixture gives them short rings, one queue and no steering.
        for f in &r.findings {
            for soft in ["veth0", "br0", "eth1.20", "eth2.100"] {
                if f.title.contains("MTU") {
                    continue;
                }
                assert!(
                    !f.title.contains(soft) && !f.fix.contains(soft),
                    "{soft} in {f:#?}"
                );
            }
        }
        assert!(
            !r.unavailable
                .iter()
                .any(|u| u.starts_with("veth0") || u.starts_with("br0")),
            "{:?}",
            r.unavailable
        );
        // The physical eth2 still gets both.
        found(&r, "eth2's receive ring is 256 of a possible 4096");
        found(
            &r,
            "eth2 has 1 receive queue(s) for 2 CPUs and no packet steering",
        );
        assert_eq!(
            found(&r, "eth1 has auto-negotiation off").severity,
            Severity::Warning
        );
        let slow = found(
            &r,
            "eth3 runs at 100 Mb/s though both ends can do 1000 Mb/s",
        );
        assert_eq!(slow.severity, Severity::Warning);
        assert!(slow.evidence[2].contains("link partner advertised"));
        // eth2 runs at the best mode both ends share: not reported.
        assert!(!r
            .findings
            .iter()
            .any(|f| f.title.starts_with("eth2 runs at")));
        assert_eq!(r.worst(), Some(Severity::Critical));
        // Critical first.
        assert_eq!(r.findings[0].severity, Severity::Critical);
    }

    /// A well-set host: nothing worse than information.
    #[test]
    fn a_clean_host_gives_no_warnings() {
        let (t0, t1) = fixture("doctor-clean");
        let r = examine(&t0, &t1, &Scope::default());
        // 2 retransmissions of 10,000 segments: no loss worth a finding.
        assert!(!r.findings.iter().any(|f| f.title.starts_with("TCP")));
        assert!(
            r.findings.iter().all(|f| f.severity == Severity::Info),
            "{:#?}",
            r.findings
        );
    }

    /// This machine: the doctor runs and says what it cannot see.
    #[test]
    fn this_host_is_examined_without_errors() {
        let live = Root::live();
        let dir = tempfile::tempdir().unwrap();
        let before = snapshot(&live, dir.path()).unwrap();
        let r = examine(&before, &live, &Scope::default());
        assert!(r.findings.len() + r.unavailable.len() > 0);
    }
}

#[cfg(test)]
mod filesystem_tests {
    use super::*;

    /// The fixture host mounts the database's filesystem sync and without
    /// barriers.
    #[test]
    fn a_targets_mount_options_are_checked() {
        let root = Root::fixture(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor-traps/t1"),
        );
        let mut r = Report::default();
        target_filesystem(&root, Path::new("/var/lib/postgresql/data"), &mut r);
        let titles: Vec<&str> = r.findings.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "/var/lib/postgresql/data is on a filesystem mounted sync",
                "/var/lib/postgresql/data is on a filesystem without write barriers"
            ]
        );
        assert!(r.findings[0].evidence[0].contains("/dev/sdb1 on /var/lib/postgresql"));
    }
}
