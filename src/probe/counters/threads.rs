//! Where a followed process's threads spend their time, without the
//! server's cooperation: thread-state analysis in the manner of Brendan
//! Gregg's TSA method, from files any Linux exposes per thread.
//!
//! Each interval, per thread of every followed process:
//! - `/proc/PID/task/TID/schedstat` (sched-stats.rst): nanoseconds on a
//!   CPU, nanoseconds runnable but waiting for one (run delay), timeslices;
//! - `stat`: the state (`R`, `S`, `D`, …) and, when
//!   `kernel.task_delayacct` is 1, field 42 `delayacct_blkio_ticks` (the
//!   exact time blocked on block I/O);
//! - `wchan` (the kernel function the thread sleeps in) and `syscall` (the
//!   system call it is blocked in, with its arguments): both need ptrace
//!   access, and read `0` or fail without it.
//!
//! The interval's time of each thread is on a CPU, waiting for a CPU, or
//! off a CPU; the off-CPU time is classified by the wait seen at the
//! sample: I/O (D state, its path named from the wait channel), a lock
//! (futex), the clients or the network (a socket read, epoll, poll),
//! sleep (a timer) or other. A thread whose schedstat did not change has
//! not run since the last sample, so it is still in the same wait: its
//! other files are not read again — that is what makes a 1 s sample of the
//! wait honest for the whole interval, and what keeps the probe cheap.
//!
//! Threads that ran at least [`ACTIVE_SLICES_PER_S`] times a second are
//! the ones serving work; idle pool threads and background threads woken
//! by a timer are not, and their waits say nothing of a response time, so
//! the split of active threads is kept apart from that of all threads.

use crate::util::sys::clock_ticks;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Timeslices per second from which a thread counts as serving work: a
/// background thread on a 1 s timer runs once or twice, a connection
/// thread at a few operations per second several times.
pub(crate) const ACTIVE_SLICES_PER_S: f64 = 4.0;

/// Threads read per group at most: the cost stays bounded whatever a
/// process spawns (the rest are counted in the group's thread total).
pub(crate) const MAX_THREADS: usize = 4096;

/// Wait channels kept per group and interval, and their names' length.
pub(crate) const MAX_CHANNELS: usize = 8;
const MAX_CHANNEL_CHARS: usize = 40;

/// The I/O path a thread in D state waits on, from its wait channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IoPath {
    /// The block layer or a throttle in it (`io_schedule`, `rq_qos_wait`,
    /// `blk_*`, `submit_bio_wait`, direct I/O).
    Block,
    /// A journal commit (`jbd2_*`, xfs log force).
    Journal,
    /// An fsync or writeback waiting for its pages (`file_write_and_wait_range`,
    /// `folio_wait_*`, `wait_on_page_*`).
    Flush,
    /// A page fault reading a file's page in (`filemap_fault`).
    PageFault,
    /// Another uninterruptible wait.
    Other,
}

impl IoPath {
    /// The path in words.
    pub(crate) fn text(self) -> &'static str {
        match self {
            IoPath::Block => "block layer",
            IoPath::Journal => "journal commit",
            IoPath::Flush => "fsync/writeback",
            IoPath::PageFault => "page fault",
            IoPath::Other => "other",
        }
    }
}

/// What a thread was doing at a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ThreadWait {
    /// Running or runnable.
    Running,
    /// Blocked in I/O (D state).
    Io(IoPath),
    /// Asleep on a futex: a lock, a condition variable, a queue.
    Lock,
    /// Waiting on its clients or the network: a socket read, epoll, poll.
    Clients,
    /// Asleep on a timer (nanosleep).
    Sleep,
    /// Anything else, or a wait that could not be read.
    #[default]
    Other,
}

/// schedstat files kept open at most: a file kept is read again with one
/// `pread` from offset 0 (the kernel writes its text afresh), which saves
/// the path lookup, the open and the close — most of the cost of reading
/// a thread — without taking more than these descriptors from perflab's.
const MAX_KEPT: usize = 512;

/// Each thread's schedstat file, kept open between samples by thread id.
#[derive(Debug, Default)]
pub(crate) struct KeptFiles {
    files: HashMap<u32, File>,
}

