//! `--flow FILE`: a user's journey through a web application, its
//! requests in order (login → browse → buy), run by every virtual user
//! from the top again when it reaches the end.
//!
//! The file is a targets file (`targets`: `METHOD URL`, `Name: value`
//! lines, `@body`, `# name:`) with a few more lines:
//! - after a request's line, `capture VAR header NAME`, `capture VAR
//!   cookie NAME` or `capture VAR json PATH` takes a value from its reply,
//!   and `think DURATION` (`500ms`, `exp:1s`, `uniform:1s..3s`) is the
//!   user's pause after it (closed loop);
//! - before the first request, `data FILE.csv` gives each user a row of a
//!   CSV file (a header row names its columns; user `u` takes row `u`
//!   modulo the rows), `redirects follow` follows a 3xx reply's
//!   `Location` on the target (a path, a URL of it, or a relative
//!   reference; up to [`MAX_REDIRECTS`]), and `cookies off`
//!   stops keeping the cookies the server sets (kept per user by default).
//!
//! `${VAR}` in a URL, a header's value or a body is the user's value of
//! VAR: a CSV column, a captured value, `user` (the user's number) or
//! `iteration` (the journeys it began). A value is used only after the
//! request that captures it; a journey whose request fails or whose
//! capture finds nothing begins again from the top, its captures and
//! cookies forgotten.

mod cookies;
mod head;
pub(crate) mod json;
mod location;
mod run;
#[cfg(test)]
mod tests;
mod user;

pub(crate) use run::FlowShared;
pub(crate) use user::FlowUser;

use super::targets::{self, Allowed, Targets};
use crate::plan::ThinkTime;
use std::path::Path;

/// The longest value a flow sends (a CSV field, a captured value), bytes.
pub(crate) const MAX_VALUE: usize = 8 << 10;
/// The most of a reply's body kept for a JSON capture, bytes.
pub(crate) const MAX_KEPT_BODY: usize = 1 << 20;
/// The most cookies a user keeps; more are not kept.
pub(crate) const MAX_COOKIES: usize = 50;
const _: () = assert!(
    MAX_COOKIES <= 64,
    "a request's cookies are chosen in a 64-bit mask"
);
/// The most redirects followed for one request.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// The largest CSV file read, bytes.
const MAX_DATA: u64 = 16 << 20;
/// The most variables a flow captures.
const MAX_CAPTURED: usize = 64;

/// A value a request is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Var {
    /// The user's number.
    User,
    /// The journeys the user began (from 0).
    Iteration,
    /// A column of the user's CSV row.
    Data(usize),
    /// A value captured from a reply.
    Captured(usize),
}

/// A text with `${VAR}` in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(Box<[u8]>),
    Var(Var),
}

/// Where a captured value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    Header(String),
    Cookie(String),
    Json(Vec<json::Seg>),
}

/// One `capture` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capture {
    pub(crate) slot: usize,
    pub(crate) source: Source,
}

/// One request of the journey, as the users write it.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) method: targets::HttpMethod,
    /// The path and query; below the base's path when `relative`.
    pub(crate) path: Vec<Piece>,
    pub(crate) relative: bool,
    pub(crate) headers: Vec<(String, Vec<Piece>)>,
    pub(crate) body: Option<Vec<Piece>>,
    pub(crate) captures: Vec<Capture>,
    pub(crate) think: ThinkTime,
    /// Whether the reply's body is kept (a JSON capture reads it).
    pub(crate) keeps_body: bool,
}

/// One CSV row: a value per column.
pub(crate) type Row = Vec<Box<[u8]>>;

/// A parsed flow.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    pub(crate) steps: Vec<Step>,
    /// The CSV's rows, each a value per column.
    pub(crate) rows: Vec<Row>,
    pub(crate) columns: Vec<String>,
    /// The captured variables' names, by slot.
    pub(crate) captured: Vec<String>,
    pub(crate) follow_redirects: bool,
    pub(crate) cookies: bool,
}

/// The flow's own lines, taken out before the targets parser reads the
/// rest: each with its line number and the request it follows.
struct Directives {
    data: Option<(String, usize)>,
    follow_redirects: bool,
    cookies: bool,
    /// (line, request index, words after `capture`).
    captures: Vec<(usize, usize, Vec<String>)>,
    /// (line, request index, think).
    thinks: Vec<(usize, usize, ThinkTime)>,
    /// Each request's first line.
    request_lines: Vec<usize>,
}

