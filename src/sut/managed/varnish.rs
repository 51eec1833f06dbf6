//! A Varnish perflab owns for the length of a run (`--target
//! varnish:managed --origin …`): a caching accelerator, and nothing else,
//! in front of an origin ([`super::origin`]: an `http://` URL, or a
//! managed nginx serving the file set, which lives and dies with it).
//!
//! Its directory holds the VCL perflab writes (the origin as its one
//! backend, a synthetic reply at [`READY_PATH`] for the readiness probe),
//! varnishd's own working directory (`-n`, never the system instance's
//! under /var/lib/varnish), its log and the cache's accounting.
//! `varnishd -F` runs in the foreground as the `varnish` user when
//! perflab is root, on a free port, its cache in memory (`-s malloc`).
//!
//! `--varnish-set NAME=VALUE` sets one of varnishd's parameters (`-p`),
//! except `storage`, perflab's own: the cache's size (`-s
//! malloc,SIZE`). Each is checked for its form, then asked of varnishd
//! itself (`varnishd -C` over the VCL, which checks every parameter and
//! the storage), before anything starts.
//!
//! The cache's accounting: a `varnishncsa` of the same working
//! directory, started with varnishd and stopped after it (its own pid,
//! in the ledger), writes one line per transaction of both sides in
//! [`crate::sut::cache_log`]'s format ([`VARNISHNCSA_FORMAT`]): each
//! reply with how Varnish handled it (`hit`, `miss`, `pass`, …), each
//! fetch from the origin apart. What varnishncsa cannot give exactly is
//! approximated: the origin's bytes are those Varnish received (headers
//! and body, `BereqAcct`), its time the fetch's until the body was in
//! (`BerespBody`), a request's time the reply's end since its start
//! (`Resp`), all as Varnish's shared-memory log timed them.

use super::ledger::Leftovers;
use super::origin::{start_origin, upstream_of, Accelerating, OriginPlan, Upstream};
use super::server::{ManagedKind, MovedLog, Probe, Reach, Site, Start};
use super::{find_programs, log_file, placed_command, Placement, ServerDir, ServerProcess};
use crate::error::PlanError;
use crate::sut::cache_log::{CacheAccounting, VARNISHNCSA_FORMAT};
use crate::sut::{ServerOptions, TargetKind};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) use super::guard::{varnish_size, STORAGE};

/// perflab's defaults, each replaced by a setting of the same name: a
/// cache of 256 MiB (as the nginx accelerator's), replies kept 10
/// minutes when the origin says nothing of their freshness (nginx
/// serving files does not).
const DEFAULTS: &[(&str, &str)] = &[(STORAGE, "256m"), ("default_ttl", "600")];

/// The path Varnish answers itself (a synthetic 200), for the readiness
/// probe.
pub(crate) const READY_PATH: &str = "/perflab-varnish-ready";

/// The VCL perflab writes, in its directory.
const VCL: &str = "perflab.vcl";
/// varnishd's working directory (`-n`), in its directory.
const WORKDIR: &str = "varnishd";
/// The cache's accounting, in its directory.
const CACHE_LOG: &str = "cache.log";
/// varnishncsa's own complaints, in its directory.
const NCSA_LOG: &str = "varnishncsa.log";

/// The managed Varnish kind: where it listens, what it runs with, and
/// what it runs beside. Fields drop in order, after varnishd's process:
/// the accounting (its ledger after it), then the origin.
pub struct Varnish {
    program: PathBuf,
    address: SocketAddr,
    /// The settings as it runs with them, perflab's defaults included.
    settings: Vec<(String, String)>,
    /// The cache's size, bytes.
    storage: u64,
    /// varnishncsa, held to be stopped on drop, and its ledger's record,
    /// struck after it.
    _accounting: ServerProcess,
    _accounting_ledger: Leftovers,
    accelerating: Accelerating,
}

/// What a managed Varnish is given before anything is made.
pub(crate) struct Programs {
    varnishd: PathBuf,
    varnishncsa: PathBuf,
    origin: OriginPlan,
}