impl KeptFiles {
    /// Thread `tid`'s on-CPU ns, run delay ns and timeslices, through its
    /// kept file, else opened at `path` (and kept while there is room).
    fn schedstat(&mut self, tid: u32, path: impl FnOnce() -> PathBuf) -> Option<(u64, u64, u64)> {
        let mut buf = [0u8; 128];
        if let Some(file) = self.files.get(&tid) {
            match file.read_at(&mut buf, 0) {
                Ok(n) if n > 0 => return parse_schedstat(&buf[..n]),
                // The thread ended (or its id went to another): open anew.
                _ => {
                    self.files.remove(&tid);
                }
            }
        }
        let file = File::open(path()).ok()?;
        let n = file.read_at(&mut buf, 0).ok()?;
        let read = parse_schedstat(&buf[..n])?;
        if self.files.len() < MAX_KEPT {
            self.files.insert(tid, file);
        }
        Some(read)
    }

    /// Closes the files of threads not in `seen` (they ended).
    pub(crate) fn keep_only(&mut self, seen: impl Fn(u32) -> bool) {
        self.files.retain(|tid, _| seen(*tid));
    }
}

/// One thread at one sample.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct ThreadReading {
    /// The process the thread belongs to.
    #[serde(default)]
    pub(crate) pid: u32,
    /// Nanoseconds on a CPU, runnable but waiting, and timeslices run.
    pub(crate) on_cpu_ns: u64,
    pub(crate) run_delay_ns: u64,
    pub(crate) timeslices: u64,
    pub(crate) wait: ThreadWait,
    /// The kernel function it slept in, when readable (bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) channel: Option<String>,
    /// Clock ticks blocked on block I/O (delay accounting), when on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) blkio_ticks: Option<u64>,
}

/// The threads of a followed group at one sample, by thread id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct GroupThreads {
    pub(crate) threads: BTreeMap<u32, ThreadReading>,
    /// A sleeping thread's wait channel could not be read (no ptrace
    /// access): its off-CPU time is `other`.
    #[serde(default)]
    pub(crate) wchan_unreadable: bool,
}

/// Reads the threads of processes `pids` under `proc`; a thread whose
/// on-CPU time and timeslices are those of `previous` keeps its wait.
/// schedstat files are read through `kept`.
pub(crate) fn read_threads(
    proc: &Path,
    pids: impl Iterator<Item = u32>,
    previous: Option<&GroupThreads>,
    delayacct: bool,
    kept: &mut KeptFiles,
) -> GroupThreads {
    let mut out = GroupThreads::default();
    let mut reader = ThreadReader {
        proc,
        previous,
        delayacct,
        buf: Vec::with_capacity(1024),
        // The thread reading is running as it reads itself; between
        // samples it sleeps on its interval.
        // SAFETY: gettid has no preconditions.
        me: u32::try_from(unsafe { libc::gettid() }).unwrap_or(0),
    };
    'pids: for pid in pids {
        for (tid, task) in super::numbered(&proc.join(pid.to_string()).join("task")) {
            if out.threads.len() >= MAX_THREADS {
                break 'pids;
            }
            let dir = task.path();
            // A thread can end between listing and reading: skip it.
            let Some(times) = kept.schedstat(tid, || dir.join("schedstat")) else {
                continue;
            };
            let at = ThreadAt {
                pid,
                tid,
                dir: &dir,
            };
            if let Some(reading) = reader.read(&at, times, &mut out.wchan_unreadable) {
                out.threads.insert(tid, reading);
            }
        }
    }
    out
}

/// What reading one group's threads keeps from thread to thread.
struct ThreadReader<'a> {
    proc: &'a Path,
    previous: Option<&'a GroupThreads>,
    delayacct: bool,
    /// The buffer small files are read into.
    buf: Vec<u8>,
    /// The reading thread's own id.
    me: u32,
}

/// One thread: its process, its id and its /proc directory.
struct ThreadAt<'a> {
    pid: u32,
    tid: u32,
    dir: &'a Path,
}

