//! How a step's load is dealt out: over the processes that offer it (a
//! run's generators, or this process alone) and, in each, over its worker
//! threads.

use super::schedule::Schedule;
use super::worker::{self, WorkerLoad, WorkerPlan};
use crate::plan::{Level, LoadModel, Plan};
use std::sync::Arc;
use std::time::Duration;

/// Which part of a step's load one process offers: the `k`-th of `n`
/// (a generator among the run's generators; 0 of 1 for a local run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Part {
    pub k: usize,
    pub n: usize,
}

impl Part {
    /// The whole load, offered by one process.
    pub const WHOLE: Part = Part { k: 0, n: 1 };
}

/// What splitting a step's load needs of the plan.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Split {
    pub load: LoadModel,
    pub threads: usize,
    pub seed: u64,
    #[serde(with = "crate::util::serde_duration")]
    pub timeout: Duration,
    pub part: Part,
}

impl Split {
    /// The plan's split of a step over this process's threads.
    pub fn of(plan: &Plan, part: Part) -> Self {
        Split {
            load: plan.load,
            threads: plan.threads,
            seed: plan.seed,
            timeout: plan.timeout,
            part,
        }
    }
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
    let Part { k, n } = split.part;
    let n = n.max(1);
    let mine = |total: u32| -> Vec<u32> { (0..total).filter(|u| *u as usize % n == k).collect() };
    let (sessions, single) = match (level, split.load) {
        (Level::Users(users), _) => (mine(users), false),
        (Level::Rate(_), LoadModel::Open { connections, .. }) => (mine(connections), false),
        (Level::Rate(_), LoadModel::Closed { .. }) => (vec![k as u32], true),
    };
    let workers = if single {
        1
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
                        ..
                    },
                ) => {
                    let all = (workers * n) as f64;
                    WorkerLoad::Open {
                        rate: rate / all,
                        arrivals,
                        max_outstanding: max_outstanding.div_ceil((workers * n) as u32).max(1),
                        first_arrival: crate::units::saturating_secs(
                            (k * workers + w) as f64 / rate,
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
                stream: (k * 4096 + w) as u64,
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

    /// An open loop's rate is divided over every worker of every part,
    /// and every worker's arrival stream is its own.
    #[test]
    fn a_rate_is_divided_and_every_stream_is_distinct() {
        let open = LoadModel::Open {
            arrivals: Arrivals::Poisson,
            connections: 8,
            max_outstanding: 64,
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
