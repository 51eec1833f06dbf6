//! The flags every workload on a server target shares: `--target` and the
//! options of a server perflab manages (`--pg-set`, `--pg-cpus`,
//! `--mariadb-set`, `--mariadb-cpus`, `--keep`),
//! validated into a [`Target`] and [`ServerOptions`]. A workload flattens
//! [`TargetArgs`] into its own flags and names its default target.

use super::managed::disk::IoLimits;
use super::managed::link::LinkShape;
use super::managed::{self, KindEntry, ServerOptions};
use super::{schemes, Target};
use crate::error::PlanError;

/// `--target` and the managed server's options.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct TargetArgs {
    #[arg(long, value_name = "DSN", help = format!("The target: {}.", schemes()))]
    pub(crate) target: Option<String>,

    /// Managed PostgreSQL: a server setting, NAME=VALUE (repeatable).
    #[arg(long = "pg-set", value_name = "NAME=VALUE")]
    pub(crate) pg_set: Vec<String>,

    /// Managed PostgreSQL: run the server on these CPUs only, e.g. 0 or 0-1,3 (its affinity mask).
    #[arg(long = "pg-cpus", value_name = "LIST")]
    pub(crate) pg_cpus: Option<String>,

    /// Managed PostgreSQL: hold the server and its page cache to SIZE of memory (a cgroup; root), e.g. 256MiB.
    #[arg(long = "pg-memory", value_name = "SIZE")]
    pub(crate) pg_memory: Option<String>,

    /// Managed MariaDB: a server option, NAME=VALUE, given to mariadbd as --NAME=VALUE (repeatable).
    #[arg(long = "mariadb-set", value_name = "NAME=VALUE")]
    pub(crate) mariadb_set: Vec<String>,

    /// Managed MariaDB: run the server on these CPUs only, e.g. 0 or 0-1,3 (its affinity mask).
    #[arg(long = "mariadb-cpus", value_name = "LIST")]
    pub(crate) mariadb_cpus: Option<String>,

    /// Managed MariaDB: hold the server and its page cache to SIZE of memory (a cgroup; root), e.g. 256MiB.
    #[arg(long = "mariadb-memory", value_name = "SIZE")]
    pub(crate) mariadb_memory: Option<String>,

    #[command(flatten)]
    pub(crate) surroundings: SurroundingsArgs,

    /// Managed PostgreSQL or MariaDB: put its log (the write-ahead log, initdb --waldir; the InnoDB redo log, innodb_log_group_home_dir) in a directory of its own under DIR, e.g. on another disk.
    #[arg(long = "log-dir", value_name = "DIR")]
    pub(crate) log_dir: Option<std::path::PathBuf>,

    /// Managed PostgreSQL or MariaDB: keep the data directory after the run.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// What surrounds a managed server: its link and its disk. Every
/// workload that runs on a managed server flattens these.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct SurroundingsArgs {
    /// Managed server: run the server in a network namespace of its own behind a veth pair shaped to RATE each way (tbf; root), e.g. 1mbit; unlimited leaves it unshaped.
    #[arg(long = "link-rate", value_name = "RATE")]
    pub(crate) link_rate: Option<String>,

    /// Managed server: drop this share of the packets on the server's link at random, both ways (2%) or toward:from the server (2%:0%) (nftables; root).
    #[arg(long = "link-loss", value_name = "SHARE")]
    pub(crate) link_loss: Option<String>,

    /// Managed server: delay the server's packets by D each way (netem, where the kernel has it; root), e.g. 5ms.
    #[arg(long = "link-delay", value_name = "D")]
    pub(crate) link_delay: Option<String>,

    /// Managed server: hold the server's reads from the disk under its files to N per second (a blkio/io cgroup; root).
    #[arg(long = "disk-read-iops", value_name = "N")]
    pub(crate) disk_read_iops: Option<String>,

    /// Managed server: hold the server's writes to the disk under its files to N per second (a blkio/io cgroup; root).
    #[arg(long = "disk-write-iops", value_name = "N")]
    pub(crate) disk_write_iops: Option<String>,

    /// Managed server: hold the server's reads from the disk under its files to SIZE per second, e.g. 10MiB (root).
    #[arg(long = "disk-read-bps", value_name = "SIZE")]
    pub(crate) disk_read_bps: Option<String>,

    /// Managed server: hold the server's writes to the disk under its files to SIZE per second, e.g. 10MiB (root).
    #[arg(long = "disk-write-bps", value_name = "SIZE")]
    pub(crate) disk_write_bps: Option<String>,
}

