//! The live view's HTTP server: who may listen where and ask what (the
//! agent's rules), the routes (`/`, `/events`, `/metrics`), the event
//! stream, and stopping: at the run's end, or after `--serve-linger`.

use super::metrics::{render, Flavour};
use super::state::Live;
use crate::agent::http::{Limits, Request, Response};
use crate::agent::{bearer, constant_time_eq};
use crate::error::PlanError;
use crate::wire::tls::Identity;
use crate::wire::Wire;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where and how the view is served, validated.
#[derive(Debug, Clone)]
pub(crate) struct ServeConfig {
    pub(crate) addr: SocketAddr,
    /// The flag that gave the address (`--serve`, or `perflab serve`'s
    /// `--addr`), named in its errors.
    pub(crate) flag: &'static str,
    /// Required on every request when set; required beyond loopback.
    pub(crate) token: Option<String>,
    /// Served in HTTPS with this certificate; plain HTTP only on loopback.
    pub(crate) tls: Option<Identity>,
    /// How long the final page stays served after the run ends.
    pub(crate) linger: Duration,
}

impl ServeConfig {
    /// Refuses listening beyond loopback without a token or in plain
    /// HTTP: the run's numbers, the target's name and the token would be
    /// anyone's.
    pub(crate) fn check(&self) -> Result<(), PlanError> {
        if self.addr.ip().is_loopback() {
            return Ok(());
        }
        if self.token.is_none() {
            return Err(PlanError::flag(
                self.flag,
                format!(
                    "refusing to serve the live view on {} without a token: anyone who can reach it would see the run",
                    self.addr
                ),
                "give --serve-token-file FILE (and TLS), or serve on 127.0.0.1",
            ));
        }
        if self.tls.is_none() {
            return Err(PlanError::flag(
                self.flag,
                format!(
                    "refusing to serve the live view on {} in plain HTTP: the token would cross the network in clear",
                    self.addr
                ),
                "give --serve-tls-self-signed or --serve-tls-cert and --serve-tls-key, or serve on 127.0.0.1",
            ));
        }
        Ok(())
    }

    /// Binds the address; a refusal names it.
    fn bind(&self) -> Result<TcpListener, PlanError> {
        TcpListener::bind(self.addr).map_err(|e| {
            PlanError::flag(
                self.flag,
                format!("cannot listen on {}: {e}", self.addr),
                "give a free address, or port 0 for any free port",
            )
        })
    }

    /// Says where it is served, on standard error (standard output is the
    /// run's); the token is never printed.
    fn announce(&self, listener: &TcpListener, what: &str, live: bool) -> String {
        let bound = listener
            .local_addr()
            .map_or(self.addr.to_string(), |a| a.to_string());
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{bound}/");
        let routes = if live {
            format!(" (events {url}events, Prometheus {url}metrics)")
        } else {
            String::new()
        };
        crate::util::err(format_args!(
            "{what} on {url}{routes}{}\n",
            if self.token.is_some() {
                "; every request needs the token (Authorization: Bearer, or ?token= for the page)"
            } else {
                ""
            }
        ));
        if let Some(identity) = &self.tls {
            crate::util::err(format_args!(
                "certificate SHA-256 fingerprint: {}\n",
                identity.fingerprint()
            ));
        }
        url
    }

    fn limits(&self) -> Limits {
        Limits {
            head_bytes: 8 * 1024,
            body_bytes: 0,
            connections: super::CLIENTS,
            deadline: Duration::from_secs(5),
            who: "perflab live view",
        }
    }

    fn tls_config(&self) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
        Ok(match &self.tls {
            Some(identity) => Some(identity.server_config()?),
            None => None,
        })
    }
}

