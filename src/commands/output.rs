//! Where a command's [`Document`] goes: standard output, a file named by
//! a flag (`-` meaning standard output), or a directory of files. The
//! bytes are the writer's; nothing is added here.

use crate::error::PlanError;
use crate::report::{render, Document, Format, Output};
use std::path::Path;

/// Where to write.
pub(super) enum Destination<'a> {
    /// Standard output.
    Stdout,
    /// A file, or standard output when the path is `-`; `flag` names it
    /// in errors.
    File { path: &'a Path, flag: &'static str },
    /// A directory, made when missing, one file per part.
    Dir { path: &'a Path, flag: &'static str },
}

/// Writes `output` in `format` to `to`. True when a file was written
/// (the command then says where).
pub(super) fn write(
    output: &Output<'_>,
    format: Format,
    to: Destination<'_>,
) -> anyhow::Result<bool> {
    let document = render(format, output)?;
    match (document, to) {
        (Document::Text(text), Destination::Stdout) => {
            crate::util::out(format_args!("{}", crate::util::printable(&text)));
            Ok(false)
        }
        (Document::Text(text), Destination::File { path, flag }) => {
            if path.as_os_str() == "-" {
                crate::util::out(format_args!("{}", crate::util::printable(&text)));
                return Ok(false);
            }
            save(path, &text, flag).map(|()| true)
        }
        (Document::Files(files), Destination::Dir { path, flag }) => {
            std::fs::create_dir_all(path).map_err(|e| {
                PlanError::flag(
                    flag,
                    format!("cannot make {}: {e}", path.display()),
                    "give a writable directory",
                )
            })?;
            for (name, text) in files {
                save(&path.join(name), &text, flag)?;
            }
            Ok(true)
        }
        (Document::Files(_), _) => Err(anyhow::anyhow!(
            "{} in {} is several files: it needs a directory",
            output.name(),
            format.name()
        )),
        (Document::Text(_), Destination::Dir { .. }) => Err(anyhow::anyhow!(
            "{} in {} is one text: it needs a file, not a directory",
            output.name(),
            format.name()
        )),
    }
}

/// Saves `text` at `path` through a temporary file in the same directory,
/// renamed over it once whole: a reader never sees half a report, and a
/// failed write leaves what was there. A path that cannot be written, or
/// that holds a database (the results store, its journal, any SQLite
/// file), is bad input naming `flag`.
pub(super) fn save(path: &Path, text: &str, flag: &str) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(what) = database_at(path) {
        return Err(PlanError::new(format!(
            "{} is {what}: a report written there would destroy it; give {flag} another path",
            path.display()
        ))
        .into());
    }
    let cannot = |e: std::io::Error| -> anyhow::Error {
        PlanError::new(format!(
            "cannot write {}: {e}; give {flag} a writable path",
            path.display()
        ))
        .into()
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(cannot)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(cannot)?;
    file.persist(path).map_err(|e| cannot(e.error))?;
    Ok(())
}

/// What database `path` holds, if any: a SQLite file (the results store),
/// or a SQLite write-ahead log or rollback journal beside one.
fn database_at(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 16];
    let mut file = std::fs::File::open(path).ok()?;
    let n = file.read(&mut head).ok()?;
    let head = &head[..n];
    if head.starts_with(crate::store::SQLITE_MAGIC) {
        return Some("a SQLite database (a results store?)");
    }
    // The WAL's magic number, big-endian, either checksum order.
    if head.starts_with(&[0x37, 0x7f, 0x06, 0x82]) || head.starts_with(&[0x37, 0x7f, 0x06, 0x83]) {
        return Some("a SQLite write-ahead log");
    }
    let name = path.file_name()?.to_string_lossy();
    (name.ends_with("-journal") || name.ends_with("-wal") || name.ends_with("-shm"))
        .then_some("a SQLite journal")
}