impl ManagedKind for Varnish {
    const SCHEME: &'static str = "varnish:managed";
    const TARGET_KIND: TargetKind = TargetKind::Http;
    const NAME: &'static str = "Varnish";
    const DIR_PREFIX: &'static str = "varnish";
    const MOVED_LOG: Option<MovedLog> = None;
    const USER: &'static str = "varnish";
    const LOG: &'static str = "varnishd.log";
    const KNOB: &'static str = "varnish";
    const SETTINGS_FLAG: &'static str = "--varnish-set";
    const CPUS_FLAG: &'static str = "--varnish-cpus";
    const MEMORY_FLAG: &'static str = "--varnish-memory";
    const EXAMPLE_SETTING: &'static str = "storage=64m";
    const SETTINGS_HELP: &'static str = "a varnishd parameter, NAME=VALUE (repeatable), or storage=SIZE for its cache's size (default 256m), e.g. storage=64m";
    const ROLES: super::Roles = super::Roles::Accelerates;
    const ADVICE: super::Advice = super::Advice {
        cache_size: Some("storage=…"),
        cache_ttl: Some("default_ttl=3600"),
        ..super::Advice::NONE
    };
    const PROGRAM: &'static str = "varnishd";
    /// Its VCL is compiled to C and built with the C compiler first.
    const START_TIMEOUT: Duration = Duration::from_secs(30);
    const POLL: Duration = Duration::from_millis(100);
    const READY_MEANS: &'static str = "answer";
    /// The manager stops its cache child, then itself.
    const STOP_SIGNAL: libc::c_int = libc::SIGTERM;
    const STOP_TIMEOUT: Duration = Duration::from_secs(10);

    type Programs = Programs;

    fn check_setting(name: &str, value: &str, _accelerating: bool) -> Result<(), String> {
        check_setting(name, value)
    }

    fn ask(settings: &[(String, String)], _accelerating: bool) -> Result<(), String> {
        check_settings(settings)
    }

    fn find(options: &ServerOptions) -> anyhow::Result<Programs> {
        let (varnishd, varnishncsa) = find_varnish().ok_or_else(|| {
            PlanError::new(
                format!(
                    "no varnishd (on PATH or in /usr/sbin) with its varnishncsa; install them (apt-get install varnish) or use {}",
                    super::KINDS
                        .iter()
                        .filter(|k| k.roles == super::Roles::Either)
                        .map(|k| format!("--target {} {} accelerator", k.scheme, k.flag("role")))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            )
        })?;
        for (name, value) in &options.settings {
            check_setting(name, value).map_err(|e| {
                PlanError::flag("--varnish-set", e, "e.g. --varnish-set storage=64m")
            })?;
        }
        let origin = options.origin.as_ref().ok_or_else(|| {
            PlanError::flag(
                "--origin",
                "a managed Varnish caches an origin, and none was given",
                &format!(
                    "add --origin http://HOST:PORT/ or --origin {}",
                    super::origin_kind().map_or("a managed web server", |k| k.scheme)
                ),
            )
        })?;
        Ok(Programs {
            varnishd,
            varnishncsa,
            origin: OriginPlan::of(origin, options.keep)?,
        })
    }

    fn version(programs: &Programs, _user: Option<(u32, u32)>) -> String {
        let said = Command::new(&programs.varnishd)
            .arg("-V")
            .output()
            .map(|o| o.stderr)
            .unwrap_or_default();
        let said = String::from_utf8_lossy(&said);
        // `varnishd (varnish-7.1.1 revision …)`
        said.split_whitespace()
            .find_map(|w| w.strip_prefix("(varnish-"))
            .unwrap_or_default()
            .to_string()
    }

    /// Its VCL and its accounting (which waits for varnishd's shared
    /// memory), and its origin, started now.
    fn prepare(programs: Programs, site: &Site) -> anyhow::Result<Self> {
        let settings = merged(&site.settings);
        let storage = setting(&settings, STORAGE)
            .and_then(varnish_size)
            .unwrap_or_default();
        let address = SocketAddr::new(site.address().into(), super::free_loopback_port()?);
        let dir = site.dir.path();
        let mut accounting_ledger = Leftovers::begin("varnishncsa")?;
        let accounting = start_accounting(&programs.varnishncsa, site, &mut accounting_ledger)?;
        let accelerating =
            start_origin(programs.origin, site.link.as_ref().map(|_| site.client()))?;
        let upstream = upstream_of(&accelerating.origin_url)?;
        let vcl = dir.join(VCL);
        std::fs::write(&vcl, vcl_text(&upstream))
            .with_context(|| format!("cannot write {}", vcl.display()))?;
        Ok(Varnish {
            program: programs.varnishd,
            address,
            settings,
            storage,
            _accounting: accounting,
            _accounting_ledger: accounting_ledger,
            accelerating,
        })
    }

    fn command(&self, site: &Site) -> Command {
        let dir = site.dir.path();
        let mut cmd = placed_command(&self.program, &site.placement());
        cmd.arg("-F")
            .arg("-n")
            .arg(dir.join(WORKDIR))
            .arg("-a")
            .arg(self.address.to_string())
            .arg("-f")
            .arg(dir.join(VCL))
            .arg("-T")
            .arg("none");
        arguments(&mut cmd, &self.settings);
        cmd
    }

    /// Varnish answers its synthetic page, and its accounting has logged
    /// that answer (varnishncsa has found its shared memory: no request
    /// of the run goes uncounted).
    fn probe<'a>(&'a self, site: &'a Site, _start: Start) -> anyhow::Result<Probe<'a>> {
        let address = self.address;
        let log = site.dir.path().join(CACHE_LOG);
        Ok(Box::new(move || {
            let reply = crate::sut::http::get_text(address, READY_PATH, Duration::from_secs(2))
                .map_err(|e| format!("{address}: {e}"))?;
            if !reply.starts_with("HTTP/1.1 200") {
                return Err(format!(
                    "{address}: {}",
                    reply.lines().next().unwrap_or_default()
                ));
            }
            match std::fs::metadata(&log) {
                Ok(m) if m.len() > 0 => Ok(()),
                _ => Err(format!(
                    "varnishncsa has not logged a request in {}",
                    log.display()
                )),
            }
        }))
    }

    fn said(dir: &ServerDir) -> Vec<String> {
        errors_said(&std::fs::read(dir.path().join(Self::LOG)).unwrap_or_default())
    }

    fn reach(&self, site: &Site) -> Result<Reach, PlanError> {
        Ok(Reach::Http {
            bases: vec![self.base_url()],
            status: None,
            cache_log: Some(CacheAccounting {
                log: site.dir.path().join(CACHE_LOG),
                max_bytes: Some(self.storage),
            }),
        })
    }

    fn at(&self, _site: &Site) -> String {
        format!(
            "{}, caching {}",
            self.base_url(),
            self.accelerating.origin_url
        )
    }

    fn origin_pid(&self) -> Option<u32> {
        self.accelerating.pid()
    }

    /// An origin URL it was given (a managed origin is perflab's own).
    fn given_flags(&self) -> Vec<&'static str> {
        self.accelerating.url_given().into_iter().collect()
    }

