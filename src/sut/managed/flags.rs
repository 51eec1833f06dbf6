//! The flags each managed kind owns, made from what the kind says of
//! itself when the command line is built: `--KNOB-set`, `--KNOB-cpus` and
//! `--KNOB-memory` for every kind, `--KNOB-role` for one that can serve
//! the file set or cache an origin, `--KNOB-listen` for one that listens
//! on addresses it is given, and `--KNOB-tls-cert`/`--KNOB-tls-key` for
//! one that serves HTTPS. A workload flattens the [`KindFlags`] of the
//! family of kinds it runs on; a kind added to [`super::KINDS`] brings its
//! flags, their help and their refusals with it.

use super::{KindEntry, Roles, KINDS};
use crate::error::PlanError;
use crate::sut::cpus::parse_cpu_list;
use crate::sut::{Target, TargetKind};
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::marker::PhantomData;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Which kinds a workload runs on.
pub(crate) trait Family {
    fn takes(kind: &KindEntry) -> bool;
}

/// The databases (the bank's and the SQL scripts' targets).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Databases;

impl Family for Databases {
    fn takes(kind: &KindEntry) -> bool {
        kind.target_kind != TargetKind::Http
    }
}

/// The web servers and accelerators (the web workload's targets).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WebServers;

impl Family for WebServers {
    fn takes(kind: &KindEntry) -> bool {
        kind.target_kind == TargetKind::Http
    }
}

/// The flags of every kind of family `F`, as given.
#[derive(Debug, Clone)]
pub(crate) struct KindFlags<F> {
    given: Vec<Given>,
    family: PhantomData<F>,
}

impl<F: Family> Default for KindFlags<F> {
    fn default() -> Self {
        KindFlags {
            given: kinds::<F>().map(Given::none).collect(),
            family: PhantomData,
        }
    }
}

/// One kind's flags, as given.
#[derive(Debug, Clone)]
pub(crate) struct Given {
    pub(crate) kind: &'static KindEntry,
    set: Vec<String>,
    cpus: Option<String>,
    memory: Option<String>,
    /// `--KNOB-role accelerator`.
    accelerator: bool,
    listen: Option<String>,
    tls: Option<(PathBuf, PathBuf)>,
}

/// The kinds of family `F`, in [`KINDS`]'s order.
fn kinds<F: Family>() -> impl Iterator<Item = &'static KindEntry> {
    KINDS.iter().filter(|k| F::takes(k))
}

/// What a role flag takes.
const SERVER: &str = "server";
const ACCELERATOR: &str = "accelerator";

