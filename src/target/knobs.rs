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

use super::Target;

/// The knobs there are, for error messages.
pub const KNOBS: &str = "cpus, memory, link.rate, link.loss, link.delay, disk.read_iops, disk.write_iops, disk.read_bps, disk.write_bps, log_dir, pg.NAME, mariadb.NAME, nginx.NAME (and the lab's own setup, teardown and var.NAME)";

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
pub fn knob_flags(target: &Target, knob: &str, value: &str) -> Result<Vec<String>, String> {
    let managed = |what: &str| {
        format!(
            "{what} acts on a server perflab manages, not on {}; use --target postgres:managed, mariadb:managed or nginx:managed",
            target.redacted()
        )
    };
    if knob == "cpus" {
        let flag = match target {
            Target::PostgresManaged => "--pg-cpus",
            Target::MariadbManaged => "--mariadb-cpus",
            Target::NginxManaged => "--nginx-cpus",
            _ => return Err(managed("'cpus'")),
        };
        return Ok(vec![flag.to_string(), value.to_string()]);
    }
    if knob == "memory" {
        let flag = match target {
            Target::PostgresManaged => "--pg-memory",
            Target::MariadbManaged => "--mariadb-memory",
            Target::NginxManaged => "--nginx-memory",
            _ => return Err(managed("'memory'")),
        };
        return Ok(vec![flag.to_string(), value.to_string()]);
    }
    if knob == "log_dir" {
        return match target {
            Target::PostgresManaged | Target::MariadbManaged => {
                Ok(vec!["--log-dir".to_string(), value.to_string()])
            }
            Target::NginxManaged => Err(
                "'log_dir' moves a database's log; vary it on postgres:managed or mariadb:managed"
                    .to_string(),
            ),
            _ => Err(managed("'log_dir'")),
        };
    }
    if let Some((_, flag)) = SURROUNDINGS.iter().find(|(name, _)| *name == knob) {
        return match target {
            Target::PostgresManaged | Target::MariadbManaged | Target::NginxManaged => {
                Ok(vec![flag.to_string(), value.to_string()])
            }
            _ => Err(managed(&format!("'{knob}'"))),
        };
    }
    if let Some((server, name)) = knob.split_once('.') {
        let (flag, own) = match server {
            "pg" => ("--pg-set", matches!(target, Target::PostgresManaged)),
            "mariadb" => ("--mariadb-set", matches!(target, Target::MariadbManaged)),
            "nginx" => ("--nginx-set", matches!(target, Target::NginxManaged)),
            _ => ("", false),
        };
        if !flag.is_empty() {
            if name.is_empty() {
                return Err(format!("'{knob}' names no setting; write {server}.NAME"));
            }
            if !own {
                return Err(format!(
                    "'{knob}' is a setting of a managed {}, and the target is {}",
                    match server {
                        "pg" => "postgres:managed",
                        "mariadb" => "mariadb:managed",
                        _ => "nginx:managed",
                    },
                    target.redacted()
                ));
            }
            return Ok(vec![flag.to_string(), format!("{name}={value}")]);
        }
    }
    Err(format!("'{knob}' is no knob; use one of {KNOBS}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_knob_becomes_its_servers_flag() {
        let pg = Target::PostgresManaged;
        assert_eq!(
            knob_flags(&pg, "cpus", "0-1").unwrap(),
            ["--pg-cpus", "0-1"]
        );
        assert_eq!(
            knob_flags(&pg, "pg.shared_buffers", "16MB").unwrap(),
            ["--pg-set", "shared_buffers=16MB"]
        );
        let maria = Target::MariadbManaged;
        assert_eq!(
            knob_flags(&maria, "cpus", "0").unwrap(),
            ["--mariadb-cpus", "0"]
        );
        assert_eq!(
            knob_flags(&maria, "mariadb.innodb_buffer_pool_size", "64M").unwrap(),
            ["--mariadb-set", "innodb_buffer_pool_size=64M"]
        );
        assert_eq!(
            knob_flags(&Target::NginxManaged, "nginx.worker_processes", "2").unwrap(),
            ["--nginx-set", "worker_processes=2"]
        );
    }

    #[test]
    fn a_knob_the_target_does_not_take_is_refused() {
        let pg = Target::PostgresManaged;
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
            knob_flags(&Target::MariadbManaged, "log_dir", "/dev/shm").unwrap(),
            ["--log-dir", "/dev/shm"]
        );
        assert!(knob_flags(&Target::NginxManaged, "log_dir", "/dev/shm")
            .unwrap_err()
            .contains("a database's log"));
        assert_eq!(
            knob_flags(&Target::NginxManaged, "memory", "64MiB").unwrap(),
            ["--nginx-memory", "64MiB"]
        );
        assert_eq!(
            knob_flags(&Target::NginxManaged, "link.rate", "10mbit").unwrap(),
            ["--link-rate", "10mbit"]
        );
        assert!(knob_flags(&pg, "colour", "red")
            .unwrap_err()
            .contains("no knob"));
    }
}
