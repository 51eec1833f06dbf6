//! The SQL commands of a script: where each ends (a `;` or `\gset`
//! outside quotes, dollar quotes and comments), and its `:name`
//! variables, which become the parameters of a prepared statement. A
//! backend writes the statement with its own placeholders (`$1` or `?`),
//! so a variable's value never becomes SQL text.

use super::vars::Slots;

/// A part of a statement's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    /// The statement's next parameter.
    Param,
}

/// A command as read, before its variables are resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) line: usize,
    pieces: Vec<RawPiece>,
    gset: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RawPiece {
    Text(String),
    Var(String),
}

/// One SQL statement of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    pub(crate) pieces: Vec<Piece>,
    /// The variable bound to each parameter, in order.
    pub(crate) params: Vec<usize>,
    /// `\gset`'s prefix: its first row's columns become variables.
    pub(crate) gset: Option<String>,
    /// Its first line in the script.
    pub(crate) line: usize,
}

impl Statement {
    /// Resolves a command's variables to slots.
    pub(crate) fn read(command: &Command, slots: &mut Slots) -> Result<Statement, String> {
        let mut pieces = Vec::new();
        let mut params = Vec::new();
        for piece in &command.pieces {
            match piece {
                RawPiece::Text(t) => pieces.push(Piece::Text(t.clone())),
                RawPiece::Var(name) => {
                    params.push(slots.slot(name)?);
                    pieces.push(Piece::Param);
                }
            }
        }
        Ok(Statement {
            pieces,
            params,
            gset: command.gset.clone(),
            line: command.line,
        })
    }

    /// The statement's text with parameter `i` (from 1) written by `placeholder`.
    pub(crate) fn render(&self, placeholder: impl Fn(usize) -> String) -> String {
        let mut out = String::new();
        let mut n = 0;
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Param => {
                    n += 1;
                    out.push_str(&placeholder(n));
                }
            }
        }
        out
    }

    /// The statement as the script wrote it, on one line, for messages.
    pub(crate) fn shown(&self, names: &[&str]) -> String {
        let mut params = self.params.iter();
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Param => {
                    out.push(':');
                    out.push_str(
                        params
                            .next()
                            .and_then(|s| names.get(*s))
                            .copied()
                            .unwrap_or("?"),
                    );
                }
            }
        }
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// The statements of a file of plain SQL (`--init` on a server that
/// takes one statement at a time), each with its first line: split where
/// a script's are (at a `;` outside quotes and comments, comments
/// dropped), a `:name` left as written. An error is `:LINE: problem`.
pub(crate) fn plain_statements(text: &str) -> Result<Vec<(usize, String)>, String> {
    let mut pending = Pending::default();
    let mut commands = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        commands.extend(
            pending
                .feed(line, number)
                .map_err(|e| format!(":{number}: {e}"))?,
        );
    }
    commands.extend(pending.finish()?);
    Ok(commands
        .into_iter()
        .map(|c| {
            let sql = c
                .pieces
                .iter()
                .map(|p| match p {
                    RawPiece::Text(t) => t.clone(),
                    RawPiece::Var(name) => format!(":{name}"),
                })
                .collect();
            (c.line, sql)
        })
        .collect())
}

/// Whether `name` is a variable's name: a letter or `_`, then letters, digits, `_`.
pub(crate) fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where the reader stands inside SQL text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Quote {
    #[default]
    None,
    /// Inside `'…'`, `"…"` or `` `…` ``: until the same character.
    Char(char),
    /// Inside `$tag$…$tag$`.
    Dollar(String),
    /// Inside `/* … */`, nested this deep.
    Comment(u32),
}

/// A command being read, line by line.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    command: Command,
    text: String,
    quote: Quote,
}

impl Pending {
    /// True when no command has begun.
    pub(crate) fn is_empty(&self) -> bool {
        self.command.pieces.is_empty() && self.text.trim().is_empty() && self.quote == Quote::None
    }

    /// Reads one line; the commands it ends.
    pub(crate) fn feed(&mut self, line: &str, number: usize) -> Result<Vec<Command>, String> {
        let mut ended = Vec::new();
        if self.is_empty() {
            self.text.clear();
            self.command.line = number;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match &mut self.quote {
                Quote::Comment(depth) => {
                    if c == '*' && next == Some('/') {
                        *depth -= 1;
                        i += 1;
                        if *depth == 0 {
                            self.quote = Quote::None;
                        }
                    } else if c == '/' && next == Some('*') {
                        *depth += 1;
                        i += 1;
                    }
                }
                Quote::Char(q) => {
                    self.text.push(c);
                    if c == *q {
                        self.quote = Quote::None;
                    }
                }
                Quote::Dollar(tag) => {
                    if chars[i..]
                        .iter()
                        .take(tag.chars().count())
                        .copied()
                        .eq(tag.chars())
                    {
                        let n = tag.chars().count();
                        self.text.push_str(tag);
                        self.quote = Quote::None;
                        i += n;
                        continue;
                    }
                    self.text.push(c);
                }
                Quote::None => {
                    if c == '-' && next == Some('-') {
                        break;
                    }
                    match self.plain(&chars, i, number)? {
                        Step::Next(n) => i = n,
                        Step::End { next, gset } => {
                            if let Some(command) = self.end(gset) {
                                ended.push(command);
                            }
                            self.command.line = number;
                            i = next;
                        }
                    }
                    continue;
                }
            }
            i += 1;
        }
        if !self.is_empty() {
            self.text.push('\n');
        }
        Ok(ended)
    }

