//! Processes followed through a run: perflab itself, and the server under
//! test (`--server-pid`, `--server-proc`, or a managed server). Each group's
//! CPU (user and system, as shares of one CPU), resident memory, threads,
//! context switches, major faults and storage I/O, summed over its
//! processes from /proc/PID/stat, /proc/PID/status (parsed with
//! procfs-core) and /proc/PID/io (`read_bytes`/`write_bytes`: bytes that
//! went to or came from the block layer, proc(5)).

use super::HostRoot;
use crate::util::sys::clock_ticks;
use procfs_core::FromRead;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which processes a group follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ProcessSelector {
    /// Exactly this process.
    Pid(u32),
    /// This process and its children (a postmaster and its backends).
    Tree(u32),
    /// Every process with this command name (`postgres`, `mariadbd`).
    Name(String),
}

/// A named group of processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessGroup {
    /// `perflab` or `server`.
    pub(crate) label: String,
    pub(crate) selector: ProcessSelector,
}

/// The label of the server under test's group.
pub(crate) const SERVER_LABEL: &str = "server";
/// The label of perflab's own group.
pub(crate) const PERFLAB_LABEL: &str = "perflab";
/// The label of a perflab agent's own process, in what it samples.
pub(crate) const AGENT_LABEL: &str = "agent";

/// The group's first process: the one its selector names, else the oldest
/// found (lowest pid) — for a server, its postmaster or main process, whose
/// cgroup and network namespace its workers share.
pub(crate) fn first_pid(selector: &ProcessSelector, found: &GroupCounters) -> Option<u32> {
    match selector {
        ProcessSelector::Pid(p) | ProcessSelector::Tree(p) if found.contains_key(p) => Some(*p),
        _ => found.keys().next().copied(),
    }
}

/// One process's cumulative counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct PidCounters {
    /// User and system CPU, clock ticks.
    pub(crate) utime: u64,
    pub(crate) stime: u64,
    pub(crate) rss_pages: u64,
    pub(crate) threads: u64,
    pub(crate) context_switches: u64,
    /// Major page faults (`majflt` of /proc/PID/stat).
    #[serde(default)]
    pub(crate) major_faults: u64,
    /// Bytes read from and written to storage (/proc/PID/io), when the
    /// file could be read (it needs ptrace access to the process).
    #[serde(default)]
    pub(crate) read_bytes: Option<u64>,
    #[serde(default)]
    pub(crate) write_bytes: Option<u64>,
    /// The process's nice value: its user time at nice > 0 is what the
    /// host's CPU counters file under `nice`.
    #[serde(default)]
    pub(crate) nice: i64,
    /// Nanoseconds its threads spent runnable but waiting for a CPU
    /// (`run_delay`, the second field of schedstat), summed over threads.
    #[serde(default)]
    pub(crate) run_delay_ns: Option<u64>,
    /// The descriptors it held and its soft limit on them, when both
    /// could be read (see [`super::open_files`]).
    #[serde(default)]
    pub(crate) open_files: Option<(u64, u64)>,
}

/// A group's processes at one moment, by pid.
pub(crate) type GroupCounters = BTreeMap<u32, PidCounters>;

#[cfg(test)]
/// Reads the counters of every process a group follows.
pub(crate) fn read_group(root: &HostRoot, group: &ProcessGroup) -> GroupCounters {
    read_group_with(root, group, true, &mut super::open_files::Limits::default())
}

