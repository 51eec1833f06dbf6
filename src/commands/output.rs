//! Where a command's [`Document`] goes: standard output, a file named by
//! a flag (`-` meaning standard output), or a directory of files. The
//! bytes are the writer's; nothing is added here.

use crate::error::PlanError;
use crate::report::{render, Document, Format, Output};
use anyhow::Context;
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

/// Writes `output` as text to standard output, or, with `--json FILE`,
/// as JSON to that file and says so (`wrote WHAT to FILE`).
pub(super) fn text_or_json(
    output: &Output<'_>,
    json: Option<&Path>,
    what: &str,
) -> anyhow::Result<()> {
    let Some(file) = json else {
        write(output, Format::Text, Destination::Stdout)?;
        return Ok(());
    };
    let to = Destination::File {
        path: file,
        flag: "--json",
    };
    if write(output, Format::Json, to).with_context(|| format!("writing {what}"))? {
        crate::util::out(format_args!("wrote {what} to {}\n", file.display()));
    }
    Ok(())
}

/// Writes `output` in `format` to `to`. True when a file was written
/// (the command then says where); false when the text went to standard
/// output (`-`).
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
            save(path, &text, flag, Readers::Umask).map(|saved| saved == Saved::File)
        }
        (Document::Files(_), Destination::Dir { path, flag }) if is_stdout(path) => {
            Err(PlanError::flag(
                flag,
                format!(
                    "{} in {} is several files: standard output (-) cannot hold them apart",
                    output.name(),
                    format.name()
                ),
                "give a directory",
            )
            .into())
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
                save(&path.join(name), &text, flag, Readers::Umask)?;
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

/// Whether an output flag's path means standard output.
pub(super) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Who may read a file an output flag makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readers {
    /// Whoever the user's umask lets (reports); a file replaced keeps
    /// its mode.
    Umask,
    /// Its owner alone, mode 0600 (manifests holding a token and a key).
    Owner,
}

/// Where [`save`] put the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Saved {
    /// Standard output: the path was `-`.
    Stdout,
    /// The file the path names, or what its link, device or pipe leads to.
    File,
}

/// How the bytes reach a path, by what is there now.
#[derive(Debug, PartialEq, Eq)]
enum Sink {
    /// `-`.
    Stdout,
    /// A regular file or nothing: a temporary beside it, renamed over it.
    Replace,
    /// A symbolic link, a character device (`/dev/null`, a terminal) or a
    /// FIFO: opened and written, never replaced; `create` when a dangling
    /// link makes its target, `file` when what is written is a regular
    /// file (truncated, and its mode set for [`Readers::Owner`]).
    Through { create: bool, file: bool },
}

/// Saves `text` at `path`, the value of `flag`, the one way every output
/// flag writes. `-` is standard output. A regular file (or a new path) is
/// written through a temporary file in the same directory, renamed over
/// it once whole: a reader never sees half a report, and a failed write
/// leaves what was there. A symbolic link, a character device or a FIFO
/// is opened and written, never replaced (`--json /dev/stdout` writes to
/// standard output; a link stays a link and its target gets the bytes);
/// opening a FIFO waits for its reader, as a shell's `>` does.
/// A database (the results store, its journal, any SQLite file — through
/// a link too), a directory, a block device or a socket is refused, as
/// is a path that cannot be written: bad input naming `flag`.
pub(super) fn save(path: &Path, text: &str, flag: &str, readers: Readers) -> anyhow::Result<Saved> {
    use std::io::Write;
    let cannot = |e: std::io::Error| -> anyhow::Error {
        PlanError::new(format!(
            "cannot write {}: {e}; give {flag} a writable path",
            path.display()
        ))
        .into()
    };
    // No file perflab writes holds a terminal's escape sequence either
    // (`cat report.md`): text from outside reaches it made printable.
    let text = crate::util::printable(text);
    let sink = sink(path, flag)?;
    // A file is whole or untouched, even when a signal ends the command.
    let _hold = matches!(sink, Sink::Replace | Sink::Through { file: true, .. })
        .then(crate::util::writing_file);
    match sink {
        Sink::Stdout => {
            crate::util::out(format_args!("{text}"));
            Ok(Saved::Stdout)
        }
        Sink::Through { create, file } => {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let mut target = std::fs::OpenOptions::new()
                .write(true)
                .create(create)
                .truncate(file)
                .mode(mode(readers))
                .open(path)
                .map_err(cannot)?;
            if file && readers == Readers::Owner {
                target
                    .set_permissions(std::fs::Permissions::from_mode(0o600))
                    .map_err(cannot)?;
            }
            target
                .write_all(text.as_bytes())
                .and_then(|()| target.flush())
                .map_err(cannot)?;
            Ok(Saved::File)
        }
        Sink::Replace => {
            use std::os::unix::fs::PermissionsExt;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let mut file = tempfile::Builder::new()
                .permissions(std::fs::Permissions::from_mode(mode(readers)))
                .tempfile_in(dir)
                .map_err(cannot)?;
            // A report replacing a file keeps the mode the user gave it.
            if let (Readers::Umask, Ok(old)) = (readers, std::fs::metadata(path)) {
                file.as_file()
                    .set_permissions(old.permissions())
                    .map_err(cannot)?;
            }
            file.write_all(text.as_bytes())
                .and_then(|()| file.flush())
                .map_err(cannot)?;
            file.persist(path).map_err(|e| cannot(e.error))?;
            Ok(Saved::File)
        }
    }
}

