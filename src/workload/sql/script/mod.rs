//! A user's SQL script in pgbench's format, read into a small program.
//!
//! A script is SQL commands, each ended by `;` (outside quotes and
//! comments; a command may span lines) or by `\gset [prefix]`, which keeps
//! its first row's columns as variables; and backslash commands, one per
//! line (a `\` at the end of a line continues it): `\set NAME EXPR`,
//! `\sleep N [us|ms|s]`, `\if`/`\elif`/`\else`/`\endif`. `:name` in SQL
//! is the variable's value, bound as a parameter of the prepared
//! statement (never pasted into the SQL text). What perflab does not run
//! (`\shell`, `\setshell`, pipelines) is refused with the file and line.
//!
//! The program is flat: `\if` chains become conditional jumps, so running
//! one operation walks a vector and allocates nothing.

pub(crate) mod draw;
pub(crate) mod expr;
mod sql_text;
mod value;
pub(crate) mod vars;

use expr::Expr;
pub(crate) use sql_text::{is_name, plain_statements, Piece, Statement};
use vars::Slots;

/// The longest script read (bytes).
pub(crate) const MAX_SCRIPT: usize = 1024 * 1024;

/// The most commands one script may hold.
const MAX_COMMANDS: usize = 10_000;

/// One step of a script's program.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Runs statement `stmt` of the script.
    Sql { stmt: usize },
    /// `\set`.
    Set { slot: usize, expr: Expr },
    /// `\sleep`: the amount (a constant or a variable) times the unit.
    Sleep { amount: Amount, unit_us: u64 },
    /// Goes on at `to` unless `cond` holds (`\if`, `\elif`).
    JumpUnless { cond: Expr, to: usize },
    /// Goes on at `to` (the end of a branch taken).
    Jump { to: usize },
}

/// How long a `\sleep` is, in its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Amount {
    Const(i64),
    Var(usize),
}

/// A script, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Script {
    /// Its name: the file as given, or the built-in's name.
    pub(crate) name: String,
    /// Its share of the operations, relative to the other scripts'.
    pub(crate) weight: u32,
    pub(crate) program: Vec<Step>,
    pub(crate) statements: Vec<Statement>,
    /// The slots a `\set` of this script assigns.
    pub(crate) assigns: Vec<usize>,
}

impl Script {
    /// Whether any statement keeps columns as variables (`\gset`).
    pub(crate) fn gsets(&self) -> bool {
        self.statements.iter().any(|s| s.gset.is_some())
    }
}

/// An open `\if` while reading: where its pending test jumps, and the
/// jumps out of the branches already closed.
struct OpenIf {
    line: usize,
    pending: Option<usize>,
    exits: Vec<usize>,
    seen_else: bool,
}

/// Reads `text`, the script called `name`; variables take slots in
/// `slots`. An error is one line: `NAME:LINE: problem; fix`.
pub(crate) fn parse(name: &str, text: &str, slots: &mut Slots) -> Result<Script, String> {
    let mut reader = Reader {
        name,
        slots,
        script: Script {
            name: name.to_string(),
            weight: 1,
            program: Vec::new(),
            statements: Vec::new(),
            assigns: Vec::new(),
        },
        ifs: Vec::new(),
        sql: sql_text::Pending::default(),
    };
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        let number = index + 1;
        if reader.sql.is_empty() && line.trim_start().starts_with('\\') {
            let mut whole = line.trim().to_string();
            while whole.ends_with('\\') && !whole.ends_with("\\\\") {
                whole.pop();
                match lines.next() {
                    Some((_, next)) => whole.push_str(next.trim()),
                    None => break,
                }
            }
            reader.meta(&whole, number)?;
        } else {
            reader.sql_line(line, number)?;
        }
        if reader.script.program.len() > MAX_COMMANDS {
            return Err(format!(
                "{name}:{number}: more than {MAX_COMMANDS} commands; split the script"
            ));
        }
    }
    reader.finish()
}

struct Reader<'a> {
    name: &'a str,
    slots: &'a mut Slots,
    script: Script,
    ifs: Vec<OpenIf>,
    sql: sql_text::Pending,
}

