//! The lab's report written three ways from one [`LabReport`]: for the
//! terminal, as Markdown, and as one self-contained HTML page whose
//! charts overlay every variant's curve (throughput and p95 against
//! load). Each writer takes the same tables — the variants' matrix, the
//! variants against the first, the predictions checked, the scorecard —
//! and the same capacity answer; only the markup differs. Everything from
//! outside (variant names, knob values) is escaped by the grid and chart
//! writers.

use super::report::{LabReport, VariantSummary};
use crate::report::grid::Grid;
use crate::report::markdown::plain;
use crate::report::svg::{escape, number, seconds, Chart, Series};
use crate::units::RateUnit;
use std::fmt::Write;

/// `1,234 tps ±56` (the interval's half width), or `-`.
fn peak_text(v: &VariantSummary, unit: RateUnit) -> String {
    match (v.peak, v.interval) {
        (Some(p), Some((lo, hi))) => format!("{} {unit} ±{}", group(p), group((hi - lo) / 2.0)),
        (Some(p), None) => format!("{} {unit}", group(p)),
        _ => "-".to_string(),
    }
}

/// A number rounded to a whole one, thousands grouped.
pub(super) fn group(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// A figure with at most two decimals and no trailing zeros.
fn short(x: f64) -> String {
    let text = format!("{x:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One table of the variants' matrix: the first axis down, the second across,
/// at one value of each axis beyond them.
struct MatrixTable {
    /// `cpus ↓ / memory →`.
    axes: String,
    /// The values of the axes beyond the second (`link.rate=1mbit`).
    at: String,
    columns: Vec<String>,
    /// Each row's label and, per column, the cell's peak and bottleneck.
    rows: Vec<(String, Vec<(String, String)>)>,
}

impl LabReport {
    /// What the lab's throughputs count: its workload's unit.
    fn unit(&self) -> RateUnit {
        crate::workload::rate_unit(&self.workload)
    }

    /// The cost unit's label: `tps per USD`, or `tps per unit of cost`.
    fn per_cost(&self) -> String {
        match &self.cost_unit {
            Some(u) => format!("{} per {u}", self.unit()),
            None => format!("{} per unit of cost", self.unit()),
        }
    }

    /// The first line: which lab, what, where, how it ended.
    fn title(&self) -> String {
        format!(
            "lab {} · {} · {} on {} · {}",
            self.lab,
            self.name,
            self.workload,
            self.target.as_deref().unwrap_or("-"),
            self.status
        )
    }

    /// The matrix's tables, when the variants were crossed or zipped.
    fn matrix(&self) -> Vec<MatrixTable> {
        let axes = &self.spec.axes;
        if axes.is_empty() || self.variants.len() < 2 {
            return Vec::new();
        }
        let sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
        let index = |coords: &[usize]| coords.iter().zip(&sizes).fold(0, |acc, (c, n)| acc * n + c);
        let (rows, cols) = (sizes[0], sizes.get(1).copied().unwrap_or(1));
        let rest: usize = sizes.iter().skip(2).product();
        let mut tables = Vec::new();
        for r in 0..rest {
            // The coordinates of the axes beyond the second, slowest first.
            let mut extra = Vec::new();
            let mut left = r;
            for n in sizes.iter().skip(2).rev() {
                extra.insert(0, left % n);
                left /= n;
            }
            let at = axes
                .iter()
                .skip(2)
                .zip(&extra)
                .map(|(a, &i)| format!("{}={}", a.knobs.join("/"), a.values[i]))
                .collect::<Vec<_>>()
                .join(" ");
            let header = match axes.get(1) {
                Some(a) => format!("{} ↓ / {} →", axes[0].knobs.join("/"), a.knobs.join("/")),
                None => format!("{} ↓", axes[0].knobs.join("/")),
            };
            let cell = |row: usize, col: usize| {
                let mut coords = vec![row];
                if axes.len() > 1 {
                    coords.push(col);
                }
                coords.extend(&extra);
                self.variants
                    .get(index(&coords))
                    .map_or(("-".to_string(), String::new()), |v| {
                        (peak_text(v, self.unit()), v.bottleneck())
                    })
            };
            tables.push(MatrixTable {
                axes: header,
                at,
                columns: (0..cols)
                    .map(|c| {
                        axes.get(1)
                            .map_or("peak".to_string(), |a| a.values[c].clone())
                    })
                    .collect(),
                rows: (0..rows)
                    .map(|row| {
                        (
                            axes[0].values[row].clone(),
                            (0..cols).map(|col| cell(row, col)).collect(),
                        )
                    })
                    .collect(),
            });
        }
        tables
    }

    /// Every variant: runs, peak, p95 there, against the first, cost,
    /// value, score, bottleneck (columns with nothing in them dropped).
    fn variants_grid(&self) -> Grid {
        let mut grid = Grid::new([
            "variant".to_string(),
            "runs".to_string(),
            "peak (95% interval)".to_string(),
            "p95 at peak".to_string(),
            "vs first (95% interval, p)".to_string(),
            "cost".to_string(),
            self.per_cost(),
            "score".to_string(),
            "hit ratio".to_string(),
            "byte hit".to_string(),
            "origin MB/s".to_string(),
            "bottleneck".to_string(),
        ]);
        grid.left = vec![0, 11];
        for (i, v) in self.variants.iter().enumerate() {
            let vs = match (&v.vs_base, i) {
                (_, 0) => "baseline".to_string(),
                (Some(d), _) => format!(
                    "{:.2}x [{:.2}, {:.2}] p={:.3}{}",
                    d.ratio,
                    d.ci.0,
                    d.ci.1,
                    d.p_value,
                    if d.significant { "" } else { " (n.s.)" }
                ),
                (None, _) => "-".to_string(),
            };
            grid.rows.push(vec![
                v.name.clone(),
                v.runs.len().to_string(),
                peak_text(v, self.unit()),
                v.p95_s.map_or("-".to_string(), seconds),
                vs,
                v.cost.map_or("-".to_string(), short),
                v.value.map_or("-".to_string(), short),
                v.score
                    .as_ref()
                    .map_or("-".to_string(), |s| format!("{:.2}", s.total)),
                v.cache.map_or("-".to_string(), |c| {
                    crate::units::Percent(c.hit_ratio).to_string()
                }),
                v.cache.map_or("-".to_string(), |c| {
                    crate::units::Percent(c.byte_hit_ratio).to_string()
                }),
                v.cache.map_or("-".to_string(), |c| {
                    crate::units::BytesPerSec(c.origin_bytes_per_s).to_string()
                }),
                v.bottleneck(),
            ]);
        }
        grid.without_empty_columns()
    }

    /// The predictions checked, one row each.
    fn predictions_grid(&self) -> Grid {
        let mut grid = Grid::new([
            "predicted by",
            "measured on",
            "change",
            "load",
            "predicted [95%]",
            "measured [95%]",
            "error",
            "held",
        ]);
        grid.left = vec![0, 1, 2, 7];
        let figure = |x: f64, interval: Option<[f64; 2]>| match interval {
            Some([lo, hi]) => format!("{} [{}–{}] {}", group(x), group(lo), group(hi), self.unit()),
            None => format!("{} {}", group(x), self.unit()),
        };
        for p in &self.predictions {
            grid.rows.push(vec![
                p.from.clone(),
                p.to.clone(),
                p.change.clone(),
                short(p.load),
                format!(
                    "{}{}",
                    if p.at_least { "at least " } else { "" },
                    figure(p.predicted, p.interval)
                ),
                figure(p.measured, p.measured_interval),
                format!("{:+.1}%", p.error * 100.0),
                p.held.words().to_string(),
            ]);
        }
        grid
    }

    /// Each variant's score on each criterion (0–5) and the total.
    fn scorecard_grid(&self) -> Grid {
        let mut header = vec!["variant".to_string()];
        header.extend(
            self.weights
                .iter()
                .map(|(c, w)| format!("{c} ({})", short(*w))),
        );
        header.push("total".to_string());
        let mut grid = Grid::new(header);
        grid.left = vec![0];
        for v in &self.variants {
            let mut row = vec![v.name.clone()];
            match &v.score {
                Some(s) => {
                    row.extend(s.criteria.iter().map(|(_, x)| format!("{x:.2}")));
                    row.push(format!("{:.2}", s.total));
                }
                None => row.extend((0..=self.weights.len()).map(|_| "-".to_string())),
            }
            grid.rows.push(row);
        }
        grid
    }

    /// The sentence on knobs no what-if predicts.
    fn unpredicted_line(&self) -> Option<String> {
        (!self.unpredicted.is_empty()).then(|| {
            format!(
                "no prediction is made for {}: the what-if has no rule for {} yet",
                self.unpredicted.join(", "),
                if self.unpredicted.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            )
        })
    }

    /// What each variant's runs hold within their objectives, a line per
    /// run: none when no run was judged by objectives.
    fn holds_lines(&self) -> Option<(String, Vec<String>)> {
        let lines: Vec<String> = self
            .variants
            .iter()
            .flat_map(|v| {
                let each = v.holds.len() > 1;
                v.holds.iter().zip(&v.runs).map(move |(answer, run)| {
                    if each {
                        format!("{} (run {run}): {answer}", v.name)
                    } else {
                        format!("{}: {answer}", v.name)
                    }
                })
            })
            .collect();
        (!lines.is_empty()).then(|| ("within the objectives".to_string(), lines))
    }

    /// The capacity answer as a heading and lines.
    fn capacity_lines(&self) -> Option<(String, Vec<String>)> {
        let c = self.capacity.as_ref()?;
        let mut lines = Vec::new();
        if c.met.is_empty() {
            lines.push("no variant met it in every run".to_string());
        }
        for m in &c.met {
            lines.push(format!(
                "met by {}: {} {} at load {} (mean of {} run{})",
                m.variant,
                group(m.throughput),
                self.unit(),
                short(m.load),
                m.runs,
                if m.runs == 1 { "" } else { "s" }
            ));
        }
        if !c.smallest.is_empty() {
            lines.push(format!(
                "the smallest that met it: {}",
                c.smallest.join("; ")
            ));
        }
        for u in &c.unsteady {
            lines.push(format!("{u} met it in some runs and not in others"));
        }
        for p in &c.predicted {
            let estimates = if p.estimates.is_empty() {
                String::new()
            } else {
                format!(", {}", p.estimates.join(", "))
            };
            let measured = match &p.measured_on {
                Some((to, x)) => format!("; measured as {to}: {} {}", group(*x), self.unit()),
                None => " (not measured)".to_string(),
            };
            lines.push(format!(
                "predicted: {} with {}: {} {} at load {}{estimates}{measured}",
                p.variant,
                p.change,
                group(p.throughput),
                self.unit(),
                short(p.load)
            ));
        }
        if !c.smallest_predicted.is_empty() {
            lines.push(format!(
                "the smallest predicted to meet it: {}",
                c.smallest_predicted.join("; ")
            ));
        }
        if c.met.is_empty() && c.predicted.is_empty() {
            lines.push(
                "none is predicted to: no variant's what-if (a doubled bottleneck, a second CPU) reaches it"
                    .to_string(),
            );
        }
        for n in &c.not_estimated {
            lines.push(format!(
                "{n}: the objectives cannot be estimated (no response time is predicted for an open loop)"
            ));
        }
        Some((format!("capacity: {}", c.asked), lines))
    }

    /// The terminal text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title());
        for t in self.matrix() {
            let width = t
                .rows
                .iter()
                .map(|(label, _)| label.chars().count())
                .max()
                .unwrap_or(1)
                .clamp(8, 40);
            let cell_width = t
                .rows
                .iter()
                .flat_map(|(_, cells)| cells.iter())
                .map(|(a, b)| a.chars().count().max(b.chars().count()))
                .chain(t.columns.iter().map(|c| c.chars().count()))
                .max()
                .unwrap_or(8)
                + 2;
            let _ = writeln!(
                out,
                "\n  {}{}",
                t.axes,
                if t.at.is_empty() {
                    String::new()
                } else {
                    format!("   ({})", t.at)
                }
            );
            let mut line = format!("  {:<width$}", "");
            for c in &t.columns {
                let _ = write!(line, "{c:>cell_width$}");
            }
            let _ = writeln!(out, "{line}");
            for (label, cells) in &t.rows {
                let mut peaks = format!("  {label:<width$}");
                let mut names = format!("  {:<width$}", "");
                for (peak, name) in cells {
                    let _ = write!(peaks, "{peak:>cell_width$}");
                    let _ = write!(names, "{name:>cell_width$}");
                }
                let _ = writeln!(out, "{peaks}\n{}", names.trim_end());
            }
        }
        let _ = write!(out, "\n{}", self.variants_grid().terminal("  "));
        for v in &self.variants {
            for missing in &v.not_done {
                let _ = writeln!(out, "  {}: not done: {missing}", v.name);
            }
        }
        if !self.predictions.is_empty() {
            let _ = write!(
                out,
                "\n  predictions checked (one variant's what-if against the variant with that change):\n{}",
                self.predictions_grid().terminal("    ")
            );
        }
        if let Some(line) = self.unpredicted_line() {
            let _ = writeln!(out, "  {line}");
        }
        if !self.weights.is_empty() {
            let _ = write!(
                out,
                "\n  scorecard (each criterion 0–5, the best measured variant 5; total weighted by the weights in brackets):\n{}",
                self.scorecard_grid().terminal("    ")
            );
        }
        for (heading, lines) in self.holds_lines().into_iter().chain(self.capacity_lines()) {
            let _ = writeln!(out, "\n  {heading}");
            for l in lines {
                let _ = writeln!(out, "    {l}");
            }
        }
        out
    }

    /// The report as Markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!("# {}\n", plain(&self.title()));
        for t in self.matrix() {
            let _ = writeln!(
                out,
                "\n## Matrix: {}{}\n",
                plain(&t.axes),
                if t.at.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", plain(&t.at))
                }
            );
            let _ = write!(out, "{}", matrix_grid(&t).markdown());
        }
        let _ = write!(out, "\n## Variants\n\n{}", self.variants_grid().markdown());
        for v in &self.variants {
            for missing in &v.not_done {
                let _ = writeln!(out, "\n- {}: not done: {}", plain(&v.name), plain(missing));
            }
        }
        if !self.predictions.is_empty() {
            let _ = write!(
                out,
                "\n## Predictions checked\n\n{}",
                self.predictions_grid().markdown()
            );
        }
        if let Some(line) = self.unpredicted_line() {
            let _ = writeln!(out, "\n{}.", plain(&line));
        }
        if !self.weights.is_empty() {
            let _ = write!(
                out,
                "\n## Scorecard\n\nEach criterion 0–5 (the best measured variant scores 5); the total is weighted by the weights in brackets.\n\n{}",
                self.scorecard_grid().markdown()
            );
        }
        for (heading, lines) in self.holds_lines().into_iter().chain(self.capacity_lines()) {
            let _ = writeln!(out, "\n## {}\n", plain(&heading));
            for l in lines {
                let _ = writeln!(out, "- {}", plain(&l));
            }
        }
        out
    }

    /// The report as one HTML page, with the variants' curves overlaid.
    pub(crate) fn html(&self) -> String {
        let title = escape(&self.title());
        let mut out = format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>perflab {title}</title><style>{}</style></head><body><h1>{title}</h1>",
            crate::report::html::STYLE
        );
        for t in self.matrix() {
            let _ = write!(
                out,
                "<h2>Matrix: {}{}</h2>{}",
                escape(&t.axes),
                if t.at.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", escape(&t.at))
                },
                matrix_grid(&t).html()
            );
        }
        let _ = write!(out, "<h2>Variants</h2>{}", self.variants_grid().html());
        let missing: Vec<String> = self
            .variants
            .iter()
            .flat_map(|v| {
                v.not_done
                    .iter()
                    .map(move |m| format!("<li>{}: not done: {}</li>", escape(&v.name), escape(m)))
            })
            .collect();
        if !missing.is_empty() {
            let _ = write!(out, "<ul>{}</ul>", missing.concat());
        }
        out.push_str("<h2>Curves</h2>");
        out.push_str(&self.curve_chart(false).render());
        out.push_str(&self.curve_chart(true).render());
        if !self.predictions.is_empty() {
            let _ = write!(
                out,
                "<h2>Predictions checked</h2>{}",
                self.predictions_grid().html()
            );
        }
        if let Some(line) = self.unpredicted_line() {
            let _ = write!(out, "<p>{}.</p>", escape(&line));
        }
        if !self.weights.is_empty() {
            let _ = write!(
                out,
                "<h2>Scorecard</h2><p>Each criterion 0–5 (the best measured variant scores 5); the total is weighted by the weights in brackets.</p>{}",
                self.scorecard_grid().html()
            );
        }
        for (heading, lines) in self.holds_lines().into_iter().chain(self.capacity_lines()) {
            let _ = write!(out, "<h2>{}</h2><ul>", escape(&heading));
            for l in lines {
                let _ = write!(out, "<li>{}</li>", escape(&l));
            }
            out.push_str("</ul>");
        }
        out.push_str("</body></html>\n");
        out
    }

    /// Every variant's throughput (or p95, on a log axis) against load.
    fn curve_chart(&self, latency: bool) -> Chart {
        let series = self
            .variants
            .iter()
            .map(|v| Series {
                name: v.name.clone(),
                points: v
                    .curve
                    .iter()
                    .map(|p| (p.load, if latency { p.p95_s } else { p.throughput }))
                    .collect(),
                dashed: false,
            })
            .collect();
        Chart {
            title: if latency {
                "p95 response time against load, every variant".to_string()
            } else {
                "Throughput against load, every variant".to_string()
            },
            x_label: "load (users, or offered rate /s)".to_string(),
            y_label: if latency {
                "p95".to_string()
            } else {
                self.unit().label().to_string()
            },
            log_x: false,
            log_y: latency,
            series,
            marks: Vec::new(),
            x_format: number,
            y_format: if latency { seconds } else { number },
        }
    }
}

/// A matrix table as a grid: each cell its peak and bottleneck.
fn matrix_grid(t: &MatrixTable) -> Grid {
    let mut header = vec![String::new()];
    header.extend(t.columns.iter().cloned());
    let mut grid = Grid::new(header);
    grid.left = vec![0];
    for (label, cells) in &t.rows {
        let mut row = vec![label.clone()];
        row.extend(cells.iter().map(|(peak, name)| {
            if name.is_empty() {
                peak.clone()
            } else {
                format!("{peak} · {name}")
            }
        }));
        grid.rows.push(row);
    }
    grid
}

#[cfg(test)]
mod tests {
    use super::group;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(group(1234567.4), "1,234,567");
        assert_eq!(group(999.6), "1,000");
        assert_eq!(group(12.0), "12");
    }
}