    fn settings<'a>(&'a self, _site: &'a Site) -> &'a [(String, String)] {
        &self.settings
    }

    fn docroot(&self, _site: &Site) -> Option<PathBuf> {
        self.accelerating.docroot()
    }
}

impl Varnish {
    fn base_url(&self) -> String {
        format!("http://{}/", self.address)
    }
}

/// Finds varnishd (on PATH or in /usr/sbin) and varnishncsa (on PATH or
/// in /usr/bin).
pub(crate) fn find_varnish() -> Option<(PathBuf, PathBuf)> {
    let varnishd = find_programs(&["varnishd"], [PathBuf::from("/usr/sbin")])?;
    let varnishncsa = find_programs(&["varnishncsa"], [PathBuf::from("/usr/bin")])?;
    Some((varnishd.join("varnishd"), varnishncsa.join("varnishncsa")))
}

/// Starts varnishncsa on the working directory varnishd will make,
/// retrying until it is there (`-t off`), both sides of every
/// transaction into the cache's log.
fn start_accounting(
    program: &Path,
    site: &Site,
    ledger: &mut Leftovers,
) -> anyhow::Result<ServerProcess> {
    let dir = site.dir.path();
    let mut cmd = placed_command(
        program,
        &Placement {
            user: site.user,
            ..Placement::default()
        },
    );
    cmd.arg("-n")
        .arg(dir.join(WORKDIR))
        .args(["-c", "-b", "-t", "off", "-F", VARNISHNCSA_FORMAT, "-w"])
        .arg(dir.join(CACHE_LOG))
        .stderr(log_file(&site.dir, NCSA_LOG, site.user)?);
    ServerProcess::spawn(
        cmd,
        libc::SIGTERM,
        Duration::from_secs(5),
        "varnishncsa",
        ledger,
    )
}

