//! `--targets FILE`: the requests a web run sends, in the text form load
//! testers share (vegeta's): a block per request, `METHOD URL` on its
//! first line, `Name: value` header lines after it, an optional
//! `@path/to/body` line last; blocks separated by blank lines (or by the
//! next `METHOD URL` line), `#` comments. A `# name: NAME` comment names
//! the request that follows it; otherwise a request is named `METHOD
//! /path` (the query left out, so that one endpoint asked many ways stays
//! one kind).
//!
//! Every URL must point at the run's target: a path (`/api/items`, joined
//! to the base URL's path) or an absolute URL whose scheme, host and port
//! are those of one of `--target`'s bases — never another host. Bodies
//! are read once here, each at most [`MAX_BODY`] and all together at most
//! [`MAX_BODIES`]; the run writes them from memory. What this module
//! refuses it refuses in one line naming the file and line.

use crate::sut::http::{split_host_port, HttpBase};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest targets file read, bytes.
pub(crate) const MAX_FILE: u64 = 16 << 20;
/// The largest body file, bytes.
pub(crate) const MAX_BODY: u64 = 16 << 20;
/// The most bytes of all body files together.
pub(crate) const MAX_BODIES: u64 = 64 << 20;
/// The most requests a file lists.
pub(crate) const MAX_TARGETS: usize = 10_000;
/// The most distinct request names: each is an operation kind, with its
/// own histograms in every worker's recorder and a row in every report.
pub(crate) const MAX_NAMES: usize = 64;
/// The longest URL, bytes.
const MAX_URL: usize = 8 << 10;
/// The most header lines of one request.
const MAX_HEADERS: usize = 64;
/// The longest request name, characters (a longer default name is cut).
const MAX_NAME: usize = 80;

/// A request method the targets file may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpMethod {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
    Options,
}

impl HttpMethod {
    /// Every method, as written.
    const ALL: [(&'static str, HttpMethod); 7] = [
        ("GET", HttpMethod::Get),
        ("HEAD", HttpMethod::Head),
        ("POST", HttpMethod::Post),
        ("PUT", HttpMethod::Put),
        ("PATCH", HttpMethod::Patch),
        ("DELETE", HttpMethod::Delete),
        ("OPTIONS", HttpMethod::Options),
    ];

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().find(|(t, _)| *t == text).map(|(_, m)| *m)
    }

    /// The method as the request line carries it.
    pub(crate) fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("GET", |(t, _)| t)
    }

    /// Whether a request of this method may carry a body.
    fn takes_body(self) -> bool {
        matches!(
            self,
            HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch | HttpMethod::Delete
        )
    }

    /// Whether a request of this method always says its body's length
    /// (0 when it has none): servers answer a POST without one with 411.
    pub(crate) fn always_sized(self) -> bool {
        matches!(self, HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch)
    }
}

/// Where a request goes on the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// Below the base URL's path: `/api/x` is written `api/x`.
    Relative(String),
    /// This path (and query) as it stands, from an absolute URL.
    Absolute(String),
}

/// One request of the file.
#[derive(Debug, Clone)]
pub(crate) struct TargetRequest {
    /// Its operation kind's name.
    pub(crate) name: String,
    pub(crate) method: HttpMethod,
    pub(crate) place: Place,
    /// Its own header lines (name, value).
    pub(crate) headers: Vec<(String, String)>,
    /// Its body, shared by every request naming the same file.
    pub(crate) body: Option<Arc<[u8]>>,
}

/// The requests of a targets file, and their distinct names.
#[derive(Debug, Clone)]
pub(crate) struct Targets {
    pub(crate) requests: Vec<TargetRequest>,
    /// The distinct names, in the order they first appear.
    pub(crate) names: Vec<String>,
    /// Each request's index into `names`.
    pub(crate) kinds: Vec<usize>,
    /// Bytes of the distinct bodies read.
    pub(crate) body_bytes: u64,
}

/// What the URLs must point at: the run's bases, or a managed server
/// whose address is chosen at its start (paths only).
#[derive(Clone, Copy)]
pub(crate) enum Allowed<'a> {
    Bases(&'a [HttpBase]),
    Managed,
}

