//! Each statement's time, as pgbench's `-r` reports it, but per step: a
//! pair of counters per statement of every script (runs that succeeded,
//! and their seconds from send to the last byte of the reply), added to
//! by every session with two relaxed atomic adds and no allocation, and
//! read at each interval's end by the run's statistics source beside the
//! server's own counters ([`ClockSource`]). Stored with each interval as
//! `statement_runs:LABEL` and `statement_seconds:LABEL`, where the label
//! is the script, its line and the statement's first words
//! ([`label`]); the workload's figures ([`super::figures`]) turn them
//! into each statement's mean time per step.

use super::script::Script;
use crate::probe::DbStatsSource;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// One statement's counters, on a cache line of its own so that two
/// sessions timing different statements do not contend.
#[derive(Default)]
#[repr(align(64))]
struct Cell {
    runs: AtomicU64,
    nanos: AtomicU64,
}

/// Every timed statement's counters, shared by the run's sessions.
pub(crate) struct StatementClock {
    cells: Box<[Cell]>,
    /// Where each script's statements begin among the cells.
    offsets: Vec<usize>,
    /// Each cell's label.
    labels: Vec<String>,
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
        StatementClock {
            cells: labels.iter().map(|_| Cell::default()).collect(),
            offsets,
            labels,
        }
    }

    /// A clock of statements named by `labels` alone, as one script: a
    /// workload of fixed statements (the bank's BEGIN and COMMIT).
    pub(crate) fn labelled(labels: &[String]) -> Self {
        let labels: Vec<String> = labels.iter().take(MOST).cloned().collect();
        StatementClock {
            cells: labels.iter().map(|_| Cell::default()).collect(),
            offsets: vec![0],
            labels,
        }
    }

    /// Statement `stmt` of script `script` succeeded in `took`.
    #[inline]
    pub(crate) fn record(&self, script: usize, stmt: usize, took: Duration) {
        let Some(cell) = self
            .offsets
            .get(script)
            .and_then(|o| self.cells.get(o.saturating_add(stmt)))
        else {
            return;
        };
        // `stmt` is below the script's own count of statements, so the
        // cell is the script's; past [`MOST`] there is none.
        cell.runs.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        cell.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Every statement's counters so far, by their stored names.
    fn counters(&self, out: &mut BTreeMap<String, f64>) {
        for (cell, label) in self.cells.iter().zip(&self.labels) {
            let runs = cell.runs.load(Ordering::Relaxed);
            let nanos = cell.nanos.load(Ordering::Relaxed);
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
}
