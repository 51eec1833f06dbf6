//! Running a lab's cells: each one a `perflab run` process of this same
//! binary on the lab's store, one after another, marked in the store as it
//! starts and ends with the run it became. A cell whose run fails (a step
//! broke the error limit, the check failed, the server refused a setting)
//! is marked failed and the lab goes on; Ctrl-C or SIGTERM reaches the
//! running cell (which stores what it measured, as any run does), marks it
//! partial, and ends the lab there with every finished cell kept.
//! `perflab lab resume` runs what a stopped or killed lab left.
//!
//! The store keeps each cell's command line as [`crate::secret`] masks
//! it: no password or secret header. A cell that held one is rebuilt for
//! `lab resume` from the lab file (read again, its cells planned again
//! with the stored seed), which must still give the same cells.

use super::hooks::{follow_lines, run_hook, Hooks};
use super::{Cell, LabFile, LabPlan, LabSpec};
use crate::error::PlanError;
use crate::store::{
    CellStatus, LabId, LabStatus, NewCell, RunId, RunStatus, Store, StoredCell, StoredLab,
};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How a lab ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LabEnd {
    /// Every cell ran (some may have failed).
    Complete { failed: usize },
    /// Ctrl-C or SIGTERM stopped it (the signal's number).
    Interrupted(i32),
    /// A cell's teardown command failed, and the lab stopped after it.
    TeardownFailed,
}

/// Records the lab of `file` and its cells (all pending) in the store at
/// `store_path`, then runs them; `stop` is set by a signal.
pub(crate) fn run_lab(
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
                args: serde_json::to_string(&crate::secret::redact_args(&c.args))?,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let lab = store.create_lab(
        &file.name,
        &file.path.display().to_string(),
        &serde_json::to_string(&spec)?,
        &cells,
    )?;
    let runner = Runner::new(&store, lab, &spec, plan.cells.len(), stop, signal)?;
    let end = runner.run_cells(&mut store, &plan.cells)?;
    Ok((lab, end))
}

/// Continues lab `lab` at its first unfinished cell: a cell whose run
/// completed after its lab was killed keeps that run; a cell cut short or
/// never started runs again. Refused while the lab or a cell's run is
/// still going.
pub(crate) fn resume_lab(
    store_path: &Path,
    lab: &str,
    stop: &AtomicBool,
    signal: &AtomicUsize,
) -> anyhow::Result<(LabId, LabEnd)> {
    let mut store = Store::open_existing(store_path)?;
    let lab = store.resolve_lab(lab)?;
    let stored = store.load_lab(lab)?;
    let mut spec = LabSpec::of_stored(&stored)?;
    if spec.name.is_empty() {
        spec.name = stored.name.clone();
    }
    if stored.status == LabStatus::Running && alive(stored.pid) {
        return Err(PlanError::new(format!(
            "lab {lab} is still running (pid {}); let it finish, or stop it with Ctrl-C, then resume",
            stored.pid
        ))
        .into());
    }
    let todo = with_secrets(cells_left(&mut store, &stored)?, &stored, &spec)?;
    if let Some(end) = run_owed_teardowns(&mut store, &stored, &spec)? {
        return Ok((lab, end));
    }
    crate::util::out(format_args!(
        "lab {lab}: {} of {} cells to run\n",
        todo.len(),
        stored.cells.len()
    ));
    store.resume_lab(lab)?;
    let runner = Runner::new(&store, lab, &spec, stored.cells.len(), stop, signal)?;
    let end = runner.run_cells(&mut store, &todo)?;
    Ok((lab, end))
}

