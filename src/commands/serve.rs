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
    check_addr(args)?;
    let config = crate::cli::store_view(args)?;
    // Refused at once when there is no store to show.
    drop(super::show::existing_store(&args.store.store)?);
    let path = args.store.store.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let signals = super::StopSignals::register(&stop)?;
    let pages: crate::live::Pages = Arc::new(move |p: &str| page(&path, p));
    crate::live::serve_store(&config, &stop, pages)?;
    Ok(signals.exit(Exit::Ok))
}

/// `--addr` beyond loopback without a token or without TLS, refused in
/// words of `perflab serve`'s own flags (the live view's rule, which
/// names `--serve`).
fn check_addr(args: &ServeArgs) -> Result<(), crate::error::PlanError> {
    let Ok(addr) = args.addr.trim().parse::<std::net::SocketAddr>() else {
        // Not an address: said, naming --addr, where it is read.
        return Ok(());
    };
    let access = &args.access;
    let plain = access.serve_tls_cert.is_none() && !access.serve_tls_self_signed;
    let why = match (addr.ip().is_loopback(), &access.serve_token_file) {
        (true, _) => return Ok(()),
        (false, None) => "without a token: anyone who can reach it would see every run",
        (false, Some(_)) if plain => "in plain HTTP: the token would cross the network in clear",
        _ => return Ok(()),
    };
    Err(crate::error::PlanError::flag(
        "--addr",
        format!("refusing to serve the stored runs on {addr} {why}"),
        "give --serve-token-file FILE and --serve-tls-self-signed (or --serve-tls-cert and --serve-tls-key), or --addr 127.0.0.1:PORT",
    ))
}

/// The page at `path` of the store at `store` and its HTTP status, a
/// store that cannot be read said on the page (500); none for a 404.
fn page(store: &Path, path: &str) -> Option<(u16, String)> {
    said(super::show::existing_store(&PathBuf::from(store)).and_then(|s| page_of(&s, path)))
}

/// The page of run N at `/run/N`, read from the store at `store` by a
/// process that also writes it (`perflab lab --serve`): none for a 404,
/// or while the store is being made.
pub(crate) fn run_page_in_process(store: &Path, path: &str) -> Option<(u16, String)> {
    match crate::store::Store::open_in_process(store) {
        Ok(Some(opened)) if path != "/" => said(page_of(&opened, path)),
        Ok(_) => None,
        Err(e) => said(Err(e)),
    }
}

/// A page found (200), or why it could not be made, said on a page
/// (500: the store, not the request, is at fault).
fn said(page: anyhow::Result<Option<String>>) -> Option<(u16, String)> {
    match page {
        Ok(found) => found.map(|html| (200, html)),
        Err(e) => Some((500, format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>perflab</title></head><body><p>{}</p></body></html>",
            escape(&crate::util::one_line(&format!("{e:#}")))
        ))),
    }
}

/// The page at `path` of the store at `store`: `/` lists the runs,
/// `/run/N` is run N's report; none for any other path.
fn page_of(store: &crate::store::Store, path: &str) -> anyhow::Result<Option<String>> {
    if path == "/" {
        return Ok(Some(listing(store)?));
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
    let running = match stored.status {
        crate::store::RunStatus::Running => Some(store.run_progress(run)?),
        _ => None,
    };
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
        crate::report::Document::Text(text) => Ok(Some(match running {
            Some(progress) => still_running(&text, &progress),
            None => text,
        })),
        crate::report::Document::Files(_) => Ok(None),
    }
}

/// Seconds between reloads of a running run's page.
const RELOAD_S: u32 = 2;

/// The report of a run still running (its finished steps), with how far
/// it has got from the store (the running step's intervals, which the
/// report leaves out, counted), reloaded every [`RELOAD_S`] seconds.
fn still_running(report: &str, progress: &crate::store::RunProgress) -> String {
    let step = progress
        .running_step
        .map_or(progress.steps_begun, |i| i + 1);
    let of = progress
        .steps_planned
        .map_or_else(String::new, |n| format!(" of {n}"));
    let banner = format!(
        "<p id=\"running\">Running: step {step}{of}, {} intervals and {} operations stored so far; the report below holds its finished steps. This page reloads every {RELOAD_S} s.</p>",
        progress.intervals,
        progress.ok + progress.refused + progress.failed
    );
    let refresh = format!("<meta http-equiv=\"refresh\" content=\"{RELOAD_S}\">");
    let with_refresh = report.replacen("<head>", &format!("<head>{refresh}"), 1);
    match with_refresh.find("<body>") {
        Some(at) => {
            let at = at + "<body>".len();
            format!("{}{banner}{}", &with_refresh[..at], &with_refresh[at..])
        }
        None => format!("{with_refresh}{banner}"),
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
