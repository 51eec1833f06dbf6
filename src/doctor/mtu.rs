//! MTUs compared only where frames pass from one interface to another:
//! a bridge and its ports (/sys/class/net/BR/brif/), a bond and its slaves
//! (/sys/class/net/BOND/bonding/slaves), and a stacked interface over the
//! one beneath it (VLANs, macvlans, tunnels: the `lower_DEV` links of
//! /sys/class/net/DEV/, and /proc/net/vlan/config). Interfaces on separate
//! paths (loopback at 65536, a container bridge at 1450 beside an uplink
//! at 1500) may differ freely. Sources: the kernel's
//! Documentation/ABI/testing/sysfs-class-net and networking/bonding.rst.

use super::{Finding, Report, Root, Severity};
use std::collections::{BTreeMap, BTreeSet};

fn mtu(root: &Root, dev: &str) -> Option<i64> {
    root.number(&format!("sys/class/net/{dev}/mtu"))
}

/// `mtu N: devs` lines, one per MTU.
fn by_mtu(root: &Root, devs: &[String]) -> BTreeMap<i64, Vec<String>> {
    let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for dev in devs {
        if let Some(m) = mtu(root, dev) {
            out.entry(m).or_default().push(dev.clone());
        }
    }
    out
}

/// Stacked interfaces and the one each sits on: `lower_*` links, then
/// /proc/net/vlan/config (`NAME | VID | PARENT` after two header lines).
fn stacked(root: &Root) -> BTreeSet<(String, String)> {
    let mut pairs = BTreeSet::new();
    for dev in root.list("sys/class/net") {
        for entry in root.list(&format!("sys/class/net/{dev}")) {
            if let Some(lower) = entry.strip_prefix("lower_") {
                pairs.insert((dev.clone(), lower.to_string()));
            }
        }
    }
    if let Some(config) = root.read("proc/net/vlan/config") {
        for line in config.lines().skip(2) {
            let cols: Vec<&str> = line.split('|').map(str::trim).collect();
            if let [name, _, parent] = cols[..] {
                pairs.insert((name.to_string(), parent.to_string()));
            }
        }
    }
    pairs
}

/// Reports a bridge or bond whose members' MTUs differ, and a stacked
/// interface whose MTU is above that of the interface beneath it.
pub(crate) fn check(root: &Root, report: &mut Report) {
    let mut grouped: BTreeSet<(String, String)> = BTreeSet::new();
    for dev in root.list("sys/class/net") {
        let base = format!("sys/class/net/{dev}");
        let (kind, members, listing) = if root.path(&format!("{base}/bridge")).is_dir() {
            (
                "bridge",
                root.list(&format!("{base}/brif")),
                format!("/{base}/brif"),
            )
        } else if let Some(slaves) = root.read(&format!("{base}/bonding/slaves")) {
            (
                "bond",
                slaves.split_whitespace().map(str::to_string).collect(),
                format!("/{base}/bonding/slaves"),
            )
        } else {
            continue;
        };
        if members.is_empty() {
            continue;
        }
        for m in &members {
            grouped.insert((dev.clone(), m.clone()));
        }
        let mut path = vec![dev.clone()];
        path.extend(members.iter().cloned());
        let mtus = by_mtu(root, &path);
        if mtus.len() > 1 {
            let mut evidence = vec![format!("{listing}: {}", members.join(", "))];
            evidence.extend(
                mtus.iter()
                    .map(|(m, devs)| format!("mtu {m}: {}", devs.join(", "))),
            );
            let smallest = mtus.keys().next().copied().unwrap_or(0);
            report.add(Finding {
                severity: Severity::Warning,
                area: "network".to_string(),
                title: format!("{kind} {dev} and its {} use different MTUs", if kind == "bridge" { "ports" } else { "slaves" }),
                evidence,
                why: format!("frames pass between these interfaces unchanged: one larger than a member's MTU is dropped there (a {kind} does not fragment), so large transfers stall while small requests pass"),
                fix: format!("give the {kind} and all its members one MTU, e.g. ip link set DEV mtu {smallest} for each (or raise the small ones)"),
            });
        }
    }
    for (upper, lower) in stacked(root) {
        if grouped.contains(&(upper.clone(), lower.clone())) {
            continue;
        }
        let (Some(up), Some(low)) = (mtu(root, &upper), mtu(root, &lower)) else {
            continue;
        };
        if up > low {
            report.add(Finding {
                severity: Severity::Warning,
                area: "network".to_string(),
                title: format!("{upper}'s MTU {up} is above that of {lower} beneath it ({low})"),
                evidence: vec![
                    format!("/sys/class/net/{upper}/mtu = {up}"),
                    format!("/sys/class/net/{lower}/mtu = {low}"),
                    format!("{upper} is stacked on {lower} (lower_{lower} or /proc/net/vlan/config)"),
                ],
                why: "every frame of the upper interface goes out through the lower one; frames larger than the lower MTU are dropped or fragmented".to_string(),
                fix: format!("ip link set {upper} mtu {low} (or raise {lower}'s MTU to {up} along the whole path)"),
            });
        }
    }
}