impl SurroundingsArgs {
    /// The link shape and disk limits asked for, checked against `target`
    /// (a server perflab manages) and this process's rights.
    pub(crate) fn validate(
        &self,
        target: &Target,
    ) -> Result<(Option<LinkShape>, Option<IoLimits>), PlanError> {
        let managed = matches!(target, Target::Managed(_));
        let link = LinkShape::from_flags(
            self.link_rate.as_deref(),
            self.link_loss.as_deref(),
            self.link_delay.as_deref(),
        )?;
        if let Some(shape) = &link {
            if !managed {
                return Err(PlanError::flag(
                    self.link_flag(),
                    format!(
                        "perflab shapes the link of a server it manages, not of {}",
                        target.redacted()
                    ),
                    &format!(
                        "use a managed target ({}), or shape your server's link yourself",
                        managed::schemes(|_| true).join(", ")
                    ),
                ));
            }
            super::managed::link::check_can_shape(shape)?;
        }
        let io = IoLimits::from_flags(
            self.disk_read_iops.as_deref(),
            self.disk_write_iops.as_deref(),
            self.disk_read_bps.as_deref(),
            self.disk_write_bps.as_deref(),
        )?;
        if let Some(io) = &io {
            if !managed {
                return Err(PlanError::flag(
                    io.flag(),
                    format!(
                        "perflab throttles the disk of a server it manages, not of {}",
                        target.redacted()
                    ),
                    &format!(
                        "use a managed target ({}), or throttle your server's disk yourself",
                        managed::schemes(|_| true).join(", ")
                    ),
                ));
            }
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err(PlanError::flag(
                    io.flag(),
                    "a disk throttle is a cgroup, which only root can make",
                    "run perflab as root, or drop the --disk-* flags",
                ));
            }
        }
        Ok((link, io))
    }

    /// The first `--link-*` flag given, for messages.
    fn link_flag(&self) -> &'static str {
        if self.link_rate.is_some() {
            "--link-rate"
        } else if self.link_loss.is_some() {
            "--link-loss"
        } else {
            "--link-delay"
        }
    }
}

impl TargetArgs {
    /// Validates the target (`default` when no `--target`) and the managed
    /// server's options, which only a managed target takes.
    pub(crate) fn validate(&self, default: &str) -> Result<(Target, ServerOptions), PlanError> {
        let target = validate_target(self.target.as_deref(), default)?;
        let own = self.own_flags(&target)?;
        let settings = own.map_or(Ok(Vec::new()), |(kind, flags)| {
            let settings = flags.settings(kind.example)?;
            (kind.ask)(&settings)
                .map_err(|e| PlanError::flag(kind.set_flag, e, "fix the setting, or drop it"))?;
            Ok::<_, PlanError>(settings)
        })?;
        let (cpus, memory) = match own {
            Some((_, flags)) => (flags.cpus()?, flags.memory()?),
            None => (Vec::new(), None),
        };
        let (link, io) = self.surroundings.validate(&target)?;
        self.check_log_dir(&target)?;
        Ok((
            target,
            ServerOptions {
                settings,
                keep: self.keep,
                cpus,
                memory,
                link,
                io,
                log_dir: self.log_dir.clone(),
                addresses: Vec::new(),
                tls_files: None,
                origin: None,
                origin_of_link: None,
            },
        ))
    }

