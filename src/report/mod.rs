//! Reports, made from stored runs only. [`format`] is the seam every
//! command prints or writes through: an [`Output`] in a [`Format`], made
//! by one writer per format — `text` (the terminal renderers: `table`,
//! `verdict`, `host`, `compare`, `doctor`, `listing`), `json`,
//! `markdown`, `csv` and [`html`]. Also the live progress of a running
//! sweep.

mod generators;
mod host;
mod json;
mod progress;
mod table;

mod compare;
mod csv;
mod doctor;
pub mod format;
pub mod grid;
pub mod html;
mod listing;
pub mod markdown;
pub mod sections;
pub mod svg;
mod text;
mod verdict;
pub use compare::render_compare;
pub use doctor::render_doctor;
pub use format::{Document, Format, FormatError, Output, ReportRun};
pub use host::{host_table, host_tables, use_line};
pub use json::{pretty, run_json, SCHEMA_ID};
pub use markdown::{render_compare_md, render_markdown};
pub use progress::Progress;
pub use table::{render_check, render_run, step_table};
pub use verdict::{render_verdict, what_if_lines};

/// Writes `output` in `format`.
pub fn render(format: Format, output: &Output<'_>) -> Result<Document, FormatError> {
    match format {
        Format::Text => text::write(output),
        Format::Json => json::write(output),
        Format::Markdown => markdown::write(output),
        Format::Csv => csv::write(output),
        Format::Html => html::write(output),
    }
}
