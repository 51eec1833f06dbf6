//! The output seam. A command says *what* it writes (an [`Output`]: a
//! stored run, a verdict, a comparison, a doctor's findings…) and *in
//! which form* (a [`Format`]); [`super::render`] hands it to the one writer of
//! that form — [`super::text`], [`super::json`], [`super::markdown`],
//! [`super::csv`], [`super::html`] — and returns the exact bytes to print
//! or save as a [`Document`]. Commands only choose and write; no command
//! formats.

use crate::analyze::compare::Comparison;
use crate::analyze::Verdict;
use crate::doctor::inventory::Difference;
use crate::probe::counters::HostSample;
use crate::store::{RunId, RunRow, StoredRun};
use std::path::Path;

/// A form of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// For a terminal: aligned tables and lines.
    Text,
    /// Pretty-printed JSON (one compact object per line for a stream of samples).
    Json,
    /// GitHub-flavoured Markdown.
    Markdown,
    /// Comma-separated values, one file per table.
    Csv,
    /// One self-contained HTML page.
    Html,
}

impl Format {
    /// The form's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "JSON",
            Format::Markdown => "Markdown",
            Format::Csv => "CSV",
            Format::Html => "HTML",
        }
    }
}

/// A run and its verdict, as the report writers take them.
pub(crate) struct ReportRun<'a> {
    pub(crate) run: &'a StoredRun,
    pub(crate) verdict: &'a Verdict,
    /// The latency distributions to show: the chosen steps' (`--step`).
    pub(crate) distributions: Vec<super::sections::Distribution>,
}

/// What a command writes.
pub(crate) enum Output<'a> {
    /// `perflab runs`: every run in the store at `store`.
    Runs { store: &'a Path, rows: &'a [RunRow] },
    /// `perflab show`: one stored run.
    Run(&'a StoredRun),
    /// `perflab analyze`: the verdict of run `run`.
    Verdict { verdict: &'a Verdict, run: RunId },
    /// `perflab compare`: runs compared with the first.
    Comparison(&'a Comparison),
    /// `perflab report`: runs with their verdicts, compared with the first
    /// when there are several.
    Report {
        runs: &'a [ReportRun<'a>],
        comparison: Option<&'a Comparison>,
    },
    /// `perflab doctor`: the findings, worst first.
    Doctor(&'a crate::doctor::Report),
    /// `perflab check`: what was checked (a heading) and the check's rules.
    Check {
        what: &'a str,
        report: &'a crate::workload::CheckReport,
    },
    /// `perflab diff-hosts`: the facts in which the hosts of runs `a` and
    /// `b` differ, of `facts` recorded.
    HostDiff {
        a: RunId,
        b: RunId,
        facts: usize,
        differences: &'a [Difference],
    },
    /// `perflab watch`: one sample of a host, taken at `at` (RFC 3339).
    Sample { at: &'a str, sample: &'a HostSample },
}

impl Output<'_> {
    /// What this is, in messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Output::Runs { .. } => "the list of runs",
            Output::Run(_) => "a stored run",
            Output::Verdict { .. } => "a verdict",
            Output::Comparison(_) => "a comparison",
            Output::Report { .. } => "a report",
            Output::Doctor(_) => "the doctor's findings",
            Output::Check { .. } => "a data check",
            Output::HostDiff { .. } => "a host comparison",
            Output::Sample { .. } => "a host sample",
        }
    }
}