impl Reader<'_> {
    fn at(&self, line: usize, problem: impl std::fmt::Display) -> String {
        format!("{}:{line}: {problem}", self.name)
    }

    fn sql_line(&mut self, line: &str, number: usize) -> Result<(), String> {
        let ended = self
            .sql
            .feed(line, number)
            .map_err(|e| self.at(number, e))?;
        for command in ended {
            self.push_statement(command)?;
        }
        Ok(())
    }

    fn push_statement(&mut self, command: sql_text::Command) -> Result<(), String> {
        let line = command.line;
        let statement = Statement::read(&command, self.slots).map_err(|e| self.at(line, e))?;
        self.script.statements.push(statement);
        let stmt = self.script.statements.len() - 1;
        self.script.program.push(Step::Sql { stmt });
        Ok(())
    }

    fn meta(&mut self, text: &str, line: usize) -> Result<(), String> {
        let body = text.strip_prefix('\\').unwrap_or(text);
        let (word, rest) = body
            .split_once(char::is_whitespace)
            .map_or((body, ""), |(w, r)| (w, r.trim()));
        match word.to_ascii_lowercase().as_str() {
            "set" => self.set(rest, line),
            "sleep" => self.sleep(rest, line),
            "if" => {
                let cond = self.expr(rest, line)?;
                self.script.program.push(Step::JumpUnless { cond, to: 0 });
                let pending = Some(self.script.program.len() - 1);
                self.ifs.push(OpenIf { line, pending, exits: Vec::new(), seen_else: false });
                Ok(())
            }
            "elif" | "else" => self.branch(word, rest, line),
            "endif" => self.endif(line),
            "shell" | "setshell" => Err(self.at(
                line,
                format_args!("perflab runs no shell command from a script (\\{word}); compute the value with \\set, or pass it with -D NAME=VALUE"),
            )),
            "startpipeline" | "endpipeline" | "syncpipeline" => Err(self.at(
                line,
                format_args!("\\{word}: pipelines in scripts are not supported; remove the pipeline commands (each statement then takes its own round trip)"),
            )),
            "gset" | "aset" => Err(self.at(line, format_args!("\\{word} must follow an SQL command on the same line, in place of its `;`"))),
            "" => Err(self.at(line, "a lone backslash; a backslash command needs its name, e.g. \\set")),
            _ => Err(self.at(
                line,
                format_args!("unknown command \\{word}; perflab runs \\set, \\sleep, \\if, \\elif, \\else, \\endif and \\gset"),
            )),
        }
    }

    fn expr(&mut self, text: &str, line: usize) -> Result<Expr, String> {
        if text.is_empty() {
            return Err(self.at(line, "an expression is missing"));
        }
        expr::parse(text, self.slots).map_err(|e| self.at(line, e))
    }

    fn set(&mut self, rest: &str, line: usize) -> Result<(), String> {
        let (name, text) = rest.split_once(char::is_whitespace).ok_or_else(|| {
            self.at(
                line,
                "\\set needs a name and an expression, e.g. \\set aid random(1, 100000)",
            )
        })?;
        if !sql_text::is_name(name) {
            return Err(self.at(
                line,
                format_args!("`{name}` is no variable name (letters, digits, _)"),
            ));
        }
        let slot = self.slots.slot(name).map_err(|e| self.at(line, e))?;
        let expr = self.expr(text.trim(), line)?;
        self.script.assigns.push(slot);
        self.script.program.push(Step::Set { slot, expr });
        Ok(())
    }

    fn sleep(&mut self, rest: &str, line: usize) -> Result<(), String> {
        let mut words = rest.split_whitespace();
        let amount = words
            .next()
            .ok_or_else(|| self.at(line, "\\sleep needs a time, e.g. \\sleep 10 ms"))?;
        let unit_us = match words.next().map(str::to_ascii_lowercase).as_deref() {
            None | Some("s") => 1_000_000,
            Some("ms") => 1_000,
            Some("us") => 1,
            Some(other) => {
                return Err(self.at(
                    line,
                    format_args!("\\sleep's unit is us, ms or s, not `{other}`"),
                ))
            }
        };
        if let Some(extra) = words.next() {
            return Err(self.at(
                line,
                format_args!("\\sleep takes a time and a unit; `{extra}` is one word too many"),
            ));
        }
        let amount = match amount.strip_prefix(':') {
            Some(var) => Amount::Var(self.slots.slot(var).map_err(|e| self.at(line, e))?),
            None => Amount::Const(amount.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(
                || {
                    self.at(
                        line,
                        format_args!("\\sleep's time `{amount}` is no whole number"),
                    )
                },
            )?),
        };
        self.script.program.push(Step::Sleep { amount, unit_us });
        Ok(())
    }

    fn branch(&mut self, word: &str, rest: &str, line: usize) -> Result<(), String> {
        let here = self.script.program.len();
        let Some(open) = self.ifs.last_mut() else {
            return Err(self.at(line, format_args!("\\{word} without \\if")));
        };
        if open.seen_else {
            return Err(format!(
                "{}:{line}: \\{word} after \\else (the \\if of line {})",
                self.name, open.line
            ));
        }
        // The branch before ends by jumping to the \endif.
        open.exits.push(here);
        let pending = open.pending.take();
        self.script.program.push(Step::Jump { to: 0 });
        if let Some(at) = pending {
            patch(&mut self.script.program, at, here + 1);
        }
        if word.eq_ignore_ascii_case("else") {
            if !rest.is_empty() {
                return Err(self.at(line, "\\else takes nothing after it"));
            }
            if let Some(open) = self.ifs.last_mut() {
                open.seen_else = true;
            }
            return Ok(());
        }
        let cond = self.expr(rest, line)?;
        self.script.program.push(Step::JumpUnless { cond, to: 0 });
        let at = self.script.program.len() - 1;
        if let Some(open) = self.ifs.last_mut() {
            open.pending = Some(at);
        }
        Ok(())
    }

    fn endif(&mut self, line: usize) -> Result<(), String> {
        let open = self
            .ifs
            .pop()
            .ok_or_else(|| self.at(line, "\\endif without \\if"))?;
        let end = self.script.program.len();
        for at in open.exits.into_iter().chain(open.pending) {
            patch(&mut self.script.program, at, end);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Script, String> {
        let last = self.sql.finish().map_err(|e| format!("{}{e}", self.name))?;
        if let Some(command) = last {
            self.push_statement(command)?;
        }
        if let Some(open) = self.ifs.last() {
            return Err(self.at(open.line, "\\if without \\endif"));
        }
        if self.script.statements.is_empty() {
            return Err(format!("{}: the script holds no SQL command", self.name));
        }
        Ok(self.script)
    }
}

/// Points the jump at `at` to `to`.
fn patch(program: &mut [Step], at: usize, to: usize) {
    if let Some(Step::Jump { to: t } | Step::JumpUnless { to: t, .. }) = program.get_mut(at) {
        *t = to;
    }
}

#[cfg(test)]
mod tests;
