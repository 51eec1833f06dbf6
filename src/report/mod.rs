//! Reports, made from stored runs only. [`format`] is the seam every
//! command prints or writes through: an [`Output`] in a [`Format`], made
//! by one writer per format — `text` (the terminal renderers: `table`,
//! `verdict`, `host`, `compare`, `doctor`, `listing`), `json`,
//! `markdown`, `csv` and [`html`]. Also the live progress of a running
//! sweep.

mod generators;
mod host;
mod json;
mod objectives;
mod progress;
mod table;

mod compare;
mod csv;
mod doctor;
mod figures;
pub(crate) mod format;
pub(crate) mod grid;
pub(crate) mod history;
pub(crate) mod html;
mod listing;
pub(crate) mod markdown;
pub(crate) mod sections;
pub(crate) mod svg;
mod text;
mod verdict;
pub(crate) use compare::render_compare;
pub(crate) use doctor::render_doctor;
pub(crate) use format::{Document, Format, FormatError, Output, ReportRun};
pub(crate) use host::{host_tables, use_line};
pub(crate) use json::run_json;
pub(crate) use objectives::judgement_words;
pub(crate) use progress::Progress;
pub(crate) use table::{render_check, render_run};
pub(crate) use verdict::{render_verdict, what_if_lines};

/// Writes `output` in `format`.
pub(crate) fn render(format: Format, output: &Output<'_>) -> Result<Document, FormatError> {
    match format {
        Format::Text => text::write(output),
        Format::Json => json::write(output),
        Format::Markdown => markdown::write(output),
        Format::Csv => csv::write(output),
        Format::Html => html::write(output),
    }
}