/// Reads and parses `file`: one line (`FILE:LINE: why; fix`) when it
/// cannot be used.
pub(crate) fn read(file: &Path, allowed: Allowed<'_>) -> Result<Targets, String> {
    let shown = file.display();
    let text = read_bounded(file, MAX_FILE)
        .map_err(|e| format!("{shown}: {e}"))
        .and_then(|b| String::from_utf8(b).map_err(|_| format!("{shown}: not UTF-8 text")))?;
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    parse(&text, &shown.to_string(), allowed, |p| {
        let at = if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        };
        read_bounded(&at, MAX_BODY).map_err(|e| format!("{}: {e}", at.display()))
    })
}

/// A file's bytes, refused when longer than `max`.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".to_string());
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(format!("longer than {}", crate::units::Bytes(max)));
    }
    Ok(bytes)
}

/// The parser's state between lines.
struct Parser<'a, F> {
    allowed: Allowed<'a>,
    load: F,
    out: Vec<TargetRequest>,
    /// The request whose header lines may follow, and whether its body was given.
    open: Option<bool>,
    /// A `# name:` waiting for its request, and its line.
    pending_name: Option<(String, usize)>,
    bodies: HashMap<PathBuf, Arc<[u8]>>,
    body_bytes: u64,
}

/// Parses a targets file's text; `load` reads a body file (relative
/// paths as written).
pub(crate) fn parse<F>(
    text: &str,
    file: &str,
    allowed: Allowed<'_>,
    load: F,
) -> Result<Targets, String>
where
    F: FnMut(&Path) -> Result<Vec<u8>, String>,
{
    let mut p = Parser {
        allowed,
        load,
        out: Vec::new(),
        open: None,
        pending_name: None,
        bodies: HashMap::new(),
        body_bytes: 0,
    };
    let mut last = 0;
    for (n, line) in text.lines().enumerate() {
        last = n + 1;
        p.line(line.strip_suffix('\r').unwrap_or(line), n + 1)
            .map_err(|why| format!("{file}:{}: {why}", n + 1))?;
    }
    if let Some((name, at)) = p.pending_name {
        return Err(format!(
            "{file}:{at}: '# name: {name}' names no request; put it just before a METHOD URL line"
        ));
    }
    if p.out.is_empty() {
        return Err(format!(
            "{file}:{}: lists no request; give METHOD URL lines, e.g. GET /index.html",
            last.max(1)
        ));
    }
    let (names, kinds) = kinds_of(&p.out);
    if names.len() > MAX_NAMES {
        return Err(format!(
            "{file}: {} distinct request names, and a run keeps figures for at most {MAX_NAMES}; name requests alike with '# name: NAME' comments",
            names.len()
        ));
    }
    Ok(Targets {
        requests: p.out,
        names,
        kinds,
        body_bytes: p.body_bytes,
    })
}

/// The distinct names, and each request's index among them.
fn kinds_of(requests: &[TargetRequest]) -> (Vec<String>, Vec<usize>) {
    let mut names: Vec<String> = Vec::new();
    let kinds = requests
        .iter()
        .map(|r| match names.iter().position(|n| *n == r.name) {
            Some(i) => i,
            None => {
                names.push(r.name.clone());
                names.len() - 1
            }
        })
        .collect();
    (names, kinds)
}