/// The mode a new file is made with (the umask then applies).
fn mode(readers: Readers) -> u32 {
    match readers {
        Readers::Umask => 0o666,
        Readers::Owner => 0o600,
    }
}

/// How `path` is written, from what is there; what must not be written
/// is refused here, naming `flag`.
fn sink(path: &Path, flag: &str) -> Result<Sink, PlanError> {
    use std::os::unix::fs::FileTypeExt;
    if is_stdout(path) {
        return Ok(Sink::Stdout);
    }
    let refuse = |what: &str| {
        PlanError::new(format!(
            "{} is {what}: a report written there would destroy it; give {flag} another path",
            path.display()
        ))
    };
    let unreadable = |e: std::io::Error| {
        PlanError::new(format!(
            "cannot write {}: {e}; give {flag} a writable path",
            path.display()
        ))
    };
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m.file_type().is_symlink(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Sink::Replace),
        Err(e) => return Err(unreadable(e)),
    };
    let kind = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        // A link to nothing: its target is made.
        Err(e) if link && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Sink::Through {
                create: true,
                file: true,
            })
        }
        Err(e) => return Err(unreadable(e)),
    };
    if kind.is_dir() {
        return Err(PlanError::new(format!(
            "{} is a directory; give {flag} a file path",
            path.display()
        )));
    }
    if kind.is_block_device() {
        return Err(refuse("a block device"));
    }
    if kind.is_socket() {
        return Err(PlanError::new(format!(
            "{} is a socket, which cannot be written as a file; give {flag} another path",
            path.display()
        )));
    }
    if kind.is_file() {
        if let Some(what) = database_at(path) {
            return Err(refuse(what));
        }
        return Ok(if link {
            Sink::Through {
                create: false,
                file: true,
            }
        } else {
            Sink::Replace
        });
    }
    // A character device or a FIFO.
    Ok(Sink::Through {
        create: false,
        file: false,
    })
}