/// Reads `file`: one line (`FILE:LINE: why; fix`) when it cannot be used.
/// Returns the requests as a targets file holds them (names, bodies,
/// methods) and the flow over them.
pub(crate) fn read(file: &Path, allowed: Allowed<'_>) -> Result<(Targets, Flow), String> {
    let shown = file.display().to_string();
    let text = targets::read_bounded(file, targets::MAX_FILE)
        .map_err(|e| format!("{shown}: {e}"))
        .and_then(|b| String::from_utf8(b).map_err(|_| format!("{shown}: not UTF-8 text")))?;
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let at = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    };
    parse(
        &text,
        &shown,
        allowed,
        |p| {
            targets::read_bounded(&at(p), targets::MAX_BODY)
                .map_err(|e| format!("{}: {e}", at(p).display()))
        },
        |p| {
            targets::read_bounded(&at(p), MAX_DATA).map_err(|e| format!("{}: {e}", at(p).display()))
        },
    )
}

/// Parses a flow's text; `body` reads a body file and `data` the CSV.
pub(crate) fn parse(
    text: &str,
    file: &str,
    allowed: Allowed<'_>,
    body: impl FnMut(&Path) -> Result<Vec<u8>, String>,
    mut data: impl FnMut(&Path) -> Result<Vec<u8>, String>,
) -> Result<(Targets, Flow), String> {
    let (rest, d) = directives(text).map_err(|(n, why)| format!("{file}:{n}: {why}"))?;
    let requests = targets::parse(&rest, file, allowed, body)?;
    let (columns, rows) = match &d.data {
        Some((path, n)) => {
            let bytes = data(Path::new(path)).map_err(|e| {
                format!("{file}:{n}: the data file {e}; give a readable CSV file of at most 16 MiB")
            })?;
            csv(&bytes).map_err(|why| format!("{file}:{n}: the data file {path}: {why}"))?
        }
        None => (Vec::new(), Vec::new()),
    };
    let mut flow = Flow {
        steps: Vec::new(),
        rows,
        columns,
        captured: Vec::new(),
        follow_redirects: d.follow_redirects,
        cookies: d.cookies,
    };
    // Every variable a capture line names, in the file's order, and the
    // request whose reply first sets it.
    let mut first_set: Vec<usize> = Vec::new();
    let mut captures: Vec<Vec<Capture>> = vec![Vec::new(); requests.requests.len()];
    for (n, request, words) in &d.captures {
        let capture = capture_of(words, &mut flow.captured, &mut first_set, *request)
            .map_err(|why| format!("{file}:{n}: {why}"))?;
        captures[*request].push(capture);
    }
    let mut thinks = vec![ThinkTime::Zero; requests.requests.len()];
    for (n, request, think) in &d.thinks {
        if thinks[*request] != ThinkTime::Zero {
            return Err(format!(
                "{file}:{n}: a second think line for one request; give one"
            ));
        }
        thinks[*request] = *think;
    }
    for (i, r) in requests.requests.iter().enumerate() {
        let n = d.request_lines.get(i).copied().unwrap_or(0);
        let step = step_of(r, &flow, &first_set, i, std::mem::take(&mut captures[i]))
            .map_err(|why| format!("{file}:{n}: {why}"))?;
        flow.steps.push(Step {
            think: thinks[i],
            ..step
        });
    }
    Ok((requests, flow))
}

/// The words that begin a flow's own lines.
const DIRECTIVES: [&str; 5] = ["capture", "think", "data", "redirects", "cookies"];

/// Whether a line is a request's first (as the targets parser tells).
fn is_request_line(trimmed: &str) -> bool {
    !trimmed.starts_with('#')
        && !trimmed.starts_with('@')
        && trimmed
            .split_whitespace()
            .next()
            .is_some_and(|w| w.bytes().all(|b| b.is_ascii_uppercase()))
}

/// The flow's own lines taken out of `text` (each left as an empty
/// comment, so that line numbers and the request a header follows stay).
fn directives(text: &str) -> Result<(String, Directives), (usize, String)> {
    let mut d = Directives {
        data: None,
        follow_redirects: false,
        cookies: true,
        captures: Vec::new(),
        thinks: Vec::new(),
        request_lines: Vec::new(),
    };
    let mut rest = String::with_capacity(text.len());
    let mut requests = 0usize;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim();
        let mut words = trimmed.split_whitespace();
        let first = words.next().unwrap_or_default();
        if !DIRECTIVES.contains(&first) {
            if is_request_line(trimmed) {
                requests += 1;
                d.request_lines.push(n);
            }
            rest.push_str(line);
            rest.push('\n');
            continue;
        }
        rest.push_str("#\n");
        let args: Vec<String> = words.map(str::to_string).collect();
        directive(&mut d, first, args, requests, n).map_err(|why| (n, why))?;
    }
    Ok((rest, d))
}

