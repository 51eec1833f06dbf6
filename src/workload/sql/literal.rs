//! A script's variable written into a statement's text as a literal, for
//! the servers on which perflab runs each statement as one text query
//! (PostgreSQL's simple query, MySQL/MariaDB's COM_QUERY), as a client
//! running a script in its default mode does. A value only ever becomes
//! a literal: a number as itself, a text holding a number as that number,
//! any other text as a string the server cannot read as SQL, whatever its
//! settings.

use super::program;
use super::script::vars::{Param, Vars};
use super::script::{Piece, Statement};
use std::fmt::Write as _;

/// Whose SQL the literal is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    /// MySQL and MariaDB: a backslash in a quoted string is an escape
    /// unless `sql_mode` says NO_BACKSLASH_ESCAPES, so a text holding one
    /// (or a NUL) is written in hexadecimal, read the same in either mode.
    Mysql,
}

/// What a value cannot be written as in `dialect`: MySQL has no
/// infinite or not-a-number double.
pub(crate) const NOT_FINITE: &str = "double-not-finite";

/// Writes `statement` into `out` (cleared first) with each variable it
/// binds as a literal of `dialect`; the code of a value that cannot be
/// written.
pub(crate) fn write_statement(
    out: &mut String,
    statement: &Statement,
    vars: &Vars,
    dialect: Dialect,
) -> Result<(), &'static str> {
    out.clear();
    let mut params = program::params(statement, vars);
    for piece in &statement.pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Param => literal(out, params.next().unwrap_or(Param::Null), dialect)?,
        }
    }
    Ok(())
}

/// Writes `param` into `out` as a literal of `dialect`: a negative number
/// in parentheses (so that `-:x` never becomes a comment), a text holding
/// a number as that number, any other text quoted (its quotes doubled;
/// on PostgreSQL NULs dropped, which it cannot hold).
pub(crate) fn literal(
    out: &mut String,
    param: Param<'_>,
    dialect: Dialect,
) -> Result<(), &'static str> {
    match param {
        Param::Null => out.push_str("NULL"),
        Param::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Param::Int(i) if i < 0 => {
            out.push_str("(-");
            digits(out, i.unsigned_abs());
            out.push(')');
        }
        Param::Int(i) => digits(out, i.unsigned_abs()),
        Param::Double(d) if !d.is_finite() => match dialect {
            Dialect::Mysql => return Err(NOT_FINITE),
            Dialect::Postgres if d.is_nan() => out.push_str("'NaN'::float8"),
            Dialect::Postgres if d > 0.0 => out.push_str("'Infinity'::float8"),
            Dialect::Postgres => out.push_str("'-Infinity'::float8"),
        },
        Param::Double(d) if d < 0.0 => {
            let _ = write!(out, "({d:?})");
        }
        Param::Double(d) => {
            let _ = write!(out, "{d:?}");
        }
        Param::Text(t) => {
            if let Some(number) = number_in(t) {
                return literal(out, number, dialect);
            }
            text(out, t, dialect);
        }
    }
    Ok(())
}

/// Writes `n` in decimal. Without the formatting machinery, which took
/// about 1 µs of a 5-statement transaction's 19 µs of user CPU (its
/// variables written in) in a profile of pgbench's simple-update.
fn digits(out: &mut String, mut n: u64) {
    // u64::MAX has 20 digits.
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if let Ok(written) = std::str::from_utf8(&buf[at..]) {
        out.push_str(written);
    }
}

/// The number a text holds, trimmed: an integer, or a finite decimal
/// written with digits, a sign, a point and an exponent only.
fn number_in(t: &str) -> Option<Param<'static>> {
    let trimmed = t.trim();
    if let Ok(i) = trimmed.parse::<i64>() {
        return Some(Param::Int(i));
    }
    let d = trimmed.parse::<f64>().ok()?;
    let plain = trimmed
        .bytes()
        .all(|b| b.is_ascii_digit() || b".-+eE".contains(&b));
    (d.is_finite() && plain).then_some(Param::Double(d))
}

/// A text as a string literal of `dialect`.
fn text(out: &mut String, t: &str, dialect: Dialect) {
    if dialect == Dialect::Mysql && t.contains(['\\', '\0']) {
        out.push_str("_utf8mb4 X'");
        for b in t.bytes() {
            let _ = write!(out, "{b:02X}");
        }
        out.push('\'');
        return;
    }
    out.push('\'');
    for c in t.chars().filter(|c| *c != '\0') {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(param: Param<'_>, dialect: Dialect) -> Result<String, &'static str> {
        let mut out = String::new();
        literal(&mut out, param, dialect).map(|()| out)
    }

    #[test]
    fn a_value_is_written_as_a_literal_never_as_sql() {
        for (param, want) in [
            (Param::Int(5), "5"),
            (Param::Int(-5), "(-5)"),
            (Param::Int(0), "0"),
            (Param::Int(i64::MAX), "9223372036854775807"),
            (Param::Int(i64::MIN), "(-9223372036854775808)"),
            (Param::Double(1.5), "1.5"),
            (Param::Double(-0.25), "(-0.25)"),
            (Param::Double(f64::INFINITY), "'Infinity'::float8"),
            (Param::Null, "NULL"),
            (Param::Bool(true), "true"),
            (Param::Text(" 42 "), "42"),
            (Param::Text("9.99"), "9.99"),
            (Param::Text("-3"), "(-3)"),
            (Param::Text("it's"), "'it''s'"),
            (Param::Text("1; DROP TABLE x; --"), "'1; DROP TABLE x; --'"),
            (Param::Text("inf"), "'inf'"),
            (Param::Text("a\0b"), "'ab'"),
            (Param::Text("a\\b"), "'a\\b'"),
        ] {
            assert_eq!(
                written(param, Dialect::Postgres),
                Ok(want.to_string()),
                "{param:?}"
            );
        }
    }

    #[test]
    fn on_mysql_a_backslash_cannot_end_the_string_in_any_sql_mode() {
        // `'\'` would leave the string open under the default sql_mode
        // and the rest of the statement would be the value's.
        assert_eq!(
            written(Param::Text("x\\' OR 1=1 -- "), Dialect::Mysql),
            Ok("_utf8mb4 X'785C27204F5220313D31202D2D20'".to_string())
        );
        assert_eq!(
            written(Param::Text("a\0b"), Dialect::Mysql),
            Ok("_utf8mb4 X'610062'".to_string())
        );
        assert_eq!(
            written(Param::Text("it's"), Dialect::Mysql),
            Ok("'it''s'".to_string())
        );
        assert_eq!(
            written(Param::Int(-7), Dialect::Mysql),
            Ok("(-7)".to_string())
        );
        assert_eq!(
            written(Param::Double(f64::NAN), Dialect::Mysql),
            Err(NOT_FINITE)
        );
    }
}
