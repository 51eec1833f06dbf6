//! Hand parsers for what procfs-core does not cover: the header/value
//! table pairs of /proc/net/snmp and /proc/net/netstat, the `intr` line of
//! /proc/stat, PSI lines, and the link attributes under /sys/class/net;
//! and a guard on /proc/meminfo before procfs-core reads it.

use std::collections::BTreeMap;

/// /proc/meminfo without the lines whose size overflows 64 bits once its
/// unit is applied (procfs-core multiplies unchecked): a damaged or hostile
/// file (a fixture, a remote host's) loses those lines, not the process.
pub(crate) fn meminfo_in_range(text: &str) -> String {
    let mut kept = String::with_capacity(text.len() + 1);
    for line in text.lines().filter(|line| {
        let mut words = line.split_whitespace().skip(1);
        let Some(Ok(value)) = words.next().map(str::parse::<u64>) else {
            return true;
        };
        let scale: u64 = match words.next() {
            Some("KiB" | "kiB" | "kB" | "KB") => 1 << 10,
            Some("MiB" | "miB" | "MB" | "mB") => 1 << 20,
            Some("GiB" | "giB" | "GB" | "gB") => 1 << 30,
            _ => 1,
        };
        value.checked_mul(scale).is_some()
    }) {
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// The named section of an snmp-style file: a `Name: field field…` line
/// followed by a `Name: value value…` line.
pub(crate) fn snmp_table(text: &str, section: &str) -> BTreeMap<String, u64> {
    snmp_fields(text, section, |_| true)
}

/// The fields of an snmp-style section that `keep` names (a sampler keeps
/// the few it reports, not the hundred TcpExt has).
pub(crate) fn snmp_fields(
    text: &str,
    section: &str,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, u64> {
    let mut lines = text.lines().filter(|l| {
        l.strip_prefix(section)
            .is_some_and(|rest| rest.starts_with(':'))
    });
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return BTreeMap::new();
    };
    names
        .split_whitespace()
        .skip(1)
        .zip(values.split_whitespace().skip(1))
        .filter(|(n, _)| keep(n))
        // Some fields (MaxConn) are -1: they are settings, not counters.
        .filter_map(|(n, v)| v.parse::<u64>().ok().map(|v| (n.to_string(), v)))
        .collect()
}

/// The counters of /proc/vmstat (`name value` lines) that `keep` names.
pub(crate) fn vmstat_fields(text: &str, keep: impl Fn(&str) -> bool) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(name, _)| keep(name))
        .filter_map(|(name, value)| Some((name.to_string(), value.trim().parse().ok()?)))
        .collect()
}

/// Interrupts since boot: the first number of /proc/stat's `intr` line.
pub(crate) fn interrupts_total(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("intr "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// `total=` of the `some` or `full` line of a pressure file (/proc/pressure
/// or a cgroup's `*.pressure`): the time stalled since boot, µs. Two
/// readings give the exact stalled time between them; `avg10`, a 10 s
/// decaying average, would carry one interval's stalls into the next.
pub(crate) fn pressure_total_us(text: &str, kind: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(kind))?
        .split_whitespace()
        .find_map(|field| field.strip_prefix("total="))
        .and_then(|v| v.parse().ok())
}

/// A kernel switch (`0` or `1`, as under /proc/sys); anything else is
/// unknown.
pub(crate) fn flag(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A link's speed, Mb/s, from its directory under /sys/class/net read
/// through `read`. Reading it on a link that is down, or on a virtual
/// device, fails with EINVAL or gives -1: not reported.
pub(crate) fn link_speed_mbps(read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    link_number(&read, "speed")
        .filter(|&s| s > 0)
        .map(|s| s as u64)
}

/// A link's duplex, `full`, `half` or `unknown`, when reported.
pub(crate) fn link_duplex(read: impl Fn(&str) -> Option<String>) -> Option<String> {
    read("duplex")
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
}

/// A counter file under a link's directory (a negative one reads as 0).
pub(crate) fn link_counter(read: impl Fn(&str) -> Option<String>, rel: &str) -> Option<u64> {
    link_number(&read, rel).map(|n| n.max(0) as u64)
}

/// The number a link's file `rel` holds.
fn link_number(read: impl Fn(&str) -> Option<String>, rel: &str) -> Option<i64> {
    read(rel).and_then(|t| t.trim().parse::<i64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_tables_pair_names_with_values() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm MaxConn OutSegs RetransSegs\nTcp: 1 -1 5000 12\n";
        let tcp = snmp_table(text, "Tcp");
        assert_eq!(tcp.get("OutSegs"), Some(&5000));
        assert_eq!(tcp.get("RetransSegs"), Some(&12));
        assert_eq!(tcp.get("MaxConn"), None);
        assert!(snmp_table(text, "Udp").is_empty());
    }

    #[test]
    fn intr_and_pressure_lines_parse() {
        assert_eq!(
            interrupts_total("cpu 1 2 3\nintr 123456 0 9\nctxt 5\n"),
            Some(123_456)
        );
        assert_eq!(interrupts_total("cpu 1 2 3\n"), None);
        let psi = "some avg10=1.50 avg60=0.20 avg300=0.00 total=100\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=7\n";
        assert_eq!(pressure_total_us(psi, "some"), Some(100));
        assert_eq!(pressure_total_us(psi, "full"), Some(7));
    }
}

/// Interrupts since boot of each source, per CPU, from /proc/interrupts.
/// A numbered IRQ is named `NUMBER:DEVICE` (its last word, e.g.
/// `28:virtio0-config`); a named one keeps its name (`LOC`, `NMI`).
pub(crate) fn interrupts_by_source(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |header| {
        header
            .split_whitespace()
            .filter(|w| w.starts_with("CPU"))
            .count()
    });
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let words: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = words
            .iter()
            .take(cpus)
            .map_while(|w| w.parse().ok())
            .collect();
        if counts.is_empty() {
            continue;
        }
        let label = if name.chars().all(|c| c.is_ascii_digit()) {
            match words.get(counts.len()..).and_then(|d| d.last()) {
                Some(device) => format!("{name}:{device}"),
                None => name.to_string(),
            }
        } else {
            name.to_string()
        };
        out.insert(label, counts);
    }
    out
}

#[cfg(test)]
mod interrupt_tests {
    use super::*;

    #[test]
    fn interrupt_sources_are_named_and_counted_per_cpu() {
        let text = "           CPU0       CPU1       \n 26:          0         18  IO-APIC   4-edge      ttyS0\n 40:     500000          3 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nLOC:    1234567    2345678   Local timer interrupts\nERR:          0\n";
        let irqs = interrupts_by_source(text);
        assert_eq!(irqs["26:ttyS0"], vec![0, 18]);
        assert_eq!(irqs["40:virtio2-input.0"], vec![500_000, 3]);
        assert_eq!(irqs["LOC"], vec![1_234_567, 2_345_678]);
        assert_eq!(irqs["ERR"], vec![0]);
    }
}