impl ThreadReader<'_> {
    /// Thread `at` with schedstat's `(on-CPU ns, run delay ns,
    /// timeslices)`; none when it ended meanwhile. Sets `wchan_unreadable`
    /// when a sleeping thread's wait channel cannot be read.
    fn read(
        &mut self,
        at: &ThreadAt,
        (on_cpu_ns, run_delay_ns, timeslices): (u64, u64, u64),
        wchan_unreadable: &mut bool,
    ) -> Option<ThreadReading> {
        let previous = self.previous;
        if let Some(before) = previous
            .and_then(|p| p.threads.get(&at.tid))
            .filter(|b| b.on_cpu_ns == on_cpu_ns && b.timeslices == timeslices)
        {
            // It has not run: it is still in the wait it was in.
            if before.channel.is_none() && before.wait == ThreadWait::Other {
                *wchan_unreadable |= previous.is_some_and(|p| p.wchan_unreadable);
            }
            return Some(ThreadReading {
                pid: at.pid,
                run_delay_ns,
                ..before.clone()
            });
        }
        let fresh = ThreadReading {
            pid: at.pid,
            on_cpu_ns,
            run_delay_ns,
            timeslices,
            ..ThreadReading::default()
        };
        if at.tid == self.me && self.proc == Path::new("/proc") {
            return Some(ThreadReading {
                wait: ThreadWait::Sleep,
                ..fresh
            });
        }
        let stat = read_small(&at.dir.join("stat"), &mut self.buf).and_then(parse_stat)?;
        let (wait, channel) = self.wait_of(at, &stat, wchan_unreadable);
        Some(ThreadReading {
            wait,
            channel,
            blkio_ticks: if self.delayacct {
                stat.blkio_ticks
            } else {
                None
            },
            ..fresh
        })
    }

    /// Where a thread in `stat`'s state waits, and the kernel function it
    /// sleeps in when readable.
    fn wait_of(
        &mut self,
        at: &ThreadAt,
        stat: &ThreadStat,
        wchan_unreadable: &mut bool,
    ) -> (ThreadWait, Option<String>) {
        if stat.state == b'R' {
            return (ThreadWait::Running, None);
        }
        let channel =
            read_small(&at.dir.join("wchan"), &mut self.buf).and_then(|t| channel_name(&t));
        let syscall = read_small(&at.dir.join("syscall"), &mut self.buf);
        // A thread reads "0" where perflab may not trace it, and also when
        // it ran at that instant (or is gone): only one that still sleeps
        // had its channel hidden.
        if channel.is_none()
            && matches!(stat.state, b'S' | b'D')
            && read_small(&at.dir.join("stat"), &mut self.buf)
                .and_then(parse_stat)
                .is_some_and(|now| matches!(now.state, b'S' | b'D'))
        {
            *wchan_unreadable = true;
        }
        let fd_is_socket = |fd: u64| {
            std::fs::read_link(
                self.proc
                    .join(at.pid.to_string())
                    .join("fd")
                    .join(fd.to_string()),
            )
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        };
        let wait = classify(
            stat.state,
            channel.as_deref(),
            syscall.as_deref(),
            fd_is_socket,
        );
        (wait, channel)
    }
}

/// Whether delay accounting is on (`kernel.task_delayacct`), so that
/// stat's field 42 holds each thread's block-I/O delay.
pub(crate) fn delay_accounting(proc: &Path) -> bool {
    std::fs::read_to_string(proc.join("sys/kernel/task_delayacct")).is_ok_and(|t| t.trim() == "1")
}

/// A small /proc file's text, read into `buf` (no allocation per file
/// beyond the returned string).
fn read_small(path: &Path, buf: &mut Vec<u8>) -> Option<String> {
    buf.clear();
    let mut file = std::fs::File::open(path).ok()?;
    file.by_ref().take(4096).read_to_end(buf).ok()?;
    Some(String::from_utf8_lossy(buf).into_owned())
}

/// schedstat: ns on CPU, ns waiting on a run queue, timeslices.
fn parse_schedstat(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

struct ThreadStat {
    state: u8,
    blkio_ticks: Option<u64>,
}

/// stat's state (field 3) and delayacct_blkio_ticks (field 42), read after
/// the last `)`: the command name between parentheses may hold anything.
fn parse_stat(text: String) -> Option<ThreadStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 3 was the state; field 42 is 39 further on.
    let blkio_ticks = fields.nth(38).and_then(|x| x.parse().ok());
    Some(ThreadStat { state, blkio_ticks })
}

/// A wait channel's name, or none when the kernel hid it (`0`) or it is
/// no kernel symbol: kept to identifier characters and bounded in length,
/// whatever the file held.
fn channel_name(text: &str) -> Option<String> {
    let name = text.trim();
    if name.is_empty() || name == "0" {
        return None;
    }
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .take(MAX_CHANNEL_CHARS)
        .collect();
    (!clean.is_empty()).then_some(clean)
}

