//! The knobs a lab turns on a target: what each one does to a server
//! perflab manages, said as the run flags that do it. A lab knows knobs by
//! name only; which target takes which knob, and how, is known here.
//!
//! `cpus` is the managed server's affinity mask; `memory` the limit of a
//! memory cgroup it runs in (page cache included); `link.rate`,
//! `link.loss` and `link.delay` shape the link to it (a namespace of its
//! own behind a veth pair); `disk.*` throttle its I/O on the disk under
//! its files; `log_dir` moves its log (write-ahead or redo); `pg.NAME`,
//! `mariadb.NAME` and `nginx.NAME` are the server's own settings.

use super::managed::{self, KindEntry};
use super::{in_words, Target};

/// The knobs there are, for error messages: a server's own settings are
/// `PREFIX.NAME`, a prefix for each managed kind.
pub(crate) fn knobs() -> String {
    let own: Vec<String> = managed::KINDS
        .iter()
        .map(|k| format!("{}.NAME", k.knob))
        .collect();
    format!(
        "cpus, memory, link.rate, link.loss, link.delay, disk.read_iops, disk.write_iops, disk.read_bps, disk.write_bps, log_dir, {} (and the lab's own setup, teardown and var.NAME)",
        own.join(", ")
    )
}

/// Whether `knob` is a managed server's setting that sizes its own cache
/// of pages (`mariadb.innodb_buffer_pool_size`): a size in bytes, whose
/// change the memory what-if predicts.
pub(crate) fn sizes_a_cache(knob: &str) -> bool {
    knob.split_once('.').is_some_and(|(prefix, name)| {
        managed::KINDS
            .iter()
            .any(|k| k.knob == prefix && k.cache_setting == Some(name))
    })
}

/// The knobs of a managed database server's surroundings (its link and
/// its disk) and the run flags that set them.
const SURROUNDINGS: [(&str, &str); 7] = [
    ("link.rate", "--link-rate"),
    ("link.loss", "--link-loss"),
    ("link.delay", "--link-delay"),
    ("disk.read_iops", "--disk-read-iops"),
    ("disk.write_iops", "--disk-write-iops"),
    ("disk.read_bps", "--disk-read-bps"),
    ("disk.write_bps", "--disk-write-bps"),
];

/// The run flags that set `knob` to `value` on `target`, or why it cannot
/// be set there (one sentence naming the fix).
pub(crate) fn knob_flags(target: &Target, knob: &str, value: &str) -> Result<Vec<String>, String> {
    let flag_and_value = |flag: &str| Ok(vec![flag.to_string(), value.to_string()]);
    let kind = match target {
        Target::Managed(kind) => Some(*kind),
        _ => None,
    };
    let not_managed = |what: &str| {
        format!(
            "{what} acts on a server perflab manages, not on {}; use --target {}",
            target.redacted(),
            in_words(&managed::schemes(|_| true), "or")
        )
    };
    match knob {
        "cpus" => kind.map_or_else(
            || Err(not_managed("'cpus'")),
            |k| flag_and_value(k.cpus_flag),
        ),
        "memory" => kind.map_or_else(
            || Err(not_managed("'memory'")),
            |k| flag_and_value(k.memory_flag),
        ),
        "log_dir" => match kind {
            Some(k) if k.moved_log.is_some() => flag_and_value("--log-dir"),
            Some(_) => Err(format!(
                "'log_dir' moves a database's log; vary it on {}",
                in_words(&managed::schemes(|k| k.moved_log.is_some()), "or")
            )),
            None => Err(not_managed("'log_dir'")),
        },
        _ => {
            if let Some((_, flag)) = SURROUNDINGS.iter().find(|(name, _)| *name == knob) {
                return match kind {
                    Some(_) => flag_and_value(flag),
                    None => Err(not_managed(&format!("'{knob}'"))),
                };
            }
            setting_flags(target, kind, knob, value)
        }
    }
}