    /// The flags of each managed kind that takes its flags here, each
    /// with its name; [`managed::KINDS`] says which kind they are of.
    fn managed_flags(&self) -> [ManagedFlags<'_>; 2] {
        [
            ManagedFlags {
                set: ("--pg-set", &self.pg_set),
                cpus: ("--pg-cpus", &self.pg_cpus),
                memory: ("--pg-memory", &self.pg_memory),
            },
            ManagedFlags {
                set: ("--mariadb-set", &self.mariadb_set),
                cpus: ("--mariadb-cpus", &self.mariadb_cpus),
                memory: ("--mariadb-memory", &self.mariadb_memory),
            },
        ]
    }

    /// The managed target's kind and its flags, when it takes them here;
    /// an error naming the first flag given for another server (or for
    /// none: `--keep` on a server perflab does not manage).
    fn own_flags(
        &self,
        target: &Target,
    ) -> Result<Option<(&'static KindEntry, ManagedFlags<'_>)>, PlanError> {
        let all = self.managed_flags();
        let own = match target {
            Target::Managed(kind) => all
                .iter()
                .find(|f| f.set.0 == kind.set_flag)
                .map(|f| (*kind, *f)),
            _ => None,
        };
        let stray = all
            .iter()
            .filter(|f| own.is_none_or(|(_, o)| o.set.0 != f.set.0))
            .find_map(|f| f.given().map(str::to_string))
            .or_else(|| (own.is_none() && self.keep).then(|| "--keep".to_string()));
        let Some(flag) = stray else {
            return Ok(own);
        };
        Err(PlanError::flag(
            &flag,
            if own.is_some() {
                format!("is not a setting of {}", target.redacted())
            } else {
                "only a managed server can be configured by perflab".to_string()
            },
            &format!("use {}, or set it on your server", flags_per_kind(&all)),
        ))
    }

    /// `--log-dir`, given to a kind that has a log to move, names a
    /// directory by its absolute path.
    fn check_log_dir(&self, target: &Target) -> Result<(), PlanError> {
        let Some(dir) = &self.log_dir else {
            return Ok(());
        };
        if !matches!(target, Target::Managed(kind) if kind.moved_log.is_some()) {
            let moved: Vec<&str> = managed::KINDS.iter().filter_map(|k| k.moved_log).collect();
            let takers = managed::schemes(|k| k.moved_log.is_some());
            return Err(PlanError::flag(
                "--log-dir",
                format!(
                    "perflab moves the log of a managed database only ({}), not of {}",
                    moved.join(", "),
                    target.redacted()
                ),
                &format!("use --target {}", super::in_words(&takers, "or")),
            ));
        }
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(PlanError::flag(
                "--log-dir",
                format!(
                    "{} is not a directory given by its absolute path",
                    dir.display()
                ),
                "give one that exists, e.g. --log-dir /dev/shm",
            ));
        }
        Ok(())
    }
}

/// `--pg-* with --target postgres:managed and --mariadb-* with
/// mariadb:managed`: which flags go with which target.
fn flags_per_kind(all: &[ManagedFlags<'_>]) -> String {
    let pairs: Vec<String> = all
        .iter()
        .filter_map(|f| managed::KINDS.iter().find(|k| k.set_flag == f.set.0))
        .enumerate()
        .map(|(at, k)| {
            let target = if at == 0 { "--target " } else { "" };
            format!("--{}-* with {target}{}", k.knob, k.scheme)
        })
        .collect();
    pairs.join(" and ")
}

/// One managed server's flags, each with its name.
#[derive(Clone, Copy)]
struct ManagedFlags<'a> {
    set: (&'static str, &'a Vec<String>),
    cpus: (&'static str, &'a Option<String>),
    memory: (&'static str, &'a Option<String>),
}

