use super::*;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/threads/proc")
}

/// D-state threads are I/O named by their path, sleeps by their wait
/// channel or system call; an unreadable wait channel is other, and said.
#[test]
fn a_fixture_tree_of_threads_is_classified_by_state_channel_and_syscall() {
    let got = read_threads(
        &fixture(),
        [4242].into_iter(),
        None,
        false,
        &mut KeptFiles::default(),
    );
    let wait = |tid: u32| got.threads.get(&tid).map(|t| t.wait);
    assert_eq!(wait(4242), Some(ThreadWait::Clients), "ep_poll");
    assert_eq!(wait(4243), Some(ThreadWait::Io(IoPath::Journal)));
    assert_eq!(wait(4244), Some(ThreadWait::Io(IoPath::Block)));
    assert_eq!(wait(4245), Some(ThreadWait::Io(IoPath::Flush)));
    assert_eq!(wait(4246), Some(ThreadWait::Other), "wchan 0, no syscall");
    assert_eq!(wait(4247), Some(ThreadWait::Lock));
    assert_eq!(wait(4248), Some(ThreadWait::Clients), "read(2) on a socket");
    assert_eq!(wait(4251), Some(ThreadWait::Other), "read(2) on a pipe");
    // A command name holding ") S (" does not hide the state after it.
    assert_eq!(wait(4249), Some(ThreadWait::Running));
    assert!(got.wchan_unreadable);
    // Whatever the file held, the name kept is a bounded identifier.
    let hostile = got.threads[&4250].channel.clone().unwrap();
    assert!(hostile.len() <= MAX_CHANNEL_CHARS, "{hostile}");
    assert!(hostile
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'));
    assert_eq!(got.threads[&4250].wait, ThreadWait::Io(IoPath::Block));
    // Delay accounting off: field 42 is not taken.
    assert_eq!(got.threads[&4243].blkio_ticks, None);
    let on = read_threads(
        &fixture(),
        [4242].into_iter(),
        None,
        true,
        &mut KeptFiles::default(),
    );
    assert_eq!(on.threads[&4243].blkio_ticks, Some(7));
}

/// A thread whose schedstat did not move has not run: it keeps the wait
/// it had, and its other files are not read again.
#[test]
fn a_thread_that_has_not_run_keeps_its_wait() {
    let first = read_threads(
        &fixture(),
        [4242].into_iter(),
        None,
        false,
        &mut KeptFiles::default(),
    );
    let mut before = first.clone();
    before.threads.get_mut(&4247).unwrap().wait = ThreadWait::Sleep;
    let again = read_threads(
        &fixture(),
        [4242].into_iter(),
        Some(&before),
        false,
        &mut KeptFiles::default(),
    );
    assert_eq!(again.threads[&4247].wait, ThreadWait::Sleep);
    // One that ran is read afresh.
    before.threads.get_mut(&4243).unwrap().on_cpu_ns -= 1;
    before.threads.get_mut(&4243).unwrap().wait = ThreadWait::Sleep;
    let again = read_threads(
        &fixture(),
        [4242].into_iter(),
        Some(&before),
        false,
        &mut KeptFiles::default(),
    );
    assert_eq!(again.threads[&4243].wait, ThreadWait::Io(IoPath::Journal));
}

fn reading(on_ms: u64, delay_ms: u64, slices: u64, wait: ThreadWait) -> ThreadReading {
    ThreadReading {
        pid: 1,
        on_cpu_ns: on_ms * 1_000_000,
        run_delay_ns: delay_ms * 1_000_000,
        timeslices: slices,
        wait,
        channel: None,
        blkio_ticks: None,
    }
}

/// Over an interval a thread's time is on CPU, run delay, and the rest
/// off CPU in the wait seen at the sample (the one before, when it was
/// running at the sample); serving threads are counted apart.
#[test]
fn an_interval_splits_each_threads_time() {
    let a = GroupThreads {
        threads: BTreeMap::from([
            (1, reading(0, 0, 0, ThreadWait::Clients)),
            (2, reading(0, 0, 0, ThreadWait::Lock)),
            (3, reading(0, 0, 0, ThreadWait::Sleep)),
        ]),
        wchan_unreadable: false,
    };
    let mut flushing = reading(200, 100, 20, ThreadWait::Io(IoPath::Flush));
    flushing.channel = Some("jbd2_log_wait_commit".to_string());
    let b = GroupThreads {
        threads: BTreeMap::from([
            (1, flushing),
            (2, reading(500, 0, 10, ThreadWait::Running)),
            // Idle: ran once on its timer.
            (3, reading(1, 0, 1, ThreadWait::Sleep)),
            // New: only its CPU counts.
            (4, reading(300, 0, 30, ThreadWait::Lock)),
        ]),
        wchan_unreadable: false,
    };
    let s = ThreadStates::between(&a, &b, 1.0).unwrap();
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    assert!(close(s.all.on_cpu, 1.001), "{s:?}");
    assert!(close(s.all.cpu_wait, 0.1));
    assert!(close(s.all.io_flush, 0.7));
    assert!(close(s.all.lock, 0.5), "the wait before it woke");
    assert!(close(s.all.sleep, 0.999));
    assert_eq!(s.threads, 4);
    assert!(close(s.active_threads, 3.0));
    assert!(close(s.active.sleep, 0.0), "the idle thread is no server");
    assert_eq!(s.channels.len(), 1);
    assert_eq!(s.channels[0].0, "jbd2_log_wait_commit");
    assert!(close(s.channels[0].1, 0.7));
    let shares = s.active.shares();
    assert_eq!(shares[0].0, "on CPU");
    assert!(shares.iter().any(|(n, _)| n == "I/O (fsync/writeback)"));
    let total: f64 = shares.iter().map(|x| x.1).sum();
    assert!(close(total, 1.0));
}

/// With delay accounting, a thread's block-I/O delay is I/O whatever
/// state the sample saw.
#[test]
fn delay_accounting_gives_the_io_time_exactly() {
    let mut x = reading(0, 0, 0, ThreadWait::Lock);
    x.blkio_ticks = Some(0);
    let mut y = reading(100, 0, 10, ThreadWait::Lock);
    y.blkio_ticks = Some((clock_ticks() * 0.4) as u64);
    let a = GroupThreads {
        threads: BTreeMap::from([(1, x)]),
        wchan_unreadable: false,
    };
    let b = GroupThreads {
        threads: BTreeMap::from([(1, y)]),
        wchan_unreadable: false,
    };
    let s = ThreadStates::between(&a, &b, 1.0).unwrap();
    assert!((s.all.io_block - 0.4).abs() < 0.02, "{s:?}");
    assert!((s.all.lock - 0.5).abs() < 0.02);
    assert!(s.delay_accounted);
}

/// Many channels keep the largest eight; a step's mean weighs intervals
/// by their length.
#[test]
fn channels_are_bounded_and_means_weighted() {
    let many: Vec<_> = (0..20).map(|i| (format!("ch{i}"), f64::from(i))).collect();
    let top = top_channels(many);
    assert_eq!(top.len(), MAX_CHANNELS);
    assert_eq!(top[0].0, "ch19");
    let one = ThreadStates {
        all: ThreadSplit {
            lock: 1.0,
            ..ThreadSplit::default()
        },
        ..ThreadStates::default()
    };
    let three = ThreadStates {
        all: ThreadSplit {
            lock: 3.0,
            ..ThreadSplit::default()
        },
        wchan_unreadable: true,
        ..ThreadStates::default()
    };
    let m = ThreadStates::mean(&[(&one, 1.0), (&three, 3.0)]).unwrap();
    assert!((m.all.lock - 2.5).abs() < 1e-9);
    assert!(m.wchan_unreadable);
}

/// This process's threads, each in a known state: blocked on a futex,
/// in nanosleep, spinning, and blocked reading a TCP socket on loopback.
#[test]
fn real_threads_are_classified_by_what_they_wait_in() {
    let stop = Arc::new(AtomicBool::new(false));
    let tids: Arc<[AtomicU32; 4]> = Arc::new(Default::default());
    // SAFETY: gettid has no preconditions.
    let tid = || u32::try_from(unsafe { libc::gettid() }).unwrap_or(0);
    let lock = Arc::new(Mutex::new(()));
    let held = lock.lock().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut served, _) = listener.accept().unwrap();
    let mut handles = Vec::new();
    {
        let (lock, tids) = (lock.clone(), tids.clone());
        handles.push(std::thread::spawn(move || {
            tids[0].store(tid(), Ordering::SeqCst);
            drop(lock.lock());
        }));
    }
    {
        let tids = tids.clone();
        handles.push(std::thread::spawn(move || {
            tids[1].store(tid(), Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(3));
        }));
    }
    {
        let (stop, tids) = (stop.clone(), tids.clone());
        handles.push(std::thread::spawn(move || {
            tids[2].store(tid(), Ordering::SeqCst);
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }));
    }
    {
        let tids = tids.clone();
        handles.push(std::thread::spawn(move || {
            tids[3].store(tid(), Ordering::SeqCst);
            let mut byte = [0u8; 1];
            let _ = std::io::Read::read(&mut served, &mut byte);
        }));
    }
    let want = [
        ThreadWait::Lock,
        ThreadWait::Sleep,
        ThreadWait::Running,
        ThreadWait::Clients,
    ];
    let proc = Path::new("/proc");
    let me = std::process::id();
    // Until each thread has reached its wait (bounded: a loaded machine
    // may take a while to run them).
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        let got = read_threads(
            proc,
            [me].into_iter(),
            None,
            false,
            &mut KeptFiles::default(),
        );
        seen = (0..4)
            .map(|i| {
                let t = tids[i].load(Ordering::SeqCst);
                got.threads.get(&t).map(|r| (r.wait, r.channel.clone()))
            })
            .collect();
        if seen
            .iter()
            .zip(&want)
            .all(|(s, w)| s.as_ref().map(|x| x.0) == Some(*w))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = read_threads(
        proc,
        [me].into_iter(),
        None,
        false,
        &mut KeptFiles::default(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let after = read_threads(
        proc,
        [me].into_iter(),
        Some(&before),
        false,
        &mut KeptFiles::default(),
    );
    stop.store(true, Ordering::SeqCst);
    drop(held);
    client.write_all(b"x").unwrap();
    for h in handles {
        h.join().unwrap();
    }
    for (i, w) in want.iter().enumerate() {
        assert_eq!(
            seen[i].as_ref().map(|x| x.0),
            Some(*w),
            "thread {i}: {:?}",
            seen[i]
        );
    }
    let s = ThreadStates::between(&before, &after, 0.3).unwrap();
    assert!(s.all.on_cpu > 0.0 && s.all.lock > 0.0, "{s:?}");
    assert!(s.all.sleep > 0.0 && s.all.clients > 0.0, "{s:?}");
}

/// Read through the host reader, each process's run delay is the sum of
/// its threads' (their schedstat read once), and the threads' states
/// reach the sample.
#[test]
fn the_host_reader_sums_run_delay_from_the_threads() {
    use super::super::process::{ProcessGroup, ProcessSelector};
    use super::super::{HostReader, HostRoot, HostSample};
    let me = ProcessGroup {
        label: "perflab".to_string(),
        selector: ProcessSelector::Pid(std::process::id()),
    };
    let mut reader = HostReader::new(HostRoot::live());
    let a = reader.read(std::slice::from_ref(&me));
    std::thread::sleep(Duration::from_millis(50));
    let b = reader.read(std::slice::from_ref(&me));
    let counters = &b.processes[0].1[&std::process::id()];
    let threads = &b.threads[0].1;
    let sum: u64 = threads.threads.values().map(|t| t.run_delay_ns).sum();
    assert_eq!(counters.run_delay_ns, Some(sum));
    let sample = HostSample::between_over(&a, &b, 0.05);
    let states = sample.processes[0].thread_states.as_ref();
    assert!(states.is_some_and(|s| s.threads >= 1), "{states:?}");
}