impl<F: Family> clap::Args for KindFlags<F> {
    fn augment_args(cmd: Command) -> Command {
        kinds::<F>().fold(cmd, |cmd, kind| {
            let named = |what: &str| Arg::new(kind.flag(what)).long(kind.flag(what)[2..].to_string());
            let mut cmd = cmd
                .arg(
                    named("set")
                        .value_name("NAME=VALUE")
                        .action(ArgAction::Append)
                        .help(format!("Managed {}: {}.", kind.name, kind.settings_help)),
                )
                .arg(named("cpus").value_name("LIST").help(format!(
                    "Managed {}: run it on these CPUs only, e.g. 0 or 0-1,3 (its affinity mask).",
                    kind.name
                )))
                .arg(named("memory").value_name("SIZE").help(format!(
                    "Managed {}: hold it and its page cache to SIZE of memory (a cgroup; root), e.g. 256MiB.",
                    kind.name
                )));
            if kind.roles == Roles::Either {
                cmd = cmd.arg(
                    named("role")
                        .value_name("ROLE")
                        .value_parser([SERVER, ACCELERATOR])
                        .default_value(SERVER)
                        .help(format!(
                            "Managed {}: server (serves the file set) or accelerator (a caching reverse proxy in front of --origin).",
                            kind.name
                        )),
                );
            }
            if kind.listens {
                cmd = cmd.arg(named("listen").value_name("ADDRS").help(format!(
                    "Managed {}: the loopback addresses it listens on, e.g. 127.0.0.1,127.0.0.2.",
                    kind.name
                )));
            }
            if kind.serves_tls {
                let (cert, key) = (kind.flag("tls-cert"), kind.flag("tls-key"));
                cmd = cmd
                    .arg(
                        named("tls-cert")
                            .value_name("FILE")
                            .value_parser(clap::value_parser!(PathBuf))
                            .requires(key.clone())
                            .help(format!(
                                "Managed {}: serve HTTPS with this certificate (PEM); needs {key}.",
                                kind.name
                            )),
                    )
                    .arg(
                        named("tls-key")
                            .value_name("FILE")
                            .value_parser(clap::value_parser!(PathBuf))
                            .requires(cert)
                            .help(format!(
                                "Managed {}: the certificate's private key (PEM).",
                                kind.name
                            )),
                    );
            }
            cmd
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<F: Family> clap::FromArgMatches for KindFlags<F> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let text = |id: String| m.get_one::<String>(&id).cloned();
        let path = |id: String| m.get_one::<PathBuf>(&id).cloned();
        let given = kinds::<F>()
            .map(|kind| Given {
                kind,
                set: m
                    .get_many::<String>(&kind.flag("set"))
                    .map(|v| v.cloned().collect())
                    .unwrap_or_default(),
                cpus: text(kind.flag("cpus")),
                memory: text(kind.flag("memory")),
                accelerator: kind.roles == Roles::Either
                    && text(kind.flag("role")).as_deref() == Some(ACCELERATOR),
                listen: if kind.listens {
                    text(kind.flag("listen"))
                } else {
                    None
                },
                tls: if kind.serves_tls {
                    path(kind.flag("tls-cert")).zip(path(kind.flag("tls-key")))
                } else {
                    None
                },
            })
            .collect();
        Ok(KindFlags {
            given,
            family: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<F: Family> KindFlags<F> {
    /// The flags of the managed target's kind when it is of this family;
    /// an error naming the first flag given for another kind, or for a
    /// server perflab does not manage.
    pub(crate) fn own(&self, target: &Target) -> Result<Option<&Given>, PlanError> {
        let own = match target {
            Target::Managed(kind) => self.given.iter().find(|g| g.kind == *kind),
            _ => None,
        };
        let stray = self
            .given
            .iter()
            .filter(|g| own.is_none_or(|o| o.kind != g.kind))
            .find_map(|g| g.first().map(|flag| (g.kind, flag)));
        match stray {
            None => Ok(own),
            Some((kind, flag)) => Err(PlanError::flag(
                &flag,
                format!("only a managed {} takes it", kind.name),
                &format!(
                    "use it with --target {}, or drop it (the target is {})",
                    kind.scheme,
                    target.redacted()
                ),
            )),
        }
    }

    /// `--pg-* with --target postgres:managed and --mariadb-* with
    /// mariadb:managed`: which flags go with which target.
    pub(crate) fn per_kind() -> String {
        let pairs: Vec<String> = kinds::<F>()
            .enumerate()
            .map(|(at, k)| {
                let target = if at == 0 { "--target " } else { "" };
                format!("--{}-* with {target}{}", k.knob, k.scheme)
            })
            .collect();
        pairs.join(" and ")
    }
}

impl Given {
    fn none(kind: &'static KindEntry) -> Given {
        Given {
            kind,
            set: Vec::new(),
            cpus: None,
            memory: None,
            accelerator: false,
            listen: None,
            tls: None,
        }
    }

    /// The first of its flags that was given, by name.
    fn first(&self) -> Option<String> {
        [
            (!self.set.is_empty(), "set"),
            (self.cpus.is_some(), "cpus"),
            (self.memory.is_some(), "memory"),
            (self.accelerator, "role"),
            (self.listen.is_some(), "listen"),
            (self.tls.is_some(), "tls-cert"),
        ]
        .into_iter()
        .find_map(|(given, what)| given.then(|| self.kind.flag(what)))
    }

    /// Whether it caches an origin: a kind that only does, or one whose
    /// role was set so.
    pub(crate) fn accelerates(&self) -> bool {
        self.kind.roles == Roles::Accelerates || self.accelerator
    }

    /// Its settings, each `NAME=VALUE` split, trimmed and checked by the
    /// kind (for a server that accelerates or not), then asked of the
    /// server's own program together.
    pub(crate) fn settings(&self, accelerating: bool) -> Result<Vec<(String, String)>, PlanError> {
        let kind = self.kind;
        let example = format!("e.g. {} {}", kind.set_flag, kind.example);
        let settings = self
            .set
            .iter()
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .ok_or_else(|| {
                        PlanError::flag(
                            kind.set_flag,
                            format!("'{kv}' is not NAME=VALUE"),
                            &example,
                        )
                    })?;
                (kind.check_setting)(&k, &v, accelerating)
                    .map_err(|e| PlanError::flag(kind.set_flag, e, &example))?;
                Ok((k, v))
            })
            .collect::<Result<Vec<_>, PlanError>>()?;
        (kind.ask)(&settings, accelerating)
            .map_err(|e| PlanError::flag(kind.set_flag, e, "fix the setting, or drop it"))?;
        Ok(settings)
    }

    /// The CPUs asked for (all when none).
    pub(crate) fn cpus(&self) -> Result<Vec<usize>, PlanError> {
        Ok(self
            .cpus
            .as_deref()
            .map(|t| parse_cpu_list(t, self.kind.cpus_flag))
            .transpose()?
            .unwrap_or_default())
    }

    /// The memory limit asked for.
    pub(crate) fn memory(&self) -> Result<Option<crate::units::Bytes>, PlanError> {
        let flag = self.kind.memory_flag;
        self.memory
            .as_deref()
            .map(|t| {
                crate::units::Bytes::parse(t)
                    .map_err(|e| PlanError::flag(flag, e, &format!("e.g. {flag} 256MiB")))
            })
            .transpose()
    }

    /// The loopback addresses it is to listen on (none: its default),
    /// refused behind a shaped link, which gives it its link's address.
    pub(crate) fn listen(&self, shaped: bool) -> Result<Vec<IpAddr>, PlanError> {
        let Some(text) = &self.listen else {
            return Ok(Vec::new());
        };
        let flag = self.kind.flag("listen");
        if shaped {
            return Err(PlanError::flag(
                &flag,
                format!(
                    "a managed {} behind a shaped link listens on its link's address",
                    self.kind.name
                ),
                &format!("drop {flag}, or the --link-* flags"),
            ));
        }
        let mut out = Vec::new();
        for part in text.split(',') {
            let addr: IpAddr = part.trim().parse().map_err(|_| {
                PlanError::flag(
                    &flag,
                    format!("'{part}' is not an IP address"),
                    &format!("e.g. {flag} 127.0.0.1,127.0.0.2"),
                )
            })?;
            if !addr.is_loopback() {
                return Err(PlanError::flag(
                    &flag,
                    format!("{addr} is not a loopback address"),
                    &format!(
                        "a managed {} listens on 127.0.0.0/8 or ::1 only",
                        self.kind.name
                    ),
                ));
            }
            if !out.contains(&addr) {
                out.push(addr);
            }
        }
        Ok(out)
    }

    /// The certificate and key it serves HTTPS with, by their absolute
    /// paths.
    pub(crate) fn tls(&self) -> Result<Option<(PathBuf, PathBuf)>, PlanError> {
        let Some((cert, key)) = &self.tls else {
            return Ok(None);
        };
        let flags = (self.kind.flag("tls-cert"), self.kind.flag("tls-key"));
        tls_files((&flags.0, cert), (&flags.1, key)).map(Some)
    }
}

/// A certificate and its key, each given by a flag, by their absolute
/// paths, which must be readable files with plain paths: they are written
/// into the server's configuration, and the server would read a relative
/// path from its own directory, not from where perflab started.
pub(crate) fn tls_files(
    (cert_flag, cert): (&str, &Path),
    (key_flag, key): (&str, &Path),
) -> Result<(PathBuf, PathBuf), PlanError> {
    let absolute = |what: &str, flag: &str, file: &Path| {
        let found = std::fs::canonicalize(file).ok().filter(|f| f.is_file());
        let plain = found.filter(|f| {
            f.to_str().is_some_and(|t| {
                t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-+,=:@~%".contains(c))
            })
        });
        plain.ok_or_else(|| {
            PlanError::flag(
                flag,
                format!(
                    "the {what} {} is not a readable file with a plain path (letters, digits, /._-+,=:@~%)",
                    file.display().to_string().escape_debug()
                ),
                &format!("give PEM files, e.g. {cert_flag} cert.pem {key_flag} key.pem"),
            )
        })
    };
    Ok((
        absolute("certificate", cert_flag, cert)?,
        absolute("key", key_flag, key)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    /// The long flags a family's kinds bring to a command.
    fn longs<F: Family>() -> Vec<String> {
        KindFlags::<F>::augment_args(Command::new("t"))
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    }

    fn parse<F: Family>(args: &[&str]) -> KindFlags<F> {
        let cmd = KindFlags::<F>::augment_args(Command::new("t"));
        let m = cmd
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap();
        KindFlags::<F>::from_arg_matches(&m).unwrap()
    }

    /// Every kind of a family has its settings, CPUs and memory flags,
    /// and a flag of a capability only when it has the capability; no
    /// kind's flags reach the other family's workloads.
    #[test]
    fn each_kind_brings_the_flags_its_capabilities_give() {
        let (db, web) = (longs::<Databases>(), longs::<WebServers>());
        for kind in KINDS {
            let (own, other) = if Databases::takes(kind) {
                (&db, &web)
            } else {
                (&web, &db)
            };
            for what in ["set", "cpus", "memory"] {
                assert!(own.contains(&kind.flag(what)), "{}", kind.flag(what));
                assert!(!other.contains(&kind.flag(what)), "{}", kind.flag(what));
            }
            let has = |what: &str| own.contains(&kind.flag(what));
            assert_eq!(has("role"), kind.roles == Roles::Either, "{}", kind.name);
            assert_eq!(has("listen"), kind.listens, "{}", kind.name);
            assert_eq!(has("tls-cert"), kind.serves_tls, "{}", kind.name);
            assert_eq!(kind.flag("set"), kind.set_flag);
            assert_eq!(kind.flag("cpus"), kind.cpus_flag);
            assert_eq!(kind.flag("memory"), kind.memory_flag);
        }
    }

    /// The managed target's own flags are read; another kind's are refused
    /// by name, with the target that takes them.
    #[test]
    fn a_kinds_flags_go_to_its_target_and_another_kinds_are_refused() {
        let Some(either) = KINDS.iter().find(|k| k.roles == Roles::Either) else {
            return;
        };
        let role = either.flag("role");
        let listen = either.flag("listen");
        let flags: KindFlags<WebServers> = parse(&[
            &role,
            "accelerator",
            &listen,
            "127.0.0.1, 127.0.0.2,127.0.0.1",
        ]);
        let target = Target::Managed(either);
        let own = flags.own(&target).unwrap().expect("its own flags");
        assert!(own.accelerates());
        assert_eq!(own.listen(false).unwrap().len(), 2);
        let shaped = own.listen(true).unwrap_err().to_string();
        assert!(shaped.starts_with(&format!("{listen}: ")), "{shaped}");
        for bad in ["10.0.0.1", "x"] {
            let flags: KindFlags<WebServers> = parse(&[&listen, bad]);
            let own = flags.own(&target).unwrap().expect("its own flags");
            assert!(own.listen(false).is_err(), "{bad}");
        }
        let unmanaged = Target::parse("http://127.0.0.1:1/").unwrap();
        let e = flags.own(&unmanaged).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{role}: only a managed {} takes it; use it with --target {}, or drop it (the target is http://127.0.0.1:1/)",
                either.name, either.scheme
            )
        );
        if let Some(other) = KINDS
            .iter()
            .find(|k| WebServers::takes(k) && k.scheme != either.scheme)
        {
            let e = flags.own(&Target::Managed(other)).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{role}: only a managed {}", either.name)),
                "{e}"
            );
        }
    }
}
