//! Each statement's time, as pgbench's `-r` reports it, but per step: a
//! pair of counters per statement of every script (runs that succeeded,
//! and their seconds from send to the last byte of the reply), added to
//! by every session with two relaxed atomic adds and no allocation — in
//! its thread's own shard, so that two threads timing the same statement
//! never pass a cache line between them — and summed over the shards
//! at each interval's end by the run's statistics source beside the
//! server's own counters ([`ClockSource`]). Stored with each interval as
//! `statement_runs:LABEL` and `statement_seconds:LABEL`, where the label
//! is the script, its line and the statement's first words
//! ([`label`]); the workload's figures ([`super::figures`]) turn them
//! into each statement's mean time per step.

use super::script::Script;
use crate::probe::DbStatsSource;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The counter of a statement's successful runs, before its label.
pub(crate) const RUNS: &str = "statement_runs:";
/// The counter of their seconds, before its label.
pub(crate) const SECONDS: &str = "statement_seconds:";

/// The most characters of a statement's text a label keeps.
const TEXT_CHARS: usize = 64;

/// The most statements timed; those after (in scripts of hundreds of
/// statements) are run but not timed.
const MOST: usize = 256;

/// The most shards: threads past it share one.
const MOST_SHARDS: usize = 64;

/// One statement's counters in one shard, on a cache line of its own so
/// that two threads timing statements do not contend.
#[derive(Default)]
#[repr(align(64))]
struct Cell {
    runs: AtomicU64,
    nanos: AtomicU64,
}

/// Every timed statement's counters, shared by the run's sessions: one
/// shard per thread (up to [`MOST_SHARDS`]), each a cell per statement.
pub(crate) struct StatementClock {
    cells: Box<[Cell]>,
    /// How many shards (a power of two), and the statements in each.
    shards: usize,
    per_shard: usize,
    /// Where each script's statements begin among a shard's cells.
    offsets: Vec<usize>,
    /// Each statement's label.
    labels: Vec<String>,
}

/// This thread's ordinal among the threads that timed a statement: its
/// shard, modulo the shards.
fn thread_ordinal() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static ORDINAL: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ORDINAL.with(|o| *o)
}

/// Shards for a run: two per CPU (a step of few users gives each its
/// own thread, up to one per CPU, and `--threads` may give more), as a
/// power of two.
fn shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    cpus.saturating_mul(2).next_power_of_two().min(MOST_SHARDS)
}

impl StatementClock {
    /// A clock for every statement of `scripts` (up to [`MOST`]), their
    /// variables named by `names` (by slot).
    pub(crate) fn new(scripts: &[Script], names: &[&str]) -> Self {
        let mut offsets = Vec::with_capacity(scripts.len());
        let mut labels = Vec::new();
        // A script given twice is two operations: its statements are told
        // apart by the operation's name, as its latency is.
        let ops = super::unique_names(scripts.iter().map(|s| s.name.as_str()));
        for (script, op) in scripts.iter().zip(&ops) {
            offsets.push(labels.len());
            for statement in &script.statements {
                if labels.len() < MOST {
                    labels.push(label(op, statement.line, &statement.shown(names)));
                }
            }
        }
        StatementClock::of(offsets, labels)
    }

    fn of(offsets: Vec<usize>, labels: Vec<String>) -> Self {
        let shards = shards();
        StatementClock {
            cells: (0..shards * labels.len())
                .map(|_| Cell::default())
                .collect(),
            shards,
            per_shard: labels.len(),
            offsets,
            labels,
        }
    }

    /// A clock of statements named by `labels` alone, as one script: a
    /// workload of fixed statements (the bank's BEGIN and COMMIT).
    pub(crate) fn labelled(labels: &[String]) -> Self {
        let labels: Vec<String> = labels.iter().take(MOST).cloned().collect();
        StatementClock::of(vec![0], labels)
    }