/// Whether `request` carries the token (when one is required), as a
/// header or as the query's `token=`; a refusal is logged without what
/// it carried.
fn refused(request: &Request, token: Option<&str>) -> Option<Response> {
    let token = token?;
    let header = request.header("authorization").map_or("", bearer);
    let query = request
        .target
        .split_once('?')
        .map_or("", |(_, q)| q)
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or("");
    if constant_time_eq(header.as_bytes(), token.as_bytes())
        || constant_time_eq(query.as_bytes(), token.as_bytes())
    {
        return None;
    }
    crate::util::err(format_args!(
        "perflab live view: refused a request from {}: {} token\n",
        request.peer,
        if header.is_empty() && query.is_empty() {
            "no"
        } else {
            "a wrong"
        }
    ));
    Some(text(401, "a valid token is required\n"))
}

pub(crate) fn text(status: u16, body: &str) -> Response {
    Response::whole(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

/// The path of a request's target, without its query.
pub(crate) fn path(request: &Request) -> &str {
    request
        .target
        .split_once('?')
        .map_or(request.target.as_str(), |(p, _)| p)
}

/// Streams counted while they last (the server waits for them to send
/// the end before the process goes).
pub(crate) struct Streaming(pub(crate) Arc<AtomicUsize>);

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Time between comments on an idle event stream: it finds a client gone.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A client's event stream: the state so far, then each update, until
/// the hub drops the client (too slow) or stops; a write that cannot
/// finish within `deadline` ends it.
fn events(live: Arc<Live>, streams: Arc<AtomicUsize>, deadline: Duration) -> Response {
    streams.fetch_add(1, Ordering::AcqRel);
    let guard = Streaming(streams);
    Response::stream(
        "text/event-stream; charset=utf-8",
        Box::new(move |wire: &mut Wire| {
            let _guard = guard;
            let Some((last, queue)) = live.subscribe() else {
                return;
            };
            let mut send = |text: &str| {
                wire.set_deadline(Instant::now() + deadline);
                wire.write_all(text.as_bytes()).and_then(|()| wire.flush())
            };
            // A browser reconnects after this long if the stream breaks.
            if send("retry: 2000\n\n").is_err() {
                return;
            }
            if let Some(last) = last {
                if send(&last.event(false)).is_err() {
                    return;
                }
            }
            loop {
                let sent = match queue.recv_timeout(KEEP_ALIVE) {
                    Ok(update) => send(&update.event(true)),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => send(": keep-alive\n\n"),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                };
                if sent.is_err() {
                    return;
                }
            }
        }),
    )
}

/// Answers one request of a run's live view (its token checked).
fn answer(
    request: &Request,
    live: &Arc<Live>,
    streams: &Arc<AtomicUsize>,
    deadline: Duration,
) -> Response {
    match path(request) {
        "/" | "/index.html" => {
            let (title, html) = live.last().map_or_else(
                || ("perflab live".to_string(), String::new()),
                |r| (r.title.clone(), r.html.clone()),
            );
            Response::whole(
                200,
                "text/html; charset=utf-8",
                super::page::page(&title, &html).into_bytes(),
            )
        }
        "/events" => events(live.clone(), streams.clone(), deadline),
        "/metrics" => {
            let flavour = Flavour::of_accept(request.header("accept"));
            let (names, counts, gauges) = live.metrics();
            Response::whole(
                200,
                flavour.content_type(),
                render(flavour, &names, &counts, &gauges).into_bytes(),
            )
        }
        _ => text(404, "no such page: try / (the page), /events or /metrics\n"),
    }
}

/// The handler of a view's requests, once the token is checked.
pub(crate) type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A running live view (of a run, or of a lab); stopping it (or dropping
/// it) ends its threads.
pub(crate) struct LiveServer {
    /// A run's hub; none for a lab's view, whose streams read the store.
    live: Option<Arc<Live>>,
    stop: Arc<AtomicBool>,
    streams: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
    linger: Duration,
    /// Where it is served.
    pub(crate) url: String,
}

/// What a view's handler may use: the flag set when the server stops
/// (a stream ends on it), the count of open streams (the server waits
/// for them), and how long a write may take.
pub(crate) struct Serving {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) streams: Arc<AtomicUsize>,
    pub(crate) deadline: Duration,
}

impl LiveServer {
    /// Checks `config`, binds, says where, and serves `live` until
    /// [`LiveServer::finish`].
    pub(crate) fn start(config: &ServeConfig, live: Arc<Live>) -> anyhow::Result<LiveServer> {
        let publisher = {
            let live = live.clone();
            std::thread::Builder::new()
                .name("perflab-live-publish".to_string())
                .spawn(move || live.publish(super::page::render))?
        };
        let hub = live.clone();
        Self::launch(config, Some(hub), vec![publisher], move |serving| {
            Arc::new(move |request: &Request| {
                answer(request, &live, &serving.streams, serving.deadline)
            })
        })
    }

    /// Checks `config`, binds, says where, and answers each request
    /// (once its token is checked) with the handler `make` builds, until
    /// [`LiveServer::finish`]: a lab's view.
    pub(crate) fn start_with(
        config: &ServeConfig,
        make: impl FnOnce(Serving) -> Handler,
    ) -> anyhow::Result<LiveServer> {
        Self::launch(config, None, Vec::new(), make)
    }

    fn launch(
        config: &ServeConfig,
        live: Option<Arc<Live>>,
        threads: Vec<std::thread::JoinHandle<()>>,
        make: impl FnOnce(Serving) -> Handler,
    ) -> anyhow::Result<LiveServer> {
        // Stops what was started for it when it cannot serve.
        let stop_early = |live: &Option<Arc<Live>>, threads: Vec<std::thread::JoinHandle<()>>| {
            if let Some(live) = live {
                live.stop();
            }
            for thread in threads {
                let _ = thread.join();
            }
        };
        let bound = config.check().map_err(anyhow::Error::from).and_then(|()| {
            let listener = config.bind()?;
            let tls = config.tls_config()?;
            Ok((listener, tls))
        });
        let (listener, tls) = match bound {
            Ok(bound) => bound,
            Err(e) => {
                stop_early(&live, threads);
                return Err(e);
            }
        };
        let url = config.announce(&listener, "live view", true);
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(AtomicUsize::new(0));
        let limits = config.limits();
        let inner = make(Serving {
            stop: stop.clone(),
            streams: streams.clone(),
            deadline: limits.deadline,
        });
        let token = config.token.clone();
        let handle: Handler = Arc::new(move |request: &Request| {
            if let Some(refusal) = refused(request, token.as_deref()) {
                return refusal;
            }
            if request.method != "GET" {
                return text(405, "only GET is served here\n");
            }
            inner(request)
        });
        let mut threads = threads;
        let server = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("perflab-live-serve".to_string())
                .spawn(move || {
                    if let Err(e) = crate::agent::http::serve(listener, limits, tls, &stop, handle)
                    {
                        crate::util::err(format_args!("perflab live view: stopped serving: {e}\n"));
                    }
                })
        };
        match server {
            Ok(server) => threads.push(server),
            Err(e) => {
                stop_early(&live, threads);
                return Err(e.into());
            }
        }
        Ok(LiveServer {
            live,
            stop,
            streams,
            threads,
            linger: config.linger,
            url,
        })
    }

    /// The run ended: its last update goes out, the final page stays
    /// served for the linger (cut short by Ctrl-C or SIGTERM), then the
    /// server stops, once its event streams sent what they hold (a few
    /// seconds at most).
    pub(crate) fn finish(mut self, interrupted: &AtomicBool) {
        if let Some(live) = &self.live {
            live.flush(Duration::from_secs(5));
        }
        if !self.linger.is_zero() && !interrupted.load(Ordering::Relaxed) {
            crate::util::err(format_args!(
                "live view: serving the final page for {} more ({})\n",
                crate::units::format_duration(self.linger),
                self.url
            ));
            let until = Instant::now() + self.linger;
            while Instant::now() < until && !interrupted.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(live) = &self.live {
            live.stop();
        }
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        let until = Instant::now() + Duration::from_secs(3);
        while self.streams.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shut();
        }
    }
}

/// Maps a path to its page and its HTTP status (500 for a page that
/// says why it could not be made), none for a 404.
pub(crate) type Pages = Arc<dyn Fn(&str) -> Option<(u16, String)> + Send + Sync>;

/// Serves pages (`pages` maps a path to a page, none for a 404) until
/// `stop` is set: `perflab serve`'s stored runs, with the live view's
/// rules and bounds.
pub(crate) fn serve_store(
    config: &ServeConfig,
    stop: &AtomicBool,
    pages: Pages,
) -> anyhow::Result<()> {
    config.check()?;
    let listener = config.bind()?;
    let tls = config.tls_config()?;
    config.announce(&listener, "stored runs", false);
    let token = config.token.clone();
    let handle: Arc<dyn Fn(&Request) -> Response + Send + Sync> =
        Arc::new(move |request: &Request| {
            if let Some(refusal) = refused(request, token.as_deref()) {
                return refusal;
            }
            if request.method != "GET" {
                return text(405, "only GET is served here\n");
            }
            match pages(path(request)) {
                Some((status, html)) => {
                    Response::whole(status, "text/html; charset=utf-8", html.into_bytes())
                }
                None => text(404, "no such page: try /\n"),
            }
        });
    crate::agent::http::serve(listener, config.limits(), tls, stop, handle)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, auth: Option<&str>) -> Request {
        Request {
            method: "GET".to_string(),
            target: target.to_string(),
            headers: auth
                .map(|a| vec![("authorization".to_string(), a.to_string())])
                .unwrap_or_default(),
            peer: SocketAddr::from(([127, 0, 0, 1], 9)),
            body: Vec::new(),
        }
    }

    /// The token is taken from the header or the query, compared whole.
    #[test]
    fn the_token_is_asked_as_a_header_or_a_query() {
        let token = Some("0123456789abcdef");
        assert!(refused(&request("/", None), None).is_none());
        assert!(refused(&request("/", None), token).is_some());
        assert!(refused(&request("/?token=0123456789abcdef", None), token).is_none());
        assert!(refused(&request("/events?x=1&token=0123456789abcdef", None), token).is_none());
        assert!(refused(&request("/?token=0123456789abcde", None), token).is_some());
        assert!(refused(&request("/", Some("Bearer 0123456789abcdef")), token).is_none());
        assert!(refused(&request("/", Some("Bearer nope")), token).is_some());
    }

    /// Beyond loopback: a token and TLS, or a refusal naming the flag.
    #[test]
    fn beyond_loopback_needs_a_token_and_tls() {
        let mut config = ServeConfig {
            addr: "0.0.0.0:0".parse().unwrap(),
            flag: "--addr",
            token: None,
            tls: None,
            linger: Duration::ZERO,
        };
        let e = config.check().unwrap_err().to_string();
        assert!(e.starts_with("--addr: "), "{e}");
        assert!(e.contains("--serve-token-file"), "{e}");
        config.token = Some("0123456789abcdef".to_string());
        let e = config.check().unwrap_err().to_string();
        assert!(e.contains("--serve-tls-self-signed"), "{e}");
        config.addr = "[::1]:0".parse().unwrap();
        config.token = None;
        assert!(config.check().is_ok());
    }

    /// A client that does not read is dropped once its queue is full: the
    /// publisher never waits for it.
    #[test]
    fn a_client_that_does_not_read_is_dropped() {
        let live = Live::new("null".into(), "null".into(), 1);
        let (_, queue) = live.subscribe().unwrap();
        let publisher = {
            let live = live.clone();
            std::thread::spawn(move || live.publish(|_| (String::new(), String::new())))
        };
        for _ in 0..(super::super::state::CLIENT_QUEUE * 4) {
            live.step_dropped();
            live.flush(Duration::from_secs(10));
        }
        assert_eq!(live.clients(), 0);
        live.stop();
        publisher.join().unwrap();
        // What it had queued is still there to send, then the end.
        assert_eq!(queue.try_iter().count(), super::super::state::CLIENT_QUEUE);
    }
}