/// One flow line: `first` and its words, after `requests` requests.
fn directive(
    d: &mut Directives,
    first: &str,
    args: Vec<String>,
    requests: usize,
    n: usize,
) -> Result<(), String> {
    let file_wide = matches!(first, "data" | "redirects" | "cookies");
    if file_wide && requests > 0 {
        return Err(format!(
            "'{first}' is the whole flow's; put it before the first request"
        ));
    }
    if !file_wide && requests == 0 {
        return Err(format!(
            "'{first}' belongs to a request; put it after its METHOD URL line"
        ));
    }
    let one = |what: &str| match args.as_slice() {
        [a] => Ok(a.clone()),
        _ => Err(format!("'{first}' takes one word: {what}")),
    };
    match first {
        "data" => {
            if d.data.is_some() {
                return Err("a second data line; give one CSV file".into());
            }
            d.data = Some((one("data FILE.csv")?, n));
        }
        "redirects" => {
            d.follow_redirects = match one("redirects follow|keep")?.as_str() {
                "follow" => true,
                "keep" => false,
                other => return Err(format!("'redirects {other}': give follow or keep")),
            }
        }
        "cookies" => {
            d.cookies = match one("cookies on|off")?.as_str() {
                "on" => true,
                "off" => false,
                other => return Err(format!("'cookies {other}': give on or off")),
            }
        }
        "think" => {
            let think = ThinkTime::parse(&one("think 500ms, exp:1s or uniform:1s..3s")?)
                .map_err(|e| format!("think: {e}; e.g. think 500ms or think exp:1s"))?;
            d.thinks.push((n, requests - 1, think));
        }
        _ => d.captures.push((n, requests - 1, args)),
    }
    Ok(())
}

/// A `capture VAR header|cookie|json WHAT` line's words; its variable
/// gets a slot in `captured` (and `first_set` the request that first
/// sets it) when new.
fn capture_of(
    words: &[String],
    captured: &mut Vec<String>,
    first_set: &mut Vec<usize>,
    request: usize,
) -> Result<Capture, String> {
    let [var, from, what] = words else {
        return Err(
            "a capture line is 'capture VAR header NAME', 'capture VAR cookie NAME' or 'capture VAR json PATH'"
                .into(),
        );
    };
    check_var_name(var)?;
    if ["user", "iteration"].contains(&var.as_str()) {
        return Err(format!(
            "'{var}' is perflab's own variable; capture into another name"
        ));
    }
    let source = match from.as_str() {
        "header" => Source::Header(what.clone()),
        "cookie" => Source::Cookie(what.clone()),
        "json" => Source::Json(json::parse_path(what)?),
        other => {
            return Err(format!(
                "'capture {var} {other}': take a value from a header, a cookie or json"
            ))
        }
    };
    let slot = match captured.iter().position(|c| c == var) {
        Some(slot) => slot,
        None => {
            if captured.len() >= MAX_CAPTURED {
                return Err(format!(
                    "more than {MAX_CAPTURED} captured variables; reuse names"
                ));
            }
            captured.push(var.clone());
            first_set.push(request);
            captured.len() - 1
        }
    };
    Ok(Capture { slot, source })
}

/// A variable's name: a letter or `_`, then letters, digits and `_`.
fn check_var_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let good = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if good {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a variable name (letters, digits and _, not starting with a digit)",
            crate::util::printable(name)
        ))
    }
}

/// Request `i` of the file as a step: its texts' variables found, each
/// one set by an earlier request or the user's own.
fn step_of(
    r: &targets::TargetRequest,
    flow: &Flow,
    first_set: &[usize],
    i: usize,
    captures: Vec<Capture>,
) -> Result<Step, String> {
    let template = |text: &[u8]| pieces(text, flow, first_set, i);
    let (path, relative) = match &r.place {
        targets::Place::Relative(p) => (template(p.as_bytes())?, true),
        targets::Place::Absolute(p) => (template(p.as_bytes())?, false),
    };
    let headers = r
        .headers
        .iter()
        .map(|(k, v)| Ok((k.clone(), template(v.as_bytes())?)))
        .collect::<Result<Vec<_>, String>>()?;
    let body = r.body.as_deref().map(template).transpose()?;
    Ok(Step {
        method: r.method,
        path,
        relative,
        headers,
        body,
        keeps_body: captures.iter().any(|c| matches!(c.source, Source::Json(_))),
        captures,
        think: ThinkTime::Zero,
    })
}

