//! One virtual user's journey through a flow: where it is, the values it
//! captured, its cookies, and its next request written into a buffer it
//! keeps. After its first journeys it allocates nothing: every buffer is
//! cleared and written again, cookies reuse their slots.

use super::cookies::Jar;
use super::head::header;
use super::{json, Capture, Flow, Piece, Source, Step, Var, MAX_VALUE};
use crate::plan::ThinkTime;
use crate::sut::http::HttpBase;
use std::io::Write;
use std::time::Duration;

/// A user's place in the flow and what it holds.
pub(crate) struct FlowUser {
    user: u32,
    /// Its CSV row, when the flow has data.
    row: Option<usize>,
    /// The request it sends next.
    pub(crate) step: usize,
    iteration: u64,
    /// Each captured variable's value (empty until captured).
    values: Vec<Vec<u8>>,
    jar: Jar,
    /// The next request, whole.
    pub(crate) request: Vec<u8>,
    /// The last request's body, written out.
    body: Vec<u8>,
    /// Where a redirect leads, resolved.
    location: Vec<u8>,
    /// The pause owed after the request just sent.
    think: ThinkTime,
}

/// Where a user's requests go, and what every one of them carries.
pub(crate) struct Target<'a> {
    pub(crate) base: &'a HttpBase,
    /// `host:port` as the Host header carries it.
    pub(crate) authority: &'a str,
    /// The run's own headers (`--header`).
    pub(crate) common: &'a [(String, String)],
    /// `--connection close`.
    pub(crate) close: bool,
}

/// How a redirect is followed.
pub(crate) struct Redirect {
    /// Whether the request asks for its head only.
    pub(crate) head: bool,
}

impl FlowUser {
    pub(crate) fn new(flow: &Flow, user: u32) -> Self {
        FlowUser {
            user,
            row: (!flow.rows.is_empty()).then(|| user as usize % flow.rows.len()),
            step: 0,
            iteration: 0,
            values: vec![Vec::new(); flow.captured.len()],
            jar: Jar::default(),
            request: Vec::new(),
            body: Vec::new(),
            location: Vec::new(),
            think: ThinkTime::Zero,
        }
    }

    /// Writes the request of the user's step to `base` into `request`.
    pub(crate) fn render(&mut self, flow: &Flow, to: &Target<'_>) {
        let step = &flow.steps[self.step];
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        if let Some(t) = &step.body {
            self.expand(flow, t, &mut body, false);
        }
        self.body = body;
        let mut r = std::mem::take(&mut self.request);
        r.clear();
        r.extend_from_slice(step.method.as_str().as_bytes());
        r.push(b' ');
        if step.relative {
            r.extend_from_slice(to.base.path.as_bytes());
        }
        self.expand(flow, &step.path, &mut r, true);
        self.request = r;
        self.finish(flow, step, step.method, true, to);
    }

    /// After a 3xx reply whose head is `head`: writes the request that
    /// follows its `Location` (a path, a URL of `base` itself, or a
    /// reference relative to the request it answers) into `request`. A 307 or 308 repeats the method, headers and body;
    /// another 3xx is a GET. None when there is no place to follow to on
    /// the target.
    pub(crate) fn redirect(
        &mut self,
        flow: &Flow,
        head: &[u8],
        status: u16,
        to: &Target<'_>,
    ) -> Option<Redirect> {
        let location = header(head, b"location")?;
        let mut path = std::mem::take(&mut self.location);
        let sent = sent_target(&self.request);
        if !super::location::resolve(location, sent, to.base, &mut path) {
            self.location = path;
            return None;
        }
        let step = &flow.steps[self.step];
        let again = matches!(status, 307 | 308);
        let method = if again {
            step.method
        } else {
            super::targets::HttpMethod::Get
        };
        if !again {
            self.body.clear();
        }
        let r = &mut self.request;
        r.clear();
        r.extend_from_slice(method.as_str().as_bytes());
        r.push(b' ');
        r.extend_from_slice(&path);
        self.location = path;
        self.finish(flow, step, method, again, to);
        Some(Redirect {
            head: method == super::targets::HttpMethod::Head,
        })
    }

