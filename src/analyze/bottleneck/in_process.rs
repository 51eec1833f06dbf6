//! A target the kernel serves inside perflab's own process: a file tree or
//! a device is served in perflab's system calls (the file system, the
//! page cache, the block layer, the driver), so perflab's CPU holds the
//! served work beside the generator's own. The two are told apart by the
//! mode the time was spent in (getrusage(2), `ru_stime` and `ru_utime`):
//! system time is the kernel serving the I/O the run asked for; user time
//! is perflab's own code per operation — choosing, encoding and checking
//! operations, its samplers. perflab's worker threads busy on the served
//! work make the CPU the target's bottleneck, and their wait for a CPU is
//! the served work's wait too; the generator is named only when its own
//! user-space share of perflab's CPU is what limits ([`OWN_LIMITS`]).
//!
//! An embedded database (SQLite) runs its engine in user space, in the
//! same threads as the generator: no mode tells them apart, and its CPU
//! is counted as the server's (the generator's CPU checks are not made).

use super::super::capacity::load_text;
use super::super::points::StepPoint;
use super::{Bottleneck, RunShape};
use crate::units::{Latency, Percent};

/// The generator's own share of perflab's CPU from which it is what
/// limits: half or more would at least double the served work's room
/// without it.
pub(crate) const OWN_LIMITS: f64 = 0.5;

/// perflab's CPU at a step, split between the served work and its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Split {
    /// CPUs in the kernel serving the run's I/O (system time).
    pub(crate) served_cpus: f64,
    /// CPUs of perflab's own code (user time).
    pub(crate) own_cpus: f64,
}

impl Split {
    /// The split at step `p` of a kernel-served run; none for other
    /// targets or a step stored without user and system time.
    pub(crate) fn of(p: &StepPoint, shape: RunShape) -> Option<Self> {
        if !shape.kernel_served {
            return None;
        }
        let g = &p.generator;
        let split = Split {
            served_cpus: g.system_cpus?,
            own_cpus: g.user_cpus?,
        };
        (split.served_cpus + split.own_cpus > 0.0).then_some(split)
    }

    /// The generator's own share of perflab's CPU.
    pub(crate) fn own_share(&self) -> f64 {
        self.own_cpus / (self.own_cpus + self.served_cpus)
    }

    /// The generator's own work, not the served work, is what limits.
    pub(crate) fn generator_limits(&self) -> bool {
        self.own_share() >= OWN_LIMITS
    }
}

/// The split at step `at`, in words: the served work and perflab's own
/// share, with its CPU per operation.
pub(crate) fn evidence(points: &[StepPoint], at: usize, shape: RunShape) -> Option<String> {
    let p = points.get(at)?;
    let s = Split::of(p, shape)?;
    let per_op = (p.throughput > 0.0).then(|| s.own_cpus / p.throughput);
    Some(format!(
        "at {} perflab's CPU was the target's work and its own: {:.2} CPUs in the kernel serving the run's I/O (system time: the file system, the block layer), {:.2} CPUs of perflab's own code as the generator (user time: {} of perflab's CPU{})",
        load_text(p),
        s.served_cpus,
        s.own_cpus,
        Percent(s.own_share()),
        per_op.map_or_else(String::new, |c| format!(", {} per operation", Latency::secs(c)))
    ))
}

/// A saturated CPU's verdict for a kernel-served run: the split after
/// perflab's own use, and, when the served work kept it busy, named as
/// the CPU serving the I/O.
pub(crate) fn cpu_verdict(mut b: Bottleneck, q: &StepPoint, shape: RunShape) -> Bottleneck {
    let Some(line) = evidence(std::slice::from_ref(q), 0, shape) else {
        return b;
    };
    let after = b
        .evidence
        .iter()
        .position(|e| e.starts_with("perflab itself used"))
        .map_or(b.evidence.len(), |i| i + 1);
    b.evidence.insert(after, line);
    let served = Split::of(q, shape).is_some_and(|s| !s.generator_limits());
    if served && b.name == "cpu" {
        b.name = "cpu (the kernel serving the run's I/O)".to_string();
    }
    b
}
