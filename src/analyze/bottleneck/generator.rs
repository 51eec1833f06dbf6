//! Whether the generator, not the server, set the pace — judged only on
//! the generator's own signs: perflab's cgroup quota throttled it for over
//! 5% of a step; for a target outside perflab's process (or served by
//! the kernel in it, when perflab's own user-space work is half its CPU
//! or more: see [`in_process`]), perflab used ≥ 90% of the CPUs it could
//! use (affinity, quota, worker threads); its serving threads waited for
//! a CPU (schedstat run delay) half their time or more while the
//! server's waited under a quarter as long per operation; the
//! hypervisor took ≥ 10% of the host while perflab used most of what it
//! could; an open loop's dispatch ran over 10 ms late at p99 (Schroeder,
//! Wierman and Harchol-Balter, *Open versus closed*, NSDI 2006, on what a
//! generator that sets the pace does to the figures).
//!
//! Little's law `N = X·(R+Z)` is no such sign: a shortfall in it says that
//! time passed outside the measured cycle, not whose that time was, so it
//! is a caveat of the run ([`little_breaches`]) and never names the
//! generator by itself. A retried operation's response time covers every
//! try and the backoff between them, so retries keep the law; many of
//! them are the server's contention, judged by its own rule.
//!
//! Little's law counts every operation a user spent time on: failed
//! operations keep no latency, but the time users spent in them is kept
//! apart and counted (a run stored before it was kept is checked on the
//! operations attempted, and a shortfall failures longer than successes
//! could explain is not reported). The window's edges
//! move the sum either way: an operation that straddles its start is
//! counted whole, one still running at its end not at all, and with a slow
//! tail (a retransmission timeout, a serialisation retry's back-off) those
//! few operations weigh. An excess or a shortfall of up to twice the p99
//! over the window's length is theirs. (A closed loop's response time runs
//! from the intended start, so a generator that wakes late shows in R,
//! inside the law; what breaks it beyond the edges is time spent neither
//! in an operation nor in thinking.)

use super::super::capacity::load_text;
use super::super::demands::Demands;
use super::super::points::StepPoint;
use super::{in_process, RunShape};
use crate::units::Percent;

/// Failures above this share of attempts may hold the time Little's law
/// misses.
const FAILURES_EXPLAIN: f64 = 0.01;

/// Share of their time perflab's serving threads waited for a CPU from
/// which that wait set the pace: half.
const RUN_DELAY_SHARE: f64 = 0.5;

/// Steal from which a generator near its allowance was short of CPU.
const STEAL: f64 = 0.10;

/// Evidence that the generator set the pace; empty when it did not.
pub(crate) fn evidence(points: &[StepPoint], shape: RunShape) -> Vec<String> {
    let mut out = Vec::new();
    for p in points {
        let g = &p.generator;
        // On generators, the busiest one's use is the step's.
        let who = p
            .busiest_generator
            .as_ref()
            .map_or_else(|| "perflab".to_string(), |name| format!("generator {name}"));
        if let Some(t) = g.throttled_share.filter(|t| *t > 0.05) {
            out.push(format!(
                "at {} {who}'s cgroup CPU quota held it back for {} of the step",
                load_text(p),
                // Throttled time adds up over CPUs: it can exceed the wall.
                Percent(t.min(1.0))
            ));
        }
        out.extend(cpu_signs(p, shape, &who));
        if let Some(lag) = g.lag_p99_s.filter(|l| *l > 0.010) {
            out.push(format!(
                "at {} arrivals were dispatched up to {} late (p99)",
                load_text(p),
                crate::units::Latency::secs(lag)
            ));
        }
    }
    out
}

/// The generator's CPU signs at step `p` (`who` it is): its CPUs used to
/// their allowance, its threads' wait for a CPU, steal while it was busy.
/// In-process work is the target's: for an embedded target they are
/// not read, and for a kernel-served one only when the generator's own
/// share of perflab's CPU is what limits (with that split said).
fn cpu_signs(p: &StepPoint, shape: RunShape, who: &str) -> Vec<String> {
    let g = &p.generator;
    let split = in_process::Split::of(p, shape);
    if shape.embedded || split.is_some_and(|s| !s.generator_limits()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let usable = if shape.closed {
        f64::from(shape.threads).min(p.load.max(1.0))
    } else {
        f64::from(shape.threads)
    };
    let capacity = g.capacity.map_or(usable, |c| c.min(usable));
    if capacity > 0.0 && g.cpus >= 0.9 * capacity {
        out.push(format!(
            "at {} {who} used {:.2} of the {:.2} CPUs it could use",
            load_text(p),
            g.cpus,
            capacity
        ));
    }
    out.extend(run_delay(p, shape));
    if let Some(steal) = p.extras.steal.filter(|s| *s >= STEAL) {
        if capacity > 0.0 && g.cpus >= 0.7 * capacity {
            out.push(format!(
                "at {} the hypervisor took {} of the host's CPU time (steal) while {who} used {:.2} of the {:.2} CPUs it could use",
                load_text(p),
                Percent(steal),
                g.cpus,
                capacity
            ));
        }
    }
    if !out.is_empty() {
        out.extend(in_process::evidence(std::slice::from_ref(p), 0, shape));
    }
    out
}

/// How long perflab's threads waited for a CPU at a step, as a share of
/// their own time, and what that adds to each operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PerflabWait {
    /// The threads the share is of: those serving work, or the worker
    /// threads when their states were not read.
    pub(crate) threads: f64,
    /// Share of those threads' time runnable but waiting for a CPU, 0..1.
    pub(crate) share: f64,
    /// Seconds of each operation's mean response spent so: an operation
    /// runs on its thread, so it waits while its thread does; never more
    /// than the response itself.
    pub(crate) per_op_s: f64,
    /// The share is of the threads' states (schedstat per thread), not
    /// the process's summed run delay over its worker threads.
    pub(crate) of_states: bool,
}

