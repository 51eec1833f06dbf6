//! The host's own counters, read from /proc and /sys: CPU time by state
//! (per CPU and in total, with `%ISR` = irq + softirq), context switches,
//! interrupts and the run queue, memory and paging, every disk, every
//! network interface with its link speed and duplex, TCP segments and
//! retransmissions, pressure stall information, and — for the server under
//! test — its cgroup's limits and counters and the qdiscs of its network
//! namespace and the host's (see `probe::cgroup`, `probe::qdisc`). A [`HostSnapshot`]
//! holds the cumulative counters at one moment; two snapshots give a
//! [`HostSample`] of rates over the time between them.
//!
//! Files are parsed with procfs-core where it covers them (stat, meminfo,
//! vmstat, diskstats, net/dev, pressure) and by hand where it does not
//! (net/snmp and net/netstat tables, the `intr` line, /sys/class/net).
//! Everything is read from a root that tests point at fixture trees. A file
//! that is missing (a container, an old kernel, no PSI) leaves its part of
//! the sample absent — never zero, never an error that stops a run.

mod live;
pub(crate) mod open_files;
mod parse;
pub(crate) use parse::{interrupts_by_source, snmp_table};
pub(crate) mod believe;
pub mod process;
mod sample;
mod snapshot;
pub(crate) mod stack;
pub(crate) mod threads;
pub(crate) mod untrusted;

pub(crate) use crate::probe::cgroup::{CgroupIoSample, CgroupSample};
pub use crate::probe::qdisc::QdiscSample;
pub use sample::{
    stall_percent, weighted_mean, CpuSample, DiskSample, HostSample, MemorySample, NicSample,
    PressureSample, TcpSample,
};
pub use snapshot::{HostSnapshot, NicCounters, PressureTotals};

use crate::probe::cgroup::CgroupCounters;
use crate::probe::qdisc::QdiscReader;
use procfs_core::{FromBufRead, FromBufReadSI};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the proc and sys trees are: directories (`/proc` and `/sys` on a
/// live host, a fixture tree in tests), or files held in memory (counters
/// another source reported, rendered in the kernel's own formats).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRoot {
    Dirs {
        proc: PathBuf,
        sys: PathBuf,
    },
    /// File texts by path, `proc/stat`, `sys/class/net/eth0/speed`, …
    Texts(BTreeMap<String, String>),
}

