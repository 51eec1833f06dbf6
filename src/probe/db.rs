//! Database-side statistics, sampled while a step runs: what the server
//! says it did (commits, buffer hits and reads, WAL, checkpoints, row-lock
//! waits) and what the benchmark's sessions were waiting on. A sampler
//! thread with its own connection looks at the sessions every 100 ms
//! (PostgreSQL's pg_stat_activity wait events, by type and name) and reads the
//! server's counters whenever the coordinator closes an interval, so each
//! interval gets the counters' increase over it and the wait samples taken
//! during it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

/// How often the sessions' wait events are sampled.
const WAIT_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The prefix of a relation's counter of the blocks asked of it (found in
/// the server's buffers or read): `relation_accesses:public.accounts`.
pub(crate) const RELATION_ACCESSES: &str = "relation_accesses:";
/// The prefix of a relation's size in bytes, a gauge.
pub(crate) const RELATION_BYTES_NOW: &str = "now_relation_bytes:";
/// The prefix a step keeps a relation's largest size under.
pub(crate) const RELATION_BYTES: &str = "relation_bytes:";

/// What the database reported over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DbSample {
    /// Increase of each server counter over the interval (commits,
    /// blocks_hit, wal_bytes, row_lock_waits, …), or a gauge's value.
    pub counters: BTreeMap<String, f64>,
    /// Sessions seen in each wait, summed over the samples taken: for
    /// PostgreSQL `type:event` (`LWLock:WALWrite`, `Lock:transactionid`;
    /// runs stored before had the type alone), `CPU` for an active session
    /// not waiting.
    pub waits: BTreeMap<String, u64>,
}

impl DbSample {
    /// Adds another interval's sample: counters and waits add up; a gauge
    /// (`now_…`) keeps the larger value, as a size summed over intervals is
    /// no size.
    pub(crate) fn merge(&mut self, other: &DbSample) {
        for (k, v) in &other.counters {
            let kept = self.counters.entry(k.clone()).or_insert(0.0);
            if k.starts_with("now_") {
                *kept = kept.max(*v);
            } else {
                *kept += v;
            }
        }
        for (k, v) in &other.waits {
            *self.waits.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// The most frequent wait class and its share of all samples.
    pub(crate) fn top_wait(&self) -> Option<(&str, f64)> {
        let total: u64 = self.waits.values().sum();
        self.waits
            .iter()
            .max_by_key(|(_, n)| **n)
            .filter(|_| total > 0)
            .map(|(k, n)| (k.as_str(), *n as f64 / total as f64))
    }
}

/// One way of reading a server's statistics.
pub trait DbStatsSource: Send + 'static {
    /// Samples the benchmark sessions' wait classes into `waits`.
    fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()>;
    /// Reads the server's cumulative counters (and gauges, prefixed `now_`).
    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>>;
}

/// A source chosen at run time (the server's kind decides which).
impl DbStatsSource for Box<dyn DbStatsSource> {
    fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        (**self).sample_waits(waits)
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        (**self).counters()
    }
}

enum Command {
    Take(mpsc::Sender<DbSample>),
}

/// A running sampler. Dropping it stops the thread.
pub struct DbProbe {
    commands: mpsc::Sender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DbProbe {
    /// Starts sampling with `source` on a thread of its own.
    pub fn start(mut source: impl DbStatsSource) -> std::io::Result<Self> {
        let (commands, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("perflab-dbprobe".to_string())
            .spawn(move || {
                let mut last = source.counters().unwrap_or_default();
                let mut waits = BTreeMap::new();
                loop {
                    match inbox.recv_timeout(WAIT_SAMPLE_EVERY) {
                        Ok(Command::Take(reply)) => {
                            let now = source.counters().unwrap_or_default();
                            let counters = now
                                .iter()
                                .map(|(k, v)| {
                                    let value = if k.starts_with("now_") {
                                        *v
                                    } else {
                                        v - last.get(k).copied().unwrap_or(*v)
                                    };
                                    (k.clone(), value)
                                })
                                .collect();
                            last = now;
                            let _ = reply.send(DbSample {
                                counters,
                                waits: std::mem::take(&mut waits),
                            });
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            // A failed sample is a gap, not an error that stops the run.
                            let _ = source.sample_waits(&mut waits);
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok(DbProbe {
            commands,
            thread: Some(thread),
        })
    }

    /// Everything since the last call: counters' increase and wait samples.
    pub fn take(&self) -> Option<DbSample> {
        let (reply, answer) = mpsc::channel();
        self.commands.send(Command::Take(reply)).ok()?;
        answer.recv_timeout(Duration::from_secs(5)).ok()
    }
}

impl Drop for DbProbe {
    fn drop(&mut self) {
        let (closed, _) = mpsc::channel();
        self.commands = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counting {
        commits: f64,
    }

    impl DbStatsSource for Counting {
        fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
            *waits.entry("Lock".to_string()).or_insert(0) += 3;
            *waits.entry("CPU".to_string()).or_insert(0) += 1;
            Ok(())
        }

        fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
            self.commits += 10.0;
            Ok(BTreeMap::from([
                ("commits".to_string(), self.commits),
                ("now_threads_running".to_string(), 4.0),
            ]))
        }
    }

    #[test]
    fn intervals_get_counter_increases_and_wait_samples() {
        let probe = DbProbe::start(Counting { commits: 0.0 }).unwrap();
        std::thread::sleep(Duration::from_millis(350));
        let sample = probe.take().unwrap();
        assert_eq!(sample.counters["commits"], 10.0);
        assert_eq!(sample.counters["now_threads_running"], 4.0);
        let (top, share) = sample.top_wait().unwrap();
        assert_eq!(top, "Lock");
        assert!((share - 0.75).abs() < 1e-9);
        let next = probe.take().unwrap();
        assert_eq!(next.counters["commits"], 10.0);
    }

    /// Intervals merged into a step: counters and waits add up, a gauge —
    /// a relation's size — is the larger reading, never the sum.
    #[test]
    fn a_merged_gauge_is_its_largest_reading() {
        let one = |commits: f64, bytes: f64| DbSample {
            counters: BTreeMap::from([
                ("commits".to_string(), commits),
                (format!("{RELATION_BYTES_NOW}public.t"), bytes),
            ]),
            waits: BTreeMap::from([("CPU".to_string(), 2)]),
        };
        let mut merged = one(10.0, 8192.0);
        merged.merge(&one(5.0, 16384.0));
        merged.merge(&one(5.0, 16384.0));
        assert_eq!(merged.counters["commits"], 20.0);
        assert_eq!(merged.counters["now_relation_bytes:public.t"], 16384.0);
        assert_eq!(merged.waits["CPU"], 6);
    }
}