impl<F> Parser<'_, F>
where
    F: FnMut(&Path) -> Result<Vec<u8>, String>,
{
    /// Takes one line (`n` from 1).
    fn line(&mut self, line: &str, n: usize) -> Result<(), String> {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            self.open = None;
            return Ok(());
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            if let Some(name) = comment.trim_start().strip_prefix("name:") {
                self.pending_name = Some((checked_name(name.trim())?, n));
            }
            return Ok(());
        }
        let first = trimmed.split_whitespace().next().unwrap_or_default();
        let request_line = first.bytes().all(|b| b.is_ascii_uppercase());
        match (self.open, trimmed.strip_prefix('@')) {
            (Some(false), Some(body)) => self.body(body.trim()),
            (Some(true), Some(_)) => Err("a second @body line; give one body per request".into()),
            (None, Some(_)) => Err(
                "an @body line outside a request; it follows its METHOD URL line and headers, with no blank line between"
                    .into(),
            ),
            (_, None) if request_line => self.request(trimmed),
            (Some(false), None) => self.header(trimmed),
            (Some(true), None) => {
                Err("a header after the @body line; headers come before the body".into())
            }
            (None, None) => Err(format!(
                "'{}' is not METHOD URL; a request starts with a method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS) and its URL, and its headers follow it with no blank line between",
                shown(&crate::secret::redact_header(trimmed))
            )),
        }
    }

    /// A `METHOD URL` line.
    fn request(&mut self, line: &str) -> Result<(), String> {
        if self.out.len() >= MAX_TARGETS {
            return Err(format!(
                "more than {MAX_TARGETS} requests; give at most {MAX_TARGETS}"
            ));
        }
        let mut words = line.split_whitespace();
        let (Some(method), Some(url), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "'{}' is not METHOD URL (two words), e.g. POST /api/items",
                shown(line)
            ));
        };
        let method = HttpMethod::parse(method).ok_or_else(|| {
            format!(
                "unknown method '{}'; give GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS",
                shown(method)
            )
        })?;
        let place = place_of(url, self.allowed)?;
        let name = match self.pending_name.take() {
            Some((name, _)) => name,
            None => default_name(method, &place),
        };
        self.out.push(TargetRequest {
            name,
            method,
            place,
            headers: Vec::new(),
            body: None,
        });
        self.open = Some(false);
        Ok(())
    }

    /// A `Name: value` line of the open request.
    fn header(&mut self, line: &str) -> Result<(), String> {
        let header = parse_header_line(line)?;
        let Some(request) = self.out.last_mut() else {
            return Err("a header line outside a request".into());
        };
        if request.headers.len() >= MAX_HEADERS {
            return Err(format!("more than {MAX_HEADERS} headers for one request"));
        }
        request.headers.push(header);
        Ok(())
    }

    /// An `@path` line: the open request's body, read now (once per file).
    fn body(&mut self, path: &str) -> Result<(), String> {
        let Some(request) = self.out.last() else {
            return Err("an @body line outside a request".into());
        };
        if !request.method.takes_body() {
            return Err(format!(
                "a {} request carries no body; use POST, PUT, PATCH or DELETE, or drop the @ line",
                request.method.as_str()
            ));
        }
        if path.is_empty() {
            return Err("'@' names no file; write @path/to/body".into());
        }
        let key = PathBuf::from(path);
        let body = match self.bodies.get(&key) {
            Some(body) => Arc::clone(body),
            None => {
                let bytes = (self.load)(&key).map_err(|e| {
                    format!(
                        "the body file {e}; give a readable file of at most {}",
                        crate::units::Bytes(MAX_BODY)
                    )
                })?;
                self.body_bytes = self.body_bytes.saturating_add(bytes.len() as u64);
                if self.body_bytes > MAX_BODIES {
                    return Err(format!(
                        "the body files add up to more than {}; use fewer or smaller ones",
                        crate::units::Bytes(MAX_BODIES)
                    ));
                }
                let body: Arc<[u8]> = bytes.into();
                self.bodies.insert(key, Arc::clone(&body));
                body
            }
        };
        if let Some(request) = self.out.last_mut() {
            request.body = Some(body);
        }
        self.open = Some(true);
        Ok(())
    }
}

/// What an error quotes of a line: printable, at most 60 characters.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(60).collect();
    crate::util::printable(&cut).replace('\n', " ")
}

/// A `# name:` value: printable, not empty, at most [`MAX_NAME`] characters.
fn checked_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'# name:' gives no name".into());
    }
    if name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(format!(
            "the name '{}' is longer than {MAX_NAME} characters or holds control characters",
            shown(name)
        ));
    }
    Ok(name.to_string())
}

