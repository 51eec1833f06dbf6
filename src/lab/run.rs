//! Running a lab's cells: each one a `perflab run` process of this same
//! binary on the lab's store, one after another, marked in the store as it
//! starts and ends with the run it became. A cell whose run fails (a step
//! broke the error limit, the check failed, the server refused a setting)
//! is marked failed and the lab goes on; Ctrl-C or SIGTERM reaches the
//! running cell (which stores what it measured, as any run does), marks it
//! partial, and ends the lab there with every finished cell kept.
//! `perflab lab resume` runs what a stopped or killed lab left.

use super::{Cell, LabFile, LabPlan, LabSpec};
use crate::error::PlanError;
use crate::store::{LabId, NewCell, Store};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How a lab ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabEnd {
    /// Every cell ran (some may have failed).
    Complete { failed: usize },
    /// Ctrl-C or SIGTERM stopped it (the signal's number).
    Interrupted(i32),
    /// A cell's teardown command failed, and the lab stopped after it.
    TeardownFailed,
}

/// Records the lab of `file` and its cells (all pending) in the store at
/// `store_path`, then runs them; `stop` is set by a signal.
pub fn run_lab(
    file: &LabFile,
    plan: &LabPlan,
    store_path: &Path,
    stop: &AtomicBool,
    signal: &AtomicUsize,
) -> anyhow::Result<(LabId, LabEnd)> {
    let mut store = Store::open(store_path)?;
    let spec = LabSpec::of(file, plan);
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
    let lab = store.create_lab(
        &file.name,
        &file.path.display().to_string(),
        &serde_json::to_string(&spec)?,
        &cells,
    )?;
    let end = run_cells(
        &mut store,
        lab,
        &spec,
        &plan.cells,
        plan.cells.len(),
        stop,
        signal,
    )?;
    Ok((lab, end))
}

/// Continues lab `lab` at its first unfinished cell: a cell whose run
/// completed after its lab was killed keeps that run; a cell cut short or
/// never started runs again. Refused while the lab or a cell's run is
/// still going.
pub fn resume_lab(
    store_path: &Path,
    lab: &str,
    stop: &AtomicBool,
    signal: &AtomicUsize,
) -> anyhow::Result<(LabId, LabEnd)> {
    let mut store = Store::open_existing(store_path)?;
    let lab = store.resolve_lab(lab)?;
    let stored = store.load_lab(lab)?;
    let mut spec: LabSpec = serde_json::from_str(&stored.spec)
        .map_err(|e| anyhow::anyhow!("lab {lab} has a spec this perflab cannot read ({e})"))?;
    if spec.name.is_empty() {
        spec.name = stored.name.clone();
    }
    if stored.status == "running" && alive(stored.pid) {
        return Err(PlanError::new(format!(
            "lab {lab} is still running (pid {}); let it finish, or stop it with Ctrl-C, then resume",
            stored.pid
        ))
        .into());
    }
    let mut todo = Vec::new();
    for cell in &stored.cells {
        let position = cell.position;
        match (cell.status.as_str(), cell.pid) {
            ("done" | "failed", _) => continue,
            ("running", Some(pid)) if alive(pid) => {
                return Err(PlanError::new(format!(
                    "cell {} of lab {lab} is still running (pid {pid}); wait for it to end, then resume",
                    position + 1
                ))
                .into())
            }
            ("running", Some(pid)) => {
                // Its lab was killed; its run may have gone on to the end.
                let run = store.run_of_process(pid, 0)?;
                let status = run.map(|r| store.run_status(r)).transpose()?.flatten();
                if status.as_deref() == Some("complete") {
                    store.mark_cell(lab, position, "done", None, run)?;
                    crate::util::out(format_args!(
                        "cell {}: its run {} completed after the lab stopped; kept\n",
                        position + 1,
                        run.unwrap_or_default()
                    ));
                    continue;
                }
            }
            _ => {}
        }
        let args: Vec<String> = serde_json::from_str(&cell.args).map_err(|e| {
            anyhow::anyhow!("cell {} of lab {lab} cannot be read ({e})", position + 1)
        })?;
        todo.push(Cell {
            position,
            variant: cell.variant,
            repetition: cell.repetition,
            args,
            knob_args: Vec::new(),
        });
    }
    // A teardown owed by a cell of a killed lab runs first, once nothing
    // of the lab runs any more: the host is put back before any cell runs
    // on it.
    for cell in stored.cells.iter().filter(|c| c.teardown_owed) {
        let Some(v) = spec.variants.get(cell.variant) else {
            continue;
        };
        let hooks = super::hooks::Hooks::of(
            &spec.name,
            &v.name,
            &v.knobs,
            cell.position,
            cell.repetition,
        );
        let Some(command) = &hooks.teardown else {
            store.owe_teardown(lab, cell.position, false)?;
            continue;
        };
        crate::util::out(format_args!(
            "cell {}: its teardown did not run when the lab stopped; running it now\n",
            cell.position + 1
        ));
        let never = AtomicBool::new(false);
        let ran = super::hooks::run_hook("teardown", command, &hooks.env, &never);
        store.owe_teardown(lab, cell.position, false)?;
        if let Err(e) = ran {
            return Ok((lab, teardown_failed(&mut store, lab, cell.position, &e)?));
        }
    }
    crate::util::out(format_args!(
        "lab {lab}: {} of {} cells to run\n",
        todo.len(),
        stored.cells.len()
    ));
    store.resume_lab(lab)?;
    let end = run_cells(
        &mut store,
        lab,
        &spec,
        &todo,
        stored.cells.len(),
        stop,
        signal,
    )?;
    Ok((lab, end))
}

