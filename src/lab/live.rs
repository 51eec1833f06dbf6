//! The live view of a lab (`perflab lab FILE --serve ADDR`): the matrix of
//! variants × repetitions with each cell's state, the lab's progress and,
//! once it ends, its report; each cell's run at `/run/N` (the page
//! `perflab serve` shows, partial while it runs); the lab's progress and
//! the running cell's operations at `/metrics`.
//!
//! Everything is read from the lab's store, in a read-only connection of
//! its own per request (the store is in WAL mode: readers never block the
//! cells' runs that write it, nor the lab that marks its cells): the
//! cells are `perflab run` processes, so the store is the one place where
//! their progress meets. The page is the run's live page with another
//! body; its event stream (`/events`) reads the store every
//! [`POLL`] and sends the body when it changed, until the lab ends.

use super::capacity::Ask;
use super::LabSpec;
use crate::agent::http::{Request, Response};
use crate::live::metrics::{family, float, label, Flavour};
use crate::live::server::{path, text, Handler, Serving, Streaming, KEEP_ALIVE};
use crate::live::Pages;
use crate::report::svg::escape;
use crate::store::{CellStatus, LabId, LabStatus, RunId, RunProgress, Store, StoredLab};
use crate::wire::Wire;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often an event stream reads the store: a cell's run stores an
/// interval a second by default.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// Finished runs' verdict lines kept at most (each is read once, from
/// the store, then kept: a finished run does not change).
const LINES_KEPT: usize = 4096;

/// The lab a `perflab lab --serve` process runs, as its store shows it.
pub(crate) struct LabView {
    store: PathBuf,
    /// The process running the lab (this one): its lab is the newest
    /// that this process began.
    pid: u32,
    /// The newest lab in the store before this one began.
    after: LabId,
    /// The capacity question of the lab's report.
    ask: Ask,
    /// Each finished run's verdict line.
    lines: Mutex<HashMap<RunId, String>>,
}

/// How one cell stands, for the page and the metrics.
#[derive(Debug, Clone)]
enum Shown {
    Waiting,
    Running {
        run: Option<RunId>,
        progress: Option<RunProgress>,
    },
    Done {
        run: Option<RunId>,
        line: String,
    },
    Failed {
        run: Option<RunId>,
        reason: String,
    },
    Stopped {
        run: Option<RunId>,
        reason: String,
    },
}

impl Shown {
    fn word(&self) -> &'static str {
        match self {
            Shown::Waiting => "waiting",
            Shown::Running { .. } => "running",
            Shown::Done { .. } => "done",
            Shown::Failed { .. } => "failed",
            Shown::Stopped { .. } => "stopped",
        }
    }

    fn run(&self) -> Option<RunId> {
        match self {
            Shown::Waiting => None,
            Shown::Running { run, .. }
            | Shown::Done { run, .. }
            | Shown::Failed { run, .. }
            | Shown::Stopped { run, .. } => *run,
        }
    }
}

/// A cell: where it runs in the lab's order, its variant and repetition.
#[derive(Debug, Clone)]
struct CellNow {
    position: usize,
    variant: usize,
    repetition: u32,
    shown: Shown,
}

/// The lab now.
#[derive(Debug, Clone)]
struct LabNow {
    id: LabId,
    name: String,
    workload: String,
    target: String,
    variants: Vec<String>,
    repetitions: u32,
    status: LabStatus,
    cells: Vec<CellNow>,
    /// The lab's report as `perflab lab` prints it, once it ended.
    report: Option<String>,
}

/// The page's title and body, and whether the lab ended.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    pub(crate) title: String,
    pub(crate) html: String,
    pub(crate) ended: bool,
}

impl LabView {
    /// The view of the lab this process is about to run on the store at
    /// `store` (which may not exist yet).
    pub(crate) fn new(store: PathBuf, ask: Ask) -> Arc<LabView> {
        // A store that cannot be read yet holds no lab of this process.
        let after = Store::open_in_process(&store)
            .ok()
            .flatten()
            .and_then(|s| s.last_lab_id().ok())
            .unwrap_or(0);
        Arc::new(LabView {
            store,
            pid: std::process::id(),
            after,
            ask,
            lines: Mutex::new(HashMap::new()),
        })
    }

