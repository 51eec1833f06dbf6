//! The live page: one self-contained HTML document (the report's style
//! sheet, a few lines of inline script, no external asset) whose body is
//! rendered here, on the server, with the report's SVG charts
//! ([`crate::report::svg`]) each time the run moves; the script swaps the
//! body in from each server-sent event and keeps the document's title and
//! a hidden log of the events it got, for those (and tests) that read the
//! DOM. Everything from outside is escaped.

use super::state::{View, MAX_POINTS};
use crate::plan::Level;
use crate::report::svg::{escape, number, percent, seconds, Chart, Mark, Series};
use crate::units::{Latency, OpsPerSec};
use std::fmt::Write;

/// The page's script: follows `/events` (with the page's own query, which
/// may carry `token=`), swaps each update in, closes at the end; a link
/// to another page of the view (a lab's `/run/N`) is followed with the
/// page's query too, so that the token goes with it.
const SCRIPT: &str = r#"(function(){
var body=document.getElementById('live'),log=document.getElementById('events');
var es=new EventSource('/events'+location.search);
function on(name){es.addEventListener(name,function(e){
var d=JSON.parse(e.data);body.innerHTML=d.html;document.title=d.title;
var li=document.createElement('li');li.textContent=name+' '+d.seq+' '+(d.live?'live':'replayed');log.appendChild(li);
if(d.kind==='end'){es.close();}});}
['state','interval','step','cell','end'].forEach(on);
document.addEventListener('click',function(e){var a=e.target.closest?e.target.closest('a'):null;var h=a?a.getAttribute('href'):null;
if(h&&h.charAt(0)==='/'&&location.search&&h.indexOf('?')<0){a.setAttribute('href',h+location.search);}});
})();"#;

/// The whole page, its body as `html` is now.
pub(crate) fn page(title: &str, html: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{}</style></head><body><div id=\"live\">{html}</div><ol id=\"events\" hidden></ol><script>{SCRIPT}</script></body></html>\n",
        escape(title),
        crate::report::html::STYLE
    )
}

fn load_axis(view: &View) -> &'static str {
    match view.current.as_ref().map(|c| c.level) {
        Some(Level::Rate(_)) => "offered rate (/s)",
        _ => "users",
    }
}

/// The title and body of the page for `view`.
pub(crate) fn render(view: &View) -> (String, String) {
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>perflab live: run {}</h1><p>{} on {}</p>",
        escape(&view.run),
        escape(&view.workload),
        escape(&view.target)
    );
    let position = |index: usize| {
        if index < view.steps_planned {
            format!("{} of {}", index + 1, view.steps_planned)
        } else {
            format!("{} (a level run again)", index + 1)
        }
    };
    let title = match (&view.end, &view.current) {
        (Some((status, _)), _) => {
            let _ = write!(
                out,
                "<p id=\"status\">The run ended: <b>{}</b>.</p>",
                escape(status)
            );
            format!("perflab live: run {} · done · {status}", view.run)
        }
        (None, Some(c)) => {
            let _ = write!(
                out,
                "<p id=\"status\">Step <b>{}</b>: {}, {} · {} intervals so far.</p>",
                position(c.index),
                escape(&c.level.to_string()),
                escape(&c.phase),
                view.intervals
            );
            format!(
                "perflab live: run {} · step {} · {} intervals",
                view.run,
                position(c.index),
                view.intervals
            )
        }
        (None, None) => {
            out.push_str("<p id=\"status\">Preparing the target; no step has started.</p>");
            format!("perflab live: run {} · preparing", view.run)
        }
    };
    if let Some((_, verdict)) = &view.end {
        let _ = write!(
            out,
            "<h2>Verdict</h2><pre id=\"verdict\">{}</pre>",
            escape(verdict)
        );
    }
    out.push_str("<h2>Steps</h2>");
    steps(&mut out, view);
    out.push_str("<h2>Charts</h2>");
    charts(&mut out, view);
    out.push_str("<h2>Errors by kind</h2>");
    if view.errors.is_empty() {
        out.push_str("<p>No errors so far.</p>");
    } else {
        out.push_str("<table><tr><th class=\"l\">kind</th><th>operations</th></tr>");
        for (kind, n) in &view.errors {
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td>{n}</td></tr>",
                escape(kind)
            );
        }
        out.push_str("</table>");
    }
    if view.points.len() >= MAX_POINTS / 2 {
        out.push_str("<p class=\"nodata\">A long run: the charts show some of its intervals, evenly spread; the tables count them all.</p>");
    }
    (title, out)
}