/// The VCL: the origin as the one backend (its host asked for, its base
/// path put before every request's), a synthetic reply for the probe,
/// the rest Varnish's built-in logic.
fn vcl_text(upstream: &Upstream) -> String {
    let Upstream {
        authority,
        host,
        port,
        path,
    } = upstream;
    let prefix = path.trim_end_matches('/');
    let rewrite = if prefix.is_empty() {
        String::new()
    } else {
        format!("    set bereq.url = \"{prefix}\" + bereq.url;\n")
    };
    format!(
        "vcl 4.1;\n\
         # Written by perflab for one run.\n\
         backend origin {{\n\
         \x20   .host = \"{host}\";\n\
         \x20   .port = \"{port}\";\n\
         \x20   .connect_timeout = 3s;\n\
         }}\n\
         sub vcl_recv {{\n\
         \x20   if (req.url == \"{READY_PATH}\") {{\n\
         \x20       return (synth(200, \"ready\"));\n\
         \x20   }}\n\
         }}\n\
         sub vcl_backend_fetch {{\n\
         {rewrite}\
         \x20   set bereq.http.Host = \"{authority}\";\n\
         }}\n"
    )
}

/// perflab's defaults with the settings put in their place.
fn merged(settings: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (name, value) in settings {
        match out.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value.clone(),
            None => out.push((name.clone(), value.clone())),
        }
    }
    out
}

/// The last value of setting `name`.
fn setting<'a>(settings: &'a [(String, String)], name: &str) -> Option<&'a str> {
    settings
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The storage (`-s malloc,SIZE`) and the parameters (`-p NAME=VALUE`).
fn arguments(cmd: &mut Command, settings: &[(String, String)]) {
    for (name, value) in settings {
        if name == STORAGE {
            cmd.arg("-s").arg(format!("malloc,{value}"));
        } else {
            cmd.arg("-p").arg(format!("{name}={value}"));
        }
    }
}

/// A setting's form, checked before anything starts: a parameter's name
/// (letters, digits, `_`), a value of one word without quotes or
/// control characters, and a storage size Varnish reads (`64m`, `1G`).
pub(crate) fn check_setting(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("'{name}' is not a varnishd parameter's name"));
    }
    if value.is_empty()
        || value
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '"')
    {
        return Err(format!(
            "the value of {name} must be one word, without quotes or control characters"
        ));
    }
    if name == STORAGE && varnish_size(value).is_none_or(|n| n < 1 << 20) {
        return Err(format!(
            "{name}={value}: give the cache's size, 1m or more, e.g. {name}=64m"
        ));
    }
    super::guard::varnish(name, value, super::guard::available_memory())
}

