//! Small hand-written SVG line charts for the HTML report: linear or
//! logarithmic axes with ticks, several series with a legend, point
//! markers whose `<title>` gives the exact value on hover, vertical marks
//! (a knee, step boundaries). Everything is escaped text; no script.

use std::fmt::Write;

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    /// Drawn dashed (a model, a bound) and without markers.
    pub(crate) dashed: bool,
}

/// A vertical mark at an x value, with a label.
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    pub(crate) x: f64,
    pub(crate) label: String,
}

/// A chart's axes and content.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) log_x: bool,
    pub(crate) log_y: bool,
    pub(crate) series: Vec<Series>,
    pub(crate) marks: Vec<Mark>,
    /// How x values are printed on ticks and hovers (the percentile plot
    /// shows 1/(1−p) as a percentile).
    pub(crate) x_format: fn(f64) -> String,
    pub(crate) y_format: fn(f64) -> String,
}

/// Escapes text for HTML, SVG and any XML (the gate's JUnit file); a
/// control character (but newline and tab), which no HTML may hold and a
/// terminal showing the page's source would obey, and the two
/// noncharacters XML 1.0 cannot hold (U+FFFE, U+FFFF) become `�`.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c.is_control() && c != '\n' && c != '\t')
                || c == '\u{fffe}'
                || c == '\u{ffff}' =>
            {
                out.push('\u{fffd}')
            }
            c => out.push(c),
        }
    }
    out
}

/// A quantile as a percentile label: 0.5 → `50%`, 0.99999 → `99.999%`.
pub(crate) fn percentile(q: f64) -> String {
    let text = format!("{:.4}", q * 100.0);
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

/// A number the way a tick shows it.
pub(crate) fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A duration in seconds the way a tick shows it.
pub(crate) fn seconds(v: f64) -> String {
    crate::units::Latency::secs(v).to_string()
}

/// A share as a percentage.
pub(crate) fn percent(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

const PALETTE: [&str; 8] = [
    "#1f5fa8", "#c4431b", "#2e8b3d", "#7b3fa0", "#b8860b", "#00838f", "#6d4c41", "#d81b60",
];

const W: f64 = 640.0;
const H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 64.0;

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Option<Self> {
        let vals: Vec<f64> = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        if vals.is_empty() {
            return None;
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if from_zero {
                lo = lo.min(0.0);
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            hi += (hi - lo) * 0.05;
        }
        Some(Axis { lo, hi, log })
    }

    /// Position in 0..=1.
    fn at(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut out = Vec::new();
            let mut v = self.lo;
            while v <= self.hi * 1.000_001 {
                out.push(v);
                v *= 10.0;
            }
            return out;
        }
        let span = self.hi - self.lo;
        let raw = span / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| span / s <= 6.0)
            .unwrap_or(mag * 10.0);
        let mut out = Vec::new();
        let mut v = (self.lo / step).ceil() * step;
        while v <= self.hi {
            out.push(v);
            v += step;
        }
        out
    }
}

/// The height of one legend line.
const LEGEND_ROW: f64 = 14.0;
/// The longest name a legend of four columns holds.
const LEGEND_COLUMN_CHARS: usize = 24;

impl Chart {
    /// Whether the legend is one name per line (more than eight series, or
    /// a name too long for four columns) rather than two rows of four.
    fn listed_legend(&self) -> bool {
        self.series.len() > 8
            || self
                .series
                .iter()
                .any(|s| s.name.chars().count() > LEGEND_COLUMN_CHARS)
    }

    /// The height a listed legend adds below the chart's own.
    fn legend_below(&self) -> f64 {
        if self.listed_legend() {
            (self.series.len() as f64 - 2.0).max(0.0) * LEGEND_ROW
        } else {
            0.0
        }
    }

    /// The chart as an inline `<svg>` element, or a note when it has no data.
    pub(crate) fn render(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let (Some(x), Some(y)) = (
            Axis::new(xs.chain(self.marks.iter().map(|m| m.x)), self.log_x, false),
            Axis::new(ys, self.log_y, true),
        ) else {
            return format!(
                "<p class=\"nodata\">{}: no data in this run.</p>",
                escape(&self.title)
            );
        };
        let plot = Plot { chart: self, x, y };
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {:.0}\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
            H + self.legend_below(),
            t = escape(&self.title)
        );
        let _ = write!(
            out,
            "<text x=\"{LEFT}\" y=\"18\" class=\"ctitle\">{}</text>",
            escape(&self.title)
        );
        plot.grid(&mut out);
        plot.axis_labels(&mut out);
        plot.marks(&mut out);
        for (i, s) in self.series.iter().enumerate() {
            plot.series(&mut out, i, s);
        }
        out.push_str("</svg>");
        out
    }
}

/// The plotting area's width and height inside the margins.
const PLOT_W: f64 = W - LEFT - RIGHT;
const PLOT_H: f64 = H - TOP - BOTTOM;

/// A chart with its axes fixed: draws each part.
struct Plot<'a> {
    chart: &'a Chart,
    x: Axis,
    y: Axis,
}

