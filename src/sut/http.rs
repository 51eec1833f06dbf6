//! HTTP targets: one or several base URLs (`http://10.0.1.1/,http://10.0.2.1/`,
//! one per network adapter of the server, as in a WebBench lab),
//! parsed and checked once, and resolved to socket addresses before the
//! run. `https://` bases are spoken over TLS ([`super::tls`]).

use crate::units::format_duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One base URL of an HTTP target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpBase {
    /// `https://`: spoken over TLS.
    #[serde(default)]
    pub(crate) tls: bool,
    /// The host as written (a name or an address; IPv6 without brackets).
    pub(crate) host: String,
    /// The TCP port (80 when the URL names none).
    pub(crate) port: u16,
    /// The path every request's path is appended to, ending in `/`.
    pub(crate) path: String,
}

impl HttpBase {
    /// Parses `http://HOST[:PORT][/PATH]`.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        // What an error quotes of the URL: never a secret it may hold.
        let shown = super::redact(text);
        let (tls, rest) = if let Some(rest) = text.strip_prefix("http://") {
            (false, rest)
        } else if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else {
            return Err(format!("'{shown}' is not an http:// or https:// URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(format!(
                "'{shown}' holds credentials; perflab's HTTP requests send none"
            ));
        }
        if path.contains(['?', '#']) || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(format!(
                "'{shown}': a base URL's path may not hold a query, a fragment, spaces or control characters"
            ));
        }
        let (host, port) =
            split_host_port(authority, if tls { 443 } else { 80 }).ok_or_else(|| {
                format!("'{shown}' has no valid HOST[:PORT], e.g. http://127.0.0.1:8080/")
            })?;
        let mut path = path.to_string();
        if !path.ends_with('/') {
            path.push('/');
        }
        Ok(HttpBase {
            tls,
            host,
            port,
            path,
        })
    }

    /// Whether a base that came from outside the process (a generator's
    /// form) is one [`HttpBase::parse`] could have made: a host that fits
    /// a Host header, a port, a path of visible characters from `/` to
    /// `/`. One line saying what is wrong.
    pub(crate) fn check(&self) -> Result<(), String> {
        // The characters parse takes in a host.
        if self.host.is_empty()
            || !self
                .host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'))
        {
            return Err("the host is not a name or an address".to_string());
        }
        if self.port == 0 {
            return Err("port 0 is no port".to_string());
        }
        if !self.path.starts_with('/')
            || !self.path.ends_with('/')
            || !self
                .path
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
        {
            return Err("the path is not /…/ of visible characters without '?' or '#'".to_string());
        }
        Ok(())
    }

    /// The base as written back: `http://host:port/path/`.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }

    /// `host:port`, as a Host header and a label carry it.
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The socket address to connect to (the first the name resolves to).
    pub(crate) fn resolve(&self) -> Result<SocketAddr, String> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.host))
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; none when malformed.
pub(crate) fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let valid_host = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if !valid_host {
        return None;
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0)?,
        None => default_port,
    };
    Some((host.to_string(), port))
}

/// Parses a comma-separated list of base URLs; at least one, no repeats.
pub(crate) fn parse_bases(text: &str) -> Result<Vec<HttpBase>, String> {
    let mut bases: Vec<HttpBase> = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let base = HttpBase::parse(part)?;
        if bases.contains(&base) {
            return Err(format!("{} is given twice", base.url()));
        }
        bases.push(base);
    }
    if bases.is_empty() {
        return Err(format!("'{text}' names no URL"));
    }
    Ok(bases)
}

/// A web server's own statistics page, read at every interval: nginx's
/// `stub_status` (accepts, handled and requests as counters; active,
/// reading, writing and waiting connections as gauges) or Apache's
/// `server-status?auto` (`Total Accesses` as requests; busy and idle
/// workers as gauges). Stored like a database's statistics.
pub(crate) struct ServerStatus {
    addr: SocketAddr,
    path: String,
}

/// How long one read of a status page may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

impl ServerStatus {
    /// The status page at `url` (`http://HOST:PORT/PATH`), checked by one read.
    pub(crate) fn connect(url: &str) -> anyhow::Result<Self> {
        let base = HttpBase::parse(url)
            .and_then(|b| {
                if b.tls {
                    Err(format!(
                        "'{}': status pages are read over plain HTTP",
                        super::redact(url)
                    ))
                } else {
                    Ok(b)
                }
            })
            .map_err(|e| {
                crate::error::PlanError::flag(
                    "--server-status",
                    e,
                    "e.g. --server-status http://127.0.0.1/nginx_status",
                )
            })?;
        let mut status = ServerStatus {
            addr: base.resolve().map_err(anyhow::Error::msg)?,
            path: base.path.trim_end_matches('/').to_string(),
        };
        if status.path.is_empty() {
            status.path.push('/');
        }
        status.read().map_err(|e| {
            crate::error::PlanError::flag(
                "--server-status",
                format!("{} gave no status page: {e}", super::redact(url)),
                "give nginx's stub_status or Apache's server-status?auto URL",
            )
        })?;
        Ok(status)
    }

    /// One read of the page, parsed.
    fn read(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        let text = get_text(self.addr, &self.path, STATUS_TIMEOUT).map_err(anyhow::Error::msg)?;
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).unwrap_or_default();
        if status != "200" {
            anyhow::bail!(
                "HTTP status {}",
                if status.is_empty() { "none" } else { status }
            );
        }
        parse_status(body).ok_or_else(|| {
            anyhow::anyhow!("the page is neither stub_status nor server-status?auto")
        })
    }
}