/// What a writer made: the exact bytes to print or save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Document {
    /// One text, for standard output or one file.
    Text(String),
    /// Files of a directory, by name (CSV: `steps.csv`, `intervals.csv`).
    Files(Vec<(&'static str, String)>),
}

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FormatError {
    /// The writer of `format` has no form for this output.
    #[error("there is no {format} form of {what}")]
    Unsupported {
        what: &'static str,
        format: &'static str,
    },
    /// serde could not serialise the value (a map with non-string keys).
    #[error("cannot write {what} as JSON: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
}

impl FormatError {
    /// The error for a writer that has no form for `output`.
    pub(super) fn unsupported(output: &Output<'_>, format: Format) -> Self {
        FormatError::Unsupported {
            what: output.name(),
            format: format.name(),
        }
    }
}

/// `text` ending in exactly one line break, as report files are saved.
pub(super) fn one_final_newline(text: &str) -> String {
    format!("{}\n", text.trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Finding, Report, Severity};
    use crate::report::render;

    fn findings() -> Report {
        Report {
            findings: vec![Finding {
                severity: Severity::Warning,
                area: "network".to_string(),
                title: "eth0 runs at half duplex".to_string(),
                evidence: vec!["/sys/class/net/eth0/duplex = half".to_string()],
                why: "collisions".to_string(),
                fix: "set full duplex".to_string(),
            }],
            unavailable: vec!["cpufreq".to_string()],
            flush: None,
        }
    }

    fn text(document: Document) -> String {
        match document {
            Document::Text(text) => text,
            Document::Files(files) => panic!("one text expected, got {} files", files.len()),
        }
    }

    #[test]
    fn each_writer_refuses_what_it_has_no_form_for() {
        let report = findings();
        let doctor = Output::Doctor(&report);
        for format in [Format::Markdown, Format::Csv, Format::Html] {
            let e = render(format, &doctor).expect_err("no such form");
            assert_eq!(
                e.to_string(),
                format!(
                    "there is no {} form of the doctor's findings",
                    format.name()
                )
            );
        }
        let rows = Vec::new();
        let runs = Output::Runs {
            store: Path::new("perflab.db"),
            rows: &rows,
        };
        assert!(matches!(
            render(Format::Json, &runs),
            Err(FormatError::Unsupported { .. })
        ));
        let report = Output::Report {
            runs: &[],
            comparison: None,
        };
        assert!(render(Format::Text, &report).is_err());
        assert!(render(Format::Json, &report).is_err());
    }

    #[test]
    fn json_is_pretty_printed_with_one_final_line_break() {
        let report = findings();
        let json = text(render(Format::Json, &Output::Doctor(&report)).expect("JSON"));
        assert!(json.starts_with("{\n  \"findings\": [\n    {\n"), "{json}");
        assert!(json.ends_with("}\n") && !json.ends_with("\n\n"), "{json}");
        let back: Report = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, report);
    }

    #[test]
    fn a_watched_sample_is_one_json_line_with_its_time_or_a_use_line() {
        let sample = HostSample {
            procs_running: Some(3),
            ..HostSample::default()
        };
        let output = Output::Sample {
            at: "2026-11-23T16:00:00Z",
            sample: &sample,
        };
        let line = text(render(Format::Json, &output).expect("JSON"));
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(line.ends_with('\n'));
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(value["at"], "2026-11-23T16:00:00Z");
        assert_eq!(value["procs_running"], 3);
        let line = text(render(Format::Text, &output).expect("text"));
        assert!(line.starts_with("2026-11-23T16:00:00Z "), "{line}");
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn the_doctor_s_findings_print_worst_first_with_evidence_and_fix() {
        let report = findings();
        let out = text(render(Format::Text, &Output::Doctor(&report)).expect("text"));
        assert_eq!(
            out,
            "perflab doctor: 0 critical, 1 warning, 0 info\n\
             \nWARNING  network    eth0 runs at half duplex\n\
             \x20 evidence  /sys/class/net/eth0/duplex = half\n\
             \x20 why       collisions\n\
             \x20 fix       set full duplex\n\
             \nnot available on this host:\n\
             \x20 - cpufreq\n"
        );
    }

    #[test]
    fn report_files_end_in_one_line_break() {
        assert_eq!(one_final_newline("a\n\n\n"), "a\n");
        assert_eq!(one_final_newline("<html></html>"), "<html></html>\n");
    }
}