/// As [`read_group`]; a multi-threaded process's run delay is read from
/// its threads only with `run_delay_of_tasks` (a reader of the threads
/// sums it from its own reading instead); each process's open-file limit
/// from `limits`, which keeps it between readings.
pub(crate) fn read_group_with(
    root: &HostRoot,
    group: &ProcessGroup,
    run_delay_of_tasks: bool,
    limits: &mut super::open_files::Limits,
) -> GroupCounters {
    let mut out = BTreeMap::new();
    let Some(proc) = root.proc_dir() else {
        return out;
    };
    for (pid, entry) in super::numbered(proc) {
        if let ProcessSelector::Pid(p) = group.selector {
            if p != pid {
                continue;
            }
        }
        // A process can end between listing and reading: skip it.
        let Ok(file) = std::fs::File::open(entry.path().join("stat")) else {
            continue;
        };
        let Ok(stat) = procfs_core::process::Stat::from_read(file) else {
            continue;
        };
        let wanted = match &group.selector {
            ProcessSelector::Pid(p) => *p == pid,
            ProcessSelector::Tree(p) => *p == pid || u32::try_from(stat.ppid).ok() == Some(*p),
            ProcessSelector::Name(name) => stat.comm == *name,
        };
        if !wanted {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let context_switches = context_switches(&status);
        let io = std::fs::File::open(entry.path().join("io"))
            .ok()
            .and_then(|f| procfs_core::process::Io::from_read(f).ok());
        out.insert(
            pid,
            PidCounters {
                utime: stat.utime,
                stime: stat.stime,
                rss_pages: stat.rss,
                threads: u64::try_from(stat.num_threads).unwrap_or(0),
                context_switches,
                major_faults: stat.majflt,
                read_bytes: io.as_ref().map(|io| io.read_bytes),
                write_bytes: io.as_ref().map(|io| io.write_bytes),
                nice: stat.nice,
                run_delay_ns: if run_delay_of_tasks {
                    run_delay(&entry.path(), stat.num_threads)
                } else {
                    None
                },
                open_files: limits.read(&entry.path(), pid, stat.starttime, &status),
            },
        );
    }
    out
}

/// Voluntary and involuntary context switches of a /proc/PID/status text
/// (read by hand: a server of 150 processes made procfs-core build 150
/// maps of 55 entries each at every sample for these two numbers).
fn context_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
        })
        .filter_map(|l| l.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// A process's time runnable but waiting for a CPU, ns: its own schedstat
/// when it has one thread, else the sum over /proc/PID/task/*/schedstat
/// (the process file counts only its first thread).
fn run_delay(dir: &std::path::Path, threads: i64) -> Option<u64> {
    let of = |path: std::path::PathBuf| -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    };
    if threads <= 1 {
        return of(dir.join("schedstat"));
    }
    let tasks = std::fs::read_dir(dir.join("task")).ok()?;
    let mut sum = None::<u64>;
    for task in tasks.flatten() {
        if let Some(ns) = of(task.path().join("schedstat")) {
            sum = Some(sum.unwrap_or(0).saturating_add(ns));
        }
    }
    sum
}

