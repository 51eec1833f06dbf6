//! The live view of a run (`--serve ADDR`): a small HTTP/1.1 server, on
//! threads of its own, that serves a page with the report's charts
//! updated each interval over server-sent events (`/events`), and the
//! run's counts for Prometheus (`/metrics`). The run's observer feeds the
//! shared [`Live`] state once per interval and once per step, as it feeds
//! the terminal's progress: nothing here is on the load's path.
//!
//! The server is the agent's ([`crate::agent::http`]): the same bounds on
//! a request's size and time, at most [`CLIENTS`] connections at once. Its
//! access rules are the agent's too: beyond loopback it needs a token
//! (`--serve-token-file`; every request carries it as
//! `Authorization: Bearer …`, or the page and its events as `?token=…`,
//! since a browser's EventSource sends no header) and TLS
//! (`--serve-tls-self-signed`, or `--serve-tls-cert` and `--serve-tls-key`).
//! `perflab serve` serves stored runs' reports the same way, and
//! `perflab lab --serve` a lab's cells as they run (`lab::live`, above
//! this module, on these pages and this server).

pub(crate) mod metrics;
pub(crate) mod page;
pub(crate) mod server;
pub(crate) mod state;

pub(crate) use server::{serve_store, LiveServer, Pages, ServeConfig};
pub(crate) use state::Live;

/// Connections served at once: the page's readers, their event streams
/// and a scraper.
pub(crate) const CLIENTS: usize = 16;
