//! A server whose workers are all busy while none of its resources is: a
//! fixed pool of threads or processes (a single-threaded server, a
//! pre-forked pool of sync workers, PHP-FPM's children, a servlet
//! container's thread pool) each holding a request for the whole of its
//! time — on a CPU, asleep on a backend, in I/O. Past the pool the
//! requests queue (in the listen backlog, or the server's own queue) and
//! throughput holds at workers ÷ time per request however many users
//! come. It is a limit of the server's configuration, not of a resource.
//!
//! Its mark, read from the server's threads: at every step past the
//! knee, the threads serving never waited for a request (under 5% of
//! their time on their clients or the network), were not mostly on a CPU
//! or waiting for one (a CPU's case) nor on locks (contention's), and
//! more came than they took — in a closed loop the users outnumbered them
//! at least twice over, in an open one they served under 95% of the rate
//! — their number not growing with the load (a thread per connection is
//! no fixed pool). A worker waiting on a backend over the network (a
//! database, an upstream) is counted on clients/network, as one waiting
//! for work is: such a pool is not named here.

use super::super::capacity::{load_text, Knee};
use super::super::points::StepPoint;
use super::super::threads::shares_text;
use super::{Bottleneck, RunShape};
use crate::units::{Latency, Percent};
use std::time::Duration;

/// The verdict's name.
pub(crate) const NAME: &str = "admission limit (the server's workers)";

/// Share of the serving threads' time on their clients or the network
/// under which they never waited for a request.
const IDLE: f64 = 0.05;
/// Share of their time on a CPU or waiting for one from which a CPU is
/// the case, not the pool.
const ON_CPU: f64 = 0.6;
/// Share of their time on locks from which contention is the case.
const LOCKS: f64 = 0.3;
/// Users per serving thread from which the users outnumber the pool.
const OUTNUMBERED: f64 = 2.0;
/// Share of an open loop's rate under which the pool fell short of it.
const SHORT: f64 = 0.95;
/// Growth of the serving threads over the steps past the knee from which
/// they are no fixed pool.
const FIXED: f64 = 1.5;
/// Overflows of the listen queue from which its queue is said to overflow.
const OVERFLOWS: f64 = 10.0;

/// The server's serving threads at a step where none of them waited for
/// a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Busy {
    /// Mean threads serving.
    pub(crate) threads: f64,
    /// Share of their time on their clients or the network.
    pub(crate) idle: f64,
}

/// The serving threads at step `p`, when they were followed and never
/// waited for a request, without being mostly on a CPU or on locks.
pub(crate) fn never_idle(p: &StepPoint) -> Option<Busy> {
    let states = p.threads.server.as_ref()?;
    let s = states.serving();
    let total = s.total();
    if total <= 0.0 {
        return None;
    }
    let idle = s.clients / total;
    let cpu = (s.on_cpu + s.cpu_wait) / total;
    let locks = s.lock / total;
    (idle < IDLE && cpu < ON_CPU && locks < LOCKS).then_some(Busy {
        threads: total,
        idle,
    })
}