impl Plot<'_> {
    /// Where an x value falls, in SVG units.
    fn px(&self, v: f64) -> f64 {
        LEFT + self.x.at(v) * PLOT_W
    }

    /// Where a y value falls, in SVG units.
    fn py(&self, v: f64) -> f64 {
        TOP + (1.0 - self.y.at(v)) * PLOT_H
    }

    /// Whether a point can be drawn (finite, and positive on a log y axis).
    fn drawable(&self, (a, b): (f64, f64)) -> bool {
        a.is_finite() && b.is_finite() && (!self.chart.log_y || b > 0.0)
    }

    /// Grid lines with their tick labels, y then x.
    fn grid(&self, out: &mut String) {
        for t in self.y.ticks() {
            let yy = self.py(t);
            let _ = write!(
                out,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/><text x=\"{}\" y=\"{:.1}\" class=\"ytick\">{}</text>",
                W - RIGHT,
                LEFT - 4.0,
                yy + 4.0,
                escape(&(self.chart.y_format)(t))
            );
        }
        for t in self.x.ticks() {
            let xx = self.px(t);
            let _ = write!(
                out,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{}\" class=\"grid\"/><text x=\"{xx:.1}\" y=\"{}\" class=\"xtick\">{}</text>",
                TOP + PLOT_H,
                TOP + PLOT_H + 14.0,
                escape(&(self.chart.x_format)(t))
            );
        }
    }

    /// The axes' names.
    fn axis_labels(&self, out: &mut String) {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" class=\"xlabel\">{}</text><text x=\"12\" y=\"{}\" class=\"ylabel\" transform=\"rotate(-90 12 {})\">{}</text>",
            LEFT + PLOT_W / 2.0,
            TOP + PLOT_H + 30.0,
            escape(&self.chart.x_label),
            TOP + PLOT_H / 2.0,
            TOP + PLOT_H / 2.0,
            escape(&self.chart.y_label)
        );
    }

    /// The vertical marks with their labels.
    fn marks(&self, out: &mut String) {
        for m in &self.chart.marks {
            let xx = self.px(m.x);
            let _ = write!(
                out,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{}\" class=\"mark\"><title>{}</title></line><text x=\"{:.1}\" y=\"{}\" class=\"marklabel\">{}</text>",
                TOP + PLOT_H,
                escape(&m.label),
                xx + 3.0,
                TOP + 10.0,
                escape(&m.label)
            );
        }
    }

    /// Series `i`: its line, its point markers (solid lines only) and its
    /// legend entry; nothing when no point can be drawn.
    fn series(&self, out: &mut String, i: usize, s: &Series) {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .filter(|p| self.drawable(**p))
            .map(|(a, b)| format!("{:.1},{:.1}", self.px(*a), self.py(*b)))
            .collect();
        if pts.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"{}\"{} points=\"{}\"/>",
            if s.dashed { 1.5 } else { 2.0 },
            if s.dashed {
                " stroke-dasharray=\"5 4\""
            } else {
                ""
            },
            pts.join(" ")
        );
        if !s.dashed {
            self.point_markers(out, s, color);
        }
        let (lx, ly) = if self.chart.listed_legend() {
            (LEFT, H - 26.0 + i as f64 * LEGEND_ROW)
        } else {
            (
                LEFT + (i % 4) as f64 * (PLOT_W / 4.0),
                H - 14.0 + if i >= 4 { 0.0 } else { -12.0 },
            )
        };
        let _ = write!(
            out,
            "<line x1=\"{lx:.1}\" x2=\"{:.1}\" y1=\"{ly:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"2\"{}/><text x=\"{:.1}\" y=\"{:.1}\" class=\"legend\">{}</text>",
            lx + 16.0,
            if s.dashed { " stroke-dasharray=\"5 4\"" } else { "" },
            lx + 20.0,
            ly + 4.0,
            escape(&s.name)
        );
    }

    /// A dot per point whose hover title gives its exact values.
    fn point_markers(&self, out: &mut String, s: &Series, color: &str) {
        let c = self.chart;
        for (a, b) in s.points.iter().filter(|p| self.drawable(**p)) {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"><title>{}: {} = {}, {} = {}</title></circle>",
                self.px(*a),
                self.py(*b),
                escape(&s.name),
                escape(&c.x_label),
                escape(&(c.x_format)(*a)),
                escape(&c.y_label),
                escape(&(c.y_format)(*b))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_outside_is_escaped() {
        assert_eq!(
            escape("<script>a&b</script>\""),
            "&lt;script&gt;a&amp;b&lt;/script&gt;&quot;"
        );
        // What no XML 1.0 document may hold, and a terminal's escapes.
        assert_eq!(
            escape("it's\u{1b}[31m\r\u{85}\u{fffe}\u{ffff}\n\tok"),
            "it&#39;s\u{fffd}[31m\u{fffd}\u{fffd}\u{fffd}\u{fffd}\n\tok"
        );
        let chart = Chart {
            title: "<b>x</b>".to_string(),
            x_label: "users".to_string(),
            y_label: "tps".to_string(),
            log_x: false,
            log_y: true,
            series: vec![Series {
                name: "run <1>".to_string(),
                points: vec![(1.0, 10.0), (2.0, 100.0)],
                dashed: false,
            }],
            marks: vec![],
            x_format: number,
            y_format: number,
        };
        let svg = chart.render();
        assert!(!svg.contains("<b>") && svg.contains("&lt;b&gt;"));
        assert!(svg.contains("run &lt;1&gt;: users = 2, tps = 100"));
        assert_eq!(svg.matches("<circle").count(), 2);
    }

    #[test]
    fn a_chart_without_data_says_so() {
        let chart = Chart {
            title: "empty".to_string(),
            x_label: "x".to_string(),
            y_label: "y".to_string(),
            log_x: false,
            log_y: false,
            series: vec![],
            marks: vec![],
            x_format: number,
            y_format: number,
        };
        assert!(chart.render().contains("no data"));
    }
}
