//! A table of text cells, written three ways: aligned for the terminal,
//! as a Markdown table, and as HTML. Cells may hold text from outside (an
//! error kind, a target name): Markdown escapes pipes and angle brackets,
//! HTML everything.

use super::svg::escape;
use std::fmt::Write;

/// A header row and body rows of equal width.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Grid {
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    /// Columns written flush left (text); the rest align right (figures).
    pub(crate) left: Vec<usize>,
}

impl Grid {
    /// A grid from a header and no rows yet.
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Grid {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            left: Vec::new(),
        }
    }

    /// A grid whose first row is the header.
    pub(crate) fn from_rows(mut rows: Vec<Vec<String>>) -> Self {
        let header = if rows.is_empty() {
            Vec::new()
        } else {
            rows.remove(0)
        };
        Grid {
            header,
            rows,
            left: Vec::new(),
        }
    }

    /// Drops every column whose body cells are all `-` (nothing measured).
    pub(crate) fn without_empty_columns(mut self) -> Self {
        let keep: Vec<bool> = (0..self.header.len())
            .map(|c| {
                self.rows.is_empty() || self.rows.iter().any(|r| r.get(c).is_some_and(|v| v != "-"))
            })
            .collect();
        let pick = |row: Vec<String>| -> Vec<String> {
            row.into_iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(v, _)| v)
                .collect()
        };
        let mut left = Vec::new();
        let mut index = 0;
        for (c, k) in keep.iter().enumerate() {
            if *k {
                if self.left.contains(&c) {
                    left.push(index);
                }
                index += 1;
            }
        }
        self.header = pick(std::mem::take(&mut self.header));
        self.rows = std::mem::take(&mut self.rows)
            .into_iter()
            .map(pick)
            .collect();
        self.left = left;
        self
    }

    fn widths(&self) -> Vec<usize> {
        (0..self.header.len())
            .map(|i| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r.get(i).map_or(0, |v| v.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Aligned columns, two spaces apart, each line indented by `indent`.
    pub(crate) fn terminal(&self, indent: &str) -> String {
        let widths = self.widths();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (v, w))| {
                    if self.left.contains(&i) {
                        format!("{v:<w$}")
                    } else {
                        format!("{v:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "{indent}{}", cells.join("  ").trim_end());
        }
        out
    }

    /// A Markdown (GitHub) table.
    pub(crate) fn markdown(&self) -> String {
        let cell = |v: &String| {
            v.replace('|', "\\|")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('\n', " ")
        };
        let line = |row: &Vec<String>| {
            format!(
                "| {} |\n",
                row.iter().map(cell).collect::<Vec<_>>().join(" | ")
            )
        };
        let mut out = line(&self.header);
        let rule: Vec<&str> = (0..self.header.len())
            .map(|i| {
                if self.left.contains(&i) {
                    ":---"
                } else {
                    "---:"
                }
            })
            .collect();
        let _ = writeln!(out, "|{}|", rule.join("|"));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    /// An HTML table, every cell escaped.
    pub(crate) fn html(&self) -> String {
        let class = |i: usize| {
            if self.left.contains(&i) {
                " class=\"l\""
            } else {
                ""
            }
        };
        let mut out = String::from("<table><tr>");
        for (i, h) in self.header.iter().enumerate() {
            let _ = write!(out, "<th{}>{}</th>", class(i), escape(h));
        }
        out.push_str("</tr>");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, v) in row.iter().enumerate() {
                let _ = write!(out, "<td{}>{}</td>", class(i), escape(v));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        let mut g = Grid::new(["load", "tps", "disk", "error"]);
        g.left = vec![3];
        g.rows
            .push(vec!["1".into(), "10".into(), "-".into(), "a|b".into()]);
        g.rows
            .push(vec!["16".into(), "1250".into(), "-".into(), "<x>".into()]);
        g
    }

    #[test]
    fn empty_columns_go_and_the_left_columns_follow() {
        let g = grid().without_empty_columns();
        assert_eq!(g.header, ["load", "tps", "error"]);
        assert_eq!(g.left, [2]);
        assert_eq!(
            g.terminal(""),
            "load   tps  error\n   1    10  a|b\n  16  1250  <x>\n"
        );
    }

    #[test]
    fn markdown_escapes_pipes_and_html_escapes_everything() {
        let g = grid().without_empty_columns();
        assert_eq!(
            g.markdown(),
            "| load | tps | error |\n|---:|---:|:---|\n| 1 | 10 | a\\|b |\n| 16 | 1250 | &lt;x&gt; |\n"
        );
        let html = g.html();
        assert!(html.contains("<td class=\"l\">&lt;x&gt;</td>"), "{html}");
        assert!(!html.contains("<x>"));
    }
}