/// The I/O path of a D-state wait channel.
fn io_path(channel: &str) -> IoPath {
    let has = |p: &[&str]| p.iter().any(|x| channel.contains(x));
    if has(&["jbd2", "xlog", "xfs_log", "log_wait_commit", "btrfs_commit"]) {
        IoPath::Journal
    } else if has(&[
        "file_write_and_wait",
        "folio_wait",
        "wait_on_page",
        "filemap_fdatawait",
        "writeback",
        "wait_on_buffer",
        "__wait_on_buffer",
    ]) {
        IoPath::Flush
    } else if has(&[
        "filemap_fault",
        "do_fault",
        "handle_mm_fault",
        "swap_readpage",
    ]) {
        IoPath::PageFault
    } else if has(&[
        "io_schedule",
        "rq_qos",
        "blk_",
        "bio",
        "dio",
        "throtl",
        "submit",
    ]) {
        IoPath::Block
    } else {
        IoPath::Other
    }
}

/// A sleep's meaning from its wait channel, when the name says it.
fn channel_wait(channel: &str) -> Option<ThreadWait> {
    let has = |p: &[&str]| p.iter().any(|x| channel.contains(x));
    if has(&["futex"]) {
        Some(ThreadWait::Lock)
    } else if has(&[
        "ep_poll",
        "epoll",
        "sk_wait",
        "tcp_",
        "unix_stream",
        "unix_dgram",
        "inet_csk_accept",
        "skb_wait",
        "poll_schedule",
        "do_select",
        "do_sys_poll",
        "io_cqring_wait",
    ]) {
        Some(ThreadWait::Clients)
    } else if has(&["nanosleep", "hrtimer"]) {
        Some(ThreadWait::Sleep)
    } else {
        None
    }
}

/// A sleep's meaning from the system call it is blocked in (this
/// architecture's numbers); `socket` says whether an fd is a socket.
fn syscall_wait(syscall: &str, socket: impl Fn(u64) -> bool) -> Option<ThreadWait> {
    let mut f = syscall.split_ascii_whitespace();
    let nr: i64 = f.next()?.parse().ok()?;
    let fd = f
        .next()
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    let nr = nr as libc::c_long;
    #[cfg(target_arch = "x86_64")]
    if [
        libc::SYS_poll,
        libc::SYS_select,
        libc::SYS_epoll_wait,
        libc::SYS_accept,
    ]
    .contains(&nr)
    {
        return Some(ThreadWait::Clients);
    }
    Some(match nr {
        libc::SYS_futex | libc::SYS_futex_waitv => ThreadWait::Lock,
        libc::SYS_nanosleep | libc::SYS_clock_nanosleep => ThreadWait::Sleep,
        libc::SYS_ppoll
        | libc::SYS_pselect6
        | libc::SYS_epoll_pwait
        | libc::SYS_epoll_pwait2
        | libc::SYS_accept4
        | libc::SYS_recvfrom
        | libc::SYS_recvmsg
        | libc::SYS_recvmmsg => ThreadWait::Clients,
        libc::SYS_read | libc::SYS_readv if fd.is_some_and(&socket) => ThreadWait::Clients,
        libc::SYS_fsync | libc::SYS_fdatasync | libc::SYS_sync_file_range => {
            ThreadWait::Io(IoPath::Flush)
        }
        _ => return None,
    })
}

/// What a thread not running was waiting on: its state, then its wait
/// channel, then its system call.
pub(crate) fn classify(
    state: u8,
    channel: Option<&str>,
    syscall: Option<&str>,
    socket: impl Fn(u64) -> bool,
) -> ThreadWait {
    match state {
        b'R' => return ThreadWait::Running,
        b'D' => return ThreadWait::Io(channel.map_or(IoPath::Other, io_path)),
        _ => {}
    }
    if let Some(w) = channel.and_then(channel_wait) {
        return w;
    }
    if let Some(w) = syscall.and_then(|s| syscall_wait(s, socket)) {
        return w;
    }
    // An S-state sleep in an I/O function (a journal wait that sleeps
    // interruptibly) is still I/O.
    match channel.map(io_path) {
        Some(IoPath::Other) | None => ThreadWait::Other,
        Some(path) => ThreadWait::Io(path),
    }
}

/// Mean threads (seconds per second) in each state over an interval.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct ThreadSplit {
    pub(crate) on_cpu: f64,
    /// Runnable, waiting for a CPU (run delay).
    pub(crate) cpu_wait: f64,
    /// Blocked in I/O, by path.
    pub(crate) io_block: f64,
    pub(crate) io_journal: f64,
    pub(crate) io_flush: f64,
    pub(crate) io_fault: f64,
    pub(crate) io_other: f64,
    /// Asleep on a futex.
    pub(crate) lock: f64,
    /// Waiting on clients or the network.
    pub(crate) clients: f64,
    /// Asleep on a timer.
    pub(crate) sleep: f64,
    pub(crate) other: f64,
}

