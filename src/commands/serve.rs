//! `perflab serve`: the stored runs in a browser — a list of them, and
//! each run's page, the same page `report --html` writes — with the live
//! view's access rules and bounds; until Ctrl-C or SIGTERM.

use super::Exit;
use crate::cli::ServeArgs;
use crate::report::svg::escape;
use crate::report::{Format, Output};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs `perflab serve`.
pub(crate) fn serve(args: &ServeArgs) -> anyhow::Result<Exit> {
    let config = crate::cli::store_view(args)?;
    // Refused at once when there is no store to show.
    drop(super::show::existing_store(&args.store.store)?);
    let path = args.store.store.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let signals = super::StopSignals::register(&stop)?;
    let pages: crate::live::Pages = Arc::new(move |page: &str| {
        match page_of(&path, page) {
            Ok(found) => found,
            Err(e) => Some(format!(
                "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>perflab</title></head><body><p>{}</p></body></html>",
                escape(&crate::util::one_line(&format!("{e:#}")))
            )),
        }
    });
    crate::live::serve_store(&config, &stop, pages)?;
    Ok(signals.exit(Exit::Ok))
}

/// The page at `path` of the store at `store`: `/` lists the runs,
/// `/run/N` is run N's report; none for any other path.
fn page_of(store: &Path, path: &str) -> anyhow::Result<Option<String>> {
    let store = super::show::existing_store(&PathBuf::from(store))?;
    if path == "/" {
        return Ok(Some(listing(&store)?));
    }
    let Some(id) = path.strip_prefix("/run/") else {
        return Ok(None);
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let Ok(run) = store.resolve_run(id) else {
        return Ok(None);
    };
    let stored = store.load_run(run)?;
    let verdicts = vec![crate::analyze::verdict_of_run(&stored, None, None)];
    let runs = std::slice::from_ref(&stored);
    let pairs = super::report::report_runs(
        runs,
        &verdicts,
        &[crate::report::sections::StepChoice::Peak],
    )?;
    let document = crate::report::render(
        Format::Html,
        &Output::Report {
            runs: &pairs,
            comparison: None,
        },
    )?;
    match document {
        crate::report::Document::Text(text) => Ok(Some(text)),
        crate::report::Document::Files(_) => Ok(None),
    }
}

/// The runs, each a link to its page.
fn listing(store: &crate::store::Store) -> anyhow::Result<String> {
    let mut out = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>perflab: stored runs</title><style>{}</style></head><body><h1>perflab: stored runs</h1><table><tr><th>run</th><th class=\"l\">started</th><th class=\"l\">workload</th><th class=\"l\">target</th><th>steps</th><th>peak</th><th class=\"l\">status</th></tr>",
        crate::report::html::STYLE
    );
    for r in store.runs()?.iter().rev() {
        let _ = write!(
            out,
            "<tr><td><a href=\"/run/{id}\">{id}</a></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&r.started_at),
            escape(&r.workload),
            escape(&r.target),
            r.steps,
            r.peak_throughput
                .map_or_else(String::new, |x| format!("{}/s", crate::units::OpsPerSec(x))),
            escape(r.damaged.as_deref().unwrap_or(r.status.as_str())),
            id = r.id
        );
    }
    out.push_str("</table></body></html>\n");
    Ok(out)
}