/// Whether process `pid` is a perflab still running (not a zombie).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `PID (COMM) STATE …`; the name may hold spaces and parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let state = stat[close + 1..].split_whitespace().next();
    pid != 0 && stat[open + 1..close] == *"perflab" && !matches!(state, Some("Z" | "X"))
}

/// Stops the lab after a teardown failed: the host may not be as the lab
/// found it, so no further cell runs on it.
fn teardown_failed(
    store: &mut Store,
    lab: LabId,
    position: usize,
    why: &str,
) -> anyhow::Result<LabEnd> {
    crate::util::err(format_args!(
        "error: cell {}: {why}; the lab stops here, since the host may not be as it found it: undo the setup by hand, then perflab lab resume {lab}\n",
        position + 1
    ));
    store.finish_lab(lab, "partial")?;
    Ok(LabEnd::TeardownFailed)
}

/// Runs `cells` of lab `lab` one by one, then records how the lab ended
/// (every cell of it finished or not).
fn run_cells(
    store: &mut Store,
    lab: LabId,
    spec: &LabSpec,
    cells: &[Cell],
    total: usize,
    stop: &AtomicBool,
    signal: &AtomicUsize,
) -> anyhow::Result<LabEnd> {
    let store_path = store.path().to_path_buf();
    let exe = std::env::current_exe()?;

    let mut failed = 0;
    for cell in cells {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let variant_name = spec
            .variants
            .get(cell.variant)
            .map_or("?", |v| v.name.as_str());
        crate::util::out(format_args!(
            "cell {}/{total}: {variant_name} (repetition {}/{}){}\n",
            cell.position + 1,
            cell.repetition,
            spec.repetitions,
            if cell.knob_args.is_empty() {
                String::new()
            } else {
                format!(": {}", cell.knob_args.join(" "))
            }
        ));
        let hooks = spec.variants.get(cell.variant).map(|v| {
            super::hooks::Hooks::of(
                &spec.name,
                &v.name,
                &v.knobs,
                cell.position,
                cell.repetition,
            )
        });
        let env = hooks.as_ref().map_or(&[][..], |h| &h.env[..]);
        // A teardown runs whatever happened to the cell, Ctrl-C included:
        // it is never stopped, only timed out.
        let never = AtomicBool::new(false);
        let teardown = |store: &mut Store| match hooks.as_ref().and_then(|h| h.teardown.as_ref()) {
            Some(command) => {
                let ran = super::hooks::run_hook("teardown", command, env, &never);
                store
                    .owe_teardown(lab, cell.position, false)
                    .map_err(|e| format!("{e:#}"))?;
                ran
            }
            None => Ok(()),
        };
        // Owed before the setup begins: a lab killed from here on leaves
        // it to `lab resume`.
        if hooks.as_ref().is_some_and(|h| h.teardown.is_some()) {
            store.owe_teardown(lab, cell.position, true)?;
        }
        if let Some(setup) = hooks.as_ref().and_then(|h| h.setup.as_ref()) {
            if let Err(why) = super::hooks::run_hook("setup", setup, env, stop) {
                crate::util::err(format_args!("error: cell {}: {why}\n", cell.position + 1));
                let interrupted = stop.load(Ordering::Relaxed);
                store.mark_cell(
                    lab,
                    cell.position,
                    if interrupted { "partial" } else { "failed" },
                    Some(&why),
                    None,
                )?;
                if let Err(e) = teardown(store) {
                    return teardown_failed(store, lab, cell.position, &e);
                }
                if interrupted {
                    break;
                }
                failed += 1;
                continue;
            }
        }
        let before = store.last_run_id()?;
        // A process group of its own: Ctrl-C at the terminal reaches the
        // lab alone, which passes it on once (a second one would end the
        // run at once, unstored).
        let mut child = Command::new(&exe)
            .process_group(0)
            .arg("run")
            .args(&cell.args)
            .arg("--store")
            .arg(&store_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        store.cell_started(lab, cell.position, pid)?;
        // Its progress lines, shown as they come; the rest of its table is
        // in the store, and the lab's report shows it.
        let progress = child.stdout.take().map(|out| {
            super::hooks::follow_lines(out, |line| {
                let shown = line.starts_with("step ")
                    || line.starts_with("check:")
                    || line.starts_with("stored as run");
                shown && crate::util::out(format_args!("  {line}\n"))
            })
        });
        // Its error lines, passed on; the last one is why a cell failed.
        let errors = child.stderr.take().map(|err| {
            super::hooks::follow_lines(err, |line| crate::util::err(format_args!("{line}\n")))
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
        if let Err(e) = teardown(store) {
            return teardown_failed(store, lab, cell.position, &e);
        }
        match state {
            "partial" => {
                store.finish_lab(lab, "partial")?;
                return Ok(LabEnd::Interrupted(status.code().unwrap_or(130)));
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
        return Ok(LabEnd::Interrupted(code));
    }
    store.finish_lab(lab, "complete")?;
    Ok(LabEnd::Complete { failed })
}
