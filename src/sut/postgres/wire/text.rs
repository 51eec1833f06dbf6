//! Statements of any shape on perflab's own PostgreSQL connection, for a
//! user's scripts: a statement is parsed once with parameters of no stated
//! type, to learn whether the server takes it and which columns it
//! returns; and a reply's data row is read column by column.

use super::super::PgTarget;
use super::{lost, Wire};
use crate::error::PlanError;
use postgres_protocol::message::frontend;

/// A statement prepared with untyped parameters.
#[derive(Debug, Clone)]
pub(crate) struct TextStatement {
    /// The names of the columns it returns (none for a statement that
    /// returns no rows).
    pub(crate) columns: Vec<String>,
}

impl Wire {
    /// Parses `sql` as statement `name` with `params` parameters whose
    /// types the server infers, and learns the columns it returns.
    pub(crate) async fn prepare_text(
        &mut self,
        target: &PgTarget,
        name: &str,
        sql: &str,
        params: usize,
    ) -> anyhow::Result<TextStatement> {
        frontend::parse(
            name,
            sql,
            std::iter::repeat_n(0u32, params),
            &mut self.write,
        )?;
        frontend::describe(b'S', name, &mut self.write)?;
        frontend::sync(&mut self.write);
        self.owed += 1;
        self.send().await.map_err(|e| lost(target, &e))?;
        let mut columns = Vec::new();
        let failed = self.prepared(target, Some(&mut columns)).await?;
        if let Some((code, text)) = failed {
            anyhow::bail!(PlanError::new(format!(
                "PostgreSQL at {} cannot prepare it ({code}: {text})",
                target.display
            )));
        }
        Ok(TextStatement { columns })
    }
}

/// The columns of a DataRow body: each one's bytes, or none for NULL. A
/// body that makes no sense ends the walk (every length is checked).
pub(crate) fn columns_of(body: &[u8]) -> impl Iterator<Item = Option<&[u8]>> {
    let count = body
        .get(..2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 2usize;
    (0..count).map_while(move |_| {
        let len = body.get(at..at.checked_add(4)?)?;
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        at = at.checked_add(4)?;
        if len < 0 {
            return Some(None);
        }
        let end = at.checked_add(usize::try_from(len).ok()?)?;
        let value = body.get(at..end)?;
        at = end;
        Some(Some(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_row_is_read_column_by_column_and_a_bad_one_stops_the_walk() {
        let mut body = vec![0, 3];
        body.extend_from_slice(&2i32.to_be_bytes());
        body.extend_from_slice(b"42");
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&3i32.to_be_bytes());
        body.extend_from_slice(b"abc");
        let cols: Vec<_> = columns_of(&body).collect();
        assert_eq!(cols, [Some(&b"42"[..]), None, Some(&b"abc"[..])]);
        // A length past the end, or a huge one: the walk ends, no panic.
        let mut bad = vec![0, 2];
        bad.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(columns_of(&bad).count(), 0);
        assert_eq!(columns_of(&[0xff]).count(), 0);
    }
}
