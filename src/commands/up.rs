//! `perflab up`: a database perflab manages, started as a run starts it
//! (its settings, CPUs, memory, link and disk limits, `--log-dir`), held
//! until Ctrl-C or SIGTERM, then stopped and its directory removed
//! (unless `--keep`) — so that a peer tool (pgbench, sysbench) or a script
//! loads the same make of server through the same lifecycle, with nothing
//! left behind. Its URL is printed with any password hidden, and written
//! whole to `--url-file`, a new file only this user can read.

use super::Exit;
use crate::cli::UpArgs;
use crate::error::PlanError;
use crate::sut::managed::flags::{Databases, Family};
use crate::sut::{Opened, Target};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Runs `perflab up`.
pub(crate) fn up(args: &UpArgs) -> anyhow::Result<Exit> {
    let kinds = crate::sut::managed::schemes(Databases::takes);
    let example = kinds.first().copied().unwrap_or("KIND:managed");
    if args.target.target.is_none() {
        return Err(PlanError::flag(
            "--target",
            "perflab up starts the server it names, and none was named",
            &format!("e.g. --target {example}"),
        )
        .into());
    }
    let (target, options) = args.target.validate(example)?;
    if !matches!(target, Target::Managed(_)) {
        return Err(PlanError::flag(
            "--target",
            format!(
                "perflab up starts a server perflab manages, not {}",
                target.redacted()
            ),
            &format!("give {}", crate::sut::in_words(&kinds, "or")),
        )
        .into());
    }
    let url_file = args.url_file.as_deref().map(UrlFile::reserve).transpose()?;
    let (signals, interrupted) = super::StopSignals::register_with_servers()?;
    let opened = Opened::open(&target, &options)?;
    let (url, pid) = opened
        .managed_url()
        .ok_or_else(|| PlanError::new("the managed server has no address"))??;
    if let Some(file) = &url_file {
        file.write(&url)?;
    }
    crate::util::out(format_args!(
        "{}\nup until Ctrl-C or SIGTERM (perflab's pid {})\n",
        crate::secret::redact(&url),
        std::process::id()
    ));
    while !interrupted.load(Ordering::SeqCst) {
        // SAFETY: kill with signal 0 only asks whether the process exists.
        if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
            return Err(PlanError::new(format!(
                "the managed server (pid {pid}) ended by itself; its log is in its directory above, kept with --keep"
            ))
            .into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(opened);
    crate::util::out(format_args!(
        "stopped ({}): the server is stopped, its directory {}\n",
        super::signal_exit(signals.first()).0,
        if args.target.keep { "kept" } else { "removed" }
    ));
    Ok(signals.exit(Exit::Ok))
}

/// `--url-file`: made new before the server starts (so that a path taken
/// is refused before anything runs), written once it answers, removed
/// when perflab ends.
struct UrlFile(PathBuf);

impl UrlFile {
    fn reserve(path: &Path) -> Result<UrlFile, PlanError> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| {
                PlanError::flag(
                    "--url-file",
                    format!("cannot make {}: {e}", path.display()),
                    "give a path where no file is (perflab makes the file, and never overwrites one)",
                )
            })?;
        Ok(UrlFile(path.to_path_buf()))
    }

    fn write(&self, url: &str) -> anyhow::Result<()> {
        let mut file = std::fs::OpenOptions::new().write(true).open(&self.0)?;
        file.write_all(format!("{url}\n").as_bytes())?;
        Ok(file.sync_all()?)
    }
}

impl Drop for UrlFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
