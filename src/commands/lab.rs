//! `perflab lab FILE.toml`: check the whole lab file before anything is
//! made, print its cells (`--dry-run` stops there), run them, and print
//! the matrix; `perflab lab report LAB` prints a stored lab's matrix again;
//! `perflab lab cleanup` removes what killed runs' managed servers left.

use super::output::{save, Readers, Saved};
use super::Exit;
use crate::cli::{LabArgs, LabAskArgs, LabCommand, LabReportArgs, LabResumeArgs};
use crate::error::PlanError;
use crate::lab::capacity::Ask;
use crate::lab::run::{resume_lab, run_lab, LabEnd};
use crate::lab::{report, LabFile, LabPlan};
use crate::store::Store;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// Runs `perflab lab`.
pub(crate) fn lab(args: &LabArgs) -> anyhow::Result<Exit> {
    match &args.command {
        Some(LabCommand::Report(report_args)) => return lab_report(report_args),
        Some(LabCommand::Resume(resume_args)) => return lab_resume(resume_args),
        Some(LabCommand::Cleanup) => return lab_cleanup(),
        None => {}
    }
    let ask = ask_of(&args.ask)?;
    let Some(path) = &args.file else {
        return Err(
            PlanError::new("perflab lab needs a lab file; e.g. perflab lab lab.toml").into(),
        );
    };
    let file = LabFile::read(path).map_err(|e| PlanError::new(e.to_string()))?;
    let plan = LabPlan::of(&file, rand::random()).map_err(|e| PlanError::new(e.to_string()))?;
    crate::util::out(format_args!(
        "lab {}: {} on {}, {} variant(s) × {} repetition(s) = {} cells in a seeded order (seed {})\n",
        file.name,
        file.workload,
        file.target.as_deref().map_or("-".to_string(), crate::secret::redact),
        file.variants.len(),
        file.repetitions,
        plan.cells.len(),
        plan.seed
    ));
    // Bad input here is found before anything is made.
    let serve = crate::cli::lab_view(args)?;
    if args.dry_run {
        for cell in &plan.cells {
            crate::util::out(format_args!(
                "  cell {}: {} (repetition {}): perflab run {}\n",
                cell.position + 1,
                file.variants[cell.variant].name,
                cell.repetition,
                crate::secret::redact_args(&cell.args).join(" ")
            ));
        }
        return Ok(Exit::Ok);
    }
    let (stop, signal) = signals()?;
    // The lab alone serves: its cells' runs are given no --serve.
    let server = match &serve {
        Some(config) => Some(serve_lab(config, &args.store.store, &ask)?),
        None => None,
    };
    let ran = run_lab(&file, &plan, &args.store.store, &stop, &signal)
        .and_then(|(lab, end)| finish(&args.store.store, lab, end, &ask));
    let before_linger = signal.load(std::sync::atomic::Ordering::SeqCst);
    match (server, &ran) {
        // The final page (the lab's report) stays for the linger, cut
        // short by Ctrl-C or SIGTERM.
        (Some(server), Ok(_)) => server.finish(&stop),
        // A lab that could not run has no final page: the error is said
        // at once.
        (Some(server), Err(_)) => drop(server),
        (None, _) => {}
    }
    let now = signal.load(std::sync::atomic::Ordering::SeqCst);
    match ran {
        // A signal while the final page was served: its code all the same.
        Ok(_) if before_linger == 0 && now != 0 => {
            let (by, exit) = super::signal_exit(now);
            crate::util::err(format_args!(
                "interrupted ({by}) while the live view served the final page; the lab is stored\n"
            ));
            Ok(exit)
        }
        other => other,
    }
}

/// Serves the lab's live view on `config`: its page and metrics from the
/// store at `store`, each cell's run as `perflab serve` shows it.
fn serve_lab(
    config: &crate::live::ServeConfig,
    store: &std::path::Path,
    ask: &Ask,
) -> anyhow::Result<crate::live::LiveServer> {
    let view = crate::lab::live::LabView::new(store.to_path_buf(), ask.clone());
    let path = store.to_path_buf();
    let runs: crate::live::Pages =
        Arc::new(move |page: &str| super::serve::run_page_in_process(&path, page));
    crate::live::LiveServer::start_with(config, move |serving| {
        crate::lab::live::handler(view, runs, serving)
    })
}

/// The capacity question of `--need` and `--slo`.
fn ask_of(args: &LabAskArgs) -> anyhow::Result<Ask> {
    Ok(Ask {
        need: args.need,
        slos: crate::cli::parse_slos(&args.slo)?,
    })
}

