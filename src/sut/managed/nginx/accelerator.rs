//! The accelerator role of a managed nginx (`--nginx-role accelerator
//! --origin …`, its origin in [`crate::sut::managed::origin`]): the parts of its `proxy_cache_path` (perflab's directive,
//! its directory in the managed one) each set and checked like a
//! directive, and its part of the configuration: the cache, the origin
//! as an upstream, and its own accounting of every request in the log
//! [`crate::sut::cache_log`] reads.

use crate::sut::managed::origin::Upstream;
use std::path::Path;

/// The parts of `proxy_cache_path` perflab writes (the directive itself
/// is perflab's: its directory is in the managed one), each set as if it
/// were a directive: `--nginx-set proxy_cache_max_size=64m`.
pub(crate) const CACHE_PARTS: &[&str] = &[
    "proxy_cache_max_size",
    "proxy_cache_keys_zone",
    "proxy_cache_inactive",
    "proxy_cache_levels",
];

/// An accelerator's defaults, each replaced by a setting of the same
/// name: a cache of 256 MiB whose entries live 10 minutes unused, 16 MiB
/// of keys (about 128,000 of them), and replies of 200 kept 10 minutes.
pub(super) const ACCELERATOR_DEFAULTS: &[(&str, &str)] = &[
    ("proxy_cache_max_size", "256m"),
    ("proxy_cache_keys_zone", "16m"),
    ("proxy_cache_inactive", "10m"),
    ("proxy_cache_levels", "1:2"),
    ("proxy_cache_valid", "200 10m"),
];

/// The accelerator's access log, in its directory: one line per request
/// in the format [`crate::sut::cache_log`] reads.
pub(crate) const CACHE_LOG: &str = "cache.log";

/// The accelerator's cache, in its directory.
pub(super) const CACHE_DIR: &str = "cache";

/// `proxy_cache_path` is perflab's (its directory is in the managed
/// one); its parts are set one by one, each checked: sizes as nginx
/// writes them (`64m`), a time (`10m`), levels (`1:2`).
pub(super) fn check_cache_part(name: &str, value: &str) -> Result<(), String> {
    let size = |v: &str| {
        let digits = v.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
        v.len() - digits.len() <= 1 && digits.parse::<u64>().is_ok_and(|n| n > 0)
    };
    let time = |v: &str| {
        let digits = v.trim_end_matches(['s', 'm', 'h', 'd']);
        v.len() - digits.len() <= 1 && digits.parse::<u64>().is_ok_and(|n| n > 0)
    };
    let levels = |v: &str| {
        let parts: Vec<&str> = v.split(':').collect();
        parts.len() <= 3 && parts.iter().all(|p| *p == "1" || *p == "2")
    };
    let (ok, example) = match name {
        "proxy_cache_path" => {
            return Err(
                "proxy_cache_path is perflab's (the cache lives in the managed directory); set its parts: proxy_cache_max_size=64m, proxy_cache_keys_zone=16m, proxy_cache_inactive=10m, proxy_cache_levels=1:2"
                    .to_string(),
            )
        }
        "proxy_cache_max_size" | "proxy_cache_keys_zone" => (size(value), "64m"),
        "proxy_cache_inactive" => (time(value), "10m"),
        "proxy_cache_levels" => (levels(value), "1:2"),
        _ => return Ok(()),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{name}={value}: give e.g. {name}={example}"))
    }
}