/// The verdict of a run whose throughput a fixed pool of the server's
/// workers held, when one did.
pub(crate) fn verdict(
    points: &[StepPoint],
    shape: RunShape,
    knee: Option<&Knee>,
) -> Option<Bottleneck> {
    // More came than the workers took: users outnumbering them, or a
    // rate they fell short of.
    let queued = |p: &StepPoint, b: &Busy| {
        if shape.closed {
            p.load >= OUTNUMBERED * b.threads
        } else {
            p.throughput <= SHORT * p.load
        }
    };
    // Steps past the knee where no more came than the workers took yet
    // (a latency knee can come early) say nothing of the pool.
    let past = points.get(knee?.at + 1..)?;
    let first = past.iter().position(|p| {
        let threads = p
            .threads
            .server
            .as_ref()
            .map_or(0.0, |t| t.serving().total());
        queued(p, &Busy { threads, idle: 0.0 })
    })?;
    let past = &past[first..];
    let busy: Vec<Busy> = past
        .iter()
        .map_while(|p| never_idle(p).filter(|b| queued(p, b)))
        .collect();
    let (first, last) = (busy.first()?, busy.last()?);
    if last.threads > FIXED * first.threads.max(1.0) {
        return None;
    }
    // The steps past those: each one whose workers the listen queue
    // starved, or the pool was not what held the curve.
    let (held, starved) = past.split_at(busy.len());
    let starved: Vec<String> = starved.iter().map(starved_line).collect::<Option<_>>()?;
    let (p0, pn) = (held.first()?, held.last()?);
    // Where the throughput is said to have held from: the first step the
    // pool held, or the knee's when it held one step only.
    let pk = if held.len() > 1 {
        p0
    } else {
        points.get(knee?.at)?
    };
    let mut evidence = vec![
        idle_line(held, &busy),
        held_line(pn, last),
        throughput_line(pk, pn, last, shape),
    ];
    let backlog = if starved.is_empty() {
        overflowed(held)
    } else {
        Some(starved.join("; "))
    };
    let mut next = format!(
        "more workers (the server's thread or process pool: a pre-forked server's workers, Apache's MaxRequestWorkers, PHP-FPM's pm.max_children, a thread pool's size): each adds up to {} at this time per request, as far as the next resource's bound; or less time per request in what the workers wait on",
        pn.rate(pn.throughput / last.threads)
    );
    if backlog.is_some() {
        next.push_str(
            "; and a longer listen backlog (which net.core.somaxconn caps), so that the requests past the workers wait in it rather than for SYN retransmits",
        );
    }
    evidence.extend(backlog);
    Some(Bottleneck::admission_limit(
        NAME.to_string(),
        evidence,
        next,
    ))
}

/// A step past the pool's where its workers waited for requests because
/// the listen queue turned the clients away, in words; none when it
/// did not.
fn starved_line(p: &StepPoint) -> Option<String> {
    let overflows = p.extras.listen_overflows.filter(|n| *n >= OVERFLOWS)?;
    let s = p.threads.server.as_ref()?.serving();
    let idle = s.clients / s.total();
    (idle.is_finite() && idle >= IDLE).then(|| {
        format!(
            "at {} the workers waited for requests {} of their time while a full listen queue turned {overflows:.0} connection attempts away (TCP ListenOverflows): the clients past it waited for SYN retransmits (1 s, then 3 s) and throughput fell to {} (p99 {})",
            load_text(p),
            Percent(idle),
            p.rate(p.throughput),
            Latency(p.response.p99)
        )
    })
}

/// The workers' idle share over the steps `held` they held, by step when
/// more than one.
fn idle_line(held: &[StepPoint], busy: &[Busy]) -> String {
    let by_step = if held.len() > 1 {
        let each: Vec<String> = held
            .iter()
            .zip(busy)
            .map(|(p, b)| format!("{} at {}", Percent(b.idle), load_text(p)))
            .collect();
        format!(" ({})", each.join(", "))
    } else {
        String::new()
    };
    format!(
        "the server's {:.1} serving threads never waited for a request from {} on: on their clients or the network {} of their time{by_step}",
        busy.last().map_or(0.0, |b| b.threads),
        held.first().map(load_text).unwrap_or_default(),
        Percent(busy.iter().map(|b| b.idle).fold(0.0, f64::max)),
    )
}

/// The throughput from step `pk` to `pn` and how far more came than the
/// workers took at `pn`.
fn throughput_line(pk: &StepPoint, pn: &StepPoint, last: &Busy, shape: RunShape) -> String {
    let more = if shape.closed {
        format!(
            "the users outnumbering the threads {:.0} times over there",
            pn.load / last.threads
        )
    } else {
        format!(
            "{} of the rate offered there",
            Percent(pn.throughput / pn.load)
        )
    };
    format!(
        "throughput {} at {} → {} at {}, {more}{}",
        pk.rate(pk.throughput),
        load_text(pk),
        pn.rate(pn.throughput),
        load_text(pn),
        busiest(pn)
    )
}

/// How long each request held a worker at step `p` (Little's law on the
/// pool: threads ÷ throughput), and where that time went.
fn held_line(p: &StepPoint, busy: &Busy) -> String {
    let each = Duration::from_secs_f64(busy.threads / p.throughput.max(f64::MIN_POSITIVE));
    let mut line = format!(
        "each request held a worker for {} at {} ({:.1} threads ÷ {})",
        Latency(each),
        load_text(p),
        busy.threads,
        p.rate(p.throughput)
    );
    if let Some(states) = p.threads.server.as_ref() {
        line.push_str(&format!(": {}", shares_text(states, 3)));
        if let Some((channel, threads)) = states.channels.first() {
            line.push_str(&format!("; busiest wait {channel} ({threads:.1} threads)"));
        }
    }
    line
}

