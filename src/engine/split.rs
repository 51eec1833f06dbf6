//! How a step's load is dealt out: over the processes that offer it (a
//! run's generators, or this process alone) and, in each, over its worker
//! threads. A split that came from outside the process (a coordinator's
//! share, on a generator) is checked against the bounds here before any
//! thread or session exists ([`Split::check`]).

use super::schedule::Schedule;
use super::worker::{self, WorkerLoad, WorkerPlan};
use crate::plan::load::{MAX_RATE, MAX_USERS, MIN_RATE};
use crate::plan::{Level, LoadModel, Plan, ThinkTime};
use std::sync::Arc;
use std::time::Duration;

/// The most parts a step's load is dealt into (the generators of a run).
pub(crate) const MAX_PARTS: usize = 10_000;
/// The most worker threads one process runs a step on.
pub(crate) const MAX_THREADS: usize = 4096;
pub(crate) use crate::plan::MAX_WAIT;

/// Which part of a step's load one process offers: the `k`-th of `n`
/// (a generator among the run's generators; 0 of 1 for a local run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Part {
    pub(crate) k: usize,
    pub(crate) n: usize,
}

impl Part {
    /// The whole load, offered by one process.
    pub(crate) const WHOLE: Part = Part { k: 0, n: 1 };
}

/// What splitting a step's load needs of the plan.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct Split {
    pub(crate) load: LoadModel,
    pub(crate) threads: usize,
    /// A closed loop's step of at most this many users here gives each a
    /// thread of its own ([`Plan::alone_up_to`]).
    #[serde(default)]
    pub(crate) alone_up_to: usize,
    pub(crate) seed: u64,
    #[serde(with = "crate::util::serde_duration")]
    pub(crate) timeout: Duration,
    pub(crate) part: Part,
}

impl Split {
    /// Whether a step at `level` can run on this split, in one line
    /// naming the field that cannot: a part within the parts, threads,
    /// users, connections and rates within the bounds a plan takes, a
    /// timeout and think times above zero and at most [`MAX_WAIT`].
    pub(crate) fn check(&self, level: Level) -> Result<(), String> {
        let Part { k, n } = self.part;
        if !(1..=MAX_PARTS).contains(&n) {
            return Err(format!(
                "part.n is {n}; a step is dealt to 1 to {MAX_PARTS} parts"
            ));
        }
        if k >= n {
            return Err(format!("part.k is {k}; it must be below part.n ({n})"));
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(format!(
                "threads is {}; give 1 to {MAX_THREADS}",
                self.threads
            ));
        }
        if self.alone_up_to > MAX_THREADS {
            return Err(format!(
                "alone_up_to is {}; give 0 to {MAX_THREADS}",
                self.alone_up_to
            ));
        }
        if self.timeout.is_zero() || self.timeout > MAX_WAIT {
            return Err(format!(
                "timeout is {:?}; give more than 0 and at most {:?}",
                self.timeout, MAX_WAIT
            ));
        }
        match level {
            Level::Users(users) if !(1..=MAX_USERS).contains(&users) => {
                return Err(format!("level is {users} users; give 1 to {MAX_USERS}"))
            }
            Level::Rate(rate) if !(MIN_RATE..=MAX_RATE).contains(&rate) => {
                return Err(format!(
                    "level is a rate of {rate:e}/s; give {MIN_RATE} to {MAX_RATE} per second"
                ))
            }
            _ => {}
        }
        match self.load {
            LoadModel::Closed { think } => check_think(think),
            LoadModel::Open {
                connections,
                max_outstanding,
                slack,
                ..
            } => {
                if !(1..=MAX_USERS).contains(&connections) {
                    return Err(format!(
                        "load.connections is {connections}; give 1 to {MAX_USERS}"
                    ));
                }
                if max_outstanding == 0 {
                    return Err("load.max_outstanding is 0; give 1 or more".to_string());
                }
                slack.check()
            }
        }
    }

    /// The plan's split of a step over this process's threads.
    pub(crate) fn of(plan: &Plan, part: Part) -> Self {
        Split {
            load: plan.load,
            threads: plan.threads,
            alone_up_to: plan.alone_up_to,
            seed: plan.seed,
            timeout: plan.timeout,
            part,
        }
    }
}

/// A think time that can be drawn: waits at most [`MAX_WAIT`], a uniform
/// range whose lower bound is not above its upper one.
fn check_think(think: ThinkTime) -> Result<(), String> {
    let longest = match think {
        ThinkTime::Zero => Duration::ZERO,
        ThinkTime::Fixed { wait } => wait,
        ThinkTime::Exponential { mean } => mean,
        ThinkTime::Uniform { min, max } => {
            if min > max {
                return Err(format!(
                    "load.think ranges from {min:?} down to {max:?}; the lower bound must come first"
                ));
            }
            max
        }
    };
    if longest > MAX_WAIT {
        return Err(format!("load.think is {longest:?}; at most {MAX_WAIT:?}"));
    }
    Ok(())
}