/// `text` cut at its `${VAR}`s, each resolved.
fn pieces(text: &[u8], flow: &Flow, first_set: &[usize], i: usize) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.windows(2).position(|w| w == b"${") {
        if at > 0 {
            out.push(Piece::Text(rest[..at].into()));
        }
        let after = &rest[at + 2..];
        let end = after
            .iter()
            .position(|&b| b == b'}')
            .ok_or("'${' without its closing '}'; write ${NAME}")?;
        let name =
            std::str::from_utf8(&after[..end]).map_err(|_| "a variable name that is not text")?;
        out.push(Piece::Var(resolve(name, flow, first_set, i)?));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.into()));
    }
    Ok(out)
}

/// What `${name}` is in request `i`.
fn resolve(name: &str, flow: &Flow, first_set: &[usize], i: usize) -> Result<Var, String> {
    match name {
        "user" => return Ok(Var::User),
        "iteration" => return Ok(Var::Iteration),
        _ => {}
    }
    if let Some(slot) = flow.captured.iter().position(|c| c == name) {
        if first_set[slot] >= i {
            return Err(format!(
                "${{{name}}} is used before a reply sets it; capture it in an earlier request's reply"
            ));
        }
        return Ok(Var::Captured(slot));
    }
    if let Some(column) = flow.columns.iter().position(|c| c == name) {
        return Ok(Var::Data(column));
    }
    let columns = if flow.columns.is_empty() {
        "no data file".to_string()
    } else {
        format!("the data's columns are {}", flow.columns.join(", "))
    };
    Err(format!(
        "${{{}}} is not set: no capture line takes it and {columns}; perflab's own are ${{user}} and ${{iteration}}",
        crate::util::printable(name)
    ))
}

/// A CSV file's columns (its header row) and rows: fields separated by
/// commas, a field in double quotes may hold commas and `""` for a quote.
fn csv(bytes: &[u8]) -> Result<(Vec<String>, Vec<Row>), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or("is empty; give a header row and a row per user")?;
    let columns: Vec<String> = fields(header)
        .map_err(|why| format!("line 1: {why}"))?
        .into_iter()
        .map(|f| String::from_utf8_lossy(&f).trim().to_string())
        .collect();
    for c in &columns {
        check_var_name(c).map_err(|why| format!("the header row: {why}"))?;
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        let row = fields(line).map_err(|why| format!("line {}: {why}", i + 1))?;
        if row.len() != columns.len() {
            return Err(format!(
                "line {}: {} fields where the header names {}",
                i + 1,
                row.len(),
                columns.len()
            ));
        }
        if row
            .iter()
            .any(|f| f.len() > MAX_VALUE || f.iter().any(u8::is_ascii_control))
        {
            return Err(format!(
                "line {}: a field longer than {MAX_VALUE} bytes or holding a control character",
                i + 1
            ));
        }
        rows.push(row.into_iter().map(Vec::into_boxed_slice).collect());
    }
    if rows.is_empty() {
        return Err("holds a header row and no row; give a row per user".into());
    }
    Ok((columns, rows))
}

/// One CSV line's fields.
fn fields(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut bytes = line.trim_end_matches('\r').bytes().peekable();
    loop {
        let mut field = Vec::new();
        if bytes.peek() == Some(&b'"') {
            bytes.next();
            loop {
                match bytes.next() {
                    Some(b'"') if bytes.peek() == Some(&b'"') => {
                        bytes.next();
                        field.push(b'"');
                    }
                    Some(b'"') => break,
                    Some(b) => field.push(b),
                    None => return Err("a quoted field is not closed".into()),
                }
            }
            match bytes.next() {
                None => {
                    out.push(field);
                    return Ok(out);
                }
                Some(b',') => {}
                Some(_) => return Err("text after a quoted field's closing quote".into()),
            }
        } else {
            loop {
                match bytes.next() {
                    None => {
                        out.push(field);
                        return Ok(out);
                    }
                    Some(b',') => break,
                    Some(b) => field.push(b),
                }
            }
        }
        out.push(field);
    }
}