/// An accelerator's part of the configuration: its cache, its log's
/// format and its origin (in `http`), and what its server does with a
/// request (proxy it through the cache, log it).
pub(super) fn accelerator_blocks(
    dir: &Path,
    upstream: &Upstream,
    directives: &[(String, String)],
) -> (String, String) {
    let part = |name: &str| {
        directives
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let d = dir.display();
    let Upstream {
        authority, path, ..
    } = upstream;
    let proxy = format!(
        "proxy_cache_path {d}/{CACHE_DIR} levels={} keys_zone=perflab_cache:{} max_size={} inactive={} use_temp_path=off;\n\
         log_format perflab_cache '{}';\n\
         upstream perflab_origin {{\n\
         server {authority};\n\
         keepalive 64;\n\
         }}\n",
        part("proxy_cache_levels"),
        part("proxy_cache_keys_zone"),
        part("proxy_cache_max_size"),
        part("proxy_cache_inactive"),
        crate::sut::cache_log::NGINX_FORMAT,
    );
    let serve = format!(
        "access_log {d}/{CACHE_LOG} perflab_cache;\n\
         location / {{\n\
         proxy_pass http://perflab_origin{path};\n\
         proxy_cache perflab_cache;\n\
         proxy_http_version 1.1;\n\
         proxy_set_header Connection \"\";\n\
         proxy_set_header Host {authority};\n\
         }}\n"
    );
    (proxy, serve)
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    /// The accelerator's cache is perflab's `proxy_cache_path` in its
    /// directory, with the parts set as settings and none of them written
    /// as a directive of their own; misses go to the origin's path.
    #[test]
    fn the_accelerator_caches_in_its_directory_with_the_parts_it_was_given() {
        let directives = merged(
            &[
                ("proxy_cache_max_size".into(), "64m".into()),
                ("proxy_cache_valid".into(), "200 1h".into()),
            ],
            true,
        );
        let conf = configuration(
            Path::new("/tmp/x"),
            8080,
            ("127.0.0.1:8081".parse().unwrap(), None),
            &[IpAddr::from([127, 0, 0, 1])],
            false,
            &directives,
            Some(&Upstream {
                authority: "127.0.0.1:9000".into(),
                host: "127.0.0.1".into(),
                port: 9000,
                path: "/static/".into(),
            }),
        );
        assert!(
            conf.contains("proxy_cache_path /tmp/x/cache levels=1:2 keys_zone=perflab_cache:16m max_size=64m inactive=10m"),
            "{conf}"
        );
        assert!(conf.contains("proxy_cache_valid 200 1h;"), "{conf}");
        assert!(!conf.contains("proxy_cache_valid 200 10m"), "{conf}");
        assert!(!conf.contains("proxy_cache_max_size 64m;"), "{conf}");
        assert!(conf.contains("server 127.0.0.1:9000;"), "{conf}");
        assert!(
            conf.contains("proxy_pass http://perflab_origin/static/;"),
            "{conf}"
        );
        assert!(
            conf.contains("access_log /tmp/x/cache.log perflab_cache;"),
            "{conf}"
        );
        assert!(!conf.contains("root /tmp/x/html"), "{conf}");
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
    }

    #[test]
    fn the_caches_parts_are_checked_and_its_path_is_perflabs() {
        assert!(check_setting("proxy_cache_max_size", "64m").is_ok());
        assert!(check_setting("proxy_cache_max_size", "1048576").is_ok());
        assert!(check_setting("proxy_cache_inactive", "30s").is_ok());
        assert!(check_setting("proxy_cache_levels", "1:2").is_ok());
        for (name, value) in [
            ("proxy_cache_max_size", "lots"),
            ("proxy_cache_max_size", "0"),
            ("proxy_cache_keys_zone", "16mb"),
            ("proxy_cache_inactive", "soon"),
            ("proxy_cache_levels", "3:4"),
        ] {
            let e = check_setting(name, value).unwrap_err();
            assert!(e.starts_with(&format!("{name}={value}: give e.g.")), "{e}");
        }
        let e = check_setting("proxy_cache_path", "/etc keys_zone=x:1m").unwrap_err();
        assert!(e.contains("perflab's"), "{e}");
        assert_eq!(nginx_size("64m"), Some(64 << 20));
        assert_eq!(nginx_size("512K"), Some(512 << 10));
        assert_eq!(nginx_size("1000"), Some(1000));
        assert_eq!(nginx_size("x"), None);
    }
}