/// Splits a step's load over the worker threads of one part. Closed-loop
/// users (and open-loop connections) are dealt out as cards: user `u` to
/// part `u mod n`, then to thread `i mod workers` of it, so parts differ
/// by at most one user. An open-loop rate is divided evenly, and each
/// worker's arrival process has a seed of its own across all parts, so
/// the parts' independent Poisson streams of rate λ/n add up to one of
/// rate λ.
pub(super) fn worker_plans(
    split: &Split,
    index: usize,
    level: Level,
    schedule: &Arc<Schedule>,
) -> Vec<WorkerPlan> {
    let step_seed = worker::stream_seed(split.seed, index as u64);
    // Checked splits only reach here; the guards below keep a split that
    // was not from dividing by zero or overflowing all the same.
    let Part { k, n } = split.part;
    let n = n.max(1);
    let mine = |total: u32| -> Vec<u32> { (0..total).filter(|u| *u as usize % n == k).collect() };
    let (sessions, single) = match (level, split.load) {
        (Level::Users(users), _) => (mine(users), false),
        (Level::Rate(_), LoadModel::Open { connections, .. }) => (mine(connections), false),
        (Level::Rate(_), LoadModel::Closed { .. }) => (vec![k as u32], true),
    };
    let alone = matches!(
        (level, split.load),
        (Level::Users(_), LoadModel::Closed { .. })
    ) && sessions.len() <= split.alone_up_to;
    let workers = if single {
        1
    } else if alone {
        sessions.len().max(1)
    } else {
        split.threads.min(sessions.len()).max(1)
    };
    (0..workers)
        .map(|w| {
            let users: Vec<u32> = sessions
                .iter()
                .enumerate()
                .filter(|(i, _)| i % workers == w)
                .map(|(_, u)| *u)
                .collect();
            let load = match (level, split.load) {
                (
                    Level::Rate(rate),
                    LoadModel::Open {
                        arrivals,
                        max_outstanding,
                        slack,
                        ..
                    },
                ) => {
                    let all = workers.saturating_mul(n) as u64;
                    let share = rate / all as f64;
                    WorkerLoad::Open {
                        rate: share,
                        arrivals,
                        slack: slack.window(share),
                        max_outstanding: u32::try_from(
                            u64::from(max_outstanding).div_ceil(all).max(1),
                        )
                        .unwrap_or(u32::MAX),
                        first_arrival: crate::units::saturating_secs(
                            (k as f64 * workers as f64 + w as f64) / rate,
                        ),
                    }
                }
                (_, LoadModel::Closed { think }) => WorkerLoad::Closed { think },
                (Level::Users(_), LoadModel::Open { .. }) => WorkerLoad::Closed {
                    think: crate::plan::ThinkTime::Zero,
                },
            };
            WorkerPlan {
                index: w,
                stream: (k as u64).wrapping_mul(4096).wrapping_add(w as u64),
                users,
                load,
                seed: step_seed,
                schedule: schedule.clone(),
                timeout: split.timeout,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Arrivals, ThinkTime};

    fn split(load: LoadModel, k: usize, n: usize) -> Split {
        Split {
            load,
            threads: 2,
            alone_up_to: 0,
            seed: 7,
            timeout: Duration::from_secs(1),
            part: Part { k, n },
        }
    }

    fn schedule() -> Arc<Schedule> {
        Arc::new(Schedule::new(
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1),
        ))
    }

    /// Over three parts, every user is offered exactly once, the parts
    /// differ by at most one user, and the whole is the local split.
    #[test]
    fn users_are_dealt_to_parts_once_each() {
        let closed = LoadModel::Closed {
            think: ThinkTime::Zero,
        };
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for k in 0..3 {
            let plans = worker_plans(&split(closed, k, 3), 0, Level::Users(10), &schedule());
            let users: Vec<u32> = plans.iter().flat_map(|p| p.users.clone()).collect();
            sizes.push(users.len());
            seen.extend(users);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(sizes, vec![4, 3, 3]);
        let whole = worker_plans(&split(closed, 0, 1), 0, Level::Users(10), &schedule());
        assert_eq!(whole[0].users, vec![0, 2, 4, 6, 8]);
        assert_eq!(whole[1].users, vec![1, 3, 5, 7, 9]);
    }

    /// Up to `alone_up_to` users, a closed loop's users each get a thread;
    /// past it, or in an open loop, they share `threads`.
    #[test]
    fn few_users_of_a_closed_loop_get_a_thread_each_and_more_share() {
        let closed = LoadModel::Closed {
            think: ThinkTime::Zero,
        };
        let mut s = split(closed, 0, 1);
        s.alone_up_to = 4;
        let threads = |s: &Split, level| worker_plans(s, 0, level, &schedule()).len();
        assert_eq!(threads(&s, Level::Users(1)), 1);
        assert_eq!(threads(&s, Level::Users(4)), 4);
        assert_eq!(threads(&s, Level::Users(5)), 2);
        let plans = worker_plans(&s, 0, Level::Users(4), &schedule());
        assert!(plans.iter().all(|p| p.users.len() == 1));
        // A generator's part counts its own users: 8 over two parts, 4 here.
        let mut part = split(closed, 1, 2);
        part.alone_up_to = 4;
        assert_eq!(threads(&part, Level::Users(8)), 4);
        // Never in an open loop: its arrivals share the threads.
        let open = LoadModel::Open {
            arrivals: Arrivals::Poisson,
            connections: 4,
            max_outstanding: 64,
            slack: crate::plan::Slack::Fixed(Duration::ZERO),
        };
        let mut o = split(open, 0, 1);
        o.alone_up_to = 4;
        assert_eq!(threads(&o, Level::Rate(100.0)), 2);
        assert_eq!(threads(&o, Level::Users(4)), 2);
        // From outside, bounded like the threads.
        s.alone_up_to = MAX_THREADS + 1;
        assert!(s
            .check(Level::Users(4))
            .unwrap_err()
            .contains("alone_up_to"));
    }

    /// A split from outside is checked field by field, in one line each;
    /// a part count past `u32` (which once divided by zero) is refused,
    /// and even unchecked it deals out without a panic.
    #[test]
    fn a_split_from_outside_is_checked_and_never_divides_by_zero() {
        let open = LoadModel::Open {
            arrivals: Arrivals::Poisson,
            connections: 8,
            max_outstanding: 64,
            slack: crate::plan::Slack::Fixed(Duration::ZERO),
        };
        let closed = LoadModel::Closed {
            think: ThinkTime::Zero,
        };
        assert!(split(open, 0, 3).check(Level::Rate(100.0)).is_ok());
        assert!(split(closed, 2, 3).check(Level::Users(10)).is_ok());
        let huge = 4_294_967_296;
        for (s, level, says) in [
            (
                split(open, 0, huge),
                Level::Rate(100.0),
                "part.n is 4294967296",
            ),
            (split(open, 0, 0), Level::Rate(100.0), "part.n is 0"),
            (split(open, 3, 3), Level::Rate(100.0), "part.k is 3"),
            (
                split(open, 0, 1),
                Level::Rate(f64::NAN),
                "level is a rate of NaN",
            ),
            (split(open, 0, 1), Level::Rate(0.0), "level is a rate of 0"),
            (
                split(open, 0, 1),
                Level::Rate(f64::INFINITY),
                "level is a rate of inf",
            ),
            (split(closed, 0, 1), Level::Users(0), "level is 0 users"),
            (
                split(closed, 0, 1),
                Level::Users(u32::MAX),
                "level is 4294967295 users",
            ),
            (
                split(
                    LoadModel::Closed {
                        think: ThinkTime::Uniform {
                            min: Duration::from_secs(2),
                            max: Duration::from_secs(1),
                        },
                    },
                    0,
                    1,
                ),
                Level::Users(1),
                "load.think ranges from 2s down to 1s",
            ),
            (
                split(
                    LoadModel::Open {
                        arrivals: Arrivals::Uniform,
                        connections: 0,
                        max_outstanding: 1,
                        slack: crate::plan::Slack::Fixed(Duration::ZERO),
                    },
                    0,
                    1,
                ),
                Level::Rate(1.0),
                "load.connections is 0",
            ),
        ] {
            let e = s.check(level).unwrap_err();
            assert!(e.starts_with(says), "{e}");
        }
        let mut many = split(closed, 0, 1);
        many.threads = MAX_THREADS + 1;
        assert!(many
            .check(Level::Users(1))
            .unwrap_err()
            .starts_with("threads is"));
        many.threads = 2;
        many.timeout = Duration::ZERO;
        assert!(many
            .check(Level::Users(1))
            .unwrap_err()
            .starts_with("timeout is"));
        // Unchecked, the old divide by zero: (2 workers × 2^32) as u32 = 0.
        let plans = worker_plans(&split(open, 0, huge), 0, Level::Rate(100.0), &schedule());
        assert!(!plans.is_empty());
    }

    /// An open loop's rate is divided over every worker of every part,
    /// and every worker's arrival stream is its own.
    #[test]
    fn a_rate_is_divided_and_every_stream_is_distinct() {
        let open = LoadModel::Open {
            arrivals: Arrivals::Poisson,
            connections: 8,
            max_outstanding: 64,
            slack: crate::plan::Slack::Fixed(Duration::ZERO),
        };
        let mut rate = 0.0;
        let mut streams = Vec::new();
        for k in 0..3 {
            for plan in worker_plans(&split(open, k, 3), 0, Level::Rate(3000.0), &schedule()) {
                let WorkerLoad::Open { rate: r, .. } = plan.load else {
                    panic!("closed");
                };
                rate += r;
                streams.push(plan.stream);
            }
        }
        assert!((rate - 3000.0).abs() < 1e-9, "{rate}");
        let count = streams.len();
        streams.sort_unstable();
        streams.dedup();
        assert_eq!(streams.len(), count, "two workers share an arrival stream");
    }
}