/// The busiest resource of step `p`, in words after a comma: none of
/// them is what held the throughput.
fn busiest(p: &StepPoint) -> String {
    p.resources
        .iter()
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))
        .map(|r| {
            format!(
                ", the busiest resource ({}) {} busy",
                r.name,
                Percent(r.utilisation)
            )
        })
        .unwrap_or_default()
}

/// The queue past the workers overflowing the listen backlog, when it
/// did: the latency tail's cause, not the throughput's.
fn overflowed(past: &[StepPoint]) -> Option<String> {
    let p = past
        .iter()
        .rev()
        .find(|p| p.extras.listen_overflows.is_some_and(|n| n >= OVERFLOWS))?;
    Some(format!(
        "the requests queued past them overflowed the listen backlog: {:.0} connection attempts turned away at {} (TCP ListenOverflows), each client waiting for its SYN retransmit (1 s, then 3 s); that is the latency tail's cause (p99 {}), not the throughput's",
        p.extras.listen_overflows.unwrap_or(0.0),
        load_text(p),
        Latency(p.response.p99)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::super::fixture::{mva_points, SHAPE};
    use super::super::super::{verdict_of, DEFAULT_MAX_CV};
    use super::super::BottleneckKind;
    use super::*;
    use crate::probe::counters::threads::{ThreadSplit, ThreadStates};

    /// A single-threaded server whose every request waits 2 ms asleep on
    /// its backend (2.5 ms in all), swept over 1, 4, 8, 16 and 32 users:
    /// at 1 user its thread waits for the next request a quarter of its
    /// time, from 4 users on never; the throughput holds at 400/s with
    /// the CPUs 10% busy. `serving(load)` is the serving threads' split.
    fn single_threaded(serving: impl Fn(f64) -> (f64, ThreadSplit)) -> Vec<StepPoint> {
        let mut points = mva_points(0.0004, 0.0006, 0.0, &[1, 4, 8, 16, 32]);
        for p in &mut points {
            p.throughput = if p.load < 2.0 { 300.0 } else { 400.0 };
            let r = Duration::from_secs_f64(p.load / p.throughput);
            p.response.mean = r;
            p.response.p50 = r;
            p.response.p99 = r * 2;
            p.interval_throughputs = vec![p.throughput; 10];
            for res in &mut p.resources {
                res.utilisation = 0.1;
            }
            let (threads, split) = serving(p.load);
            p.threads.server = Some(ThreadStates {
                threads: threads.ceil() as usize,
                active_threads: threads,
                all: split,
                active: split,
                channels: vec![("hrtimer_nanosleep".to_string(), 0.8 * threads)],
                ..ThreadStates::default()
            });
        }
        points
    }

    /// One thread's time: on a CPU `cpu`, waiting for a request `idle`,
    /// the rest asleep on its backend.
    fn split(threads: f64, cpu: f64, idle: f64) -> ThreadSplit {
        ThreadSplit {
            on_cpu: cpu * threads,
            clients: idle * threads,
            sleep: (1.0 - cpu - idle) * threads,
            ..ThreadSplit::default()
        }
    }

    #[test]
    fn a_single_thread_never_waiting_for_a_request_is_the_servers_workers() {
        let points =
            single_threaded(|load| (1.0, split(1.0, 0.12, if load < 2.0 { 0.25 } else { 0.0 })));
        let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
        let b = v.bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::AdmissionLimit, "{b:?}");
        assert_eq!(b.name, NAME, "{b:?}");
        let all = b.evidence.join("\n");
        assert!(
            all.contains(
                "the server's 1.0 serving threads never waited for a request from 4 users on"
            ),
            "{all}"
        );
        assert!(
            all.contains("each request held a worker for 2.50ms at 32 users (1.0 threads ÷ 400 ops/s): sleep 88.0%, on CPU 12.0%; busiest wait hrtimer_nanosleep"),
            "{all}"
        );
        assert!(
            all.contains("throughput 400 ops/s at 4 users → 400 ops/s at 32 users, the users outnumbering the threads 32 times over there"),
            "{all}"
        );
        assert!(b.next.unwrap().contains("each adds up to 400 ops/s"));
    }

    /// The same server offered 200, 400, 800, 1600 and 3200 requests a
    /// second: past 400 it serves its 400 and no more, never waiting for
    /// a request; at 400 itself, served in full, it is not short.
    #[test]
    fn an_open_loop_the_pool_falls_short_of_is_the_servers_workers() {
        let judged = || {
            let mut points = single_threaded(|load| {
                (1.0, split(1.0, 0.12, if load < 2.0 { 0.25 } else { 0.0 }))
            });
            for (p, rate) in points.iter_mut().zip([200.0, 400.0, 800.0, 1600.0, 3200.0]) {
                p.level = crate::plan::Level::Rate(rate);
                p.load = rate;
                p.throughput = if rate < 300.0 { rate } else { 400.0 };
                p.interval_throughputs = vec![p.throughput; 10];
            }
            let shape = RunShape {
                closed: false,
                ..SHAPE
            };
            verdict_of(points, shape, DEFAULT_MAX_CV, 1)
                .bottleneck
                .unwrap()
        };
        let b = judged();
        assert_eq!(b.name, NAME, "{b:?}");
        let all = b.evidence.join("\n");
        assert!(
            all.contains("throughput 400 ops/s at 800 ops/s → 400 ops/s at 3200 ops/s, 12.5% of the rate offered there"),
            "{all}"
        );
    }

    /// Past the pool, at 32 users, the listen queue overflowed: the
    /// clients it turned away waited for SYN retransmits while the worker
    /// waited for requests 16% of its time, and throughput fell to 175/s.
    /// Still the workers, the backlog's fall said beside them; a step
    /// whose worker waited for requests with no overflow is not.
    #[test]
    fn a_listen_queue_starving_the_workers_past_them_is_said_beside_them() {
        let judged = |overflows: f64| {
            let mut points = single_threaded(|load| {
                (
                    1.0,
                    split(
                        1.0,
                        0.12,
                        if (2.0..=16.0).contains(&load) {
                            0.0
                        } else {
                            0.16
                        },
                    ),
                )
            });
            let last = points.last_mut().unwrap();
            last.throughput = 175.0;
            last.response.p99 = Duration::from_secs(3);
            last.extras.listen_overflows = Some(overflows);
            verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
                .bottleneck
                .unwrap()
        };
        let b = judged(142.0);
        assert_eq!(b.name, NAME, "{b:?}");
        let all = b.evidence.join("\n");
        assert!(
            all.contains("at 32 users the workers waited for requests 16.0% of their time while a full listen queue turned 142 connection attempts away (TCP ListenOverflows): the clients past it waited for SYN retransmits (1 s, then 3 s) and throughput fell to 175 ops/s (p99 3.00s)"),
            "{all}"
        );
        assert!(all.contains("→ 400 ops/s at 16 users"), "{all}");
        assert!(b.next.unwrap().contains("a longer listen backlog"));
        assert_ne!(judged(0.0).name, NAME);
    }

    /// Not a fixed pool of workers: a thread per user (PostgreSQL's,
    /// MariaDB's); threads waiting for their requests a fifth of their
    /// time; a thread mostly on its CPU (a CPU's case).
    #[test]
    fn a_thread_per_user_an_idle_pool_or_a_busy_cpu_is_not_the_workers() {
        type Serving = Box<dyn Fn(f64) -> (f64, ThreadSplit)>;
        let cases: [(&str, Serving); 3] = [
            (
                "a thread per user",
                Box::new(|load| (load, split(load, 0.12, 0.0))),
            ),
            (
                "waiting for requests",
                Box::new(|_| (1.0, split(1.0, 0.12, 0.2))),
            ),
            ("on its CPU", Box::new(|_| (1.0, split(1.0, 0.9, 0.0)))),
        ];
        for (case, serving) in cases {
            let v = verdict_of(single_threaded(serving), SHAPE, DEFAULT_MAX_CV, 1);
            let b = v.bottleneck.unwrap();
            assert_ne!(b.name, NAME, "{case}: {b:?}");
        }
    }
}
