//! The origin a caching accelerator sits in front of, whatever the
//! accelerator (a managed nginx in its accelerator role, a managed
//! Varnish): an `http://` URL that must answer before anything is made,
//! or a managed nginx serving the file set ([`OriginPlan::Managed`]),
//! started with the accelerator and stopped after it. An accelerator
//! keeps its [`Accelerating`] as its last field, so that the origin
//! outlives the accelerator's own process.

use super::server::{Reach, Running};
use super::ServerOptions;
use crate::error::PlanError;
use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;

/// What an accelerator proxies to.
pub(crate) struct Accelerating {
    /// The origin's base URL as given, or the managed origin's.
    pub(crate) origin_url: String,
    /// The managed origin, when perflab runs it.
    pub(crate) managed: Option<Box<dyn Running>>,
}

/// The managed origin's `--origin` (its kind found among the kinds by
/// what it can do, not named: an accelerator's file, nginx's own
/// included, needs no other's).
fn origin_scheme() -> &'static str {
    super::origin_kind().map_or("a managed web server", |k| k.scheme)
}

impl Accelerating {
    /// The managed origin's main process, when perflab runs it.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.managed.as_ref().map(|m| m.pid())
    }

    /// `--origin`, when the origin is a URL given (not perflab's own).
    pub(crate) fn url_given(&self) -> Option<&'static str> {
        self.managed.is_none().then_some("--origin")
    }

    /// The managed origin's document root (where the workload writes the
    /// file set); none in front of an origin perflab does not run.
    pub(crate) fn docroot(&self) -> Option<PathBuf> {
        self.managed.as_ref().and_then(|m| m.docroot())
    }
}

/// The origin as found before anything is made.
pub(crate) enum OriginPlan {
    /// An origin that answered at this base URL.
    Url(String),
    /// A managed origin, to start (kept when the accelerator is).
    Managed { keep: bool },
}

impl OriginPlan {
    /// The origin `--origin` named: a URL that answers now, or a managed
    /// nginx to start (its files kept when the accelerator's are).
    pub(crate) fn of(origin: &super::Origin, keep: bool) -> Result<OriginPlan, PlanError> {
        Ok(match origin {
            super::Origin::Managed => OriginPlan::Managed { keep },
            super::Origin::Url(url) => OriginPlan::Url(origin_answers(url)?),
        })
    }
}

/// Where the accelerator sends misses.
pub(crate) struct Upstream {
    /// `HOST:PORT` of the origin.
    pub(crate) authority: String,
    /// The origin's host (an IPv6 address without brackets) and port.
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The path every request's path is appended to, ending in `/`.
    pub(crate) path: String,
}

/// The origin at `url` (plain HTTP) answers an HTTP GET of its base path
/// within 3 s, whatever its status: the URL as a base, or one line
/// naming the problem.
pub(crate) fn origin_answers(url: &str) -> Result<String, PlanError> {
    let bad = |why: String| {
        PlanError::flag(
            "--origin",
            why,
            &format!(
                "give the origin's http://HOST:PORT/ once it runs, or --origin {}",
                origin_scheme()
            ),
        )
    };
    let base = crate::sut::http::HttpBase::parse(url).map_err(bad)?;
    check_origin_path(&base.path).map_err(bad)?;
    if base.tls {
        return Err(bad(format!(
            "'{}': the accelerator reaches its origin over plain HTTP",
            crate::sut::redact(url)
        )));
    }
    let addr = base.resolve().map_err(bad)?;
    let reply = crate::sut::http::get_text(addr, &base.path, Duration::from_secs(3))
        .map_err(|e| bad(format!("the origin {} does not answer: {e}", base.url())))?;
    if !reply.starts_with("HTTP/") {
        return Err(bad(format!(
            "the origin {} does not answer HTTP",
            base.url()
        )));
    }
    Ok(base.url())
}