/// `METHOD /path`, the query left out, cut to [`MAX_NAME`] characters.
fn default_name(method: HttpMethod, place: &Place) -> String {
    let path = match place {
        Place::Relative(p) => format!("/{p}"),
        Place::Absolute(p) => p.clone(),
    };
    let path = path.split('?').next().unwrap_or_default();
    let name = format!("{} {path}", method.as_str());
    if name.chars().count() <= MAX_NAME {
        return name;
    }
    let mut cut: String = name.chars().take(MAX_NAME - 1).collect();
    cut.push('…');
    cut
}

/// Where a URL goes: a path below the base, or an absolute URL of one of
/// the bases (its path as written).
fn place_of(url: &str, allowed: Allowed<'_>) -> Result<Place, String> {
    if url.len() > MAX_URL {
        return Err(format!("the URL is longer than {MAX_URL} bytes"));
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) || url.contains('#') {
        return Err(format!(
            "'{}' holds a character a request line cannot carry or a fragment; percent-encode it (%20 for a space) and drop #…",
            shown(url)
        ));
    }
    if let Some(path) = url.strip_prefix('/') {
        return Ok(Place::Relative(path.to_string()));
    }
    let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else {
        return Err(format!(
            "'{}' is neither a path (/…) nor an http:// or https:// URL",
            shown(url)
        ));
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let Allowed::Bases(bases) = allowed else {
        return Err(format!(
            "'{}': a managed server's address is chosen when it starts; give paths (/…) instead",
            shown(url)
        ));
    };
    let matches = split_host_port(authority, if tls { 443 } else { 80 }).is_some_and(|(h, p)| {
        bases
            .iter()
            .any(|b| b.tls == tls && b.port == p && b.host.eq_ignore_ascii_case(&h))
    });
    if !matches {
        let scheme = if tls { "https" } else { "http" };
        return Err(format!(
            "{scheme}://{} is not the run's target; perflab sends requests only to --target's host and port (give a path, /…)",
            shown(authority)
        ));
    }
    Ok(Place::Absolute(path))
}

/// One `Name: value` header line, checked as `--header` checks one.
fn parse_header_line(line: &str) -> Result<(String, String), String> {
    let Some((name, value)) = line.split_once(':') else {
        // Only its first word is quoted: the rest may be a secret.
        let first = line.split_whitespace().next().unwrap_or_default();
        return Err(format!(
            "the line starting '{}' is not a header line, Name: value",
            shown(first)
        ));
    };
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(format!(
            "'{}' is not a header line, Name: value (the name is not an HTTP token)",
            shown(name)
        ));
    }
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!("the value of {name} holds a control character"));
    }
    if ["host", "content-length", "transfer-encoding", "connection"]
        .contains(&name.to_ascii_lowercase().as_str())
    {
        return Err(format!(
            "perflab sets {name} itself; drop the line (use --connection for Connection)"
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// The bytes of request `r` to `base`: its line, the Host, the run's
/// headers (`common`, unless the request sets the same name) and its
/// own, its length when it has a body or its method expects one, the
/// body. Built once before the run.
pub(crate) fn render(
    r: &TargetRequest,
    base: &HttpBase,
    common: &[(String, String)],
    close: bool,
) -> Vec<u8> {
    let path = match &r.place {
        Place::Relative(p) => format!("{}{p}", base.path),
        Place::Absolute(p) => p.clone(),
    };
    let mut head = format!(
        "{} {path} HTTP/1.1\r\nHost: {}\r\n",
        r.method.as_str(),
        base.authority()
    );
    let own = |name: &str| r.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let defaults = [
        (
            "User-Agent",
            format!("perflab/{}", env!("CARGO_PKG_VERSION")),
        ),
        ("Accept", "*/*".to_string()),
    ];
    for (k, v) in defaults
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(common.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    {
        if !own(k) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body: &[u8] = r.body.as_deref().unwrap_or_default();
    if r.body.is_some() || r.method.always_sized() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Whether request `r` asks for its head only.
pub(crate) fn is_head(r: &TargetRequest) -> bool {
    r.method == HttpMethod::Head
}

#[cfg(test)]
mod tests;