/// Whether varnishd takes these settings: `varnishd -C` over a VCL like
/// the run's, with the storage and every parameter, as the user it runs
/// as (see [`super::asked`]).
pub(crate) fn check_settings(settings: &[(String, String)]) -> Result<(), String> {
    for (name, value) in settings {
        check_setting(name, value)?;
    }
    super::asked::remembered("varnish", settings, || {
        let Some((varnishd, _)) = find_varnish() else {
            return Ok(());
        };
        let Ok(user) = super::server_user(Varnish::USER, Varnish::NAME) else {
            return Ok(());
        };
        let Ok(dir) = tempfile::Builder::new()
            .prefix("perflab-varnish-settings-")
            .tempdir()
        else {
            return Ok(());
        };
        let vcl = dir.path().join(VCL);
        let upstream = Upstream {
            authority: "127.0.0.1:8082".to_string(),
            host: "127.0.0.1".to_string(),
            port: 8082,
            path: "/".to_string(),
        };
        if std::fs::write(&vcl, vcl_text(&upstream)).is_err() {
            return Ok(());
        }
        if let Some((uid, gid)) = user {
            for path in [dir.path(), vcl.as_path()] {
                let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
            }
        }
        let mut cmd = super::server_command(&varnishd, user, &[]);
        cmd.arg("-C")
            .arg("-n")
            .arg(dir.path().join(WORKDIR))
            .arg("-f")
            .arg(&vcl);
        arguments(&mut cmd, &merged(settings));
        match super::asked::answer_of(cmd) {
            Some((false, stderr)) => {
                let said = errors_said(stderr.as_bytes());
                match said.first() {
                    Some(s) if !s.contains("working directory") => Err(s.clone()),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    })
}

/// What varnishd said after `Error:` (on that line or the next ones, up
/// to a blank line or its usage hint), each complaint in one line.
fn errors_said(log: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(log);
    let mut said: Vec<String> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(at) = line.find("Error:") else {
            continue;
        };
        let mut words = vec![line[at + "Error:".len()..].trim().to_string()];
        for next in lines.by_ref() {
            let next = next.trim();
            if next.is_empty() || next.starts_with("(-? gives usage)") {
                break;
            }
            words.push(next.to_string());
        }
        let words = crate::util::one_line(&words.join(" "));
        if !words.is_empty() && !said.contains(&words) {
            said.push(words);
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_as_varnish_reads_them() {
        assert_eq!(varnish_size("64m"), Some(64 << 20));
        assert_eq!(varnish_size("64MB"), Some(64 << 20));
        assert_eq!(varnish_size("1G"), Some(1 << 30));
        assert_eq!(varnish_size("512k"), Some(512 << 10));
        assert_eq!(varnish_size("1048576"), Some(1 << 20));
        for bad in [
            "",
            "m",
            "lots",
            "-1m",
            "1.5m",
            "64x",
            "99999999999999999999",
        ] {
            assert_eq!(varnish_size(bad), None, "{bad}");
        }
    }

    /// A value is one word: no setting can add an argument or a quote to
    /// the VCL; the storage is a size of 1 MiB or more.
    #[test]
    fn settings_are_one_word_and_the_storage_a_size() {
        assert!(check_setting("storage", "64m").is_ok());
        assert!(check_setting("thread_pool_max", "500").is_ok());
        for (name, value) in [
            ("storage", "lots"),
            ("storage", "0"),
            ("storage", "512k"),
            ("thread pool", "1"),
            ("x", "a b"),
            ("x", "\"q\""),
            ("x", ""),
        ] {
            assert!(check_setting(name, value).is_err(), "{name}={value}");
        }
        let e = check_setting("storage", "lots").unwrap_err();
        assert!(e.starts_with("storage=lots: give the cache's size"), "{e}");
    }

    /// The storage is `-s malloc,SIZE`, the rest `-p`, perflab's defaults
    /// replaced by settings of their name.
    #[test]
    fn the_storage_and_parameters_become_arguments() {
        let settings = merged(&[
            ("storage".into(), "8m".into()),
            ("thread_pool_min".into(), "10".into()),
        ]);
        let mut cmd = Command::new("varnishd");
        arguments(&mut cmd, &settings);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "-s",
                "malloc,8m",
                "-p",
                "default_ttl=600",
                "-p",
                "thread_pool_min=10"
            ]
        );
    }

    #[test]
    fn the_vcl_sends_misses_to_the_origins_path_and_answers_the_probe() {
        let vcl = vcl_text(&Upstream {
            authority: "[::1]:9000".into(),
            host: "::1".into(),
            port: 9000,
            path: "/static/".into(),
        });
        assert!(vcl.starts_with("vcl 4.1;\n"), "{vcl}");
        assert!(vcl.contains(".host = \"::1\";"), "{vcl}");
        assert!(vcl.contains(".port = \"9000\";"), "{vcl}");
        assert!(
            vcl.contains("set bereq.url = \"/static\" + bereq.url;"),
            "{vcl}"
        );
        assert!(
            vcl.contains("set bereq.http.Host = \"[::1]:9000\";"),
            "{vcl}"
        );
        assert!(
            vcl.contains(&format!("req.url == \"{READY_PATH}\"")),
            "{vcl}"
        );
        assert_eq!(vcl.matches('{').count(), vcl.matches('}').count());
        let root = vcl_text(&Upstream {
            authority: "127.0.0.1:9000".into(),
            host: "127.0.0.1".into(),
            port: 9000,
            path: "/".into(),
        });
        assert!(!root.contains("bereq.url ="), "{root}");
    }

    /// varnishd's complaints span lines; each is quoted in one.
    #[test]
    fn varnishds_errors_are_quoted_in_one_line() {
        let log = b"Error:\nUnknown parameter \"foo\".\n\nError: (-smalloc) size \"64x\": Unknown BYTES unit\n(-? gives usage)\n";
        assert_eq!(
            errors_said(log),
            [
                "Unknown parameter \"foo\".",
                "(-smalloc) size \"64x\": Unknown BYTES unit"
            ]
        );
    }
}
