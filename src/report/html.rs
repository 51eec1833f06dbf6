//! The HTML writer: the single-file report, built from the store alone:
//! what was run and where, the verdict with its evidence, charts as inline
//! SVG (no network, fonts or scripts needed; hover titles give exact
//! values) —
//! throughput against load with the knee, the USL fit and the bound;
//! latency percentiles on a log axis; utilisation (CPU split into user,
//! system, %ISR and iowait, the busiest disk, each link direction,
//! perflab's CPU); throughput and p95 per interval across the run with
//! step boundaries; the latency distribution of the chosen steps (the
//! peak step unless `--step` says); database wait classes — and the tables
//! of [`super::sections`]. Several runs overlay their curves. Everything
//! from outside is escaped.

use super::format::{one_final_newline, Document, Format, FormatError, Output, ReportRun};
use super::svg::{escape, number, percent, seconds, Chart, Mark, Series};
use crate::measure::{LatencySummary, Phase};
use crate::store::StoredRun;
use std::fmt::Write;

/// The report's style sheet (the lab's report uses it too).
pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1000px;margin:24px auto;padding:0 16px;color:#1b1b1b}h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}h3{font-size:15px}table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}td.l,th.l{text-align:left}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap}.chart{width:100%;max-width:760px;height:auto;display:block;margin:12px 0;page-break-inside:avoid}.ctitle{font-size:13px;font-weight:600}.grid{stroke:#e3e3e3}.xtick{font-size:10px;text-anchor:middle;fill:#444}.ytick{font-size:10px;text-anchor:end;fill:#444}.xlabel{font-size:11px;text-anchor:middle}.ylabel{font-size:11px;text-anchor:middle}.legend{font-size:10px}.mark{stroke:#888;stroke-dasharray:2 3}.marklabel{font-size:10px;fill:#555}.bad{color:#a40000;font-weight:600}.nodata{color:#777;font-style:italic}@media print{body{max-width:none}h2{page-break-after:avoid}}";

/// `output` as an HTML page.
pub(super) fn write(output: &Output<'_>) -> Result<Document, FormatError> {
    match output {
        Output::Report { runs, comparison } => Ok(Document::Text(one_final_newline(&render_html(
            runs,
            *comparison,
        )))),
        _ => Err(FormatError::unsupported(output, Format::Html)),
    }
}

