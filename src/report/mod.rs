//! Reports, made from stored runs only: the terminal table and run view,
//! the live progress of a running sweep, and the JSON export.

mod host;
mod json;
mod progress;
mod table;

mod compare;
pub mod grid;
pub mod html;
mod markdown;
pub mod sections;
pub mod svg;
mod verdict;
pub use compare::{render_compare, render_compare_md};
pub use host::{host_table, host_tables, use_line};
pub use json::{run_json, SCHEMA_ID};
pub use markdown::render_markdown;
pub use progress::Progress;
pub use table::{render_check, render_run, step_table};
pub use verdict::{render_verdict, what_if_lines};
