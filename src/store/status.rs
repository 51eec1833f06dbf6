//! The statuses the store keeps as words: a run's, a lab's and a lab
//! cell's. Each is an enum whose one [`StoredWord::word`] gives the word
//! written to the database; reading goes through the same table, so the
//! two directions cannot drift, and a word no perflab writes is an error
//! that names it rather than a guess.

use anyhow::anyhow;

/// A status stored as one word: `ALL` lists every value, `word` gives
/// its word, and reading a word back looks it up in that list.
pub trait StoredWord: Copy + Sized + 'static {
    /// What the word is the status of, for errors (`run status`).
    const WHAT: &'static str;
    /// Every value, in no particular order.
    const ALL: &'static [Self];

    /// The word stored for this value.
    fn word(self) -> &'static str;

    /// The value whose word is `text`; none for a word no perflab writes.
    fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.word() == text)
    }

    /// The value whose word is `text`, or an error naming the word.
    fn read(text: &str) -> anyhow::Result<Self> {
        Self::parse(text).ok_or_else(|| anyhow!("unknown {} '{text}' in the store", Self::WHAT))
    }
}

/// Writes `status` as its stored word (JSON reports show the same text).
fn serialize_word<S: serde::Serializer, W: StoredWord>(
    status: W,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(status.word())
}

/// A run's status as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Still being written, or its writer died (then shown as partial).
    Running,
    /// Every step ran.
    Complete,
    /// Cut short: some steps are missing.
    Partial,
    /// A step broke the error limit, or the check failed.
    Failed,
}

impl RunStatus {
    /// Its stored word (also what `perflab runs` shows).
    pub(crate) fn as_str(&self) -> &'static str {
        self.word()
    }
}

impl StoredWord for RunStatus {
    const WHAT: &'static str = "run status";
    const ALL: &'static [Self] = &[
        RunStatus::Running,
        RunStatus::Complete,
        RunStatus::Partial,
        RunStatus::Failed,
    ];

    fn word(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Partial => "partial",
            RunStatus::Failed => "failed",
        }
    }
}

/// How a lab stands: running, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabStatus {
    /// Its cells are being run, or its process died (`lab resume` goes on).
    Running,
    /// Every cell ran (some may have failed).
    Complete,
    /// Stopped before its last cell: a signal, or a teardown that failed.
    Partial,
}

impl StoredWord for LabStatus {
    const WHAT: &'static str = "lab status";
    const ALL: &'static [Self] = &[LabStatus::Running, LabStatus::Complete, LabStatus::Partial];

    fn word(self) -> &'static str {
        match self {
            LabStatus::Running => "running",
            LabStatus::Complete => "complete",
            LabStatus::Partial => "partial",
        }
    }
}

impl serde::Serialize for LabStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_word(*self, serializer)
    }
}

impl std::fmt::Display for LabStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// How one cell of a lab stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellStatus {
    /// Not started yet.
    Pending,
    /// Its run's process was started (and may have died with its lab).
    Running,
    /// Its run completed.
    Done,
    /// Its run failed, refused to start, or its setup failed.
    Failed,
    /// Cut short by a signal.
    Partial,
}

impl CellStatus {
    /// Whether the cell is over for good: `lab resume` leaves it alone.
    pub(crate) fn is_final(self) -> bool {
        matches!(self, CellStatus::Done | CellStatus::Failed)
    }
}

impl StoredWord for CellStatus {
    const WHAT: &'static str = "cell status";
    const ALL: &'static [Self] = &[
        CellStatus::Pending,
        CellStatus::Running,
        CellStatus::Done,
        CellStatus::Failed,
        CellStatus::Partial,
    ];

    fn word(self) -> &'static str {
        match self {
            CellStatus::Pending => "pending",
            CellStatus::Running => "running",
            CellStatus::Done => "done",
            CellStatus::Failed => "failed",
            CellStatus::Partial => "partial",
        }
    }
}

impl std::fmt::Display for CellStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value's word reads back as that value, and no two share one.
    fn round_trips<W: StoredWord + PartialEq + std::fmt::Debug>() {
        for &status in W::ALL {
            assert_eq!(W::parse(status.word()), Some(status));
            assert_eq!(W::read(status.word()).unwrap(), status);
        }
        let mut words: Vec<&str> = W::ALL.iter().map(|s| s.word()).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), W::ALL.len(), "two {} share a word", W::WHAT);
    }

    #[test]
    fn every_status_reads_back_as_itself() {
        round_trips::<RunStatus>();
        round_trips::<LabStatus>();
        round_trips::<CellStatus>();
    }

    #[test]
    fn the_words_are_those_stores_already_hold() {
        let words = |all: &[&'static str]| all.to_vec();
        assert_eq!(
            RunStatus::ALL.iter().map(|s| s.word()).collect::<Vec<_>>(),
            words(&["running", "complete", "partial", "failed"])
        );
        assert_eq!(
            LabStatus::ALL.iter().map(|s| s.word()).collect::<Vec<_>>(),
            words(&["running", "complete", "partial"])
        );
        assert_eq!(
            CellStatus::ALL.iter().map(|s| s.word()).collect::<Vec<_>>(),
            words(&["pending", "running", "done", "failed", "partial"])
        );
    }

    #[test]
    fn an_unknown_word_is_an_error_naming_it() {
        let e = CellStatus::read("finished").unwrap_err().to_string();
        assert_eq!(e, "unknown cell status 'finished' in the store");
        let e = LabStatus::read("done").unwrap_err().to_string();
        assert_eq!(e, "unknown lab status 'done' in the store");
        assert!(RunStatus::parse("Complete").is_none());
    }

    #[test]
    fn a_lab_status_shows_as_its_word_in_json() {
        let json = serde_json::to_string(&LabStatus::Partial).unwrap();
        assert_eq!(json, "\"partial\"");
    }
}
