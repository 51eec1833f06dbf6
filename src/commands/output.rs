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
            print!("{text}");
            Ok(false)
        }
        (Document::Text(text), Destination::File { path, flag }) => {
            if path.as_os_str() == "-" {
                print!("{text}");
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

/// Saves `text` at `path`; a path that cannot be written is bad input
/// naming `flag`.
fn save(path: &Path, text: &str, flag: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).map_err(|e| {
        PlanError::new(format!(
            "cannot write {}: {e}; give {flag} a writable path",
            path.display()
        ))
        .into()
    })
}

/// Prints one part of a stream (`perflab watch`) and flushes it at once.
/// False when the reader went away (`| head`): that ends the stream,
/// quietly.
pub(super) fn stream(output: &Output<'_>, format: Format) -> anyhow::Result<bool> {
    use std::io::Write;
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
    let mut out = std::io::stdout().lock();
    Ok(out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok())
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