    /// Reads at `i` outside quotes.
    fn plain(&mut self, chars: &[char], i: usize, number: usize) -> Result<Step, String> {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            ';' => {
                return Ok(Step::End {
                    next: i + 1,
                    gset: None,
                })
            }
            '\'' | '"' | '`' => self.quote = Quote::Char(c),
            '/' if next == Some('*') => {
                self.quote = Quote::Comment(1);
                return Ok(Step::Next(i + 2));
            }
            '$' => {
                let prev_word =
                    i > 0 && (chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_');
                let tag_end = chars[i + 1..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphabetic() || *c == '_'))
                    .map(|p| i + 1 + p);
                if let Some(end) = tag_end.filter(|e| chars[*e] == '$' && !prev_word) {
                    let tag: String = chars[i..=end].iter().collect();
                    self.text.push_str(&tag);
                    self.quote = Quote::Dollar(tag);
                    return Ok(Step::Next(end + 1));
                }
            }
            ':' if next == Some(':') => {
                self.text.push_str("::");
                return Ok(Step::Next(i + 2));
            }
            ':' if next.is_some_and(|n| n.is_ascii_alphabetic() || n == '_') => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
                    .map_or(chars.len(), |p| i + 1 + p);
                self.flush_text();
                let name: String = chars[i + 1..end].iter().collect();
                self.command.pieces.push(RawPiece::Var(name));
                return Ok(Step::Next(end));
            }
            '\\' => return self.backslash(chars, i, number),
            _ => {}
        }
        self.text.push(c);
        Ok(Step::Next(i + 1))
    }

    /// A backslash inside SQL: `\gset [prefix]` ends the command.
    fn backslash(&mut self, chars: &[char], i: usize, _number: usize) -> Result<Step, String> {
        let rest: String = chars[i + 1..].iter().collect();
        let mut words = rest.split_whitespace();
        match words.next() {
            Some("gset") => {
                let prefix = words.next().unwrap_or("").to_string();
                if !prefix.is_empty() && !is_name(&prefix) {
                    return Err(format!("\\gset's prefix `{prefix}` is no variable name"));
                }
                if let Some(extra) = words.next() {
                    return Err(format!(
                        "`{extra}` after \\gset {prefix}; \\gset takes one prefix at most"
                    ));
                }
                Ok(Step::End {
                    next: chars.len(),
                    gset: Some(prefix),
                })
            }
            Some("aset") => Err("\\aset is not supported; use \\gset after each command".into()),
            Some(w) if w.starts_with(';') => {
                Err("\\; (commands sent together) is not supported; end each command with ;".into())
            }
            _ => Err(format!(
                "`\\{}` inside an SQL command; a backslash command goes on a line of its own",
                rest.split_whitespace().next().unwrap_or("")
            )),
        }
    }

    fn flush_text(&mut self) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.command.pieces.push(RawPiece::Text(text));
        }
    }

    /// Ends the command being read; none when it holds no SQL.
    fn end(&mut self, gset: Option<String>) -> Option<Command> {
        self.flush_text();
        let mut command = std::mem::take(&mut self.command);
        command.gset = gset;
        trim(&mut command.pieces);
        let blank = command
            .pieces
            .iter()
            .all(|p| matches!(p, RawPiece::Text(t) if t.trim().is_empty()));
        (!blank).then_some(command)
    }

    /// The last command, when the script ends without its `;`.
    pub(crate) fn finish(&mut self) -> Result<Option<Command>, String> {
        if self.quote != Quote::None {
            return Err(format!(
                ":{}: a quote or comment opened in this command never closes",
                self.command.line
            ));
        }
        Ok(self.end(None))
    }
}

/// Trims whitespace at both ends of a command's text.
fn trim(pieces: &mut Vec<RawPiece>) {
    if let Some(RawPiece::Text(t)) = pieces.first_mut() {
        *t = t.trim_start().to_string();
    }
    if let Some(RawPiece::Text(t)) = pieces.last_mut() {
        *t = t.trim_end().to_string();
    }
    pieces.retain(|p| !matches!(p, RawPiece::Text(t) if t.is_empty()));
}

/// What the reader does next.
enum Step {
    /// Goes on at this character.
    Next(usize),
    /// The command ends; reading goes on at `next`.
    End { next: usize, gset: Option<String> },
}
