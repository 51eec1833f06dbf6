//! `perflab history --html FILE`: a plan's history as a page of charts,
//! one per metric and load level, a point per run, each change point a
//! vertical mark with its size; drawn with the reports' own SVG charts
//! ([`super::svg`]) and styles.

use super::svg::{escape, Chart, Mark, Series};
use crate::analyze::history::History;
use std::fmt::Write;

/// The history as a self-contained HTML page; `title` says whose.
pub(crate) fn history_html(h: &History, title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>perflab history: {t}</title><style>{}</style></head><body><h1>perflab history: {t}</h1>",
        super::html::STYLE,
        t = escape(title)
    );
    let _ = write!(
        out,
        "<p>{} runs. Change points by PELT on the logarithm of each series, its penalty {} × ln n in units of the series' own run-to-run noise.</p>",
        h.runs.len(),
        h.penalty
    );
    let changes = h.changes();
    out.push_str("<h2>Change points</h2>");
    if changes.is_empty() {
        out.push_str("<p class=\"nodata\">none</p>");
    } else {
        out.push_str("<ul>");
        for c in changes {
            let _ = write!(out, "<li>{}</li>", escape(&c.said));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Series</h2>");
    for s in &h.series {
        let latency = s.metric != "throughput";
        let chart = Chart {
            title: format!(
                "{} at {} (noise {:.1}%)",
                s.metric,
                s.level,
                s.noise * 100.0
            ),
            x_label: "run".to_string(),
            y_label: if latency {
                format!("{} response time", s.metric)
            } else {
                "throughput (/s)".to_string()
            },
            log_x: false,
            log_y: false,
            series: vec![Series {
                name: format!("{} at {}", s.metric, s.level),
                points: s.points.iter().map(|&(id, v)| (id as f64, v)).collect(),
                dashed: false,
            }],
            marks: s
                .changes
                .iter()
                .map(|c| Mark {
                    x: c.run as f64,
                    label: format!("{:+.1}%", c.change * 100.0),
                })
                .collect(),
            x_format: super::svg::number,
            y_format: if latency {
                super::svg::seconds
            } else {
                super::svg::number
            },
        };
        out.push_str(&chart.render());
    }
    let _ = write!(
        out,
        "<p style=\"color:#777;font-size:12px\">Made by perflab {} from the results store alone.</p></body></html>",
        escape(env!("CARGO_PKG_VERSION"))
    );
    out
}
