//! The flags every workload on a server target shares: `--target` and the
//! options of a server perflab manages (each database kind's own flags,
//! made from the kinds, and `--keep`, `--log-dir`, the surroundings),
//! validated into a [`Target`] and [`ServerOptions`]. A workload flattens
//! [`TargetArgs`] into its own flags and names its default target.

use super::managed::disk::IoLimits;
use super::managed::flags::{Databases, KindFlags};
use super::managed::link::LinkShape;
use super::managed::{self, ServerOptions};
use super::{schemes, Target};
use crate::error::PlanError;

/// `--target` and the managed server's options.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct TargetArgs {
    #[arg(long, value_name = "DSN", help = format!("The target: {}.", schemes()))]
    pub(crate) target: Option<String>,

    /// Each managed database kind's own flags (`--pg-set`, `--mariadb-cpus`, …).
    #[command(flatten)]
    pub(crate) kinds: KindFlags<Databases>,

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
        let own = self.kinds.own(&target)?;
        if own.is_none() && self.keep {
            return Err(PlanError::flag(
                "--keep",
                "only a managed server can be configured by perflab",
                &format!(
                    "use {}, or set it on your server",
                    KindFlags::<Databases>::per_kind()
                ),
            ));
        }
        let (settings, cpus, memory) = match own {
            Some(given) => (given.settings(false)?, given.cpus()?, given.memory()?),
            None => (Vec::new(), Vec::new(), None),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages that name managed targets name every one.
    #[test]
    fn the_managed_flags_and_messages_follow_the_kinds() {
        let stray = TargetArgs {
            target: Some("sqlite:x.db".into()),
            keep: true,
            ..TargetArgs::default()
        };
        let e = stray.validate("sqlite:x.db").unwrap_err().to_string();
        // Every database kind is named, the test-only proof's too.
        assert_eq!(
            e,
            "--keep: only a managed server can be configured by perflab; use --pg-* with --target postgres:managed and --mariadb-* with mariadb:managed and --proof-* with proof:managed, or set it on your server"
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
}