/// `todo`'s cells with the secrets the store does not keep put back from
/// the lab file `stored` was read from, planned again with its seed; a
/// cell that held none is kept as stored. Refused when the file is gone
/// or now gives other cells.
fn with_secrets(todo: Vec<Cell>, stored: &StoredLab, spec: &LabSpec) -> anyhow::Result<Vec<Cell>> {
    let needs = |c: &Cell| c.args.iter().any(|a| a.contains(crate::secret::MASK));
    if !todo.iter().any(needs) {
        return Ok(todo);
    }
    let refused = |why: &str| {
        PlanError::new(format!(
            "lab {}: its cells hold a password or secret header, which the store does not keep, and the lab file {} {why}; restore that file (run lab resume from where the lab was started), or run the lab again",
            stored.id, stored.file
        ))
    };
    let file = LabFile::read(Path::new(&stored.file)).map_err(|_| refused("cannot be read"))?;
    let plan = LabPlan::of(&file, spec.seed).map_err(|_| refused("no longer plans"))?;
    todo.into_iter()
        .map(|cell| {
            if !needs(&cell) {
                return Ok(cell);
            }
            let again = plan
                .cells
                .iter()
                .find(|c| c.position == cell.position)
                .filter(|c| crate::secret::redact_args(&c.args) == cell.args)
                .ok_or_else(|| refused("gives other cells now"))?;
            Ok(Cell {
                args: again.args.clone(),
                ..cell
            })
        })
        .collect()
}

/// The cells of `stored` that `lab resume` runs again, in their order;
/// a cell whose run completed after its lab was killed is marked done
/// instead. Refused while a cell's run is still going.
fn cells_left(store: &mut Store, stored: &StoredLab) -> anyhow::Result<Vec<Cell>> {
    let lab = stored.id;
    let mut todo = Vec::new();
    for cell in &stored.cells {
        if cell.status.is_final() || completed_after_its_lab(store, lab, cell)? {
            continue;
        }
        let args: Vec<String> = serde_json::from_str(&cell.args).map_err(|e| {
            anyhow::anyhow!(
                "cell {} of lab {lab} cannot be read ({e})",
                cell.position + 1
            )
        })?;
        todo.push(Cell {
            position: cell.position,
            variant: cell.variant,
            repetition: cell.repetition,
            args,
            knob_args: Vec::new(),
        });
    }
    Ok(todo)
}

/// Whether running cell `cell` of a killed lab went on to complete its
/// run (then marked done, keeping that run); an error while it still runs.
fn completed_after_its_lab(
    store: &mut Store,
    lab: LabId,
    cell: &StoredCell,
) -> anyhow::Result<bool> {
    let (CellStatus::Running, Some(pid)) = (cell.status, cell.pid) else {
        return Ok(false);
    };
    if alive(pid) {
        return Err(PlanError::new(format!(
            "cell {} of lab {lab} is still running (pid {pid}); wait for it to end, then resume",
            cell.position + 1
        ))
        .into());
    }
    let run = store.run_of_process(pid, 0)?;
    let status = run.map(|r| store.run_status(r)).transpose()?.flatten();
    if status != Some(RunStatus::Complete) {
        return Ok(false);
    }
    store.mark_cell(lab, cell.position, CellStatus::Done, None, run)?;
    crate::util::out(format_args!(
        "cell {}: its run {} completed after the lab stopped; kept\n",
        cell.position + 1,
        run.unwrap_or_default()
    ));
    Ok(true)
}

/// Runs the teardowns owed by cells of a killed lab, once nothing of the
/// lab runs any more: the host is put back before any cell runs on it.
/// Gives how the lab ended when one of them failed.
fn run_owed_teardowns(
    store: &mut Store,
    stored: &StoredLab,
    spec: &LabSpec,
) -> anyhow::Result<Option<LabEnd>> {
    let lab = stored.id;
    for cell in stored.cells.iter().filter(|c| c.teardown_owed) {
        let Some(hooks) = spec.hooks(cell.variant, cell.position, cell.repetition) else {
            continue;
        };
        let Some(command) = &hooks.teardown else {
            store.owe_teardown(lab, cell.position, false)?;
            continue;
        };
        crate::util::out(format_args!(
            "cell {}: its teardown did not run when the lab stopped; running it now\n",
            cell.position + 1
        ));
        let never = AtomicBool::new(false);
        let ran = run_hook("teardown", command, &hooks.env, &never);
        store.owe_teardown(lab, cell.position, false)?;
        if let Err(e) = ran {
            return Ok(Some(teardown_failed(store, lab, cell.position, &e)?));
        }
    }
    Ok(None)
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
    store.finish_lab(lab, LabStatus::Partial)?;
    Ok(LabEnd::TeardownFailed)
}