impl PerflabWait {
    /// The wait at step `p`: from perflab's serving threads' states when
    /// read (their run delay over all their time: on a CPU, waiting, in
    /// I/O, asleep), else from the process's run delay over its worker
    /// threads, at most all of their time.
    pub(crate) fn of(p: &StepPoint, shape: RunShape) -> Option<Self> {
        let states = p.threads.perflab.as_ref();
        let split = states.map(|s| s.serving()).filter(|s| s.total() > 0.0);
        let (threads, share, of_states) = match (states, split) {
            (Some(states), Some(split)) => {
                let threads = if states.active_threads > 0.0 {
                    states.active_threads
                } else {
                    states.threads as f64
                };
                (threads, split.cpu_wait / split.total(), true)
            }
            _ => {
                let waited = p.extras.perflab_run_delay?;
                let threads = f64::from(shape.threads.max(1));
                (threads, waited / threads, false)
            }
        };
        let share = share.clamp(0.0, 1.0);
        Some(PerflabWait {
            threads,
            share,
            per_op_s: share * p.response_s(),
            of_states,
        })
    }
}

/// perflab's threads waited for a CPU long enough to set the pace: half
/// their time or more, and the server's threads waited under a quarter
/// of what perflab's wait adds to each operation (a host whose CPUs are
/// short delays both: that is the CPU's verdict, or the caveat that the
/// host was not quiet, not the generator's).
fn run_delay(p: &StepPoint, shape: RunShape) -> Option<String> {
    let wait = PerflabWait::of(p, shape)?;
    if wait.share < RUN_DELAY_SHARE || p.throughput <= 0.0 {
        return None;
    }
    let servers = p.extras.server_run_delay.map(|d| d / p.throughput);
    if servers.is_some_and(|s| s >= 0.25 * wait.per_op_s) {
        return None;
    }
    let whose = if wait.of_states {
        format!("perflab's {:.1} serving threads", wait.threads)
    } else {
        format!("perflab's {:.0} worker thread(s)", wait.threads)
    };
    Some(format!(
        "at {} {whose} waited for a CPU {} of their time (schedstat run delay; the rest on a CPU, in I/O or asleep): about {} of each operation's {} response{}",
        load_text(p),
        Percent(wait.share),
        crate::units::Latency::secs(wait.per_op_s),
        crate::units::Latency(p.response.mean),
        servers.map_or_else(String::new, |s| format!(
            ", while the server's threads waited {} per operation",
            crate::units::Latency::secs(s)
        ))
    ))
}

/// Little's law breaches that failures cannot explain: caveats of the
/// run, never a verdict by themselves.
pub(crate) fn little_breaches(points: &[StepPoint], demands: &Demands) -> Vec<String> {
    demands
        .steps
        .iter()
        .filter_map(|s| {
            let l = s.little?;
            if l.deviation <= 0.05 {
                return None;
            }
            let p = points.iter().find(|p| p.load == s.load)?;
            let window = p.completed as f64 / p.throughput.max(f64::MIN_POSITIVE);
            let edges = 2.0 * p.response.p99.as_secs_f64() / window.max(f64::MIN_POSITIVE);
            if l.deviation <= 0.05 + edges {
                return None;
            }
            // Users' time in failures is not in R: counted on attempts,
            // a shortfall failures can hold is theirs.
            let attempted = p.attempts_per_s() * (p.response_s() + p.think_s);
            if p.failed_s == 0.0 && p.error_rate >= FAILURES_EXPLAIN && attempted <= l.users * 1.05 {
                return None;
            }
            Some(format!(
                "Little's law broken at {:.0} users: X·(R+Z) = {:.2} ({:.0}% off): time passed outside the measured cycle (the generator is not named on this alone: its CPU, quota and run delay did not show it)",
                l.users,
                l.implied,
                l.deviation * 100.0
            ))
        })
        .collect()
}