impl HostRoot {
    /// This host.
    pub fn live() -> Self {
        HostRoot::Dirs {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }

    #[cfg(test)]
    /// A fixture tree holding `proc/` and `sys/`.
    pub(crate) fn fixture(dir: &Path) -> Self {
        HostRoot::Dirs {
            proc: dir.join("proc"),
            sys: dir.join("sys"),
        }
    }

    /// The proc directory, when there is one (processes live only there).
    pub(crate) fn proc_dir(&self) -> Option<&Path> {
        match self {
            HostRoot::Dirs { proc, .. } => Some(proc),
            HostRoot::Texts(_) => None,
        }
    }

    /// A file's text by its path under the root (`proc/…` or `sys/…`).
    pub(crate) fn text(&self, rel: &str) -> Option<String> {
        match self {
            HostRoot::Dirs { proc, sys } => {
                let path = match rel.split_once('/') {
                    Some(("proc", rest)) => proc.join(rest),
                    Some(("sys", rest)) => sys.join(rest),
                    _ => return None,
                };
                if path.starts_with("/proc") || path.starts_with("/sys") {
                    live::read(&path)
                } else {
                    std::fs::read_to_string(path).ok()
                }
            }
            HostRoot::Texts(files) => files.get(rel).cloned(),
        }
    }

    /// The names in a directory under the root (`sys/block/dm-0/slaves`);
    /// none when it is absent.
    pub(crate) fn list(&self, rel: &str) -> Vec<String> {
        match self {
            HostRoot::Dirs { proc, sys } => {
                let dir = match rel.split_once('/') {
                    Some(("proc", rest)) => proc.join(rest),
                    Some(("sys", rest)) => sys.join(rest),
                    _ => return Vec::new(),
                };
                let mut names: Vec<String> = std::fs::read_dir(dir)
                    .map(|d| {
                        d.flatten()
                            .filter_map(|e| e.file_name().to_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                names.sort();
                names
            }
            HostRoot::Texts(files) => {
                let prefix = format!("{}/", rel.trim_end_matches('/'));
                let mut names: Vec<String> = files
                    .keys()
                    .filter_map(|k| k.strip_prefix(&prefix)?.split('/').next())
                    .map(str::to_string)
                    .collect();
                names.dedup();
                names
            }
        }
    }

    /// The sys directory, when there is one (cgroups live only there).
    pub(crate) fn sys_dir(&self) -> Option<&Path> {
        match self {
            HostRoot::Dirs { sys, .. } => Some(sys),
            HostRoot::Texts(_) => None,
        }
    }

    fn proc_file(&self, rel: &str) -> Option<std::io::Cursor<String>> {
        self.proc_text(rel).map(std::io::Cursor::new)
    }

    fn proc_text(&self, rel: &str) -> Option<String> {
        self.text(&format!("proc/{rel}"))
    }
}

impl HostSnapshot {
    /// Reads every counter under `root` once, and those of the processes
    /// of each group; what is missing stays absent. A sampler that reads
    /// again and again keeps a [`HostReader`] instead.
    pub fn read(root: &HostRoot, groups: &[process::ProcessGroup]) -> Self {
        HostReader::new(root.clone()).read(groups)
    }
}

/// A link's facts that change only with its carrier: speed and duplex are
/// negotiated when the link comes up, so they are read again only when
/// `carrier_changes` moved (every time where it is not reported).
#[derive(Debug, Clone)]
struct LinkFacts {
    carrier_changes: u64,
    speed_mbps: Option<u64>,
    duplex: Option<String>,
}

/// Reads a host's counters sample after sample, keeping what need not be
/// found again: the qdisc reader's sockets and link names (on the live
/// host), and each link's speed and duplex while its carrier holds.
pub(crate) struct HostReader {
    root: HostRoot,
    qdiscs: Option<QdiscReader>,
    links: BTreeMap<String, LinkFacts>,
    /// Each group's threads at the last reading: a thread that has not run
    /// since keeps its wait without its files being read again.
    threads: BTreeMap<String, threads::GroupThreads>,
    /// Delay accounting is on: stat gives each thread's block-I/O delay.
    delayacct: bool,
    /// Threads' schedstat files, kept open between samples.
    kept: threads::KeptFiles,
    /// The block devices' stack as last read, and how long it holds.
    stack: stack::StackSeen,
    stack_fresh: Duration,
    /// The followed processes' open-file limits, read once each.
    limits: open_files::Limits,
    /// The host's interfaces the run's traffic can cross, when known
    /// ([`HostReader::on_path`]); the others' links and qdiscs are not read.
    path: Option<BTreeSet<String>>,
}

/// Every followed group's processes, read with `run_delay_of_tasks`,
/// their open-file limits kept in `limits` between readings.
fn read_processes(
    root: &HostRoot,
    groups: &[process::ProcessGroup],
    run_delay_of_tasks: bool,
    limits: &mut open_files::Limits,
) -> Vec<(process::ProcessGroup, process::GroupCounters)> {
    limits.begin();
    groups
        .iter()
        .map(|g| {
            let found = process::read_group_with(root, g, run_delay_of_tasks, limits);
            (g.clone(), found)
        })
        .collect()
}

impl HostReader {
    /// A reader of `root`; qdiscs are read on the live host only.
    pub(crate) fn new(root: HostRoot) -> Self {
        let qdiscs = (root == HostRoot::live()).then(QdiscReader::new);
        let delayacct = root.proc_dir().is_some_and(threads::delay_accounting);
        // A tree of texts is read afresh every time (its tests change it).
        let stack_fresh = if root == HostRoot::live() {
            stack::STACK_FRESH
        } else {
            Duration::ZERO
        };
        HostReader {
            root,
            qdiscs,
            links: BTreeMap::new(),
            threads: BTreeMap::new(),
            delayacct,
            kept: threads::KeptFiles::default(),
            limits: open_files::Limits::default(),
            stack: stack::StackSeen::default(),
            stack_fresh,
            path: None,
        }
    }

    /// Reads only the links and host qdiscs of `path`, the interfaces the
    /// run's traffic can leave by (`probe::route`; `None`: every one).
    /// Another run's shaped veth, or an uplink busy under a loopback run,
    /// carries none of this run's work, and its load is not this run's
    /// bottleneck. The server's own namespace is read whole.
    pub(crate) fn on_path(mut self, path: Option<BTreeSet<String>>) -> Self {
        self.path = path;
        self
    }

    /// Every counter now, and those of the processes of each group.
    pub(crate) fn read(&mut self, groups: &[process::ProcessGroup]) -> HostSnapshot {
        let root = &self.root;
        // Read once: the kernel writes the text of every CPU afresh.
        let stat_text = root.proc_text("stat");
        let interrupts = stat_text.as_deref().and_then(parse::interrupts_total);
        let stat = stat_text.as_deref().and_then(kernel_stats);
        let irqs = root
            .proc_text("interrupts")
            .map(|t| parse::interrupts_by_source(&t))
            .unwrap_or_default();
        let meminfo = root
            .proc_text("meminfo")
            .map(|t| std::io::Cursor::new(parse::meminfo_in_range(&t)))
            .and_then(|f| procfs_core::Meminfo::from_buf_read(f).ok());
        let vmstat = root
            .proc_text("vmstat")
            .map(|t| parse::vmstat_fields(&t, |k| sample::VMSTAT_KEYS.contains(&k)));
        let disks = self.stack.read(root, self.stack_fresh);
        let names: Vec<&str> = disks.iter().map(|d| d.name.as_str()).collect();
        let disk_lower = self.stack.lower().clone();
        // Kernel threads are looked for only where a stacked disk needs them.
        let kernel_workers = if disk_lower.is_empty() {
            Vec::new()
        } else {
            stack::kernel_workers(root, &names)
        };
        let mut nics = read_nics(root, &mut self.links);
        let tcp = read_tcp(root);
        let pressure = read_pressure(root);
        // Run delay comes from the threads' reading, where there is one.
        let tasks = root.proc_dir().is_none();
        let mut processes = read_processes(root, groups, tasks, &mut self.limits);
        let threads = read_thread_groups(
            root,
            &mut processes,
            &mut self.threads,
            self.delayacct,
            &mut self.kept,
        );
        let server_pid = processes
            .iter()
            .find(|(g, _)| g.label == process::SERVER_LABEL)
            .and_then(|(g, found)| process::first_pid(&g.selector, found));
        let mem_total = meminfo.as_ref().map(|m| m.mem_total);
        let server_cgroup = server_pid.and_then(|pid| read_cgroup(root, pid, mem_total));
        let perflab_cgroup = processes
            .iter()
            .find(|(g, _)| g.label == process::PERFLAB_LABEL)
            .and_then(|(g, found)| process::first_pid(&g.selector, found))
            .and_then(|pid| read_cgroup(root, pid, mem_total));
        let mut qdiscs = match (&mut self.qdiscs, root.proc_dir()) {
            (Some(reader), Some(proc)) => reader.read(proc, server_pid),
            _ => Vec::new(),
        };
        if let Some(path) = &self.path {
            nics.retain(|name, _| path.contains(name));
            qdiscs.retain(|q| q.namespace != "host" || path.contains(&q.interface));
        }
        HostSnapshot {
            at: Instant::now(),
            stat,
            interrupts,
            irqs,
            meminfo,
            vmstat,
            disks,
            disk_lower,
            kernel_workers,
            nics,
            tcp,
            pressure,
            processes,
            server_cgroup,
            perflab_cgroup,
            qdiscs,
            threads,
            autogroup: root
                .proc_text("sys/kernel/sched_autogroup_enabled")
                .and_then(|t| parse::flag(&t)),
        }
    }
}

/// Every interface of /proc/net/dev with its link facts from sysfs; a
/// link's speed and duplex come from `known` while its carrier held, and
/// `known` is left holding this reading's.
fn read_nics(
    root: &HostRoot,
    known: &mut BTreeMap<String, LinkFacts>,
) -> BTreeMap<String, NicCounters> {
    let nics: BTreeMap<String, NicCounters> = root
        .proc_file("net/dev")
        .and_then(|f| procfs_core::net::InterfaceDeviceStatus::from_buf_read(f).ok())
        .map(|s| s.0)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, dev)| {
            let file = |rel: &str| root.text(&format!("sys/class/net/{name}/{rel}"));
            let carrier_changes = parse::link_counter(file, "carrier_changes");
            let (speed_mbps, duplex) = match (known.get(&name), carrier_changes) {
                (Some(facts), Some(now)) if facts.carrier_changes == now => {
                    (facts.speed_mbps, facts.duplex.clone())
                }
                _ => (parse::link_speed_mbps(file), parse::link_duplex(file)),
            };
            let nic = NicCounters {
                dev,
                speed_mbps,
                duplex,
                carrier_changes,
                rx_crc_errors: parse::link_counter(file, "statistics/rx_crc_errors"),
                tx_window_errors: parse::link_counter(file, "statistics/tx_window_errors"),
            };
            (name, nic)
        })
        .collect();
    // A link that went away is forgotten with it.
    *known = nics
        .iter()
        .filter_map(|(name, nic)| {
            let facts = LinkFacts {
                carrier_changes: nic.carrier_changes?,
                speed_mbps: nic.speed_mbps,
                duplex: nic.duplex.clone(),
            };
            Some((name.clone(), facts))
        })
        .collect();
    nics
}

/// `Tcp:` of /proc/net/snmp and `TcpExt:` of /proc/net/netstat, in one map.
fn read_tcp(root: &HostRoot) -> BTreeMap<String, u64> {
    let mut tcp = BTreeMap::new();
    let keep = |k: &str| sample::TCP_KEYS.contains(&k);
    if let Some(text) = root.proc_text("net/snmp") {
        tcp.extend(parse::snmp_fields(&text, "Tcp", keep));
    }
    if let Some(text) = root.proc_text("net/netstat") {
        tcp.extend(parse::snmp_fields(&text, "TcpExt", keep));
    }
    tcp
}

/// The stall counters of /proc/pressure, each file read once.
fn read_pressure(root: &HostRoot) -> PressureTotals {
    let [cpu, memory, io] =
        ["cpu", "memory", "io"].map(|file| root.proc_text(&format!("pressure/{file}")));
    let total = |text: &Option<String>, kind: &str| {
        text.as_deref()
            .and_then(|t| parse::pressure_total_us(t, kind))
    };
    PressureTotals {
        cpu_some_us: total(&cpu, "some"),
        memory_some_us: total(&memory, "some"),
        memory_full_us: total(&memory, "full"),
        io_some_us: total(&io, "some"),
        io_full_us: total(&io, "full"),
    }
}

/// The counters of the cgroup of process `pid`; `mem_total_bytes` is the
/// host's memory (a limit at or above it binds nothing).
fn read_cgroup(root: &HostRoot, pid: u32, mem_total_bytes: Option<u64>) -> Option<CgroupCounters> {
    let (proc, sys) = (root.proc_dir()?, root.sys_dir()?);
    CgroupCounters::read(
        proc,
        &sys.join("fs/cgroup"),
        &pid.to_string(),
        mem_total_bytes,
    )
}

/// `/proc/stat` read as the kernel's statistics.
fn kernel_stats(text: &str) -> Option<procfs_core::KernelStats> {
    let system = procfs_core::ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    procfs_core::KernelStats::from_buf_read(std::io::Cursor::new(text), &system).ok()
}

/// This host's CPU times, all CPUs together: `/proc/stat` alone, for a
/// share of the CPU between two readings (a generator's busy and stolen
/// time per interval) without a whole snapshot.
pub(crate) fn host_cpu_times(root: &HostRoot) -> Option<procfs_core::CpuTime> {
    root.proc_text("stat")
        .as_deref()
        .and_then(kernel_stats)
        .map(|k| k.total)
}

/// The threads of every followed group's processes; `previous` holds
/// each group's last reading and is left holding this one's.
///
/// Each process's run delay is summed from its threads' here (each
/// schedstat is read once per sample, not again by the process reader).
fn read_thread_groups(
    root: &HostRoot,
    processes: &mut [(process::ProcessGroup, process::GroupCounters)],
    previous: &mut BTreeMap<String, threads::GroupThreads>,
    delayacct: bool,
    kept: &mut threads::KeptFiles,
) -> Vec<(String, threads::GroupThreads)> {
    let Some(proc) = root.proc_dir() else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(processes.len());
    for (group, found) in processes.iter_mut() {
        let threads = threads::read_threads(
            proc,
            found.keys().copied(),
            previous.get(&group.label),
            delayacct,
            kept,
        );
        let mut delays: BTreeMap<u32, u64> = BTreeMap::new();
        for t in threads.threads.values() {
            let sum = delays.entry(t.pid).or_insert(0);
            *sum = sum.saturating_add(t.run_delay_ns);
        }
        for (pid, counters) in found.iter_mut() {
            counters.run_delay_ns = delays.get(pid).copied().or(counters.run_delay_ns);
        }
        out.push((group.label.clone(), threads));
    }
    kept.keep_only(|tid| out.iter().any(|(_, g)| g.threads.contains_key(&tid)));
    *previous = out.iter().cloned().collect();
    out
}

/// The entries of a /proc directory whose names are numbers (processes,
/// or a process's threads), with that number; none when it cannot be read.
fn numbered(dir: &Path) -> impl Iterator<Item = (u32, std::fs::DirEntry)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flat_map(|entries| entries.flatten())
        .filter_map(|entry| {
            let n = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((n, entry))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str, at: &str) -> HostSnapshot {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
            .join(at);
        HostSnapshot::read(&HostRoot::fixture(&dir), &[])
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Two snapshots of a 2-CPU VM taken while both CPUs were busy and a
    /// 64 MiB O_DIRECT write went to vda; rates over a declared 2 s.
    #[test]
    fn a_two_cpu_vm_sample_has_the_exact_figures() {
        let s = HostSample::between_over(&fixture("host-vm", "t0"), &fixture("host-vm", "t1"), 2.0);
        let cpu = s.cpu.unwrap();
        assert!(close(cpu.user, 0.914_893_617_021_276_6), "{cpu:?}");
        assert!(close(cpu.busy(), 0.995_744_680_851_063_8));
        assert!(close(cpu.isr(), 0.0));
        assert_eq!(s.cpus.len(), 2);
        assert!(close(s.cpus[1].user, 0.940_170_940_170_940_2));
        assert!(close(s.cpus[0].busy(), 1.0));
        assert!(close(s.interrupts_per_s.unwrap(), 459.0));
        assert!(close(s.context_switches_per_s.unwrap(), 575.0));
        let vda = s.disks.iter().find(|d| d.name == "vda").unwrap();
        assert!(close(vda.writes_per_s, 64.0));
        assert!(close(vda.write_bytes_per_s, 33_554_432.0));
        assert!(close(vda.busy, 0.02));
        assert!(close(vda.queue, 0.044));
        assert!(close(vda.await_ms.unwrap(), 0.659_090_909_090_909_1));
        assert_eq!(s.busiest_disk().map(|d| d.name.as_str()), Some("vda"));
        let lo = s.nics.iter().find(|n| n.name == "lo").unwrap();
        assert_eq!(lo.speed_mbps, None, "loopback reports no speed");
        assert!(s.tcp.is_some());
        // 583,994 µs of CPU stalls in the 2 s (avg10 said 35.75%).
        assert!(
            close(s.pressure.cpu_some.unwrap(), 29.1997),
            "{:?}",
            s.pressure
        );
        // Interrupts by source, busiest first, per CPU.
        assert_eq!(s.irqs.len(), 2);
        assert_eq!(s.irqs[0].source, "LOC");
        assert_eq!(s.irqs[0].per_cpu_per_s, vec![500.0, 1000.0]);
        assert_eq!(s.irqs[1].source, "38:virtio2-input.0");
        assert_eq!(s.irqs[1].per_cpu_per_s, vec![250.0, 0.0]);
        assert_eq!(s.pressure.memory_full, Some(0.0));
        assert!(s.memory.unwrap().available_bytes.is_some());
        // The later snapshot's scheduler switch: each session a group.
        assert_eq!(s.autogroup, Some(true));
        assert_eq!(fixture("host-vm", "t0").autogroup, None);
    }

    #[test]
    fn a_kernel_switch_is_zero_or_one_and_nothing_else() {
        assert_eq!(parse::flag("1\n"), Some(true));
        assert_eq!(parse::flag("0"), Some(false));
        for text in ["", "2", "yes", "-1", "1 1"] {
            assert_eq!(parse::flag(text), None, "{text:?}");
        }
    }

    /// A host whose CPUs went idle ten seconds after a load: `avg10` still
    /// says 33.6%, but no task stalled over the interval; and one whose I/O
    /// stalled 0.5 s of a 1 s interval while `avg10` still said 2%.
    #[test]
    fn pressure_is_the_stalled_share_of_the_interval_not_a_decaying_average() {
        let psi = |cpu_total: u64, io_total: u64| {
            let mut files = BTreeMap::new();
            files.insert(
                "proc/pressure/cpu".to_string(),
                format!("some avg10=33.60 avg60=20.00 avg300=5.00 total={cpu_total}\n"),
            );
            files.insert(
                "proc/pressure/io".to_string(),
                format!(
                    "some avg10=2.00 avg60=1.00 avg300=0.50 total={io_total}\nfull avg10=1.00 avg60=0.50 avg300=0.10 total={io_total}\n"
                ),
            );
            HostSnapshot::read(&HostRoot::Texts(files), &[])
        };
        let s = HostSample::between_over(&psi(9_000_000, 100), &psi(9_000_000, 500_100), 1.0);
        assert_eq!(s.pressure.cpu_some, Some(0.0), "{:?}", s.pressure);
        assert_eq!(s.pressure.io_some, Some(50.0));
        assert_eq!(s.pressure.io_full, Some(50.0));
        assert_eq!(s.pressure.memory_some, None, "no file, no figure");
    }

    /// This host's own /proc/pressure, read twice: shares within 0..=100.
    #[test]
    fn this_hosts_pressure_is_a_share_of_the_interval() {
        if !Path::new("/proc/pressure/cpu").exists() {
            panic!("this kernel has no PSI (/proc/pressure): the test needs it");
        }
        let mut reader = HostReader::new(HostRoot::live());
        let a = reader.read(&[]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let b = reader.read(&[]);
        let s = HostSample::between(&a, &b);
        for share in [
            s.pressure.cpu_some,
            s.pressure.io_some,
            s.pressure.memory_some,
        ] {
            let share = share.expect("a reading of each PSI file");
            assert!((0.0..=100.0).contains(&share), "{:?}", s.pressure);
        }
        assert!(a.pressure.io_some_us.unwrap() <= b.pressure.io_some_us.unwrap());
    }

    /// Texts of a host with one link, `eth0`, at the given speed, duplex
    /// and carrier changes (none: no such file).
    fn one_link(speed: &str, duplex: &str, carrier_changes: Option<u64>) -> HostRoot {
        let mut files = BTreeMap::new();
        files.insert(
            "proc/net/dev".to_string(),
            "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n".to_string(),
        );
        files.insert("sys/class/net/eth0/speed".to_string(), format!("{speed}\n"));
        files.insert(
            "sys/class/net/eth0/duplex".to_string(),
            format!("{duplex}\n"),
        );
        if let Some(n) = carrier_changes {
            files.insert(
                "sys/class/net/eth0/carrier_changes".to_string(),
                format!("{n}\n"),
            );
        }
        HostRoot::Texts(files)
    }

    /// A link's speed and duplex are read again only when its carrier
    /// changed: a renegotiation to 100 Mb/s half duplex shows at once
    /// (carrier 2 -> 4), and while the carrier holds the facts are kept.
    #[test]
    fn link_speed_and_duplex_are_read_again_when_the_carrier_changes() {
        let eth0 = |reader: &mut HostReader| {
            let nic = reader.read(&[]).nics.remove("eth0").unwrap();
            (nic.speed_mbps, nic.duplex, nic.carrier_changes)
        };
        let full = (Some(1000), Some("full".to_string()), Some(2));
        let mut reader = HostReader::new(one_link("1000", "full", Some(2)));
        assert_eq!(eth0(&mut reader), full);
        // Kept while the carrier holds (the files are not read again).
        reader.root = one_link("100", "half", Some(2));
        assert_eq!(eth0(&mut reader), full);
        // The link went down and came up at 100 Mb/s half duplex.
        reader.root = one_link("100", "half", Some(4));
        assert_eq!(
            eth0(&mut reader),
            (Some(100), Some("half".to_string()), Some(4))
        );
        // Without a carrier count, read every time.
        let mut reader = HostReader::new(one_link("1000", "full", None));
        assert_eq!(eth0(&mut reader).0, Some(1000));
        reader.root = one_link("10", "half", None);
        assert_eq!(eth0(&mut reader).0, Some(10));
    }

    /// A 100 Mb/s half-duplex NIC with collisions, late collisions and CRC
    /// errors, on a host with no /proc/stat and no PSI.
    #[test]
    fn a_half_duplex_link_shows_its_collisions_and_utilisation() {
        let s = HostSample::between_over(
            &fixture("host-halfduplex", "t0"),
            &fixture("host-halfduplex", "t1"),
            2.0,
        );
        let eth1 = &s.nics[0];
        assert_eq!(eth1.name, "eth1");
        assert_eq!(eth1.speed_mbps, Some(100));
        assert_eq!(eth1.duplex.as_deref(), Some("half"));
        assert!(close(eth1.rx_bytes_per_s, 625_000.0));
        assert!(close(eth1.tx_bytes_per_s, 3_125_000.0));
        assert!(close(eth1.tx_utilisation.unwrap(), 0.25));
        assert!(close(eth1.rx_utilisation.unwrap(), 0.05));
        assert_eq!(eth1.collisions, 37);
        assert_eq!(eth1.rx_errors, 4);
        assert_eq!(eth1.rx_crc_errors, Some(4));
        assert_eq!(eth1.tx_window_errors, Some(9));
        assert_eq!(eth1.carrier_changes, Some(0));
        // Missing files are absent, not zero.
        assert_eq!(s.cpu, None);
        assert_eq!(s.interrupts_per_s, None);
        assert_eq!(s.memory, None);
        assert_eq!(s.tcp, None);
        assert_eq!(s.pressure, PressureSample::default());
        assert!(s.disks.is_empty());
    }
}