    /// The rest of a request after its method and path: the version, the
    /// headers (the step's own when `own`), cookies, length and body.
    fn finish(
        &mut self,
        flow: &Flow,
        step: &Step,
        method: super::targets::HttpMethod,
        own: bool,
        to: &Target<'_>,
    ) {
        let mut r = std::mem::take(&mut self.request);
        // The request's target (path and query), after its method.
        let target = r.iter().position(|&b| b == b' ').map_or(r.len(), |i| i + 1)..r.len();
        let _ = write!(r, " HTTP/1.1\r\nHost: {}\r\n", to.authority);
        let has = |name: &str| {
            own && step
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        let agent = concat!("perflab/", env!("CARGO_PKG_VERSION"));
        for (k, v) in [("User-Agent", agent), ("Accept", "*/*")]
            .into_iter()
            .chain(to.common.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        {
            if !has(k) {
                let _ = write!(r, "{k}: {v}\r\n");
            }
        }
        if own {
            for (k, v) in &step.headers {
                r.extend_from_slice(k.as_bytes());
                r.extend_from_slice(b": ");
                self.expand(flow, v, &mut r, false);
                r.extend_from_slice(b"\r\n");
            }
        }
        if flow.cookies && !has("cookie") {
            self.jar.write_header(&mut r, target);
        }
        let sends_body = own && step.body.is_some();
        if sends_body || method.always_sized() {
            let len = if sends_body { self.body.len() } else { 0 };
            let _ = write!(r, "Content-Length: {len}\r\n");
        }
        if to.close {
            r.extend_from_slice(b"Connection: close\r\n");
        }
        r.extend_from_slice(b"\r\n");
        if sends_body {
            r.extend_from_slice(&self.body);
        }
        self.request = r;
    }

    /// `pieces` written into `out` with the user's values; in a path
    /// (`in_path`), a value's bytes that a request line cannot carry are
    /// percent-encoded.
    fn expand(&self, flow: &Flow, pieces: &[Piece], out: &mut Vec<u8>, in_path: bool) {
        for piece in pieces {
            let value: &[u8] = match piece {
                Piece::Text(t) => {
                    out.extend_from_slice(t);
                    continue;
                }
                Piece::Var(Var::User) => {
                    let _ = write!(out, "{}", self.user);
                    continue;
                }
                Piece::Var(Var::Iteration) => {
                    let _ = write!(out, "{}", self.iteration);
                    continue;
                }
                Piece::Var(Var::Data(c)) => match self.row {
                    Some(row) => &flow.rows[row][*c],
                    None => &[],
                },
                Piece::Var(Var::Captured(s)) => &self.values[*s],
            };
            if !in_path {
                out.extend_from_slice(value);
                continue;
            }
            for &b in value {
                if b.is_ascii_graphic() && b != b'#' {
                    out.push(b);
                } else {
                    let _ = write!(out, "%{b:02X}");
                }
            }
        }
    }

    /// The reply to the user's step has come (`head` and the start of its
    /// body; `succeeded` when it was a success): its cookies are kept,
    /// its captures taken, and the user moves to its next request, or to
    /// the top of a new journey when this was the last or something was
    /// missing. False when a capture found nothing.
    pub(crate) fn after(&mut self, flow: &Flow, head: &[u8], body: &[u8], succeeded: bool) -> bool {
        if flow.cookies {
            self.keep_cookies(head);
        }
        let step = &flow.steps[self.step];
        self.think = step.think;
        let captured = succeeded && step.captures.iter().all(|c| self.capture(c, head, body));
        if captured && self.step + 1 < flow.steps.len() {
            self.step += 1;
        } else {
            self.step = 0;
            self.iteration += 1;
            self.jar.clear();
            self.values.iter_mut().for_each(Vec::clear);
        }
        captured || !succeeded
    }

    /// The pause owed after the request just sent, drawn.
    pub(crate) fn pause(&mut self, rng: &mut impl rand::Rng) -> Duration {
        std::mem::replace(&mut self.think, ThinkTime::Zero).sample(rng)
    }

    /// Takes one captured value; false when the reply does not hold it
    /// or it is too long to send.
    fn capture(&mut self, c: &Capture, head: &[u8], body: &[u8]) -> bool {
        let found: Option<&[u8]> = match &c.source {
            Source::Header(name) => header(head, name.as_bytes()),
            Source::Cookie(name) => super::cookies::set_value(head, name.as_bytes())
                .or_else(|| self.jar.get(name.as_bytes())),
            Source::Json(path) => {
                let Some(raw) = json::find(body, path) else {
                    return false;
                };
                let out = &mut self.values[c.slot];
                return json::text_into(raw, out) && !out.is_empty() && out.len() <= MAX_VALUE;
            }
        };
        let Some(value) = found.filter(|v| !v.is_empty() && v.len() <= MAX_VALUE) else {
            return false;
        };
        if value.iter().any(u8::is_ascii_control) {
            return false;
        }
        let out = &mut self.values[c.slot];
        out.clear();
        out.extend_from_slice(value);
        true
    }

    /// Keeps the cookies a reply's head sets, in answer to the request
    /// just sent.
    pub(crate) fn keep_cookies(&mut self, head: &[u8]) {
        self.jar.keep(head, sent_target(&self.request));
    }
}

/// The target (path and query) of a request written out.
fn sent_target(request: &[u8]) -> &[u8] {
    request.split(|&b| b == b' ').nth(1).unwrap_or(b"/")
}