/// A server's own setting, `PREFIX.NAME`: its settings flag, on a
/// managed server of the kind the prefix names.
fn setting_flags(
    target: &Target,
    kind: Option<&KindEntry>,
    knob: &str,
    value: &str,
) -> Result<Vec<String>, String> {
    let named = knob.split_once('.').and_then(|(prefix, name)| {
        let of = managed::KINDS.iter().find(|k| k.knob == prefix)?;
        Some((prefix, name, of))
    });
    let Some((prefix, name, of)) = named else {
        return Err(format!("'{knob}' is no knob; use one of {}", knobs()));
    };
    if name.is_empty() {
        return Err(format!("'{knob}' names no setting; write {prefix}.NAME"));
    }
    if kind != Some(of) {
        return Err(format!(
            "'{knob}' is a setting of a managed {}, and the target is {}",
            of.scheme,
            target.redacted()
        ));
    }
    Ok(vec![of.set_flag.to_string(), format!("{name}={value}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed_target(scheme: &str) -> Target {
        Target::parse(scheme).unwrap()
    }

    /// Every managed kind's settings are a knob, named in the list of
    /// knobs, and its own flags follow from its knobs.
    #[test]
    fn every_managed_kind_has_its_knobs() {
        let remote = Target::parse("postgres://u@db/x").unwrap();
        let refused = knob_flags(&remote, "cpus", "0").unwrap_err();
        for kind in managed::KINDS {
            let target = Target::Managed(kind);
            assert!(knobs().contains(&format!("{}.NAME", kind.knob)));
            assert!(refused.contains(kind.scheme), "{refused}");
            assert_eq!(
                knob_flags(&target, &format!("{}.x", kind.knob), "1").unwrap(),
                [kind.set_flag, "x=1"]
            );
            assert_eq!(
                knob_flags(&target, "cpus", "0").unwrap(),
                [kind.cpus_flag, "0"]
            );
        }
    }

    #[test]
    fn each_knob_becomes_its_servers_flag() {
        let pg = managed_target("postgres:managed");
        assert_eq!(
            knob_flags(&pg, "cpus", "0-1").unwrap(),
            ["--pg-cpus", "0-1"]
        );
        assert_eq!(
            knob_flags(&pg, "pg.shared_buffers", "16MB").unwrap(),
            ["--pg-set", "shared_buffers=16MB"]
        );
        let maria = managed_target("mariadb:managed");
        assert_eq!(
            knob_flags(&maria, "cpus", "0").unwrap(),
            ["--mariadb-cpus", "0"]
        );
        assert_eq!(
            knob_flags(&maria, "mariadb.innodb_buffer_pool_size", "64M").unwrap(),
            ["--mariadb-set", "innodb_buffer_pool_size=64M"]
        );
        assert_eq!(
            knob_flags(
                &managed_target("nginx:managed"),
                "nginx.worker_processes",
                "2"
            )
            .unwrap(),
            ["--nginx-set", "worker_processes=2"]
        );
    }

    #[test]
    fn a_knob_the_target_does_not_take_is_refused() {
        let pg = managed_target("postgres:managed");
        let remote = Target::parse("postgres://u@db/x").unwrap();
        assert!(knob_flags(&remote, "cpus", "0")
            .unwrap_err()
            .contains("manages"));
        assert!(knob_flags(&pg, "mariadb.x", "1")
            .unwrap_err()
            .contains("mariadb:managed"));
        assert!(knob_flags(&pg, "pg.", "1")
            .unwrap_err()
            .contains("names no setting"));
        assert_eq!(
            knob_flags(&pg, "memory", "1GB").unwrap(),
            ["--pg-memory", "1GB"]
        );
        assert!(knob_flags(&remote, "memory", "1GB")
            .unwrap_err()
            .contains("manages"));
        assert_eq!(
            knob_flags(&pg, "link.loss", "2%").unwrap(),
            ["--link-loss", "2%"]
        );
        assert!(knob_flags(&remote, "link.rate", "1mbit")
            .unwrap_err()
            .contains("manages"));
        assert_eq!(
            knob_flags(&pg, "disk.write_iops", "100").unwrap(),
            ["--disk-write-iops", "100"]
        );
        assert_eq!(
            knob_flags(&pg, "log_dir", "/dev/shm").unwrap(),
            ["--log-dir", "/dev/shm"]
        );
        assert_eq!(
            knob_flags(&managed_target("mariadb:managed"), "log_dir", "/dev/shm").unwrap(),
            ["--log-dir", "/dev/shm"]
        );
        assert!(
            knob_flags(&managed_target("nginx:managed"), "log_dir", "/dev/shm")
                .unwrap_err()
                .contains("a database's log")
        );
        assert_eq!(
            knob_flags(&managed_target("nginx:managed"), "memory", "64MiB").unwrap(),
            ["--nginx-memory", "64MiB"]
        );
        assert_eq!(
            knob_flags(&managed_target("nginx:managed"), "link.rate", "10mbit").unwrap(),
            ["--link-rate", "10mbit"]
        );
        assert!(knob_flags(&pg, "colour", "red")
            .unwrap_err()
            .contains("no knob"));
    }
}