/// What running a lab's cells needs besides its store.
struct Runner<'a> {
    lab: LabId,
    spec: &'a LabSpec,
    /// The lab's number of cells, for the progress lines.
    total: usize,
    /// The store the cells' runs write to (the lab's own).
    store_path: PathBuf,
    /// This binary, run once per cell.
    exe: PathBuf,
    /// Set by Ctrl-C, SIGTERM or SIGHUP.
    stop: &'a AtomicBool,
    /// The number of the first signal that set `stop`.
    signal: &'a AtomicUsize,
}

/// How one cell ended, as the lab's loop needs it.
enum CellEnd {
    /// Its run ended (`Done` or `Failed`); the lab goes on.
    Ran(CellStatus),
    /// A signal came during its setup; the lab stops.
    Stopped,
    /// A signal cut its run short; the lab ends with this exit code.
    Interrupted(i32),
    /// Its teardown failed (already recorded); the lab stops.
    TeardownFailed,
}

/// A cell's `perflab run` process once it ended.
struct CellProcess {
    exit: ExitStatus,
    /// The run it stored, if it got that far.
    run: Option<RunId>,
    /// Its last error line, without `error: `.
    last_error: Option<String>,
}

impl CellProcess {
    /// The cell's status and why, from how its run's process exited.
    fn outcome(&self) -> (CellStatus, Option<String>) {
        let said = |what: &str| match &self.last_error {
            Some(line) => format!("{what}: {line}"),
            None => what.to_string(),
        };
        match self.exit.code() {
            Some(0) => (CellStatus::Done, None),
            Some(1) => (CellStatus::Failed, Some(said("its run failed"))),
            Some(2) => (CellStatus::Failed, Some(said("its run refused to start"))),
            Some(130 | 143) => (CellStatus::Partial, Some("interrupted".to_string())),
            Some(code) => (
                CellStatus::Failed,
                Some(format!("its run ended with exit code {code}")),
            ),
            None => (
                CellStatus::Failed,
                Some(format!("its run was ended by a signal ({})", self.exit)),
            ),
        }
    }
}