    /// Statement `stmt` of script `script` succeeded in `took`.
    #[inline]
    pub(crate) fn record(&self, script: usize, stmt: usize, took: Duration) {
        let Some(at) = self
            .offsets
            .get(script)
            .map(|o| o.saturating_add(stmt))
            .filter(|at| *at < self.per_shard)
        else {
            return;
        };
        let shard = thread_ordinal() & (self.shards - 1);
        // `stmt` is below the script's own count of statements, so the
        // cell is the script's; past [`MOST`] there is none.
        let Some(cell) = self.cells.get(shard * self.per_shard + at) else {
            return;
        };
        cell.runs.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        cell.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Every statement's counters so far, by their stored names.
    fn counters(&self, out: &mut BTreeMap<String, f64>) {
        for (at, label) in self.labels.iter().enumerate() {
            let (mut runs, mut nanos) = (0u64, 0u64);
            for cell in self.cells.iter().skip(at).step_by(self.per_shard) {
                runs = runs.wrapping_add(cell.runs.load(Ordering::Relaxed));
                nanos = nanos.wrapping_add(cell.nanos.load(Ordering::Relaxed));
            }
            out.insert(format!("{RUNS}{label}"), runs as f64);
            out.insert(format!("{SECONDS}{label}"), nanos as f64 / 1e9);
        }
    }
}

/// A statement's label: its script, its first line there and its text's
/// first [`TEXT_CHARS`] characters on one line, the script and line apart
/// from the text by a tab (`buy.sql:7\tUPDATE accounts SET …`).
pub(crate) fn label(script: &str, line: usize, text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut short: String = words.join(" ").chars().take(TEXT_CHARS).collect();
    if words.join(" ").chars().count() > TEXT_CHARS {
        short.push('…');
    }
    let script: String = script.chars().filter(|c| !c.is_control()).collect();
    format!("{script}:{line}\t{short}")
}

/// The run's statistics: the server's own (when it has a source) and the
/// statements' clock, read together at each interval's end.
pub(crate) struct ClockSource {
    pub(crate) clock: Arc<StatementClock>,
    pub(crate) server: Option<Box<dyn DbStatsSource>>,
}

impl DbStatsSource for ClockSource {
    fn sample_waits(&mut self, waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        match &mut self.server {
            Some(server) => server.sample_waits(waits),
            None => Ok(()),
        }
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        // A server whose statistics failed this once still has its
        // statements timed.
        let mut out = match &mut self.server {
            Some(server) => server.counters().unwrap_or_default(),
            None => BTreeMap::new(),
        };
        self.clock.counters(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_the_script_line_and_the_first_words_on_one_line() {
        assert_eq!(
            label("buy.sql", 7, "UPDATE  accounts\n   SET x = x + :d"),
            "buy.sql:7\tUPDATE accounts SET x = x + :d"
        );
        let long = "SELECT ".to_string() + &"c, ".repeat(40);
        let l = label("a\nb.sql", 2, &long);
        assert!(l.starts_with("ab.sql:2\tSELECT c, c,"), "{l}");
        assert!(l.ends_with('…'));
        assert_eq!(l.split('\t').nth(1).map(|t| t.chars().count()), Some(65));
    }

    /// Threads timing the same statements each in a shard of their own
    /// (more threads than shards sharing): every run and every second is
    /// counted once, under its statement; a statement past the script's
    /// is not counted at all.
    #[test]
    fn threads_time_statements_apart_and_every_run_is_summed() {
        let labels = ["a:1\tBEGIN".to_string(), "a:2\tCOMMIT".to_string()];
        let clock = Arc::new(StatementClock::labelled(&labels));
        let threads = clock.shards + 3;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let clock = Arc::clone(&clock);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        clock.record(0, 0, Duration::from_micros(1));
                        clock.record(0, 1, Duration::from_micros(t as u64));
                        clock.record(0, 2, Duration::from_secs(1));
                        clock.record(1, 0, Duration::from_secs(1));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut out = BTreeMap::new();
        clock.counters(&mut out);
        assert_eq!(out.len(), 4, "{out:?}");
        let n = (threads * 1000) as f64;
        assert_eq!(out[&format!("{RUNS}a:1\tBEGIN")], n);
        assert_eq!(out[&format!("{RUNS}a:2\tCOMMIT")], n);
        let begin = out[&format!("{SECONDS}a:1\tBEGIN")];
        assert!((begin - n * 1e-6).abs() < 1e-9, "{begin}");
        let commit = out[&format!("{SECONDS}a:2\tCOMMIT")];
        let sum: usize = (0..threads).sum();
        assert!(
            (commit - sum as f64 * 1000.0 * 1e-6).abs() < 1e-9,
            "{commit}"
        );
    }
}
