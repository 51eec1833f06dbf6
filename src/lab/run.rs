//! Running a lab's cells: each one a `perflab run` process of this same
//! binary on the lab's store, one after another, marked in the store as it
//! starts and ends with the run it became. A cell whose run fails (a step
//! broke the error limit, the check failed, the server refused a setting)
//! is marked failed and the lab goes on; Ctrl-C or SIGTERM reaches the
//! running cell (which stores what it measured, as any run does), marks it
//! partial, and ends the lab there with every finished cell kept.

use super::{LabFile, LabPlan, LabSpec};
use crate::store::{LabId, NewCell, Store};
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How a lab ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabEnd {
    /// Every cell ran (some may have failed).
    Complete { failed: usize },
    /// Ctrl-C or SIGTERM stopped it (the signal's number).
    Interrupted(i32),
}

/// Runs every cell of `plan` on the store at `store_path`, printing each
/// cell's progress lines; `stop` is set by a signal.
pub fn run_lab(
    file: &LabFile,
    plan: &LabPlan,
    store_path: &Path,
    stop: &AtomicBool,
    signal: &std::sync::atomic::AtomicUsize,
) -> anyhow::Result<(LabId, LabEnd)> {
    let mut store = Store::open(store_path)?;
    let spec = serde_json::to_string(&LabSpec::of(file, plan))?;
    let cells: Vec<NewCell> = plan
        .cells
        .iter()
        .map(|c| {
            Ok(NewCell {
                position: c.position,
                variant: c.variant,
                repetition: c.repetition,
                args: serde_json::to_string(&c.args)?,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let lab = store.create_lab(&file.name, &file.path.display().to_string(), &spec, &cells)?;
    let exe = std::env::current_exe()?;
    let total = plan.cells.len();
    let mut failed = 0;
    for cell in &plan.cells {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let variant = &file.variants[cell.variant];
        crate::util::out(format_args!(
            "cell {}/{total}: {} (repetition {}/{}): {}\n",
            cell.position + 1,
            variant.name,
            cell.repetition,
            file.repetitions,
            cell.knob_args.join(" ")
        ));
        store.mark_cell(lab, cell.position, "running", None, None)?;
        let before = store.last_run_id()?;
        // A process group of its own: Ctrl-C at the terminal reaches the
        // lab alone, which passes it on once (a second one would end the
        // run at once, unstored).
        let mut child = Command::new(&exe)
            .process_group(0)
            .arg("run")
            .args(&cell.args)
            .arg("--store")
            .arg(store_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        // Its progress lines, shown as they come; the rest of its table is
        // in the store, and the lab's report shows it.
        let progress = child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                    if line.starts_with("step ")
                        || line.starts_with("check:")
                        || line.starts_with("stored as run")
                    {
                        crate::util::out(format_args!("  {line}\n"));
                    }
                }
            })
        });
        // Its error lines, passed on; the last one is why a cell failed.
        let errors = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                let mut last = None;
                for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                    crate::util::err(format_args!("{line}\n"));
                    if !line.trim().is_empty() {
                        last = Some(line);
                    }
                }
                last
            })
        });
        let mut forwarded = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if stop.load(Ordering::Relaxed) && !forwarded {
                // The signal that stopped the lab stops the cell.
                let number = signal.load(Ordering::Relaxed).max(libc::SIGINT as usize) as i32;
                // SAFETY: signalling the child this lab started, by its PID.
                unsafe { libc::kill(pid as libc::pid_t, number) };
                forwarded = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(progress) = progress {
            let _ = progress.join();
        }
        let last_error = errors
            .and_then(|e| e.join().ok().flatten())
            .map(|line| line.trim().trim_start_matches("error: ").to_string());
        let run = store.run_of_process(pid, before)?;
        let said = |what: &str| match &last_error {
            Some(line) => format!("{what}: {line}"),
            None => what.to_string(),
        };
        let (state, reason) = match status.code() {
            Some(0) => ("done", None),
            Some(1) => ("failed", Some(said("its run failed"))),
            Some(2) => ("failed", Some(said("its run refused to start"))),
            Some(130 | 143) => ("partial", Some("interrupted".to_string())),
            Some(code) => (
                "failed",
                Some(format!("its run ended with exit code {code}")),
            ),
            None => (
                "failed",
                Some(format!("its run was ended by a signal ({status})")),
            ),
        };
        store.mark_cell(lab, cell.position, state, reason.as_deref(), run)?;
        match state {
            "partial" => {
                store.finish_lab(lab, "partial")?;
                return Ok((lab, LabEnd::Interrupted(status.code().unwrap_or(130))));
            }
            "failed" => failed += 1,
            _ => {}
        }
    }
    if stop.load(Ordering::Relaxed) {
        store.finish_lab(lab, "partial")?;
        let number = signal.load(Ordering::Relaxed);
        let code = if number == libc::SIGTERM as usize {
            143
        } else {
            130
        };
        return Ok((lab, LabEnd::Interrupted(code)));
    }
    store.finish_lab(lab, "complete")?;
    Ok((lab, LabEnd::Complete { failed }))
}