fn steps(out: &mut String, view: &View) {
    if view.steps.is_empty() {
        out.push_str("<p class=\"nodata\">No step has ended yet.</p>");
        return;
    }
    let judged = view.steps.iter().any(|s| s.slo.is_some());
    let _ = write!(
        out,
        "<table><tr><th>step</th><th>{}</th><th>throughput</th><th>p95</th><th>errors</th><th class=\"l\">status</th>{}</tr>",
        load_axis(view),
        if judged { "<th class=\"l\">objectives</th>" } else { "" }
    );
    for s in &view.steps {
        let _ = write!(
            out,
            "<tr class=\"step\"><td>{}</td><td>{}</td><td>{}/s</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>",
            s.index + 1,
            escape(&s.level.to_string()),
            OpsPerSec(s.throughput),
            Latency(s.p95),
            s.errors,
            s.status
        );
        if judged {
            let _ = write!(
                out,
                "<td class=\"l\">{}</td>",
                escape(s.slo.as_deref().unwrap_or("-"))
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn charts(out: &mut String, view: &View) {
    let marks: Vec<Mark> = view
        .marks
        .iter()
        .map(|(x, label)| Mark {
            x: *x,
            label: label.clone(),
        })
        .collect();
    out.push_str(
        &over_time(
            &marks,
            "Throughput per interval across the run",
            "operations/s",
            false,
            vec![
                series(view, "throughput", &|p| Some(p.throughput)),
                series(view, "errors", &|p| Some(p.errors)),
            ],
        )
        .render(),
    );
    out.push_str(
        &over_time(
            &marks,
            "Response time per interval across the run",
            "response time",
            true,
            vec![
                series(view, "p50", &|p| p.p50),
                series(view, "p95", &|p| p.p95),
                series(view, "p99", &|p| p.p99),
            ],
        )
        .render(),
    );
    out.push_str(&against_load(view).render());
    out.push_str(&resources(view, &marks).render());
}

/// One series of the points across the run, by what `pick` reads of each.
fn series(view: &View, name: &str, pick: &dyn Fn(&super::state::Point) -> Option<f64>) -> Series {
    Series {
        name: name.to_string(),
        points: view
            .points
            .iter()
            .filter_map(|p| pick(p).map(|v| (p.at, v)))
            .collect(),
        dashed: false,
    }
}

/// A chart over the run's time, with the steps' marks.
fn over_time(
    marks: &[Mark],
    title: &str,
    y_label: &str,
    log_y: bool,
    series: Vec<Series>,
) -> Chart {
    Chart {
        title: title.to_string(),
        x_label: "seconds since the first step (warm-up included)".to_string(),
        y_label: y_label.to_string(),
        log_x: false,
        log_y,
        series,
        marks: marks.to_vec(),
        x_format: number,
        y_format: if log_y { seconds } else { number },
    }
}

/// Throughput against load, of the steps ended so far.
fn against_load(view: &View) -> Chart {
    Chart {
        title: "Throughput and p95 against load, steps ended so far".to_string(),
        x_label: load_axis(view).to_string(),
        y_label: "operations/s".to_string(),
        log_x: false,
        log_y: false,
        series: vec![Series {
            name: "throughput".to_string(),
            points: view
                .steps
                .iter()
                .map(|s| (s.level.value(), s.throughput))
                .collect(),
            dashed: false,
        }],
        marks: Vec::new(),
        x_format: number,
        y_format: number,
    }
}

/// Each resource's utilisation across the run, one series per resource.
fn resources(view: &View, marks: &[Mark]) -> Chart {
    let mut names: Vec<&str> = view
        .points
        .iter()
        .flat_map(|p| p.resources.iter().map(|(n, _)| n.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    let resources = names
        .iter()
        .map(|name| {
            series(view, name, &|p| {
                p.resources.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
            })
        })
        .collect();
    let mut chart = over_time(
        marks,
        "Resources per interval: CPU busy, of each host's CPUs",
        "utilisation",
        false,
        resources,
    );
    chart.y_format = percent;
    chart
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::state::{Point, StepRow};
    use std::time::Duration;

    /// Text from outside is escaped; the page holds its script inline and
    /// fetches nothing; the verdict shows once the run ended.
    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let mut view = View {
            run: "7".to_string(),
            workload: "null".to_string(),
            target: "<script>alert(1)</script>".to_string(),
            steps_planned: 2,
            ..View::default()
        };
        view.points.push(Point {
            at: 1.0,
            throughput: 100.0,
            p50: Some(0.001),
            p95: Some(0.002),
            p99: Some(0.003),
            resources: vec![("host cpu".to_string(), 0.25)],
            ..Point::default()
        });
        view.steps.push(StepRow {
            index: 0,
            level: Level::Users(1),
            throughput: 100.0,
            p95: Duration::from_millis(2),
            errors: 0,
            status: "ok",
            slo: None,
        });
        view.errors.insert("sql:<x>".to_string(), 3);
        let (title, html) = render(&view);
        assert!(title.contains("preparing"), "{title}");
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)"));
        assert!(html.contains("sql:&lt;x&gt;"));
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 4, "{html}");
        assert!(!html.contains(">objectives</th>"), "{html}");
        // A step judged by --slo shows its judgement, escaped.
        view.steps[0].slo = Some("meets p95<5.00ms 0.1% over [0.0%–0.2%]".to_string());
        let (_, judged) = render(&view);
        assert!(
            judged.contains("<td class=\"l\">meets p95&lt;5.00ms 0.1% over"),
            "{judged}"
        );
        view.end = Some(("complete".to_string(), "capacity: <1>".to_string()));
        let (title, html) = render(&view);
        assert!(title.contains("done"), "{title}");
        assert!(html.contains("<pre id=\"verdict\">capacity: &lt;1&gt;</pre>"));
        let whole = page(&title, &html);
        assert_eq!(
            whole.matches("http").count(),
            whole
                .matches("xmlns=\"http://www.w3.org/2000/svg\"")
                .count(),
            "the page fetches nothing"
        );
        assert!(!whole.contains("<script src"));
    }
}