/// Prints one part of a stream (`perflab watch`) and flushes it at once.
/// False when the reader went away (`| head`): that ends the stream,
/// quietly.
pub(super) fn stream(output: &Output<'_>, format: Format) -> anyhow::Result<bool> {
    let text = match render(format, output)? {
        Document::Text(text) => text,
        Document::Files(_) => {
            return Err(anyhow::anyhow!(
                "{} in {} is several files: it cannot be streamed",
                output.name(),
                format.name()
            ))
        }
    };
    Ok(crate::util::out(format_args!(
        "{}",
        crate::util::printable(&text)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty report: its CSV is two files of headers only.
    fn empty_report() -> Output<'static> {
        Output::Report {
            runs: &[],
            comparison: None,
        }
    }

    #[test]
    fn a_file_holds_exactly_the_writer_s_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("r.md");
        let to = Destination::File {
            path: &path,
            flag: "--md",
        };
        assert!(write(&empty_report(), Format::Markdown, to).expect("written"));
        let saved = std::fs::read_to_string(&path).expect("saved");
        let Document::Text(made) = render(Format::Markdown, &empty_report()).expect("made") else {
            panic!("Markdown is one text");
        };
        assert_eq!(saved, made);
        assert_eq!(saved, "# perflab report: run \n");
    }

    #[test]
    fn csv_goes_into_a_directory_made_for_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let csv = dir.path().join("a/b");
        let to = Destination::Dir {
            path: &csv,
            flag: "--csv",
        };
        assert!(write(&empty_report(), Format::Csv, to).expect("written"));
        let steps = std::fs::read_to_string(csv.join("steps.csv")).expect("steps.csv");
        assert!(
            steps.starts_with("run,step,load_kind,load,status,"),
            "{steps}"
        );
        let intervals = std::fs::read_to_string(csv.join("intervals.csv")).expect("intervals");
        assert_eq!(
            intervals,
            "run,step,load,interval,phase,start_s,length_s,throughput,p95_s\n"
        );
    }

    #[test]
    fn a_path_that_cannot_be_written_is_bad_input_naming_the_flag() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("missing/r.html");
        let to = Destination::File {
            path: &path,
            flag: "--html",
        };
        let e = write(&empty_report(), Format::Html, to).expect_err("no such directory");
        assert!(e.downcast_ref::<PlanError>().is_some(), "{e:#}");
        assert!(
            format!("{e:#}").contains("give --html a writable path"),
            "{e:#}"
        );
    }

    /// A report aimed at the results store (or any SQLite file, or its
    /// log) is refused, and the store is left whole.
    #[test]
    fn a_report_is_never_written_onto_a_database() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("perflab.db");
        {
            let db = rusqlite::Connection::open(&store).expect("store");
            db.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE runs(id INTEGER); INSERT INTO runs VALUES (1);")
                .expect("a table");
            // Open while the report is tried: the WAL file exists too.
            for (path, flag) in [
                (store.clone(), "--html"),
                (dir.path().join("perflab.db-wal"), "--md"),
            ] {
                let before = std::fs::read(&path).expect("there");
                let to = Destination::File { path: &path, flag };
                let e = write(&empty_report(), Format::Html, to).expect_err("a database");
                assert!(e.downcast_ref::<PlanError>().is_some(), "{e:#}");
                let text = format!("{e:#}");
                assert!(
                    text.contains("would destroy it") && text.contains(flag),
                    "{text}"
                );
                assert_eq!(std::fs::read(&path).expect("still there"), before);
            }
        }
        let db = rusqlite::Connection::open(&store).expect("store");
        let n: i64 = db
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .expect("runs");
        assert_eq!(n, 1);
        // An ordinary file is replaced whole, and no temporary is left.
        let page = dir.path().join("r.html");
        std::fs::write(&page, "old").expect("old report");
        let to = Destination::File {
            path: &page,
            flag: "--html",
        };
        assert!(write(&empty_report(), Format::Html, to).expect("written"));
        assert!(std::fs::read_to_string(&page)
            .expect("new")
            .contains("<html"));
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.iter()
                .all(|n| !n.to_string_lossy().starts_with(".tmp")),
            "{left:?}"
        );
    }

    #[test]
    fn files_and_texts_go_only_where_they_fit() {
        let e = write(&empty_report(), Format::Csv, Destination::Stdout).expect_err("files");
        assert!(e.to_string().contains("needs a directory"), "{e}");
        let dir = tempfile::tempdir().expect("temp dir");
        let to = Destination::Dir {
            path: dir.path(),
            flag: "--md",
        };
        let e = write(&empty_report(), Format::Markdown, to).expect_err("one text");
        assert!(e.to_string().contains("needs a file"), "{e}");
    }
}