impl ManagedFlags<'_> {
    /// The first of them that was given.
    fn given(&self) -> Option<&'static str> {
        if !self.set.1.is_empty() {
            Some(self.set.0)
        } else if self.cpus.1.is_some() {
            Some(self.cpus.0)
        } else if self.memory.1.is_some() {
            Some(self.memory.0)
        } else {
            None
        }
    }

    /// The settings, each `NAME=VALUE` split and trimmed.
    fn settings(&self, example: &str) -> Result<Vec<(String, String)>, PlanError> {
        let (flag, values) = self.set;
        values
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .ok_or_else(|| {
                        PlanError::flag(
                            flag,
                            format!("'{kv}' is not NAME=VALUE"),
                            &format!("e.g. {flag} {example}"),
                        )
                    })
            })
            .collect()
    }

    /// The CPUs asked for (all when none).
    fn cpus(&self) -> Result<Vec<usize>, PlanError> {
        let (flag, list) = self.cpus;
        Ok(list
            .as_deref()
            .map(|t| parse_cpu_list(t, flag))
            .transpose()?
            .unwrap_or_default())
    }

    /// The memory limit asked for.
    fn memory(&self) -> Result<Option<crate::units::Bytes>, PlanError> {
        let (flag, memory) = self.memory;
        memory
            .as_deref()
            .map(|t| {
                crate::units::Bytes::parse(t)
                    .map_err(|e| PlanError::flag(flag, e, &format!("e.g. {flag} 256MiB")))
            })
            .transpose()
    }
}

/// Validates a `--target` (`default` when absent). `env:VAR` reads the
/// target from the environment variable VAR: a DSN holding a password
/// kept off the command line (perflab kube's coordinator gets it so, from
/// its Secret).
pub(crate) fn validate_target(text: Option<&str>, default: &str) -> Result<Target, PlanError> {
    let from_env;
    let text = match text.and_then(|t| t.strip_prefix("env:")) {
        Some(var) => {
            from_env = std::env::var(var).map_err(|_| {
                PlanError::flag(
                    "--target",
                    format!("env:{var}: the environment variable {var} is not set (or not text)"),
                    "set it to the target, or give the target itself",
                )
            })?;
            Some(from_env.as_str())
        }
        None => text,
    };
    Target::parse(text.unwrap_or(default)).map_err(|e| {
        PlanError::flag(
            "--target",
            e,
            &format!("give one of {}, e.g. --target sqlite:data.db", schemes()),
        )
    })
}

