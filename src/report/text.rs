//! The text writer: what perflab prints on a terminal — a stored run's
//! table ([`super::render_run`]), a verdict ([`super::render_verdict`]),
//! a comparison ([`super::render_compare`]), the doctor's findings
//! ([`super::render_doctor`]), a data check ([`super::render_check`]), the list of runs, the hosts' differences
//! ([`super::listing`]) and a watched sample's USE line
//! ([`super::use_line`]). The renderers live in their own modules; this
//! one only picks.

use super::format::{Document, Format, FormatError, Output};

/// `output` as terminal text.
pub(super) fn write(output: &Output<'_>) -> Result<Document, FormatError> {
    let text = match output {
        Output::Runs { store, rows } => super::listing::render_runs(store, rows),
        Output::Run(run) => super::render_run(run),
        Output::Verdict { verdict, run } => super::render_verdict(verdict, *run),
        Output::Comparison(c) => super::render_compare(c),
        Output::Doctor(report) => super::render_doctor(report),
        Output::Check { what, report } => format!("{what}\n{}", super::render_check(report)),
        Output::HostDiff {
            a,
            b,
            facts,
            differences,
        } => super::listing::render_host_diff(*a, *b, *facts, differences),
        Output::Sample { at, sample } => format!("{at} {}\n", super::use_line(sample)),
        Output::Report { .. } => return Err(FormatError::unsupported(output, Format::Text)),
    };
    Ok(Document::Text(text))
}