/// What database `path` (a regular file) holds, if any: a SQLite file
/// (the results store), or a SQLite write-ahead log or rollback journal
/// beside one.
fn database_at(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut head = [0u8; 16];
    // Non-blocking: a FIFO put there since it was looked at does not hang
    // the open.
    let n = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut file| file.read(&mut head))
        .unwrap_or(0);
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
            "run,step,load,interval,phase,start_s,length_s,throughput,throughput_unit,p95_s\n"
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

    /// A node of `kind` (libc's `S_IFCHR`, `S_IFBLK`, `S_IFIFO`) at `path`.
    fn make_node(path: &Path, kind: libc::mode_t, major: u32, minor: u32) {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path");
        // SAFETY: a NUL-terminated path; mknod touches nothing else.
        let made = unsafe { libc::mknod(name.as_ptr(), kind | 0o666, libc::makedev(major, minor)) };
        assert_eq!(
            made,
            0,
            "mknod {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }

    /// What is at `path`, not following a link.
    fn file_type(path: &Path) -> std::fs::FileType {
        std::fs::symlink_metadata(path).expect("there").file_type()
    }

    /// A FIFO is opened and written, its reader gets the text, and it is
    /// still a FIFO after.
    #[test]
    fn a_fifo_is_written_through_and_stays_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("pipe");
        make_node(&fifo, libc::S_IFIFO, 0, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).expect("read"))
        };
        let saved = save(&fifo, "through the pipe\n", "--json", Readers::Umask).expect("saved");
        assert_eq!(saved, Saved::File);
        assert_eq!(reader.join().expect("reader"), "through the pipe\n");
        assert!(file_type(&fifo).is_fifo());
    }

    /// A link stays a link and its target gets the bytes: a file, a
    /// character device (`/dev/null`), or nothing yet (then made).
    #[test]
    fn a_link_stays_a_link_and_its_target_gets_the_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = dir.path().join("real.md");
        std::fs::write(&real, "an older and longer text").expect("old");
        let link = dir.path().join("r.md");
        std::os::unix::fs::symlink(&real, &link).expect("link");
        save(&link, "new", "--md", Readers::Umask).expect("saved");
        assert!(file_type(&link).is_symlink());
        assert_eq!(std::fs::read_to_string(&real).expect("target"), "new");
        // Through a link, a manifest's target is made private too.
        save(&link, "token", "--out", Readers::Owner).expect("saved");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&real)
            .expect("target")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let null = dir.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).expect("link");
        save(&null, "gone", "--json", Readers::Umask).expect("saved");
        assert!(file_type(&null).is_symlink());

        let dangling = dir.path().join("later.md");
        std::os::unix::fs::symlink(dir.path().join("made.md"), &dangling).expect("link");
        save(&dangling, "made", "--md", Readers::Umask).expect("saved");
        assert!(file_type(&dangling).is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.md")).expect("made"),
            "made"
        );
    }

    /// A character device node (here /dev/null's numbers) is written, not
    /// replaced by a file; a block device is refused, never opened.
    #[test]
    fn a_device_is_written_through_or_refused_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let null = dir.path().join("null");
        make_node(&null, libc::S_IFCHR, 1, 3);
        let saved = save(&null, "gone", "--json", Readers::Umask).expect("saved");
        assert_eq!(saved, Saved::File);
        assert!(file_type(&null).is_char_device());

        // A loop device's numbers; the node is refused before any open.
        let disk = dir.path().join("disk");
        make_node(&disk, libc::S_IFBLK, 7, 250);
        let e = save(&disk, "report", "--html", Readers::Umask).expect_err("a disk");
        assert!(e.downcast_ref::<PlanError>().is_some(), "{e:#}");
        let text = format!("{e:#}");
        assert!(
            text.contains("a block device") && text.contains("--html"),
            "{text}"
        );
        assert!(file_type(&disk).is_block_device());

        let e = save(dir.path(), "report", "--md", Readers::Umask).expect_err("a directory");
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
    }

    /// A link to the results store is refused as the store is, and a new
    /// private file is made 0600 whatever the umask.
    #[test]
    fn a_link_to_a_store_is_refused_and_a_private_file_is_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("perflab.db");
        rusqlite::Connection::open(&store)
            .and_then(|db| db.execute_batch("CREATE TABLE runs(id INTEGER);"))
            .expect("a store");
        let before = std::fs::read(&store).expect("store");
        let link = dir.path().join("out.yaml");
        std::os::unix::fs::symlink(&store, &link).expect("link");
        for path in [&store, &link] {
            let e = save(path, "kind: Secret", "--out", Readers::Owner).expect_err("a store");
            assert!(format!("{e:#}").contains("would destroy it"), "{e:#}");
        }
        assert_eq!(std::fs::read(&store).expect("store"), before);

        let private = dir.path().join("m.yaml");
        save(&private, "kind: Secret", "--out", Readers::Owner).expect("saved");
        let mode = std::fs::metadata(&private)
            .expect("made")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A report replacing a file keeps the file's mode.
        let page = dir.path().join("r.html");
        std::fs::write(&page, "old").expect("old");
        std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        save(&page, "new", "--html", Readers::Umask).expect("saved");
        let mode = std::fs::metadata(&page).expect("made").permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
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
