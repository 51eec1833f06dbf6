//! A run's labels (`perflab run --label commit=abc123 --label
//! branch=main`): its provenance, stored with it as a JSON object, shown
//! by `runs`, `show` and the reports, and used to filter `perflab
//! history`. A key is 1 to 64 of `A-Z a-z 0-9 _ . -`; a value is
//! printable, at most 256 bytes; a run has at most 32 labels. A value
//! is stored and shown with any password it holds masked, as every text
//! from the user is ([`crate::secret::redact`]).

use super::{RunId, Store};
use anyhow::Context;
use rusqlite::params;
use std::collections::BTreeMap;

/// A run's labels, by key.
pub(crate) type Labels = BTreeMap<String, String>;

/// The most labels one run carries.
pub(crate) const MAX_LABELS: usize = 32;
/// The longest key, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 64;
/// The longest value, in bytes.
pub(crate) const MAX_VALUE_BYTES: usize = 256;

/// Parses one `KEY=VALUE`, the value's secrets masked; why not otherwise.
pub(crate) fn parse_label(text: &str) -> Result<(String, String), String> {
    let shown = crate::util::printable(&crate::secret::redact(text)).into_owned();
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{shown}' is not KEY=VALUE"))?;
    let key_ok = (1..=MAX_KEY_BYTES).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !key_ok {
        return Err(format!(
            "'{}' is not a label key (1 to {MAX_KEY_BYTES} of A-Z a-z 0-9 _ . -)",
            crate::util::printable(key)
        ));
    }
    if value.len() > MAX_VALUE_BYTES {
        return Err(format!(
            "the value of {key} is {} bytes, more than {MAX_VALUE_BYTES}",
            value.len()
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "the value of {key} holds a control character; give printable text"
        ));
    }
    Ok((key.to_string(), crate::secret::redact(value)))
}

/// Parses every `--label KEY=VALUE`: each key once, at most
/// [`MAX_LABELS`].
pub(crate) fn parse_labels(given: &[String]) -> Result<Labels, String> {
    if given.len() > MAX_LABELS {
        return Err(format!(
            "{} labels are given, more than {MAX_LABELS}",
            given.len()
        ));
    }
    let mut out = Labels::new();
    for text in given {
        let (key, value) = parse_label(text)?;
        if out.insert(key.clone(), value).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    Ok(out)
}

/// Labels as shown on one line: `branch=main commit=abc123`.
pub(crate) fn labels_text(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={}", crate::util::printable(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Labels as stored (a JSON object), read leniently: a run stored before
/// labels were, or a damaged field, has none.
pub(super) fn read_labels(stored: Option<&str>) -> Labels {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

impl Store {
    /// Stores run `run`'s labels (none: nothing is written).
    pub(crate) fn save_labels(&mut self, run: RunId, labels: &Labels) -> anyhow::Result<()> {
        if labels.is_empty() {
            return Ok(());
        }
        let text = serde_json::to_string(labels)?;
        let path = self.path.display().to_string();
        self.committed(|conn| {
            conn.execute(
                "UPDATE runs SET labels = ?2 WHERE id = ?1",
                params![run, text],
            )
            .with_context(|| format!("cannot write to the results store {path}"))?;
            Ok(())
        })
    }

    /// Run `run`'s labels.
    pub(crate) fn labels(&self, run: RunId) -> anyhow::Result<Labels> {
        let stored: Option<String> =
            self.conn
                .query_row("SELECT labels FROM runs WHERE id = ?1", [run], |r| r.get(0))?;
        Ok(read_labels(stored.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_and_bad_ones_say_why() {
        let given = ["commit=abc123".to_string(), "branch=main".to_string()];
        let labels = parse_labels(&given).unwrap();
        assert_eq!(labels_text(&labels), "branch=main commit=abc123");
        let (_, v) = parse_label("db=postgres://app:hunter2@127.0.0.1/x").unwrap();
        assert!(!v.contains("hunter2"), "{v}");
        for (bad, why) in [
            ("commit", "not KEY=VALUE"),
            ("=x", "not a label key"),
            ("a b=x", "not a label key"),
            (&format!("{}=x", "k".repeat(65)), "not a label key"),
            (&format!("k={}", "v".repeat(257)), "more than 256"),
            ("k=a\u{7}b", "control character"),
        ] {
            let e = parse_labels(&[bad.to_string()]).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = parse_labels(&["k=1".to_string(), "k=2".to_string()]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(parse_labels(&many).unwrap_err().contains("more than 32"));
        let e = parse_label("url=postgres://u:s3cret@h/db x").map(|_| ());
        assert!(e.is_ok());
        let e = parse_label("bad key=postgres://u:s3cret@h/db").unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
