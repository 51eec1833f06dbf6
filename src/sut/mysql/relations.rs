//! What InnoDB's buffer pool is asked for, relation by relation, for the
//! memory what-if ([`crate::analyze::memory`]): each table's clustered
//! index (its rows: `DATA_LENGTH` in information_schema.TABLES) and its
//! secondary indexes together (`INDEX_LENGTH`), with the rows each was
//! asked for, from performance_schema's
//! `table_io_waits_summary_by_index_usage`.
//!
//! A row an operation reads or inserts through an index is taken as one
//! access to one of that index's leaf pages: `COUNT_FETCH + COUNT_INSERT`.
//! An update or a delete fetches its row first, so `COUNT_UPDATE` and
//! `COUNT_DELETE` would count the same page twice; the index's inner pages
//! are few and always held, and are left out. Row access that used no
//! index (`INDEX_NAME` NULL: a scan, an insert into a table without a key)
//! is left out too: a scan's rows share their pages, so its rows are no
//! count of pages. The pool's size and page come from SHOW GLOBAL STATUS
//! (`Innodb_buffer_pool_pages_total`, `Innodb_page_size`), its misses from
//! `Innodb_buffer_pool_reads`.
//!
//! The summary is kept only when performance_schema is ON (a managed
//! MariaDB has it on; a server's default is off): without it no relations
//! are reported, and the what-if says what it needs.

use super::Row;

/// The most relations one look reports (a database of thousands of
/// tables costs one sample this many, not its memory).
pub(crate) const RELATIONS: usize = 200;

/// Each InnoDB table of the connection's database: its name, the bytes of
/// its rows and of its secondary indexes, and the rows asked for through
/// its clustered index and through the others.
pub(crate) const SQL: &str = "SELECT t.TABLE_NAME, t.DATA_LENGTH, t.INDEX_LENGTH,
       COALESCE(SUM(CASE WHEN i.INDEX_NAME = 'PRIMARY' THEN i.COUNT_FETCH + i.COUNT_INSERT END), 0),
       COALESCE(SUM(CASE WHEN i.INDEX_NAME <> 'PRIMARY' THEN i.COUNT_FETCH + i.COUNT_INSERT END), 0)
FROM information_schema.TABLES t
LEFT JOIN performance_schema.table_io_waits_summary_by_index_usage i
       ON i.OBJECT_SCHEMA = t.TABLE_SCHEMA AND i.OBJECT_NAME = t.TABLE_NAME
      AND i.INDEX_NAME IS NOT NULL
WHERE t.TABLE_SCHEMA = DATABASE() AND t.ENGINE = 'InnoDB'
GROUP BY t.TABLE_NAME, t.DATA_LENGTH, t.INDEX_LENGTH
ORDER BY t.DATA_LENGTH + t.INDEX_LENGTH DESC
LIMIT 200";

/// The relations of a result of [`SQL`], as (name, accesses, bytes): a
/// table's rows under its name, its secondary indexes (when it has any
/// bytes of them) as `name (secondary indexes)`. A row with a field the
/// server did not send as a number is passed over.
pub(crate) fn of_rows(rows: &[Row]) -> Vec<(String, f64, f64)> {
    let mut out = Vec::new();
    for row in rows.iter().take(RELATIONS) {
        let (Some(name), Some(data), Some(index), Some(by_key), Some(by_others)) = (
            row.text(0),
            row.get::<f64>(1),
            row.get::<f64>(2),
            row.get::<f64>(3),
            row.get::<f64>(4),
        ) else {
            continue;
        };
        out.push((name.to_string(), by_key, data));
        if index > 0.0 {
            out.push((format!("{name} (secondary indexes)"), by_others, index));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query asks for no more relations than a look keeps.
    #[test]
    fn the_query_keeps_as_many_relations_as_a_look_reports() {
        assert!(SQL.ends_with(&format!("LIMIT {RELATIONS}")), "{SQL}");
    }

    /// A table with a secondary index gives two relations, one without
    /// gives one, and a row the server sent oddly is passed over.
    #[test]
    fn each_table_is_its_rows_and_its_secondary_indexes() {
        let rows = vec![
            Row::of(&[
                Some("accounts"),
                Some("16269312"),
                Some("0"),
                Some("402"),
                Some("0"),
            ]),
            Row::of(&[
                Some("orders"),
                Some("65536"),
                Some("32768"),
                Some("10"),
                Some("7"),
            ]),
            Row::of(&[Some("odd"), None, Some("0"), Some("1"), Some("0")]),
        ];
        assert_eq!(
            of_rows(&rows),
            vec![
                ("accounts".to_string(), 402.0, 16_269_312.0),
                ("orders".to_string(), 10.0, 65_536.0),
                ("orders (secondary indexes)".to_string(), 7.0, 32_768.0),
            ]
        );
    }
}