/// `perflab lab cleanup`: exit 1 when a part could not be removed.
fn lab_cleanup() -> anyhow::Result<Exit> {
    Ok(match clean_up(true)? {
        0 => Exit::Ok,
        _ => Exit::Failed,
    })
}

/// Sweeps the ledger of managed servers' parts, a line per part; says so
/// when there was nothing (if `say_none`). Returns how many parts could
/// not be removed.
fn clean_up(say_none: bool) -> anyhow::Result<usize> {
    let swept = crate::sut::managed::ledger::sweep()?;
    if swept.is_empty() && say_none {
        crate::util::out(format_args!(
            "nothing to clean up: no ended perflab left a managed server's parts on this host\n"
        ));
    }
    let mut failed = 0;
    for s in &swept {
        match &s.outcome {
            Ok(()) => {
                crate::util::out(format_args!("removed the {}'s {}\n", s.server, s.part));
            }
            Err(e) => {
                failed += 1;
                crate::util::err(format_args!(
                    "error: cannot remove the {}'s {}: {e}\n",
                    s.server, s.part
                ));
            }
        }
    }
    Ok(failed)
}

/// `perflab lab resume LAB`.
fn lab_resume(args: &LabResumeArgs) -> anyhow::Result<Exit> {
    // What killed cells left goes first, so that the cells resumed start
    // on the host as it was.
    clean_up(false)?;
    let (stop, signal) = signals()?;
    let (lab, end) = resume_lab(&args.store.store, &args.lab, &stop, &signal)?;
    finish(&args.store.store, lab, end, &Ask::default())
}

/// The flag Ctrl-C, SIGTERM and SIGHUP set, and which of them came first.
fn signals() -> anyhow::Result<(Arc<std::sync::atomic::AtomicBool>, Arc<AtomicUsize>)> {
    let stop = crate::util::interrupt_flag();
    let signals = super::StopSignals::register(&stop)?;
    Ok((stop, signals.shared()))
}

/// Prints the lab's matrix and says how the process ends.
fn finish(store: &std::path::Path, lab: i64, end: LabEnd, ask: &Ask) -> anyhow::Result<Exit> {
    let opened = Store::open_read(store)?;
    let stored = opened.load_lab(lab)?;
    crate::util::out(format_args!(
        "\n{}",
        report::summarize(&opened, &stored, ask)?.render()
    ));
    crate::util::out(format_args!(
        "\nstored as lab {lab} in {}: perflab lab report {lab}\n",
        store.display()
    ));
    Ok(match end {
        LabEnd::Complete { failed: 0 } => Exit::Ok,
        LabEnd::Complete { .. } => Exit::Failed,
        LabEnd::Interrupted(143) => Exit::Terminated,
        LabEnd::TeardownFailed => Exit::Failed,
        LabEnd::Interrupted(_) => Exit::Interrupted,
    })
}

/// `perflab lab report LAB`.
fn lab_report(args: &LabReportArgs) -> anyhow::Result<Exit> {
    let ask = ask_of(&args.ask)?;
    let store = Store::open_read(&args.store.store)?;
    let id = store.resolve_lab(&args.lab)?;
    let summary = report::summarize(&store, &store.load_lab(id)?, &ask)?;
    // With --json on standard output, what was written is said on
    // standard error, so that the output stays one JSON document.
    // So is it when a report goes to standard output (`-`).
    let to_stdout = [&args.md, &args.html]
        .iter()
        .any(|p| p.as_deref().is_some_and(super::output::is_stdout));
    let wrote = |path: &std::path::Path, saved: Saved| {
        if saved == Saved::Stdout {
            return;
        }
        if args.json || to_stdout {
            crate::util::err(format_args!("wrote {}\n", path.display()));
        } else {
            crate::util::out(format_args!("wrote {}\n", path.display()));
        }
    };
    if let Some(path) = &args.md {
        wrote(
            path,
            save(path, &summary.markdown(), "--md", Readers::Umask)?,
        );
    }
    if let Some(path) = &args.html {
        wrote(path, save(path, &summary.html(), "--html", Readers::Umask)?);
    }
    if args.json {
        crate::util::out(format_args!(
            "{}\n",
            serde_json::to_string_pretty(&summary)?
        ));
    } else {
        crate::util::out(format_args!("{}", summary.render()));
    }
    Ok(Exit::Ok)
}