impl<'a> Runner<'a> {
    fn new(
        store: &Store,
        lab: LabId,
        spec: &'a LabSpec,
        total: usize,
        stop: &'a AtomicBool,
        signal: &'a AtomicUsize,
    ) -> anyhow::Result<Self> {
        Ok(Runner {
            lab,
            spec,
            total,
            store_path: store.path().to_path_buf(),
            exe: std::env::current_exe()?,
            stop,
            signal,
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Runs `cells` one by one, then records how the lab ended (every
    /// cell of it finished or not).
    fn run_cells(&self, store: &mut Store, cells: &[Cell]) -> anyhow::Result<LabEnd> {
        let mut failed = 0;
        for cell in cells {
            if self.stopped() {
                break;
            }
            match self.run_cell(store, cell)? {
                CellEnd::Ran(CellStatus::Failed) => failed += 1,
                CellEnd::Ran(_) => {}
                CellEnd::Stopped => break,
                CellEnd::Interrupted(code) => {
                    store.finish_lab(self.lab, LabStatus::Partial)?;
                    return Ok(LabEnd::Interrupted(code));
                }
                CellEnd::TeardownFailed => return Ok(LabEnd::TeardownFailed),
            }
        }
        if self.stopped() {
            store.finish_lab(self.lab, LabStatus::Partial)?;
            let number = self.signal.load(Ordering::Relaxed);
            // SIGHUP (a closed terminal) is treated as SIGTERM.
            let code = if [libc::SIGTERM, libc::SIGHUP].contains(&(number as libc::c_int)) {
                143
            } else {
                130
            };
            return Ok(LabEnd::Interrupted(code));
        }
        store.finish_lab(self.lab, LabStatus::Complete)?;
        Ok(LabEnd::Complete { failed })
    }

    /// Runs one cell: its setup, its run, its teardown, each marked in the
    /// store.
    fn run_cell(&self, store: &mut Store, cell: &Cell) -> anyhow::Result<CellEnd> {
        self.announce(cell);
        let hooks = self
            .spec
            .hooks(cell.variant, cell.position, cell.repetition);
        // Owed before the setup begins: a lab killed from here on leaves
        // it to `lab resume`.
        if hooks.as_ref().is_some_and(|h| h.teardown.is_some()) {
            store.owe_teardown(self.lab, cell.position, true)?;
        }
        if let Err(why) = self.setup(hooks.as_ref()) {
            crate::util::err(format_args!("error: cell {}: {why}\n", cell.position + 1));
            let interrupted = self.stopped();
            let status = if interrupted {
                CellStatus::Partial
            } else {
                CellStatus::Failed
            };
            store.mark_cell(self.lab, cell.position, status, Some(&why), None)?;
            if let Err(e) = self.teardown(store, cell, hooks.as_ref()) {
                teardown_failed(store, self.lab, cell.position, &e)?;
                return Ok(CellEnd::TeardownFailed);
            }
            return Ok(if interrupted {
                CellEnd::Stopped
            } else {
                CellEnd::Ran(CellStatus::Failed)
            });
        }
        let process = self.run_process(store, cell)?;
        let (status, reason) = process.outcome();
        store.mark_cell(
            self.lab,
            cell.position,
            status,
            reason.as_deref(),
            process.run,
        )?;
        if let Err(e) = self.teardown(store, cell, hooks.as_ref()) {
            teardown_failed(store, self.lab, cell.position, &e)?;
            return Ok(CellEnd::TeardownFailed);
        }
        Ok(match status {
            CellStatus::Partial => CellEnd::Interrupted(process.exit.code().unwrap_or(130)),
            status => CellEnd::Ran(status),
        })
    }

    /// The cell's progress line: which variant, which repetition, its knobs.
    fn announce(&self, cell: &Cell) {
        let variant_name = self
            .spec
            .variants
            .get(cell.variant)
            .map_or("?", |v| v.name.as_str());
        crate::util::out(format_args!(
            "cell {}/{}: {variant_name} (repetition {}/{}){}\n",
            cell.position + 1,
            self.total,
            cell.repetition,
            self.spec.repetitions,
            if cell.knob_args.is_empty() {
                String::new()
            } else {
                format!(": {}", cell.knob_args.join(" "))
            }
        ));
    }

    /// Runs the cell's setup command, if it has one; a signal stops it.
    fn setup(&self, hooks: Option<&Hooks>) -> Result<(), String> {
        let Some(hooks) = hooks else { return Ok(()) };
        match &hooks.setup {
            Some(setup) => run_hook("setup", setup, &hooks.env, self.stop),
            None => Ok(()),
        }
    }

    /// Runs the cell's teardown command, if it has one, and records it no
    /// longer owed. It runs whatever happened to the cell, Ctrl-C
    /// included: it is never stopped, only timed out.
    fn teardown(
        &self,
        store: &mut Store,
        cell: &Cell,
        hooks: Option<&Hooks>,
    ) -> Result<(), String> {
        let Some((hooks, command)) = hooks.and_then(|h| Some((h, h.teardown.as_ref()?))) else {
            return Ok(());
        };
        let never = AtomicBool::new(false);
        let ran = run_hook("teardown", command, &hooks.env, &never);
        store
            .owe_teardown(self.lab, cell.position, false)
            .map_err(|e| format!("{e:#}"))?;
        ran
    }

    /// Runs the cell's `perflab run` process to its end, showing its
    /// progress lines and passing on its errors and a signal that stops
    /// the lab.
    fn run_process(&self, store: &mut Store, cell: &Cell) -> anyhow::Result<CellProcess> {
        let before = store.last_run_id()?;
        let mut child = self.spawn(cell)?;
        let pid = child.id();
        store.cell_started(self.lab, cell.position, pid)?;
        // Its progress lines, shown as they come; the rest of its table is
        // in the store, and the lab's report shows it.
        let progress = child.stdout.take().map(|out| {
            follow_lines(out, |line| {
                let shown = line.starts_with("step ")
                    || line.starts_with("check:")
                    || line.starts_with("stored as run");
                shown && crate::util::out(format_args!("  {line}\n"))
            })
        });
        // Its error lines, passed on; the last one is why a cell failed.
        let errors = child
            .stderr
            .take()
            .map(|err| follow_lines(err, |line| crate::util::err(format_args!("{line}\n"))));
        let exit = self.wait(&mut child)?;
        if let Some(progress) = progress {
            let _ = progress.join();
        }
        let last_error = errors
            .and_then(|e| e.join().ok().flatten())
            .map(|line| line.trim().trim_start_matches("error: ").to_string());
        Ok(CellProcess {
            exit,
            run: store.run_of_process(pid, before)?,
            last_error,
        })
    }

    /// Starts the cell's `perflab run` on the lab's store.
    fn spawn(&self, cell: &Cell) -> std::io::Result<Child> {
        self.command(cell)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    }

    /// The cell's `perflab run`: its command line redacted, as every user
    /// of the host may read it, the whole line in its environment.
    fn command(&self, cell: &Cell) -> Command {
        let mut whole = vec!["run".to_string()];
        whole.extend(cell.args.iter().cloned());
        let visible = crate::secret::redact_args(&whole);
        let mut command = Command::new(&self.exe);
        // A process group of its own: Ctrl-C at the terminal reaches the
        // lab alone, which passes it on once (a second one would end the
        // run at once, unstored).
        command.process_group(0).args(&visible);
        if visible != whole {
            let given = serde_json::to_string(&whole).unwrap_or_default();
            command.env(crate::secret::CELL_ARGS_ENV, given);
        }
        command.arg("--store").arg(&self.store_path);
        command
    }

    /// Waits for the cell's process, passing on once the signal that
    /// stopped the lab.
    fn wait(&self, child: &mut Child) -> std::io::Result<ExitStatus> {
        let mut forwarded = false;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if self.stopped() && !forwarded {
                // SIGHUP is passed on as what it stands for here: SIGTERM.
                let number = match self.signal.load(Ordering::Relaxed) as libc::c_int {
                    0 => libc::SIGINT,
                    libc::SIGHUP => libc::SIGTERM,
                    n => n,
                };
                // SAFETY: signalling the child this lab started, by its PID.
                unsafe { libc::kill(child.id() as libc::pid_t, number) };
                forwarded = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A lab's cells stored masked are rebuilt for `lab resume` with the
    /// password of its file; a file that now names another target is
    /// refused in one line, never run with the mask.
    #[test]
    fn a_resumed_cell_gets_its_password_back_from_the_lab_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.toml");
        let text = |host: &str| {
            format!("workload = \"bank\"\ntarget = \"postgres://u:SECRETPW@{host}:1/db\"\nargs = \"--users 1\"\n[vary]\n\"var.x\" = [\"a\", \"b\"]\n")
        };
        std::fs::write(&path, text("127.0.0.1")).unwrap();
        let file = LabFile::read(&path).unwrap();
        let plan = LabPlan::of(&file, 7).unwrap();
        let spec = LabSpec::of(&file, &plan);
        assert_eq!(
            spec.target.as_deref(),
            Some("postgres://u:***@127.0.0.1:1/db")
        );
        let stored_cells: Vec<Cell> = plan
            .cells
            .iter()
            .map(|c| Cell {
                args: crate::secret::redact_args(&c.args),
                ..c.clone()
            })
            .collect();
        assert!(stored_cells
            .iter()
            .all(|c| !c.args.join(" ").contains("SECRETPW")));
        let stored = StoredLab {
            id: 1,
            name: "lab".into(),
            file: path.display().to_string(),
            started_at: String::new(),
            status: LabStatus::Partial,
            pid: 0,
            spec: String::new(),
            cells: Vec::new(),
        };
        let again = with_secrets(stored_cells.clone(), &stored, &spec).unwrap();
        for (cell, planned) in again.iter().zip(&plan.cells) {
            assert_eq!(cell.args, planned.args);
        }
        std::fs::write(&path, text("127.0.0.2")).unwrap();
        let e = with_secrets(stored_cells, &stored, &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gives other cells now"), "{e}");
        assert!(!e.contains("SECRETPW"), "{e}");
    }

    /// A cell's process shows every user of the host its command line
    /// (`/proc/PID/cmdline`): it holds no password, its environment does,
    /// and the cell reads its whole line back from there.
    #[test]
    fn a_cells_command_line_holds_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.toml");
        std::fs::write(
            &path,
            "workload = \"bank\"\ntarget = \"postgres://u:SECRETPW@127.0.0.1:1/db\"\nargs = [\"--users\", \"1\", \"--probe\", \"node-exporter://SECRETPW@127.0.0.1:1\"]\n[vary]\n\"var.x\" = [\"a\"]\n",
        )
        .unwrap();
        let file = LabFile::read(&path).unwrap();
        let plan = LabPlan::of(&file, 7).unwrap();
        let spec = LabSpec::of(&file, &plan);
        let (stop, signal) = (AtomicBool::new(false), AtomicUsize::new(0));
        let runner = Runner {
            lab: 1,
            spec: &spec,
            total: 1,
            store_path: dir.path().join("perflab.db"),
            exe: PathBuf::from("perflab"),
            stop: &stop,
            signal: &signal,
        };
        let cell = &plan.cells[0];
        assert!(cell.args.join(" ").contains("SECRETPW"));
        let command = runner.command(cell);
        let visible: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!visible.join(" ").contains("SECRETPW"), "{visible:?}");
        assert_eq!(
            visible.last().map(String::as_str),
            Some(runner.store_path.to_str().unwrap())
        );
        let given = command
            .get_envs()
            .find(|(name, _)| *name == crate::secret::CELL_ARGS_ENV)
            .and_then(|(_, value)| value)
            .map(|v| v.to_string_lossy().into_owned())
            .expect("the whole line is in the environment");
        let whole = crate::secret::cell_args(&visible, &given).expect("it stands for this line");
        assert_eq!(whole[0], "run");
        assert_eq!(whole[1..], cell.args[..]);
    }

    /// A cell process that exited with `code` (or was killed by `signal`).
    fn ended(code: Option<i32>, signal: i32, last_error: Option<&str>) -> CellProcess {
        CellProcess {
            exit: match code {
                Some(code) => ExitStatus::from_raw(code << 8),
                None => ExitStatus::from_raw(signal),
            },
            run: None,
            last_error: last_error.map(str::to_string),
        }
    }

    #[test]
    fn a_cell_is_marked_by_how_its_run_exited() {
        let cases = [
            (Some(0), None, CellStatus::Done, None),
            (
                Some(1),
                Some("the check failed"),
                CellStatus::Failed,
                Some("its run failed: the check failed"),
            ),
            (
                Some(2),
                None,
                CellStatus::Failed,
                Some("its run refused to start"),
            ),
            (Some(130), None, CellStatus::Partial, Some("interrupted")),
            (Some(143), None, CellStatus::Partial, Some("interrupted")),
            (
                Some(7),
                None,
                CellStatus::Failed,
                Some("its run ended with exit code 7"),
            ),
        ];
        for (code, said, status, reason) in cases {
            let (got, why) = ended(code, 0, said).outcome();
            assert_eq!((got, why.as_deref()), (status, reason), "exit {code:?}");
        }
        let (got, why) = ended(None, libc::SIGKILL, None).outcome();
        assert_eq!(got, CellStatus::Failed);
        assert!(why.is_some_and(|w| w.starts_with("its run was ended by a signal")));
    }
}