impl ThreadSplit {
    /// All I/O, whatever its path.
    pub(crate) fn io(&self) -> f64 {
        self.io_block + self.io_journal + self.io_flush + self.io_fault + self.io_other
    }

    /// All the time accounted.
    pub(crate) fn total(&self) -> f64 {
        self.on_cpu + self.cpu_wait + self.io() + self.lock + self.clients + self.sleep + self.other
    }

    fn add(&mut self, wait: ThreadWait, seconds: f64) {
        let slot = match wait {
            ThreadWait::Running => &mut self.other,
            ThreadWait::Io(IoPath::Block) => &mut self.io_block,
            ThreadWait::Io(IoPath::Journal) => &mut self.io_journal,
            ThreadWait::Io(IoPath::Flush) => &mut self.io_flush,
            ThreadWait::Io(IoPath::PageFault) => &mut self.io_fault,
            ThreadWait::Io(IoPath::Other) => &mut self.io_other,
            ThreadWait::Lock => &mut self.lock,
            ThreadWait::Clients => &mut self.clients,
            ThreadWait::Sleep => &mut self.sleep,
            ThreadWait::Other => &mut self.other,
        };
        *slot += seconds;
    }

    fn scaled(&self, k: f64) -> Self {
        ThreadSplit {
            on_cpu: self.on_cpu * k,
            cpu_wait: self.cpu_wait * k,
            io_block: self.io_block * k,
            io_journal: self.io_journal * k,
            io_flush: self.io_flush * k,
            io_fault: self.io_fault * k,
            io_other: self.io_other * k,
            lock: self.lock * k,
            clients: self.clients * k,
            sleep: self.sleep * k,
            other: self.other * k,
        }
    }

    fn plus(&self, o: &Self) -> Self {
        ThreadSplit {
            on_cpu: self.on_cpu + o.on_cpu,
            cpu_wait: self.cpu_wait + o.cpu_wait,
            io_block: self.io_block + o.io_block,
            io_journal: self.io_journal + o.io_journal,
            io_flush: self.io_flush + o.io_flush,
            io_fault: self.io_fault + o.io_fault,
            io_other: self.io_other + o.io_other,
            lock: self.lock + o.lock,
            clients: self.clients + o.clients,
            sleep: self.sleep + o.sleep,
            other: self.other + o.other,
        }
    }

    /// Each class's share of the time accounted, largest first, the I/O
    /// named by its largest path; classes under 0.5% left out.
    pub(crate) fn shares(&self) -> Vec<(String, f64)> {
        let total = self.total();
        if total <= 0.0 {
            return Vec::new();
        }
        let paths = [
            (IoPath::Block, self.io_block),
            (IoPath::Journal, self.io_journal),
            (IoPath::Flush, self.io_flush),
            (IoPath::PageFault, self.io_fault),
            (IoPath::Other, self.io_other),
        ];
        let io_name = paths
            .iter()
            .filter(|(_, s)| *s > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("I/O".to_string(), |(p, _)| format!("I/O ({})", p.text()));
        let mut out = vec![
            ("on CPU".to_string(), self.on_cpu),
            ("waiting for a CPU".to_string(), self.cpu_wait),
            (io_name, self.io()),
            ("locks".to_string(), self.lock),
            ("clients/network".to_string(), self.clients),
            ("sleep".to_string(), self.sleep),
            ("other".to_string(), self.other),
        ];
        out.retain(|(_, s)| *s / total >= 0.005);
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out.into_iter().map(|(n, s)| (n, s / total)).collect()
    }
}

/// Where a group's threads spent one interval (or a step's mean).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreadStates {
    /// Threads read.
    pub(crate) threads: usize,
    /// Mean threads serving work (run ≥ [`ACTIVE_SLICES_PER_S`]).
    #[serde(default)]
    pub(crate) active_threads: f64,
    /// Every thread's time, mean threads in each state.
    pub(crate) all: ThreadSplit,
    /// The serving threads' time alone.
    pub(crate) active: ThreadSplit,
    /// The serving threads' off-CPU time by wait channel, mean threads,
    /// largest first (at most [`MAX_CHANNELS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) channels: Vec<(String, f64)>,
    /// A sleeping thread's wait channel was unreadable.
    #[serde(default)]
    pub(crate) wchan_unreadable: bool,
    /// Block-I/O time came from delay accounting (exact), not the state.
    #[serde(default)]
    pub(crate) delay_accounted: bool,
}