/// What a group of processes did over one interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcessSample {
    pub label: String,
    /// Processes in the group at the end of the interval.
    pub processes: usize,
    /// User CPU as a share of one CPU (1.0 = one CPU fully busy).
    pub cpu_user: f64,
    /// System CPU as a share of one CPU.
    pub cpu_system: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub context_switches_per_s: f64,
    /// Bytes the group had read from storage and written to it, per second
    /// (`/proc/PID/io` `read_bytes`, `write_bytes`): a database that reads
    /// with read(2) shows its misses here, not as page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes_per_s: Option<f64>,
    /// Major page faults per second (pages read in on touch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults_per_s: Option<f64>,
    /// User CPU run at a nice value above 0, as a share of one CPU: the
    /// part of the host's `nice` time that is this group's own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_niced: f64,
    /// Time the group's threads were runnable but waited for a CPU, in
    /// seconds per second (the mean number of its threads kept waiting),
    /// when schedstat could be read: the CPU's saturation as the group
    /// felt it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay: Option<f64>,
    /// The CPU of the group's busiest single-threaded process, as a share
    /// of one CPU: a process that can never use more than one (nginx's
    /// worker, a PostgreSQL backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_single_thread: Option<f64>,
    /// Where the group's threads spent the interval: on a CPU, waiting
    /// for one, in I/O, on locks, on their clients, asleep (see
    /// [`super::threads`]), when their schedstat could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_states: Option<super::threads::ThreadStates>,
    /// The group's process nearest its open-file limit at the
    /// interval's end, when its descriptors and limits could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<super::open_files::OpenFiles>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl ProcessSample {
    /// Compares two readings of a group; processes that appeared in between
    /// count from zero (they started during the interval).
    pub(crate) fn between(label: &str, a: &GroupCounters, b: &GroupCounters, seconds: f64) -> Self {
        let ticks_per_s = clock_ticks();
        let page = page_size();
        // Every increase is believed only up to a rate (see
        // `untrusted::increase`), and sums saturate: the counters may be a
        // remote agent's.
        let grew = |x: u64, y: u64| super::believe::increase(x, y, seconds);
        let (mut user, mut system, mut switches, mut major) = (0u64, 0u64, 0u64, 0u64);
        let mut niced = 0u64;
        let mut delayed = None::<u64>;
        // Storage bytes: None when no process of the group let its io file
        // be read, rather than a zero that would claim it did no I/O.
        let (mut read, mut written) = (None::<u64>, None::<u64>);
        let mut single = None::<u64>;
        let add = |sum: Option<u64>, n: u64| Some(sum.unwrap_or(0).saturating_add(n));
        for (pid, after) in b {
            let before = a.get(pid).copied().unwrap_or_default();
            let (cpu_user, cpu_system) = (
                grew(before.utime, after.utime),
                grew(before.stime, after.stime),
            );
            if after.threads == 1 {
                let ticks = cpu_user.saturating_add(cpu_system);
                single = Some(single.map_or(ticks, |s| s.max(ticks)));
            }
            user = user.saturating_add(cpu_user);
            if after.nice > 0 {
                niced = niced.saturating_add(cpu_user);
            }
            system = system.saturating_add(cpu_system);
            switches =
                switches.saturating_add(grew(before.context_switches, after.context_switches));
            major = major.saturating_add(grew(before.major_faults, after.major_faults));
            let grew_opt = |x: Option<u64>, y: Option<u64>| y.map(|y| grew(x.unwrap_or(0), y));
            if let Some(n) = grew_opt(before.run_delay_ns, after.run_delay_ns) {
                delayed = add(delayed, n);
            }
            if let Some(n) = grew_opt(before.read_bytes, after.read_bytes) {
                read = add(read, n);
            }
            if let Some(n) = grew_opt(before.write_bytes, after.write_bytes) {
                written = add(written, n);
            }
        }
        let per_s = |n: u64| super::believe::per_second(n, seconds);
        let believable = super::believe::believable;
        ProcessSample {
            label: label.to_string(),
            processes: b.len(),
            cpu_user: per_s(user) / ticks_per_s,
            cpu_system: per_s(system) / ticks_per_s,
            rss_bytes: believable(b.values().fold(0u64, |sum, p| {
                sum.saturating_add(p.rss_pages.saturating_mul(page))
            })),
            threads: believable(
                b.values()
                    .fold(0u64, |sum, p| sum.saturating_add(p.threads)),
            ),
            context_switches_per_s: per_s(switches),
            read_bytes_per_s: read.map(per_s),
            write_bytes_per_s: written.map(per_s),
            major_faults_per_s: (!b.is_empty()).then(|| per_s(major)),
            cpu_niced: per_s(niced) / ticks_per_s,
            run_delay: delayed.map(|ns| per_s(ns) / 1e9),
            busiest_single_thread: single.map(|t| per_s(t) / ticks_per_s),
            thread_states: None,
            open_files: super::open_files::OpenFiles::nearest(
                b.iter().filter_map(|(pid, p)| Some((*pid, p.open_files?))),
            ),
        }
    }

    /// User plus system CPU, as a share of one CPU.
    pub(crate) fn cpu(&self) -> f64 {
        self.cpu_user + self.cpu_system
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_switches_are_both_kinds_summed() {
        let status =
            "Name:\tpostgres\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(context_switches(status), 127);
        assert_eq!(
            context_switches("Name: x\nvoluntary_ctxt_switches: many\n"),
            0
        );
        // This process has switched at least once by now.
        let mine = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(context_switches(&mine) > 0);
    }

    #[test]
    fn this_process_is_found_and_its_cpu_counted() {
        let me = ProcessGroup {
            label: "perflab".to_string(),
            selector: ProcessSelector::Pid(std::process::id()),
        };
        let root = HostRoot::live();
        // The busy loop runs until this thread has had 300 ms of CPU (at
        // most 30 s, however loaded the machine), and the group's count
        // must hold at least that much: other tests' threads may add to it.
        let thread_cpu = || {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes one timespec we own.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
        };
        let before = read_group(&root, &me);
        let start = std::time::Instant::now();
        let spent_before = thread_cpu();
        let mut x = 0u64;
        while thread_cpu() - spent_before < 0.3 && start.elapsed().as_secs() < 30 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = thread_cpu() - spent_before;
        let after = read_group(&root, &me);
        let elapsed = start.elapsed().as_secs_f64();
        let s = ProcessSample::between("perflab", &before, &after, elapsed);
        assert_eq!(s.processes, 1);
        // Clock ticks are 10 ms: a tick or two may fall either side.
        assert!(
            s.cpu() * elapsed >= spent - 0.03,
            "counted {:.3} CPU-seconds, the loop's thread alone spent {spent:.3}",
            s.cpu() * elapsed
        );
        assert!(s.rss_bytes > 0);
        assert!(s.threads >= 1);
    }

    #[test]
    fn a_name_selects_every_process_of_that_name() {
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        let group = ProcessGroup {
            label: "server".to_string(),
            selector: ProcessSelector::Name(me.trim().to_string()),
        };
        let found = read_group(&HostRoot::live(), &group);
        assert!(found.contains_key(&std::process::id()));
        let none = ProcessGroup {
            label: "server".to_string(),
            selector: ProcessSelector::Name("no-such-process-name".to_string()),
        };
        assert!(read_group(&HostRoot::live(), &none).is_empty());
    }

    /// A shell loop bounded in count (about a second of CPU), run by
    /// `prefix` (`nice -n 10`, `taskset -c 0`).
    fn busy_loop(prefix: &[&str]) -> std::process::Child {
        std::process::Command::new(prefix[0])
            .args(&prefix[1..])
            .args([
                "sh",
                "-c",
                "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done",
            ])
            .spawn()
            .unwrap()
    }

    /// Process `pid`'s counters now and once `enough` holds of them (read
    /// every 20 ms, at most 5 s: a loop may wait behind other tests).
    fn read_until(
        pid: u32,
        enough: impl Fn(&GroupCounters) -> bool,
    ) -> (GroupCounters, GroupCounters) {
        let group = ProcessGroup {
            label: "hog".to_string(),
            selector: ProcessSelector::Pid(pid),
        };
        let root = HostRoot::live();
        let before = read_group(&root, &group);
        let start = std::time::Instant::now();
        let mut after = read_group(&root, &group);
        while !enough(&after) && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            after = read_group(&root, &group);
        }
        (before, after)
    }

    /// A child running at nice 10 has its user time counted as niced: the
    /// host files it under `nice`.
    #[test]
    fn user_time_at_a_positive_nice_is_counted_as_niced() {
        let mut child = busy_loop(&["nice", "-n", "10"]);
        let (before, after) = read_until(child.id(), |c| {
            c.values().map(|p| p.utime).sum::<u64>() >= 3
        });
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(after.get(&child.id()).map(|p| p.nice), Some(10));
        let s = ProcessSample::between("hog", &before, &after, 1.0);
        assert!(s.cpu_user > 0.0, "the loop ran no CPU");
        assert_eq!(s.cpu_niced, s.cpu_user);
    }

    /// Two loops held to one CPU take turns: each waits for it while the
    /// other runs, and schedstat's run delay shows the wait.
    #[test]
    fn threads_waiting_for_a_cpu_are_counted_as_run_delay() {
        let (mut one, mut two) = (
            busy_loop(&["taskset", "-c", "0"]),
            busy_loop(&["taskset", "-c", "0"]),
        );
        let (before, after) = read_until(one.id(), |c| {
            c.values().filter_map(|p| p.run_delay_ns).sum::<u64>() >= 10_000_000
        });
        for child in [&mut one, &mut two] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let s = ProcessSample::between("hog", &before, &after, 1.0);
        let waited = s.run_delay.expect("/proc/PID/schedstat is readable");
        assert!(waited > 0.0, "the loop never waited for its CPU");
    }

    /// Writing 4 MiB and syncing it sends bytes to storage: the group's
    /// write rate shows them (the file lives on the disk the build is on).
    #[test]
    fn storage_writes_and_faults_are_counted() {
        use std::io::Write;
        let me = ProcessGroup {
            label: "perflab".to_string(),
            selector: ProcessSelector::Pid(std::process::id()),
        };
        let root = HostRoot::live();
        let before = read_group(&root, &me);
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut file = std::fs::File::create(dir.path().join("written")).unwrap();
        file.write_all(&vec![1u8; 4 << 20]).unwrap();
        file.sync_all().unwrap();
        let after = read_group(&root, &me);
        let s = ProcessSample::between("perflab", &before, &after, 1.0);
        let written = s.write_bytes_per_s.expect("/proc/self/io is readable");
        assert!(written >= f64::from(4u32 << 20), "{written} bytes/s");
        assert!(s.read_bytes_per_s.is_some());
        assert!(s.major_faults_per_s.is_some());
    }

    /// A process whose io file could not be read leaves the rates absent,
    /// not zero; one that appeared mid-interval counts from zero.
    #[test]
    fn unreadable_io_is_absent_and_new_processes_count_from_zero() {
        let blind = PidCounters {
            major_faults: 3,
            ..PidCounters::default()
        };
        let a = GroupCounters::from([(10, blind)]);
        let b = GroupCounters::from([(
            10,
            PidCounters {
                major_faults: 8,
                ..blind
            },
        )]);
        let s = ProcessSample::between("server", &a, &b, 1.0);
        assert_eq!(s.read_bytes_per_s, None);
        assert_eq!(s.write_bytes_per_s, None);
        assert_eq!(s.major_faults_per_s, Some(5.0));
        let newcomer = PidCounters {
            read_bytes: Some(8192),
            write_bytes: Some(4096),
            ..PidCounters::default()
        };
        let c = GroupCounters::from([(10, blind), (11, newcomer)]);
        let s = ProcessSample::between("server", &a, &c, 2.0);
        assert_eq!(s.read_bytes_per_s, Some(4096.0));
        assert_eq!(s.write_bytes_per_s, Some(2048.0));
        assert_eq!(s.major_faults_per_s, Some(0.0));
    }
}
