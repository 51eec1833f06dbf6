//! [`ErrorCounts`]: failed operations counted by typed [`ErrorKind`]. A
//! worker records into room reserved at the interval boundary, so counting
//! an error on the hot path neither formats nor allocates. The counts
//! become text (`{"sql:40001": 3, "timeout": 1}`, keys in text order, as
//! stores have always held them) only where they are printed or stored.

use super::error_kind::ErrorKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Failed operations by kind.
#[derive(Debug, Clone, Default)]
pub struct ErrorCounts {
    /// Typed kinds, in the order first seen.
    kinds: Vec<(ErrorKind, u64)>,
    /// Counts read back under a name that no [`ErrorKind`] prints (written
    /// by another tool or an older perflab), kept by that name.
    named: BTreeMap<String, u64>,
}

impl ErrorCounts {
    /// Makes room for `kinds` more kinds, so that recording them does not
    /// allocate.
    pub(crate) fn reserve(&mut self, kinds: usize) {
        self.kinds.reserve(kinds);
    }

    /// Counts one failed operation.
    pub(crate) fn record(&mut self, kind: ErrorKind) {
        self.add(kind, 1);
    }

    /// Counts `n` failed operations of one kind.
    pub(crate) fn add(&mut self, kind: ErrorKind, n: u64) {
        match self.kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, count)) => *count += n,
            None => self.kinds.push((kind, n)),
        }
    }

    /// Failed operations of `kind`.
    pub(crate) fn count(&self, kind: ErrorKind) -> u64 {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Failed operations whose connection the server refused or reset:
    /// those that could not reach it.
    pub(crate) fn unreached(&self) -> u64 {
        self.count(ErrorKind::Connect)
            .saturating_add(self.count(ErrorKind::Reset))
    }

    /// Failed operations of every kind.
    pub(crate) fn total(&self) -> u64 {
        self.kinds.iter().map(|(_, n)| n).sum::<u64>() + self.named.values().sum::<u64>()
    }

    #[cfg(test)]
    /// True when no kind was counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.named.is_empty()
    }

    /// Adds the counts of another tally.
    pub(crate) fn merge(&mut self, other: &ErrorCounts) {
        for (kind, n) in &other.kinds {
            self.add(*kind, *n);
        }
        for (name, n) in &other.named {
            *self.named.entry(name.clone()).or_insert(0) += n;
        }
    }

    /// The counts by the text that names each kind (`sql:40001`), in text
    /// order: the form that is printed and stored.
    pub(crate) fn to_text(&self) -> BTreeMap<String, u64> {
        let mut text = self.named.clone();
        for (kind, n) in &self.kinds {
            *text.entry(kind.to_string()).or_insert(0) += n;
        }
        text
    }

    /// Sets the count of the kind named `name` (as printed: `timeout`,
    /// `sql:40001`, or any name read from a store), returning its previous
    /// count.
    pub fn insert(&mut self, name: String, count: u64) -> Option<u64> {
        match ErrorKind::parse(&name) {
            Some(kind) => match self.kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => Some(std::mem::replace(n, count)),
                None => {
                    self.kinds.push((kind, count));
                    None
                }
            },
            None => self.named.insert(name, count),
        }
    }

    /// True when a kind printed as `name` was counted.
    pub fn contains_key(&self, name: &str) -> bool {
        match ErrorKind::parse(name) {
            Some(kind) => self.kinds.iter().any(|(k, _)| *k == kind),
            None => self.named.contains_key(name),
        }
    }
}

/// Equal when they count the same kinds the same, whatever the order each
/// first saw them in.
impl PartialEq for ErrorCounts {
    fn eq(&self, other: &Self) -> bool {
        self.to_text() == other.to_text()
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_text().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ErrorCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut counts = ErrorCounts::default();
        for (name, n) in BTreeMap::<String, u64>::deserialize(d)? {
            counts.insert(name, n);
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::SqlCode;

    #[test]
    fn counts_are_stored_as_text_in_text_order_and_read_back_typed() {
        let mut counts = ErrorCounts::default();
        counts.record(ErrorKind::Timeout);
        counts.add(ErrorKind::Sql(SqlCode::new("40001")), 3);
        counts.record(ErrorKind::Timeout);
        let json = serde_json::to_string(&counts).unwrap();
        assert_eq!(json, r#"{"sql:40001":3,"timeout":2}"#);
        let back: ErrorCounts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, counts);
        assert_eq!(back.count(ErrorKind::Timeout), 2);
        assert_eq!(back.count(ErrorKind::Sql(SqlCode::new("40001"))), 3);
        assert_eq!(back.total(), 5);
    }

    #[test]
    fn names_no_kind_prints_are_kept_by_name() {
        let mut counts: ErrorCounts =
            serde_json::from_str(r#"{"deadlock (40P01)":4,"connect":1}"#).unwrap();
        assert_eq!(counts.count(ErrorKind::Connect), 1);
        assert!(counts.contains_key("deadlock (40P01)"));
        assert!(counts.contains_key("connect"));
        assert!(!counts.contains_key("timeout"));
        assert_eq!(counts.total(), 5);
        let mut more = ErrorCounts::default();
        more.insert("deadlock (40P01)".to_string(), 2);
        more.record(ErrorKind::Connect);
        counts.merge(&more);
        assert_eq!(
            serde_json::to_string(&counts).unwrap(),
            r#"{"connect":2,"deadlock (40P01)":6}"#
        );
    }

    #[test]
    fn insert_sets_a_count_as_a_map_does() {
        let mut counts = ErrorCounts::default();
        assert_eq!(counts.insert("busy".to_string(), 2), None);
        assert_eq!(counts.insert("busy".to_string(), 5), Some(2));
        assert_eq!(counts.count(ErrorKind::Busy), 5);
        assert!(ErrorCounts::default().is_empty());
        assert!(!counts.is_empty());
    }
}