/// The most of a reply [`get_text`] keeps.
const REPLY_LIMIT: usize = 64 * 1024;

/// A small GET with `Connection: close`, read whole (at most 64 KiB) with
/// the whole exchange, connecting included, held to `within`: a server
/// that trickles its reply, or never ends it, holds the caller no longer
/// than that (a timeout on each read alone would wait for ever on a byte
/// a second).
pub(crate) fn get_text(addr: SocketAddr, path: &str, within: Duration) -> Result<String, String> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + within;
    let late = || {
        format!(
            "no whole reply from {addr} within {}",
            format_duration(within)
        )
    };
    let mut stream = TcpStream::connect_timeout(&addr, within).map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(within))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut reply = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    while reply.len() < REPLY_LIMIT {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n.min(REPLY_LIMIT - reply.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late())
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// The figures of an nginx `stub_status` or Apache `server-status?auto` page.
pub(crate) fn parse_status(body: &str) -> Option<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    let mut lines = body.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("Active connections:") {
            out.insert("now_active".to_string(), n.trim().parse().ok()?);
        } else if line.starts_with("server accepts handled requests") {
            let numbers: Vec<f64> = lines
                .next()?
                .split_whitespace()
                .map(|n| n.parse().ok())
                .collect::<Option<_>>()?;
            if numbers.len() < 3 {
                return None;
            }
            for (name, n) in ["accepts", "handled", "requests"].iter().zip(numbers) {
                out.insert(name.to_string(), n);
            }
        } else if line.starts_with("Reading:") {
            let words: Vec<&str> = line.split_whitespace().collect();
            for pair in words.chunks(2) {
                if let [name, n] = pair {
                    let name = name.trim_end_matches(':').to_ascii_lowercase();
                    out.insert(format!("now_{name}"), n.parse().ok()?);
                }
            }
        } else if let Some((name, value)) = line.split_once(':') {
            let key = match name.trim() {
                "Total Accesses" => "requests",
                "BusyWorkers" => "now_busy_workers",
                "IdleWorkers" => "now_idle_workers",
                _ => continue,
            };
            out.insert(key.to_string(), value.trim().parse().ok()?);
        }
    }
    out.contains_key("requests").then_some(out)
}

impl crate::probe::DbStatsSource for ServerStatus {
    fn sample_waits(&mut self, _waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        self.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_parse() {
        let b = HttpBase::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (b.host.as_str(), b.port, b.path.as_str()),
            ("127.0.0.1", 8080, "/")
        );
        assert_eq!(b.url(), "http://127.0.0.1:8080/");
        let b = HttpBase::parse("http://example.org/static").unwrap();
        assert_eq!((b.port, b.path.as_str()), (80, "/static/"));
        let b = HttpBase::parse("http://[::1]:81/").unwrap();
        assert_eq!(
            (b.host.as_str(), b.authority()),
            ("::1", "[::1]:81".to_string())
        );
        let b = HttpBase::parse("https://example.org").unwrap();
        assert_eq!(
            (b.tls, b.port, b.url().as_str()),
            (true, 443, "https://example.org:443/")
        );
        let two = parse_bases("http://127.0.0.1:1/,http://127.0.0.2:1/").unwrap();
        assert_eq!(two.len(), 2);
    }

    /// A page that trickles a byte every 100 ms, for ever, ends in an error
    /// once the exchange's time is up, not when the server stops.
    #[test]
    fn a_trickling_reply_is_cut_at_the_deadline() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().expect("accept");
            let mut request = [0u8; 512];
            let _ = peer.read(&mut request);
            let _ = peer.write_all(b"HTTP/1.1 200 OK\r\n");
            // Bounded: stops when the client has gone (a write fails) or
            // after a minute.
            for _ in 0..600 {
                std::thread::sleep(Duration::from_millis(100));
                if peer.write_all(b"x").is_err() {
                    break;
                }
            }
        });
        let e = get_text(addr, "/status", Duration::from_millis(500)).expect_err("trickled");
        assert!(
            e.contains("no whole reply") && e.contains("within 500ms"),
            "{e}"
        );
        server
            .join()
            .expect("the server thread ends once the client has gone");
    }

    #[test]
    fn status_pages_parse() {
        let nginx = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
        let s = parse_status(nginx).unwrap();
        assert_eq!(s["requests"], 31070465.0);
        assert_eq!(s["accepts"], 16630948.0);
        assert_eq!(s["now_writing"], 179.0);
        assert_eq!(s["now_active"], 291.0);
        let apache = "Total Accesses: 42\nTotal kBytes: 1\nBusyWorkers: 3\nIdleWorkers: 7\n";
        let s = parse_status(apache).unwrap();
        assert_eq!((s["requests"], s["now_busy_workers"]), (42.0, 3.0));
        assert!(parse_status("<html>hello</html>").is_none());
        assert!(parse_status("server accepts handled requests\n 1 x 3\n").is_none());
    }

    #[test]
    fn bad_urls_say_why() {
        for (bad, says) in [
            ("ftp://x/", "not an http:// or https:// URL"),
            ("http://:80/", "HOST[:PORT]"),
            ("http://x:0/", "HOST[:PORT]"),
            ("http://x:99999/", "HOST[:PORT]"),
            ("http://x/a?b=1", "query"),
            ("http://u:pw@x/", "credentials"),
            ("http://x/,http://x/", "twice"),
            (",", "no URL"),
        ] {
            let err = parse_bases(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
            assert!(!err.contains("pw"), "{err}");
        }
    }
}