/// The accelerator's origin: the URL that answered, or a managed nginx
/// started now (its own directory, port and processes). An accelerator
/// behind a shaped link (`link_host`, the host's end of it) runs in a
/// namespace of its own: a managed origin then listens on that end, where
/// the accelerator reaches it, and an origin URL on this host's loopback,
/// which the namespace cannot reach, is refused.
pub(crate) fn start_origin(
    plan: OriginPlan,
    link_host: Option<std::net::Ipv4Addr>,
) -> anyhow::Result<Accelerating> {
    match plan {
        OriginPlan::Url(origin_url) => {
            let loopback = crate::sut::http::HttpBase::parse(&origin_url)
                .ok()
                .and_then(|b| b.resolve().ok())
                .is_some_and(|a| a.ip().is_loopback());
            if link_host.is_some() && loopback {
                return Err(PlanError::flag(
                    "--origin",
                    format!(
                        "'{}' is on this host's loopback, which the accelerator behind its link (a network namespace of its own) cannot reach",
                        crate::sut::redact(&origin_url)
                    ),
                    &format!("give --origin {} (it then listens on the link's end), an origin on another address, or drop --link-*", origin_scheme()),
                )
                .into());
            }
            Ok(Accelerating {
                origin_url,
                managed: None,
            })
        }
        OriginPlan::Managed { keep } => {
            let kind = super::origin_kind()
                .context("no kind of managed server can be the accelerator's origin")?;
            let origin = (kind.start)(&ServerOptions {
                keep,
                origin_of_link: link_host,
                ..ServerOptions::default()
            })
            .context("cannot start the accelerator's managed origin")?;
            let origin_url = match origin.reach()? {
                Reach::Http { bases, .. } => bases.into_iter().next().unwrap_or_default(),
                _ => anyhow::bail!("the managed origin {} is no web server", kind.scheme),
            };
            Ok(Accelerating {
                origin_url,
                managed: Some(origin),
            })
        }
    }
}

/// The characters an origin's base path may hold besides letters and
/// digits: RFC 3986's unreserved ones and a few sub-delimiters that mean
/// nothing to VCL or nginx. It is written into the accelerator's
/// configuration (a VCL string, nginx's `proxy_pass`), where a quote, a
/// `;`, a brace, `$`, `\` or a space would change its structure.
const PATH_MARKS: &str = "-._~/+,=:@!*";

/// Whether `path`, an origin's base path, may be written into an
/// accelerator's configuration: `/` then letters, digits, [`PATH_MARKS`],
/// each `%` starting an escape of two hex digits. One sentence why not.
pub(crate) fn check_origin_path(path: &str) -> Result<(), String> {
    let bytes = path.as_bytes();
    let bad = bytes.iter().enumerate().find(|&(at, &b)| {
        let escape = b == b'%'
            && bytes
                .get(at + 1..at + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
        !(b.is_ascii_alphanumeric() || PATH_MARKS.as_bytes().contains(&b) || escape)
    });
    if !path.starts_with('/') || bad.is_some() {
        return Err(format!(
            "the origin's path '{}' holds characters an accelerator's configuration cannot take (only letters, digits, {PATH_MARKS} and %XX escapes)",
            path.escape_debug()
        ));
    }
    Ok(())
}

/// Where misses go: the origin's `HOST:PORT` and base path, a path that
/// [`check_origin_path`] refuses refused here too (whatever made the URL).
pub(crate) fn upstream_of(origin_url: &str) -> anyhow::Result<Upstream> {
    let base = crate::sut::http::HttpBase::parse(origin_url).map_err(anyhow::Error::msg)?;
    check_origin_path(&base.path).map_err(|e| {
        PlanError::flag("--origin", e, "percent-encode the path, e.g. %22 for '\"'")
    })?;
    Ok(Upstream {
        authority: base.authority(),
        host: base
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port: base.port,
        path: base.path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an audit sent through `--origin` (a quote and a statement for
    /// the VCL; a `;` and a directive for nginx) and its kin are refused
    /// before any configuration is written; a percent-encoded path is
    /// taken as it is.
    #[test]
    fn an_origin_path_that_could_reshape_a_configuration_is_refused() {
        for hostile in [
            "http://127.0.0.1:1/x\"+server.identity+\"/",
            "http://127.0.0.1:1/x\";}sub\u{a0}vcl_deliver{/",
            "http://127.0.0.1:1/x;include;/",
            "http://127.0.0.1:1/x}/",
            "http://127.0.0.1:1/$host/",
            "http://127.0.0.1:1/a\\b/",
            "http://127.0.0.1:1/a'b/",
            "http://127.0.0.1:1/%zz/",
            "http://127.0.0.1:1/caf\u{e9}/",
        ] {
            let e = upstream_of(hostile).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.starts_with("--origin: the origin's path")),
                "{hostile}: {e:?}"
            );
        }
        let up = upstream_of("http://127.0.0.1:1/static/a%22b/v1.2_x~y/").unwrap();
        assert_eq!(up.path, "/static/a%22b/v1.2_x~y/");
    }
}