fn load_axis(runs: &[ReportRun<'_>]) -> &'static str {
    match runs
        .first()
        .and_then(|r| r.run.steps.first())
        .map(|s| s.level)
    {
        Some(crate::plan::Level::Rate(_)) => "offered rate (/s)",
        _ => "users",
    }
}

fn label(r: &ReportRun<'_>, several: bool, what: &str) -> String {
    if several {
        format!("run {} {what}", r.run.id)
    } else {
        what.to_string()
    }
}

/// The whole report; with several runs, `comparison` compares them with
/// the first.
pub(crate) fn render_html(
    runs: &[ReportRun<'_>],
    comparison: Option<&crate::analyze::compare::Comparison>,
) -> String {
    let ids: Vec<String> = runs.iter().map(|r| r.run.id.to_string()).collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>perflab report: run {}</title><style>{STYLE}</style></head><body><h1>perflab report: run {}</h1>",
        ids.join(", "),
        ids.join(", ")
    );
    for r in runs {
        header(&mut out, r);
    }
    out.push_str("<h2>Verdict</h2>");
    for r in runs {
        verdict_section(&mut out, r);
    }
    if let Some(c) = comparison {
        let _ = write!(
            out,
            "<h2>Comparison with run {}</h2><p>Ratio of mean throughput with its 95% bootstrap interval; ~ = no significant difference (Mann–Whitney U, α = 0.05), +/- = significantly higher/lower.</p>{}",
            c.runs[0].run,
            super::grid::Grid::from_rows(super::compare::rows(c)).html()
        );
        out.push_str("<ul>");
        for line in super::compare::summary_lines(c) {
            let _ = write!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Charts</h2>");
    charts(&mut out, runs);
    out.push_str("<h2>Tables</h2>");
    for r in runs {
        tables(&mut out, r);
    }
    let _ = write!(
        out,
        "<p style=\"color:#777;font-size:12px\">Made by perflab {} from the results store alone.</p></body></html>",
        escape(env!("CARGO_PKG_VERSION"))
    );
    out
}

fn header(out: &mut String, r: &ReportRun<'_>) {
    let run = r.run;
    let rows = super::sections::facts(run);
    let _ = write!(out, "<h2>Run {}</h2><table>", run.id);
    for (k, v) in rows {
        let _ = write!(
            out,
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{}</td></tr>",
            escape(&v)
        );
    }
    out.push_str("</table>");
}

fn verdict_section(out: &mut String, r: &ReportRun<'_>) {
    let v = r.verdict;
    let text = super::sections::VerdictText::of(v);
    let _ = write!(out, "<h3>Run {}</h3>", r.run.id);
    if !text.lead.is_empty() {
        let _ = write!(out, "<p>{}</p>", escape(&text.lead));
    }
    if let Some((name, unreliable)) = &text.stop {
        let _ = write!(
            out,
            "<p>What stops it: <b{}>{}</b>.</p><ul>",
            if *unreliable { " class=\"bad\"" } else { "" },
            escape(name)
        );
        for e in &text.points {
            let _ = write!(out, "<li>{}</li>", escape(e));
        }
        out.push_str("</ul>");
        if let Some(n) = &text.next {
            let _ = write!(out, "<p>Next: {}.</p>", escape(n));
        }
    }
    if let Some((head, lines)) = &text.what_if {
        let _ = write!(out, "<p>What would change — {}:</p><ul>", escape(head));
        for line in lines {
            let _ = write!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>");
    }
    let _ = write!(
        out,
        "<details><summary>The whole verdict as printed</summary><pre>{}</pre></details>",
        escape(&super::render_verdict(v, r.run.id))
    );
}

fn throughput_chart(runs: &[ReportRun<'_>]) -> Chart {
    let several = runs.len() > 1;
    let mut series = Vec::new();
    let mut marks = Vec::new();
    for r in runs {
        let v = r.verdict;
        series.push(Series {
            name: label(r, several, "throughput"),
            points: v.points.iter().map(|p| (p.load, p.throughput)).collect(),
            dashed: false,
        });
        if let Some(fit) = &v.usl {
            if fit.concurrency == "users" {
                let max = v.points.iter().map(|p| p.load).fold(0.0, f64::max);
                let points = (0..=60)
                    .map(|i| {
                        let n = 1.0 + (max * 1.2 - 1.0) * f64::from(i) / 60.0;
                        (n, fit.at(n))
                    })
                    .collect();
                series.push(Series {
                    name: label(r, several, "USL fit"),
                    points,
                    dashed: true,
                });
            }
        }
        if let Some(d) = &v.demands {
            let points: Vec<(f64, f64)> = d
                .steps
                .iter()
                .filter_map(|s| Some((s.load, s.bound?)))
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    name: label(r, several, "bound"),
                    points,
                    dashed: true,
                });
            }
        }
        if let Some(k) = &v.knee {
            marks.push(Mark {
                x: k.load,
                label: label(r, several, "knee"),
            });
        }
    }
    Chart {
        title: "Throughput against load, with the knee, the USL fit and the asymptotic bound"
            .to_string(),
        x_label: load_axis(runs).to_string(),
        y_label: rate_axis(runs),
        log_x: false,
        log_y: false,
        series,
        marks,
        x_format: number,
        y_format: number,
    }
}

/// The throughput axis: the runs' unit when they share one (runs of
/// several workloads count different things: operations/s then).
fn rate_axis(runs: &[ReportRun<'_>]) -> String {
    let mut units = runs.iter().map(|r| r.run.rate_unit());
    match units.next() {
        Some(first) if units.all(|u| u == first) => first.label().to_string(),
        _ => "operations/s".to_string(),
    }
}

fn latency_chart(runs: &[ReportRun<'_>]) -> Chart {
    let several = runs.len() > 1;
    let mut series = Vec::new();
    for r in runs {
        let pick: [(&str, Percentile); 4] = [
            ("p50", |l| l.p50),
            ("p95", |l| l.p95),
            ("p99", |l| l.p99),
            ("max", |l| l.max),
        ];
        for (name, f) in pick {
            series.push(Series {
                name: label(r, several, name),
                points: r
                    .verdict
                    .points
                    .iter()
                    .map(|p| (p.load, f(&p.response).as_secs_f64()))
                    .collect(),
                dashed: false,
            });
        }
    }
    Chart {
        title: "Response time percentiles against load (log scale)".to_string(),
        x_label: load_axis(runs).to_string(),
        y_label: "response time".to_string(),
        log_x: false,
        log_y: true,
        series,
        marks: Vec::new(),
        x_format: number,
        y_format: seconds,
    }
}

fn utilisation_chart(runs: &[ReportRun<'_>]) -> Chart {
    let several = runs.len() > 1;
    let mut series = Vec::new();
    for r in runs {
        let pts = &r.verdict.points;
        let cpus = pts
            .first()
            .and_then(|p| p.resource("cpu"))
            .map_or(1.0, |c| c.servers);
        let mut add = |name: &str, f: &dyn Fn(&crate::analyze::StepPoint) -> Option<f64>| {
            let points: Vec<(f64, f64)> =
                pts.iter().filter_map(|p| Some((p.load, f(p)?))).collect();
            if !points.is_empty() {
                series.push(Series {
                    name: label(r, several, name),
                    points,
                    dashed: false,
                });
            }
        };
        add("cpu busy", &|p| p.resource("cpu").map(|c| c.utilisation));
        add("cpu user", &|p| p.extras.cpu_user);
        add("cpu system", &|p| p.extras.cpu_system);
        add("cpu %ISR", &|p| p.extras.cpu_isr);
        add("cpu iowait", &|p| p.extras.cpu_iowait);
        add("busiest disk", &|p| {
            p.resources
                .iter()
                .filter(|r| r.name.starts_with("disk "))
                .map(|r| r.utilisation)
                .reduce(f64::max)
        });
        let mut links: Vec<&str> = pts
            .iter()
            .flat_map(|p| &p.resources)
            .filter(|r| r.name.starts_with("link "))
            .map(|r| r.name.as_str())
            .collect();
        links.sort_unstable();
        links.dedup();
        for link in links {
            add(link, &|p| p.resource(link).map(|r| r.utilisation));
        }
        add("perflab cpu", &|p| Some(p.generator.cpus / cpus));
    }
    Chart {
        title: format!(
            "Resource utilisation against load ({})",
            runs.first()
                .map_or("this host".to_string(), |r| r.verdict.server_host.clone())
        ),
        x_label: load_axis(runs).to_string(),
        y_label: "utilisation".to_string(),
        log_x: false,
        log_y: false,
        series,
        marks: Vec::new(),
        x_format: number,
        y_format: percent,
    }
}

/// Each measured interval at its time since the run's first step started.
/// (time, value) points of a chart.
type Points = Vec<(f64, f64)>;

/// Reads one percentile off a latency summary.
type Percentile = fn(&LatencySummary) -> std::time::Duration;

fn timeline(run: &StoredRun) -> (Points, Points, Vec<Mark>) {
    let (mut tps, mut p95, mut marks) = (Vec::new(), Vec::new(), Vec::new());
    let origin = run.steps.first().map(|s| s.started_at);
    for s in &run.steps {
        let offset = origin
            .and_then(|o| s.started_at.duration_since(o).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        marks.push(Mark {
            x: offset,
            label: s.level.to_string(),
        });
        for i in s.intervals.iter().filter(|i| i.phase == Phase::Measured) {
            let secs = i.length.as_secs_f64();
            if secs <= 0.0 {
                continue;
            }
            let t = offset + i.start.as_secs_f64() + secs;
            let tally = i.tally.unpack();
            tps.push((t, tally.all_ops().completed() as f64 / secs));
            let response = tally.response();
            if !response.is_empty() {
                p95.push((t, LatencySummary::of(&response).p95.as_secs_f64()));
            }
        }
    }
    (tps, p95, marks)
}

fn distribution_chart(runs: &[ReportRun<'_>]) -> Chart {
    let several = runs.len() > 1;
    let mut series = Vec::new();
    let mut chosen = Vec::new();
    for r in runs {
        for d in &r.distributions {
            chosen.push(d.label.clone());
            series.push(Series {
                name: label(r, several, &format!("at {}", d.label)),
                points: d
                    .points
                    .iter()
                    .map(|(q, v)| (1.0 / (1.0 - q), *v))
                    .filter(|(_, v)| *v > 0.0)
                    .collect(),
                dashed: false,
            });
        }
    }
    chosen.dedup();
    Chart {
        title: format!(
            "Latency distribution at {} (HdrHistogram percentile plot)",
            if chosen.is_empty() {
                "the peak step".to_string()
            } else {
                chosen.join(", ")
            }
        ),
        x_label: "percentile".to_string(),
        y_label: "response time".to_string(),
        log_x: true,
        log_y: true,
        series,
        marks: Vec::new(),
        x_format: |x| super::svg::percentile(1.0 - 1.0 / x),
        y_format: seconds,
    }
}

fn waits_chart(runs: &[ReportRun<'_>]) -> Chart {
    let several = runs.len() > 1;
    let mut series = Vec::new();
    for r in runs {
        let mut classes: Vec<&str> = r
            .verdict
            .points
            .iter()
            .flat_map(|p| p.waits.keys().map(String::as_str))
            .collect();
        classes.sort_unstable();
        classes.dedup();
        for class in classes {
            series.push(Series {
                name: label(r, several, class),
                points: r
                    .verdict
                    .points
                    .iter()
                    .map(|p| {
                        let total: u64 = p.waits.values().sum();
                        let n = p.waits.get(class).copied().unwrap_or(0);
                        (
                            p.load,
                            if total > 0 {
                                n as f64 / total as f64
                            } else {
                                0.0
                            },
                        )
                    })
                    .collect(),
                dashed: false,
            });
        }
    }
    Chart {
        title: "Database sessions by wait class against load".to_string(),
        x_label: load_axis(runs).to_string(),
        y_label: "share of samples".to_string(),
        log_x: false,
        log_y: false,
        series,
        marks: Vec::new(),
        x_format: number,
        y_format: percent,
    }
}

fn charts(out: &mut String, runs: &[ReportRun<'_>]) {
    out.push_str(&throughput_chart(runs).render());
    out.push_str(&latency_chart(runs).render());
    out.push_str(&utilisation_chart(runs).render());
    for r in runs {
        let (tps, p95, marks) = timeline(r.run);
        let title = |what: &str| {
            if runs.len() > 1 {
                format!("Run {}: {what} per interval across the run", r.run.id)
            } else {
                format!("{what} per interval across the run")
            }
        };
        out.push_str(
            &Chart {
                title: title("Throughput"),
                x_label: "seconds since the first step".to_string(),
                y_label: r.run.rate_unit().label().to_string(),
                log_x: false,
                log_y: false,
                series: vec![Series {
                    name: "throughput".to_string(),
                    points: tps,
                    dashed: false,
                }],
                marks: marks.clone(),
                x_format: number,
                y_format: number,
            }
            .render(),
        );
        out.push_str(
            &Chart {
                title: title("p95 response time"),
                x_label: "seconds since the first step".to_string(),
                y_label: "p95".to_string(),
                log_x: false,
                log_y: true,
                series: vec![Series {
                    name: "p95".to_string(),
                    points: p95,
                    dashed: false,
                }],
                marks,
                x_format: number,
                y_format: seconds,
            }
            .render(),
        );
    }
    out.push_str(&distribution_chart(runs).render());
    out.push_str(&waits_chart(runs).render());
}

fn tables(out: &mut String, r: &ReportRun<'_>) {
    let id = r.run.id;
    let _ = write!(
        out,
        "<h3>Run {id}: steps</h3><p>Server columns are {}'s.</p>{}",
        escape(&r.verdict.server_host),
        super::sections::step_grid(r.run).html()
    );
    match super::sections::error_grid(&r.run.steps) {
        Some(grid) => {
            let _ = write!(out, "<h3>Run {id}: errors by kind</h3>{}", grid.html());
        }
        None => out.push_str("<p>No errors in any step.</p>"),
    }
    out.push_str(&super::figures::html(r.run, id));
    if let Some(grid) = super::generators::generator_grid(&r.run.steps, |l| l.to_string()) {
        let _ = write!(
            out,
            "<h3>Run {id}: the generators</h3><p>cpu: CPUs used, of those it could use.</p>{}",
            grid.html()
        );
    }
    let _ = write!(
        out,
        "<h3>Run {id}: stability</h3>{}",
        super::sections::stability_grid(r.verdict).html()
    );
}
