//! The check after a files run: the run's tree against what its users
//! wrote, every file with its size and CRC-32, none missing, none extra,
//! and every read that gave back something else.

use super::user::{self, UserFiles};
use crate::workload::{CheckLine, CheckReport};
use std::collections::HashMap;
use std::path::Path;

/// The run's tree against what its users wrote: every file there with its
/// size and CRC-32, none missing, none extra. Reading a few hundred
/// thousand files back can be long on a slow file system: it stops at
/// Ctrl-C or SIGTERM, and the run is stored unchecked.
pub(super) fn tree_check(
    root: &Path,
    users: &HashMap<u32, UserFiles>,
) -> Result<CheckReport, crate::util::Interrupted> {
    let (mut expected, mut missing, mut altered, mut extra) =
        (0u64, Vec::new(), Vec::new(), Vec::new());
    let mut mismatched_reads = Vec::new();
    for (user, files) in users {
        let dir = root.join(format!("u{user:05}"));
        let mut known: HashMap<String, user::FileRec> = HashMap::new();
        for rec in &files.files {
            known.insert(user::file_name(rec.number), *rec);
        }
        // Cut short by a failed write (counted as its error), and perflab's.
        let partial: std::collections::HashSet<String> =
            files.partial.iter().map(|n| user::file_name(*n)).collect();
        expected += files.files.len() as u64;
        mismatched_reads.extend(files.mismatches.iter().cloned());
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                crate::util::check_interrupt("checking the files the users wrote")?;
                let name = e.file_name().to_string_lossy().into_owned();
                match known.remove(&name) {
                    None if partial.contains(&name) => {}
                    None => extra.push(e.path().display().to_string()),
                    Some(rec) => {
                        // The size first: a file grown behind perflab's back is not read whole.
                        let sized = e.metadata().is_ok_and(|m| m.len() == rec.size);
                        let intact = sized
                            && std::fs::read(e.path())
                                .is_ok_and(|b| crc32fast::hash(&b) == rec.crc);
                        if !intact {
                            altered.push(e.path().display().to_string());
                        }
                    }
                }
            }
        }
        missing.extend(known.keys().map(|n| dir.join(n).display().to_string()));
    }
    let listed = |v: &mut Vec<String>| {
        v.sort();
        let shown: Vec<&str> = v.iter().take(5).map(String::as_str).collect();
        format!(
            "{}{}",
            shown.join(", "),
            if v.len() > 5 { ", …" } else { "" }
        )
    };
    let line = |rule: &str, v: &mut Vec<String>, ok: String| CheckLine {
        rule: rule.to_string(),
        passed: v.is_empty(),
        detail: if v.is_empty() {
            ok
        } else {
            format!("{}: {}", v.len(), listed(v))
        },
    };
    Ok(CheckReport::from_lines(vec![
        line(
            "every file written is there",
            &mut missing,
            format!("{expected} files"),
        ),
        line(
            "every file holds what was written (size and CRC-32)",
            &mut altered,
            "all intact".to_string(),
        ),
        line(
            "no file is there that was not written",
            &mut extra,
            "none".to_string(),
        ),
        line(
            "every read gave back what was written",
            &mut mismatched_reads,
            "all matched".to_string(),
        ),
    ]))
}
