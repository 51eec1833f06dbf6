//! A mistake in a lab file, placed where it is: `FILE:LINE:COLUMN:
//! message`, from the byte offset the TOML reader gives.

/// A mistake in a lab file, placed at its line and column.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub(crate) struct LabFileError {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
}

/// Makes the error for a byte offset of the file and a message.
pub(crate) type At<'a> = dyn Fn(usize, String) -> LabFileError + 'a;

/// The 1-based line and column of byte `offset` of `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
