//! A generator's side of a step run from elsewhere (`perflab agent
//! --generate`): its part of the step's load ([`Share`]) offered by its
//! own worker threads, exactly as a local step offers the whole — the
//! sessions opened first, the clock started at the instant the
//! coordinator names, each interval merged over this process's workers
//! and handed on, packed, as it completes.

use super::crew::{Crew, Merging};
use super::schedule::Schedule;
use super::split::{worker_plans, Split};
use crate::measure::PackedTally;
use crate::plan::Level;
use crate::probe::counters::{host_cpu_times, CpuSample, HostRoot};
use crate::probe::{SelfUsage, UsageMark};
use crate::record::IntervalUsage;
use crate::workload::Workload;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// One step's part, as the coordinator sends it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Share {
    /// The step's index in the run.
    pub(crate) index: usize,
    pub(crate) level: Level,
    pub(crate) split: Split,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) warmup: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) duration: Duration,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) interval: Duration,
}

impl Share {
    /// The step's intervals.
    pub(crate) fn schedule(&self) -> Schedule {
        Schedule::new(self.warmup, self.duration, self.interval)
    }
}

/// What a share reports, in order: ready (or failed), its intervals, and
/// its end.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum ShareEvent {
    /// Every session is open; waiting for the start.
    Ready,
    /// The share cannot run, or stopped running.
    Failed(String),
    /// Interval `index` merged over this process's workers (the index
    /// after the schedule's last is the drain), and what this process and
    /// host used over it.
    Interval {
        index: usize,
        #[serde(with = "crate::util::serde_duration")]
        length: Duration,
        tally: PackedTally,
        #[serde(default)]
        usage: Option<IntervalUsage>,
    },
    /// The share ran: when its clock started by this host's clock (ns
    /// since the Unix epoch, taken when the start instant came), this
    /// process's CPU and memory over it, and this host's CPU (all CPUs
    /// together: busy, and stolen by the hypervisor).
    Finished {
        started_unix_ns: u128,
        usage: SelfUsage,
        #[serde(default)]
        host_cpu: Option<CpuSample>,
    },
}

/// Readings at an interval's start, for [`IntervalUsage`].
struct UsageReading {
    process: crate::probe::UsageMark,
    host: Option<procfs_core::CpuTime>,
}

impl UsageReading {
    fn now(root: &HostRoot) -> Self {
        UsageReading {
            process: SelfUsage::start(),
            host: host_cpu_times(root),
        }
    }

    /// The use since this reading, and the reading for the next interval.
    fn next(self, root: &HostRoot) -> (IntervalUsage, Self) {
        let next = UsageReading::now(root);
        let usage = IntervalUsage {
            cpu: self.process.finish(None).cpu_share(),
            steal: self
                .host
                .as_ref()
                .zip(next.host.as_ref())
                .and_then(|(a, b)| CpuSample::between(a, b))
                .map(|c| c.steal),
        };
        (usage, next)
    }
}

/// Runs one share: opens its sessions, says [`ShareEvent::Ready`], waits
/// for its start (a time by this host's clock; none to give up), runs,
/// and says every interval and its end to `say`.
pub(crate) fn run_share<W: Workload>(
    workload: Arc<W>,
    share: &Share,
    interrupted: &Arc<AtomicBool>,
    start: &Receiver<Option<SystemTime>>,
    say: &mut dyn FnMut(ShareEvent),
) {
    let schedule = Arc::new(share.schedule());
    let op_count = workload.op_names().len();
    let plans = worker_plans(&share.split, share.index, share.level, &schedule);
    let crew = match Crew::spawn(workload, plans, interrupted).map(Crew::wait_ready) {
        Ok(Ok(crew)) => crew,
        Ok(Err(failed)) => return say(ShareEvent::Failed(failed.reason)),
        Err(e) => return say(ShareEvent::Failed(format!("{e:#}"))),
    };
    say(ShareEvent::Ready);
    let Ok(Some(at)) = start.recv() else {
        crew.give_up();
        return;
    };
    let begin = wait_for_start(at);
    let measuring = Measuring::start();
    let mut handed = 0;
    let mut reading = Some(UsageReading::now(&measuring.root));
    let mut on_interval = |spec: &super::schedule::IntervalSpec,
                           _tally: &crate::measure::Tally,
                           record: crate::record::IntervalRecord| {
        let usage = reading.take().map(|r| {
            let (usage, next) = r.next(&measuring.root);
            reading = Some(next);
            usage
        });
        say(ShareEvent::Interval {
            index: handed,
            length: spec.end - spec.start,
            tally: record.tally,
            usage,
        });
        handed += 1;
        Ok(())
    };
    let (merging, panicked) = crew.run(begin, &schedule, op_count, &mut on_interval);
    if panicked {
        return say(ShareEvent::Failed("a worker thread panicked".to_string()));
    }
    if let Some(failure) = &merging.failure {
        return say(ShareEvent::Failed(failure.clone()));
    }
    measuring.finish(merging, share, &schedule, say);
}

/// Waits for the start `at` (by this host's clock), and gives it as an
/// instant of the runtime's.
fn wait_for_start(at: SystemTime) -> tokio::time::Instant {
    let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
    let begin = tokio::time::Instant::now() + wait;
    // Slept to 200 µs before, then spun: a thread woken early holds its
    // CPU through the start, where one woken at the start waits its turn
    // on a busy host (the generators' starts must agree). The spin is
    // short because generators sharing a host spin at once: a spin of
    // 1 ms left three of them on two busy CPUs up to 3.6 ms apart, one
    // of 200 µs 1.2 ms.
    std::thread::sleep(wait.saturating_sub(Duration::from_micros(200)));
    while SystemTime::now() < at {
        std::hint::spin_loop();
    }
    begin
}

/// This process's and this host's use from the share's start on.
struct Measuring {
    /// When the share started, ns since the Unix epoch by this host's clock.
    started_unix_ns: u128,
    usage_start: UsageMark,
    root: HostRoot,
    host_before: Option<procfs_core::CpuTime>,
}

impl Measuring {
    fn start() -> Self {
        let root = HostRoot::live();
        Measuring {
            started_unix_ns: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            usage_start: SelfUsage::start(),
            host_before: host_cpu_times(&root),
            root,
        }
    }

    /// Says the share's drain and its end, with the use it measured.
    fn finish(
        self,
        merging: Merging,
        share: &Share,
        schedule: &Schedule,
        say: &mut dyn FnMut(ShareEvent),
    ) {
        let usage = self.usage_start.finish(merging.rss_at_end);
        let host_cpu = self
            .host_before
            .zip(host_cpu_times(&self.root))
            .and_then(|(a, b)| CpuSample::between(&a, &b));
        let finished = merging.finish(schedule, share.index, share.level, SystemTime::now(), usage);
        say(ShareEvent::Interval {
            index: schedule.intervals.len(),
            length: finished.drain.length,
            tally: finished.drain.tally,
            usage: None,
        });
        say(ShareEvent::Finished {
            started_unix_ns: self.started_unix_ns,
            usage,
            host_cpu,
        });
    }
}
