//! A host's inventory, stored with every run: kernel, CPU model and count,
//! frequency governor, SMT, NUMA nodes, memory and swap, transparent huge
//! pages, the sysctls that shape performance, every network interface's
//! speed, duplex, MTU, driver and receive ring, every disk's model, size,
//! scheduler and queue depths — and, added by the run, the database's
//! settings. A flat map of facts, so two runs' hosts can be compared fact
//! by fact (`perflab diff-hosts`): the first question when two runs
//! disagree.

use super::Root;
use std::collections::BTreeMap;

/// Fact name → value.
pub(crate) type Inventory = BTreeMap<String, String>;

/// The sysctls recorded (file under /proc/sys, dotted name).
const SYSCTLS: &[&str] = &[
    "vm/swappiness",
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/overcommit_memory",
    "net/core/somaxconn",
    "net/core/netdev_max_backlog",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "kernel/numa_balancing",
];

/// Reads the inventory of the host under `root`.
pub(crate) fn host_inventory(root: &Root) -> Inventory {
    let mut inv = Inventory::new();
    system_facts(root, &mut inv);
    nic_facts(root, &mut inv);
    disk_facts(root, &mut inv);
    inv
}

/// Records a fact with its whitespace folded; an absent or empty value is
/// left out.
fn put(inv: &mut Inventory, name: String, value: Option<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        inv.insert(name, v.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}

/// Kernel, CPUs, NUMA nodes, memory and the recorded sysctls.
fn system_facts(root: &Root, inv: &mut Inventory) {
    put(inv, "kernel".into(), root.read("proc/sys/kernel/osrelease"));
    put(
        inv,
        "cpu.model".into(),
        root.read("proc/cpuinfo").and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        }),
    );
    let cpus = root.read("proc/stat").map(|t| {
        t.lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .count()
    });
    put(inv, "cpu.count".into(), cpus.map(|n| n.to_string()));
    put(
        inv,
        "cpu.governor".into(),
        root.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
    );
    put(
        inv,
        "cpu.smt".into(),
        root.read("sys/devices/system/cpu/smt/active"),
    );
    let nodes = root
        .list("sys/devices/system/node")
        .into_iter()
        .filter(|n| n.starts_with("node"))
        .count();
    put(
        inv,
        "numa.nodes".into(),
        (nodes > 0).then(|| nodes.to_string()),
    );
    let meminfo = |key: &str| {
        root.read("proc/meminfo")?.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            Some(format!("{} kB", rest.split_whitespace().next()?))
        })
    };
    put(inv, "memory.total".into(), meminfo("MemTotal"));
    put(inv, "memory.swap".into(), meminfo("SwapTotal"));
    put(
        inv,
        "memory.transparent_hugepage".into(),
        root.read("sys/kernel/mm/transparent_hugepage/enabled"),
    );
    for s in SYSCTLS {
        put(
            inv,
            format!("sysctl.{}", s.replace('/', ".")),
            root.read(&format!("proc/sys/{s}")),
        );
    }
}

/// Every network interface but loopback: state, speed, duplex, MTU,
/// driver and receive ring.
fn nic_facts(root: &Root, inv: &mut Inventory) {
    for dev in root.list("sys/class/net").into_iter().filter(|d| d != "lo") {
        let base = format!("sys/class/net/{dev}");
        let key = |f: &str| format!("nic.{dev}.{f}");
        put(
            inv,
            key("operstate"),
            root.read(&format!("{base}/operstate")),
        );
        put(
            inv,
            key("speed"),
            root.number(&format!("{base}/speed"))
                .filter(|s| *s > 0)
                .map(|s| format!("{s} Mb/s")),
        );
        put(inv, key("duplex"), root.read(&format!("{base}/duplex")));
        put(inv, key("mtu"), root.read(&format!("{base}/mtu")));
        put(
            inv,
            key("driver"),
            std::fs::read_link(root.path(&format!("{base}/device/driver")))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        );
        put(
            inv,
            key("rx_ring"),
            super::nic::rx_ring(root, &dev).map(|(c, m)| format!("{c} of {m}")),
        );
    }
}

/// Every disk but loop, RAM and optical devices: model, size, scheduler
/// and queue depths.
fn disk_facts(root: &Root, inv: &mut Inventory) {
    for dev in root.list("sys/block").into_iter().filter(|d| {
        !["loop", "ram", "zram", "sr"]
            .iter()
            .any(|p| d.starts_with(p))
    }) {
        let base = format!("sys/block/{dev}");
        let key = |f: &str| format!("disk.{dev}.{f}");
        put(
            inv,
            key("model"),
            root.read(&format!("{base}/device/model")),
        );
        put(
            inv,
            key("size"),
            root.number(&format!("{base}/size"))
                .map(|s| format!("{} GiB", (s * 512) >> 30)),
        );
        put(
            inv,
            key("rotational"),
            root.read(&format!("{base}/queue/rotational")),
        );
        put(
            inv,
            key("scheduler"),
            root.read(&format!("{base}/queue/scheduler")),
        );
        put(
            inv,
            key("nr_requests"),
            root.read(&format!("{base}/queue/nr_requests")),
        );
        put(
            inv,
            key("queue_depth"),
            root.read(&format!("{base}/device/queue_depth")),
        );
        put(
            inv,
            key("write_cache"),
            root.read(&format!("{base}/queue/write_cache")),
        );
    }
}

/// One fact that differs: its value in the first and the second inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    pub(crate) key: String,
    pub(crate) a: Option<String>,
    pub(crate) b: Option<String>,
}

/// The facts whose values differ (or exist on one side only).
pub(crate) fn diff(a: &Inventory, b: &Inventory) -> Vec<Difference> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| Difference {
            key: k.clone(),
            a: a.get(k).cloned(),
            b: b.get(k).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> Inventory {
        host_inventory(&Root::fixture(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name)
                .join("t1"),
        ))
    }

    #[test]
    fn two_hosts_differ_in_their_nics() {
        let (traps, clean) = (fixture("doctor-traps"), fixture("doctor-clean"));
        assert_eq!(
            traps.get("nic.eth1.duplex").map(String::as_str),
            Some("half")
        );
        assert_eq!(
            traps.get("nic.eth2.rx_ring").map(String::as_str),
            Some("256 of 4096")
        );
        assert_eq!(
            clean.get("sysctl.vm.swappiness").map(String::as_str),
            Some("1")
        );
        let d = diff(&traps, &clean);
        let eth1 = d.iter().find(|x| x.key == "nic.eth1.speed").unwrap();
        assert_eq!(
            (eth1.a.as_deref(), eth1.b.as_deref()),
            (Some("100 Mb/s"), None)
        );
        assert!(d.iter().any(|x| x.key == "nic.eth0.duplex"));
        assert!(!d.iter().any(|x| x.key == "cpu.count"), "both have 2 CPUs");
        assert!(diff(&clean, &clean).is_empty());
    }

    #[test]
    fn this_host_has_an_inventory() {
        let inv = host_inventory(&Root::live());
        assert!(inv.contains_key("kernel"));
        assert!(inv.contains_key("cpu.count"));
        assert!(inv.contains_key("memory.total"));
    }
}