/// Validates `--pg-cpus`: CPUs the managed server may be placed on, e.g.
/// `0` or `0-1,3`. The server starts with perflab's affinity and is then
/// moved to these CPUs with sched_setaffinity(2), which may leave
/// perflab's own mask (`taskset -c 1 perflab … --pg-cpus 0` keeps the
/// generator off the server's CPU) but not perflab's cpuset cgroup: a
/// container's CPUs, which need not start at 0.
pub(crate) fn parse_cpu_list(text: &str, flag: &str) -> Result<Vec<usize>, PlanError> {
    let allowed = placeable_cpus();
    let shown = format_cpu_list(&allowed);
    let bad = |why: String| {
        PlanError::flag(
            flag,
            why,
            &format!(
                "give CPUs from {shown}, e.g. {flag} {}",
                allowed.first().copied().unwrap_or(0)
            ),
        )
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let Some((a, b)) = parse_cpu_range(part) else {
            return Err(bad(format!("'{part}' is not a CPU number or range")));
        };
        if let Some(cpu) = (a..=b).find(|c| !allowed.contains(c)) {
            return Err(bad(format!(
                "CPU {cpu} is not among the CPUs perflab's cgroup lets a server run on ({shown})"
            )));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `3` or `0-3` as (first, last); none when malformed or reversed.
fn parse_cpu_range(part: &str) -> Option<(usize, usize)> {
    let (a, b) = part.split_once('-').unwrap_or((part, part));
    let (a, b) = (
        a.trim().parse::<usize>().ok()?,
        b.trim().parse::<usize>().ok()?,
    );
    (a <= b).then_some((a, b))
}

/// A kernel CPU list (`0-3,6`) as CPU numbers.
pub(crate) fn parse_kernel_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = parse_cpu_range(part)?;
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// `0-1,3` for CPUs 0, 1 and 3.
fn format_cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &cpu in cpus {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    runs.iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs a child of perflab can be moved to: its cpuset cgroup's
/// effective CPUs (cgroup v2 `cpuset.cpus.effective`, v1
/// `cpuset.effective_cpus`; see the kernel's cgroup-v2.rst and
/// cgroup-v1/cpusets.rst), else the online CPUs, else as many as perflab
/// may use from 0.
fn placeable_cpus() -> Vec<usize> {
    let read = |path: String| std::fs::read_to_string(path).ok();
    let mut candidates = Vec::new();
    for line in read("/proc/self/cgroup".to_string())
        .unwrap_or_default()
        .lines()
    {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/cpuset.cpus.effective"));
        } else if controllers.split(',').any(|c| c == "cpuset") {
            candidates.push(format!("/sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus"));
        }
    }
    // Inside a cgroup namespace the paths above may be the host's; the
    // mount's root is then this cgroup.
    candidates.push("/sys/fs/cgroup/cpuset.cpus.effective".to_string());
    candidates.push("/sys/fs/cgroup/cpuset/cpuset.effective_cpus".to_string());
    candidates.push("/sys/devices/system/cpu/online".to_string());
    candidates
        .into_iter()
        .find_map(|path| read(path).as_deref().and_then(parse_kernel_cpu_list))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each server's flags here are a managed kind's, by the same names,
    /// and the messages that name managed targets name every one.
    #[test]
    fn the_managed_flags_and_messages_follow_the_kinds() {
        let args = TargetArgs::default();
        for flags in args.managed_flags() {
            let kind = managed::KINDS
                .iter()
                .find(|k| k.set_flag == flags.set.0)
                .expect(flags.set.0);
            assert_eq!(
                (flags.cpus.0, flags.memory.0),
                (kind.cpus_flag, kind.memory_flag)
            );
        }
        let stray = TargetArgs {
            target: Some("sqlite:x.db".into()),
            keep: true,
            ..TargetArgs::default()
        };
        let e = stray.validate("sqlite:x.db").unwrap_err().to_string();
        assert_eq!(
            e,
            "--keep: only a managed server can be configured by perflab; use --pg-* with --target postgres:managed and --mariadb-* with mariadb:managed, or set it on your server"
        );
        let shaped = SurroundingsArgs {
            link_rate: Some("1mbit".into()),
            ..SurroundingsArgs::default()
        };
        let e = shaped
            .validate(&Target::parse("sqlite:x.db").unwrap())
            .unwrap_err()
            .to_string();
        for kind in managed::KINDS {
            assert!(e.contains(kind.scheme), "{e}");
        }
        let moved = TargetArgs {
            log_dir: Some("/tmp".into()),
            ..TargetArgs::default()
        };
        let e = moved.validate("sqlite:x.db").unwrap_err().to_string();
        assert!(
            e.contains("(PostgreSQL's write-ahead log, MariaDB's redo log)"),
            "{e}"
        );
        assert!(
            e.ends_with("use --target postgres:managed or mariadb:managed"),
            "{e}"
        );
    }

    #[test]
    fn server_cpus_are_checked_against_the_cpus_a_server_can_get() {
        assert_eq!(format_cpu_list(&[0, 1, 3, 5, 6, 7]), "0-1,3,5-7");
        assert_eq!(parse_kernel_cpu_list("0-1,3\n"), Some(vec![0, 1, 3]));
        assert_eq!(parse_kernel_cpu_list("3-1"), None);
        let allowed = placeable_cpus();
        assert!(!allowed.is_empty());
        let first = allowed[0].to_string();
        assert_eq!(
            parse_cpu_list(&first, "--pg-cpus").unwrap(),
            vec![allowed[0]]
        );
        let outside = (0..).find(|c| !allowed.contains(c)).unwrap();
        let err = parse_cpu_list(&format!("{first},{outside}"), "--pg-cpus")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("CPU {outside} is not among the CPUs")),
            "{err}"
        );
        assert!(err.contains(&format_cpu_list(&allowed)), "{err}");
        assert!(parse_cpu_list("1-0", "--pg-cpus").is_err());
    }
}