impl ThreadStates {
    /// The interval between two readings of a group's threads. A thread
    /// new since `a` has only its CPU time and run delay counted: how long
    /// it lived is unknown.
    pub(crate) fn between(a: &GroupThreads, b: &GroupThreads, seconds: f64) -> Option<Self> {
        if seconds <= 0.0 || b.threads.is_empty() {
            return None;
        }
        let ticks = clock_ticks();
        let mut out = ThreadStates {
            threads: b.threads.len(),
            wchan_unreadable: b.wchan_unreadable,
            ..ThreadStates::default()
        };
        let mut channels: BTreeMap<String, f64> = BTreeMap::new();
        for (tid, after) in &b.threads {
            let before = a.threads.get(tid);
            let base = before.cloned().unwrap_or_default();
            let on = after.on_cpu_ns.saturating_sub(base.on_cpu_ns) as f64 / 1e9;
            let delay = after.run_delay_ns.saturating_sub(base.run_delay_ns) as f64 / 1e9;
            let slices = after.timeslices.saturating_sub(base.timeslices) as f64;
            let mut split = ThreadSplit {
                on_cpu: on.min(seconds),
                cpu_wait: delay.min(seconds),
                ..ThreadSplit::default()
            };
            if let Some(before) = before {
                let off = (seconds - on - delay).max(0.0);
                // Woken by the sample: its wait was the one before.
                let (wait, channel) = if after.wait == ThreadWait::Running {
                    (before.wait, before.channel.as_ref())
                } else {
                    (after.wait, after.channel.as_ref())
                };
                let wait = if wait == ThreadWait::Running {
                    ThreadWait::Other
                } else {
                    wait
                };
                // Delay accounting gives the block-I/O time exactly.
                let blocked = after
                    .blkio_ticks
                    .zip(before.blkio_ticks)
                    .map(|(y, x)| (y.saturating_sub(x) as f64 / ticks).min(off));
                if blocked.is_some() {
                    out.delay_accounted = true;
                }
                match blocked {
                    Some(io) if !matches!(wait, ThreadWait::Io(_)) && io > 0.0 => {
                        split.add(ThreadWait::Io(IoPath::Block), io);
                        split.add(wait, off - io);
                    }
                    _ => split.add(wait, off),
                }
                let active = slices / seconds >= ACTIVE_SLICES_PER_S;
                if active {
                    if let Some(name) = channel {
                        *channels.entry(name.clone()).or_insert(0.0) += off / seconds;
                    }
                }
            }
            let split = split.scaled(1.0 / seconds);
            out.all = out.all.plus(&split);
            if slices / seconds >= ACTIVE_SLICES_PER_S {
                out.active = out.active.plus(&split);
                out.active_threads += 1.0;
            }
        }
        out.channels = top_channels(channels.into_iter().collect());
        Some(out)
    }

    /// The length-weighted mean of intervals (`(states, seconds)`).
    pub(crate) fn mean(parts: &[(&ThreadStates, f64)]) -> Option<Self> {
        let weight: f64 = parts.iter().map(|(_, w)| *w).sum();
        if weight <= 0.0 {
            return None;
        }
        let mut out = ThreadStates::default();
        let mut channels: BTreeMap<String, f64> = BTreeMap::new();
        let mut threads = 0.0;
        for (s, w) in parts {
            let k = w / weight;
            out.all = out.all.plus(&s.all.scaled(k));
            out.active = out.active.plus(&s.active.scaled(k));
            out.active_threads += s.active_threads * k;
            threads += s.threads as f64 * k;
            out.wchan_unreadable |= s.wchan_unreadable;
            out.delay_accounted |= s.delay_accounted;
            for (name, v) in &s.channels {
                *channels.entry(name.clone()).or_insert(0.0) += v * k;
            }
        }
        out.threads = threads.round() as usize;
        out.channels = top_channels(channels.into_iter().collect());
        Some(out)
    }

    /// The split the verdict reads: the serving threads', or every
    /// thread's when none served.
    pub(crate) fn serving(&self) -> &ThreadSplit {
        if self.active.total() > 0.0 {
            &self.active
        } else {
            &self.all
        }
    }
}

/// The largest channels, at most [`MAX_CHANNELS`].
fn top_channels(mut all: Vec<(String, f64)>) -> Vec<(String, f64)> {
    all.retain(|(_, v)| *v > 0.0);
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(MAX_CHANNELS);
    all
}

#[cfg(test)]
mod tests;