    /// The lab as the store holds it now; none before the lab is stored.
    fn now(&self, with_report: bool) -> anyhow::Result<Option<LabNow>> {
        // Never `Store::open_read`: this process writes the store too
        // (see `Store::open_in_process`).
        let Some(store) = Store::open_in_process(&self.store)? else {
            return Ok(None);
        };
        let Some(id) = store.lab_of_process(self.pid, self.after)? else {
            return Ok(None);
        };
        let stored = store.load_lab(id)?;
        let spec = LabSpec::of_stored(&stored)?;
        let cells = stored
            .cells
            .iter()
            .map(|cell| {
                Ok(CellNow {
                    position: cell.position,
                    variant: cell.variant,
                    repetition: cell.repetition,
                    shown: self.shown(&store, &stored, cell)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let report = match (with_report, stored.status) {
            (true, LabStatus::Complete | LabStatus::Partial) => Some(
                super::report::summarize(&store, &stored, &self.ask)
                    .map_or_else(|e| format!("no report: {e:#}\n"), |r| r.render()),
            ),
            _ => None,
        };
        Ok(Some(LabNow {
            id,
            name: stored.name.clone(),
            workload: spec.workload.clone(),
            target: spec
                .target
                .as_deref()
                .map(crate::secret::redact)
                .unwrap_or_default(),
            variants: spec.variants.iter().map(|v| v.name.clone()).collect(),
            repetitions: spec.repetitions,
            status: stored.status,
            cells,
            report,
        }))
    }

    /// How `cell` stands: a running cell's run is found by its process
    /// until the lab marks the cell with it.
    fn shown(
        &self,
        store: &Store,
        lab: &StoredLab,
        cell: &crate::store::StoredCell,
    ) -> anyhow::Result<Shown> {
        let reason = || cell.reason.clone().unwrap_or_default();
        Ok(match cell.status {
            CellStatus::Pending => Shown::Waiting,
            CellStatus::Running => {
                let run = match (cell.run, cell.pid) {
                    (Some(run), _) => Some(run),
                    (None, Some(pid)) => store.run_begun_by(pid, &lab.started_at)?,
                    (None, None) => None,
                };
                let progress = run.map(|r| store.run_progress(r)).transpose()?;
                Shown::Running { run, progress }
            }
            CellStatus::Done => Shown::Done {
                run: cell.run,
                line: cell.run.map_or_else(String::new, |r| self.line(store, r)),
            },
            CellStatus::Failed => Shown::Failed {
                run: cell.run,
                reason: reason(),
            },
            CellStatus::Partial => Shown::Stopped {
                run: cell.run,
                reason: reason(),
            },
        })
    }

    /// A finished run's capacity and bottleneck, as its verdict says them.
    fn line(&self, store: &Store, run: RunId) -> String {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(line) = lines.get(&run) {
            return line.clone();
        }
        let line = match store.load_run(run) {
            Ok(stored) => {
                let verdict = crate::analyze::verdict_of_run(&stored, None, None);
                let text = crate::report::render_verdict(&verdict, run);
                let said = |what: &str| {
                    text.lines()
                        .find_map(|l| l.trim_start().strip_prefix(what))
                        .map(|l| l.trim().to_string())
                };
                match (said("capacity"), said("bottleneck")) {
                    (Some(c), Some(b)) => format!("{c}; bottleneck {b}"),
                    (Some(c), None) => c,
                    (None, Some(b)) => format!("bottleneck {b}"),
                    (None, None) => "no verdict".to_string(),
                }
            }
            Err(e) => crate::util::one_line(&format!("{e:#}")),
        };
        if lines.len() < LINES_KEPT {
            lines.insert(run, line.clone());
        }
        line
    }

    /// The page's title and body now.
    pub(crate) fn body(&self) -> Body {
        match self.now(true) {
            Ok(Some(lab)) => render(&lab),
            Ok(None) => Body {
                title: "perflab lab · starting".to_string(),
                html: "<h1>perflab lab</h1><p id=\"status\">The lab is being checked and stored; no cell has started.</p>".to_string(),
                ended: false,
            },
            Err(e) => Body {
                title: "perflab lab".to_string(),
                html: format!(
                    "<h1>perflab lab</h1><p id=\"status\">The store cannot be read now: {}</p>",
                    escape(&crate::util::one_line(&format!("{e:#}")))
                ),
                ended: false,
            },
        }
    }

    /// The scrape: the lab's cells by state, the running cell, and its
    /// run's operations so far.
    pub(crate) fn metrics(&self, flavour: Flavour) -> String {
        let lab = self.now(false).ok().flatten();
        metrics(flavour, lab.as_ref())
    }
}

/// The page of `lab`.
fn render(lab: &LabNow) -> Body {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>perflab lab {}: {}</h1><p>{} on {} · {} variant(s) × {} repetition(s) = {} cells</p>",
        lab.id,
        escape(&lab.name),
        escape(&lab.workload),
        escape(&lab.target),
        lab.variants.len(),
        lab.repetitions,
        lab.cells.len()
    );
    let total = lab.cells.len();
    let finished = lab
        .cells
        .iter()
        .filter(|c| matches!(c.shown, Shown::Done { .. } | Shown::Failed { .. }))
        .count();
    let failed = lab
        .cells
        .iter()
        .filter(|c| matches!(c.shown, Shown::Failed { .. }))
        .count();
    let running = lab
        .cells
        .iter()
        .find(|c| matches!(c.shown, Shown::Running { .. }));
    let ended = lab.status != LabStatus::Running;
    let title = if ended {
        let _ = write!(
            out,
            "<p id=\"status\">The lab ended: <b>{}</b> · {finished} of {total} cells finished ({failed} failed).</p>",
            lab.status
        );
        format!("perflab lab {} · done · {}", lab.id, lab.status)
    } else {
        let _ = write!(
            out,
            "<p id=\"status\">{finished} of {total} cells finished ({failed} failed)"
        );
        if let Some(cell) = running {
            let _ = write!(
                out,
                " · cell <b>{} of {total}</b> running: {} (repetition {})",
                cell.position + 1,
                escape(variant_name(lab, cell.variant)),
                cell.repetition
            );
        }
        out.push_str(".</p>");
        format!("perflab lab {} · {finished} of {total} cells", lab.id)
    };
    matrix(&mut out, lab);
    if let Some(report) = &lab.report {
        let _ = write!(
            out,
            "<h2>Report</h2><pre id=\"report\">{}</pre>",
            escape(report)
        );
    }
    Body {
        title,
        html: out,
        ended,
    }
}

fn variant_name(lab: &LabNow, variant: usize) -> &str {
    lab.variants.get(variant).map_or("?", String::as_str)
}

/// The matrix: a row per variant, a column per repetition, each cell its
/// state and a link to its run.
fn matrix(out: &mut String, lab: &LabNow) {
    out.push_str("<h2>Cells</h2><table id=\"matrix\"><tr><th class=\"l\">variant</th>");
    for r in 1..=lab.repetitions {
        let _ = write!(out, "<th class=\"l\">repetition {r}</th>");
    }
    out.push_str("</tr>");
    for (v, name) in lab.variants.iter().enumerate() {
        let _ = write!(out, "<tr><td class=\"l\">{}</td>", escape(name));
        for r in 1..=lab.repetitions {
            match lab
                .cells
                .iter()
                .find(|c| c.variant == v && c.repetition == r)
            {
                Some(cell) => cell_td(out, cell),
                None => out.push_str("<td class=\"l\"></td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn cell_td(out: &mut String, cell: &CellNow) {
    let run = cell.shown.run().map_or_else(String::new, |r| {
        format!(" · <a href=\"/run/{r}\">run {r}</a>")
    });
    let said = match &cell.shown {
        Shown::Waiting => String::new(),
        Shown::Running { progress, .. } => progress.as_ref().map_or_else(
            || ": starting".to_string(),
            |p| {
                let step = p.running_step.map_or(p.steps_begun, |i| i + 1);
                let of = p
                    .steps_planned
                    .map_or_else(String::new, |n| format!(" of {n}"));
                format!(
                    ": step {step}{of} · {} intervals · {} operations",
                    p.intervals,
                    p.ok + p.refused + p.failed
                )
            },
        ),
        Shown::Done { line, .. } => format!(": {}", escape(line)),
        Shown::Failed { reason, .. } | Shown::Stopped { reason, .. } => {
            format!(": {}", escape(reason))
        }
    };
    let _ = write!(
        out,
        "<td class=\"l cell {word}\" id=\"cell-{}\">cell {}: <b>{word}</b>{said}{run}</td>",
        cell.position + 1,
        cell.position + 1,
        word = cell.shown.word()
    );
}

/// The lab's metrics; a lab not stored yet has every count 0.
fn metrics(flavour: Flavour, lab: Option<&LabNow>) -> String {
    let mut out = String::new();
    family(
        &mut out,
        flavour,
        "perflab_lab_cells",
        "gauge",
        "",
        "The lab's cells by state (waiting, running, done, failed, stopped).",
    );
    for state in ["waiting", "running", "done", "failed", "stopped"] {
        let n = lab.map_or(0, |l| {
            l.cells.iter().filter(|c| c.shown.word() == state).count()
        });
        let _ = writeln!(out, "perflab_lab_cells{{state=\"{state}\"}} {n}");
    }
    family(
        &mut out,
        flavour,
        "perflab_lab_cells_planned",
        "gauge",
        "",
        "The lab's cells: variants × repetitions.",
    );
    let _ = writeln!(
        out,
        "perflab_lab_cells_planned {}",
        lab.map_or(0, |l| l.cells.len())
    );
    let running = lab.and_then(|l| {
        l.cells.iter().find_map(|c| match &c.shown {
            Shown::Running { run, progress } => Some((c, *run, progress.clone())),
            _ => None,
        })
    });
    family(
        &mut out,
        flavour,
        "perflab_lab_cell",
        "gauge",
        "",
        "The running cell, from 1 in the lab's order; 0 when none runs.",
    );
    let _ = writeln!(
        out,
        "perflab_lab_cell {}",
        running.as_ref().map_or(0, |(c, _, _)| c.position + 1)
    );
    family(
        &mut out,
        flavour,
        "perflab_lab_ended",
        "gauge",
        "",
        "1 once the lab ended, else 0.",
    );
    let _ = writeln!(
        out,
        "perflab_lab_ended {}",
        u8::from(lab.is_some_and(|l| l.status != LabStatus::Running))
    );
    running_cell(&mut out, flavour, running.as_ref());
    if flavour == Flavour::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The running cell's operations so far and its step (the family's
/// metadata always, its samples while a cell runs).
fn running_cell(
    out: &mut String,
    flavour: Flavour,
    running: Option<&(&CellNow, Option<RunId>, Option<RunProgress>)>,
) {
    family(
        out,
        flavour,
        "perflab_lab_cell_operations_total",
        "counter",
        "",
        "The running cell's operations so far, every step and phase, as its run stored them (an interval at a time), by outcome.",
    );
    if let Some((cell, Some(run), Some(progress))) = running {
        for (outcome, n) in [
            ("ok", progress.ok),
            ("refused", progress.refused),
            ("failed", progress.failed),
        ] {
            let _ = writeln!(
                out,
                "perflab_lab_cell_operations_total{{cell=\"{}\",run=\"{run}\",outcome=\"{}\"}} {n}",
                cell.position + 1,
                label(outcome)
            );
        }
        family(
            out,
            flavour,
            "perflab_lab_cell_step",
            "gauge",
            "",
            "The running cell's step, from 1.",
        );
        let step = progress
            .running_step
            .map_or(progress.steps_begun, |i| i + 1);
        let _ = writeln!(out, "perflab_lab_cell_step {}", float(step as f64));
    }
}

/// The handler of a lab's view: `/`, `/events`, `/metrics`, and `/run/N`
/// from `runs` (the pages `perflab serve` shows).
pub(crate) fn handler(view: Arc<LabView>, runs: Pages, serving: Serving) -> Handler {
    let serving = Arc::new(serving);
    Arc::new(move |request: &Request| match path(request) {
        "/" | "/index.html" => {
            let body = view.body();
            Response::whole(
                200,
                "text/html; charset=utf-8",
                crate::live::page::page(&body.title, &body.html).into_bytes(),
            )
        }
        "/events" => events(view.clone(), &serving),
        "/metrics" => {
            let flavour = Flavour::of_accept(request.header("accept"));
            Response::whole(
                200,
                flavour.content_type(),
                view.metrics(flavour).into_bytes(),
            )
        }
        p if p.starts_with("/run/") => match runs(p) {
            Some((status, html)) => {
                Response::whole(status, "text/html; charset=utf-8", html.into_bytes())
            }
            None => text(404, "no such run\n"),
        },
        _ => text(
            404,
            "no such page: try / (the lab), /run/N, /events or /metrics\n",
        ),
    })
}

/// A client's event stream: the lab's body now (`state`), then each time
/// it changes (`cell`), and `end` once the lab ended (or the server
/// stops); a write that cannot finish within the deadline ends it.
fn events(view: Arc<LabView>, serving: &Serving) -> Response {
    serving.streams.fetch_add(1, Ordering::AcqRel);
    let guard = Streaming(serving.streams.clone());
    let stop: Arc<AtomicBool> = serving.stop.clone();
    let deadline = serving.deadline;
    Response::stream(
        "text/event-stream; charset=utf-8",
        Box::new(move |wire: &mut Wire| {
            let _guard = guard;
            let mut send = |text: &str| {
                wire.set_deadline(Instant::now() + deadline);
                wire.write_all(text.as_bytes()).and_then(|()| wire.flush())
            };
            if send("retry: 2000\n\n").is_err() {
                return;
            }
            let mut last: Option<String> = None;
            let mut seq = 0u64;
            let mut quiet_since = Instant::now();
            loop {
                let stopping = stop.load(Ordering::Relaxed);
                let body = view.body();
                if last.as_deref() != Some(body.html.as_str()) {
                    seq += 1;
                    let kind = if body.ended {
                        "end"
                    } else if seq == 1 {
                        "state"
                    } else {
                        "cell"
                    };
                    let data = serde_json::json!({
                        "seq": seq,
                        "kind": kind,
                        "live": seq > 1,
                        "title": body.title,
                        "html": body.html,
                    });
                    if send(&format!("id: {seq}\nevent: {kind}\ndata: {data}\n\n")).is_err() {
                        return;
                    }
                    last = Some(body.html);
                    quiet_since = Instant::now();
                } else if quiet_since.elapsed() >= KEEP_ALIVE {
                    if send(": keep-alive\n\n").is_err() {
                        return;
                    }
                    quiet_since = Instant::now();
                }
                if body.ended || stopping {
                    return;
                }
                std::thread::sleep(POLL);
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(cells: Vec<Shown>, status: LabStatus) -> LabNow {
        LabNow {
            id: 1,
            name: "<lab>".to_string(),
            workload: "bank".to_string(),
            target: "sqlite:bank.db".to_string(),
            variants: vec!["a".to_string(), "b".to_string()],
            repetitions: 1,
            status,
            cells: cells
                .into_iter()
                .enumerate()
                .map(|(i, shown)| CellNow {
                    position: i,
                    variant: i,
                    repetition: 1,
                    shown,
                })
                .collect(),
            report: None,
        }
    }

    /// A running cell shows its step of the planned ones and links its
    /// run; the metrics count the cells by state and the running cell's
    /// operations; what came from the file is escaped.
    #[test]
    fn a_running_cell_shows_its_step_and_its_operations() {
        let progress = RunProgress {
            steps_begun: 2,
            running_step: Some(1),
            steps_planned: Some(3),
            intervals: 5,
            ok: 40,
            refused: 1,
            failed: 2,
            ..RunProgress::default()
        };
        let now = lab(
            vec![
                Shown::Done {
                    run: Some(1),
                    line: "peak 10 tps at 1 user".to_string(),
                },
                Shown::Running {
                    run: Some(2),
                    progress: Some(progress),
                },
            ],
            LabStatus::Running,
        );
        let body = render(&now);
        assert!(!body.ended);
        assert!(body.html.contains("&lt;lab&gt;"), "{}", body.html);
        assert!(
            body.html
                .contains("<b>running</b>: step 2 of 3 · 5 intervals · 43 operations"),
            "{}",
            body.html
        );
        assert!(body.html.contains("<a href=\"/run/2\">run 2</a>"));
        assert!(body.html.contains("cell <b>2 of 2</b> running: b"));
        let text = metrics(Flavour::Text, Some(&now));
        assert!(
            text.contains("perflab_lab_cells{state=\"done\"} 1"),
            "{text}"
        );
        assert!(text.contains("perflab_lab_cell 2"), "{text}");
        assert!(
            text.contains(
                "perflab_lab_cell_operations_total{cell=\"2\",run=\"2\",outcome=\"ok\"} 40"
            ),
            "{text}"
        );
        let open = metrics(Flavour::OpenMetrics, Some(&now));
        assert!(open.contains("# TYPE perflab_lab_cell_operations counter"));
        assert!(open.ends_with("# EOF\n"));
    }

    /// A failed cell says why; an ended lab says how it ended.
    #[test]
    fn a_failed_cell_says_why_and_the_end_is_said() {
        let mut now = lab(
            vec![
                Shown::Failed {
                    run: None,
                    reason: "its run refused to start: no such table".to_string(),
                },
                Shown::Done {
                    run: Some(1),
                    line: "peak".to_string(),
                },
            ],
            LabStatus::Complete,
        );
        now.report = Some("the matrix".to_string());
        let body = render(&now);
        assert!(body.ended);
        assert!(body.title.contains("done · complete"), "{}", body.title);
        assert!(body
            .html
            .contains("<b>failed</b>: its run refused to start: no such table"));
        assert!(body.html.contains("<pre id=\"report\">the matrix</pre>"));
    }
}
