//! What no setting from outside may do to a server perflab manages: take
//! over what perflab sets itself (its directories, addresses, logs, user),
//! load or run code (libraries, modules, plugins, shell commands, inline
//! C), or read and write files outside the server's own directory. One
//! rule per kind, applied to every `--pg-set`, `--mariadb-set`,
//! `--nginx-set` and `--varnish-set` (and so every lab knob that becomes
//! one) before anything is made; the refusal is one sentence naming the
//! setting and why. A value's form (one word, one line) is each kind's
//! own check; these rules add what its name may reach.

/// Why a setting is perflab's own, for messages.
const OWN: &str = "is perflab's own (it keeps the server in its directory, on loopback)";
/// Why a setting loads or runs code, for messages.
const CODE: &str = "loads or runs code, which a managed server never does";
/// Why a setting names a file, for messages.
const FILES: &str = "names files outside the server's own directory";

/// A refusal of `name`, for `why`.
fn refused(name: &str, why: &str) -> Result<(), String> {
    Err(format!("{name} {why}; drop it"))
}

/// Whether `name` ends with one of `suffixes`.
fn ends_with_any(name: &str, suffixes: &[&str]) -> bool {
    suffixes.iter().any(|s| name.ends_with(s))
}

/// A value holding a control character (a line break, a NUL) is refused
/// for every kind.
fn plain_value(name: &str, value: &str) -> Result<(), String> {
    if value.chars().any(char::is_control) {
        return Err(format!(
            "the value of {name} holds a control character or line break"
        ));
    }
    Ok(())
}

/// A PostgreSQL setting (`postgres -c NAME=VALUE`): names are
/// case-insensitive; perflab's addresses, sockets and files are its own;
/// preloaded libraries, shell commands (archive, restore, passphrase) and
/// any setting naming a file, directory or library path are refused.
pub(crate) fn postgres(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Err(format!(
            "'{name}' is not a PostgreSQL setting's name (letters, digits, _ and .)"
        ));
    }
    plain_value(name, value)?;
    let n = name.to_ascii_lowercase();
    const PERFLABS: &[&str] = &[
        "listen_addresses",
        "port",
        "unix_socket_directories",
        "unix_socket_group",
        "unix_socket_permissions",
        "data_directory",
        "config_file",
        "hba_file",
        "ident_file",
        "external_pid_file",
    ];
    const CODE_NAMES: &[&str] = &[
        "shared_preload_libraries",
        "local_preload_libraries",
        "session_preload_libraries",
        "dynamic_library_path",
        "jit_provider",
        "archive_command",
        "archive_library",
        "restore_command",
        "archive_cleanup_command",
        "recovery_end_command",
        "ssl_passphrase_command",
        "primary_conninfo",
        "allow_system_table_mods",
        "lo_compat_privileges",
        "include",
        "include_dir",
        "include_if_exists",
    ];
    if PERFLABS.contains(&n.as_str()) {
        return refused(name, OWN);
    }
    if CODE_NAMES.contains(&n.as_str())
        || ends_with_any(&n, &["_command", "_library", "_libraries"])
    {
        return refused(name, CODE);
    }
    let names_files = ends_with_any(
        &n,
        &["_file", "_dir", "_directory", "_directories", "_path"],
    ) || n == "log_filename"
        || n == "krb_server_keyfile";
    if names_files && n != "search_path" {
        return refused(name, FILES);
    }
    Ok(())
}

/// A MariaDB option (`mariadbd --NAME=VALUE`): `-` and `_` are one, and
/// a `loose-`, `skip-`, `enable-`, `disable-` or `maximum-` prefix and an
/// abbreviation (mariadbd takes a unique prefix of an option's name) are
/// seen through. perflab's files, sockets, address and user are its own;
/// plugins, init SQL and files (logs, key files, SSL) are refused.
pub(crate) fn mariadb(name: &str, value: &str) -> Result<(), String> {
    plain_value(name, value)?;
    let mut n = name.to_ascii_lowercase().replace('-', "_");
    for prefix in ["loose_", "skip_", "enable_", "disable_", "maximum_"] {
        if let Some(rest) = n.strip_prefix(prefix) {
            n = rest.to_string();
            break;
        }
    }
    const PERFLABS: &[&str] = &[
        "datadir",
        "tmpdir",
        "basedir",
        "socket",
        "pid_file",
        "log_error",
        "init_file",
        "port",
        "bind_address",
        "user",
        "no_defaults",
        "defaults_file",
        "defaults_extra_file",
        "defaults_group_suffix",
        "innodb_log_group_home_dir",
        "grant_tables",
        "networking",
        "chroot",
    ];
    const CODE_NAMES: &[&str] = &[
        "plugin_load",
        "plugin_load_add",
        "plugin_dir",
        "plugin_maturity",
        "init_connect",
        "init_slave",
        "local_infile",
        "secure_file_priv",
        "debug",
        "gdb",
        "core_file",
    ];
    const FILE_NAMES: &[&str] = &[
        "general_log_file",
        "slow_query_log_file",
        "log_bin",
        "log_bin_index",
        "log_basename",
        "relay_log",
        "relay_log_index",
        "log_tc",
        "lc_messages_dir",
        "character_sets_dir",
        "innodb_data_home_dir",
        "innodb_undo_directory",
        "innodb_tmpdir",
        "aria_log_dir_path",
    ];
    // An abbreviation of a refused name is refused with it; these options
    // are whole names that a refused one starts with.
    const WHOLE: &[&str] = &["general_log", "slow_query_log"];
    let is = |list: &[&str]| {
        list.iter().any(|full| {
            *full == n || (full.starts_with(n.as_str()) && !WHOLE.contains(&n.as_str()))
        })
    };
    if n.is_empty() || is(PERFLABS) {
        return refused(name, OWN);
    }
    if is(CODE_NAMES) || n.contains("plugin") || n.starts_with("init_") {
        return refused(name, CODE);
    }
    let names_files = is(FILE_NAMES)
        || n.starts_with("ssl")
        || ends_with_any(&n, &["_file", "_filename", "_dir", "_directory", "_path"]);
    if names_files {
        return refused(name, FILES);
    }
    Ok(())
}

/// An nginx directive (`NAME VALUE;` in perflab's configuration):
/// perflab's process, paths, listeners and certificate are its own;
/// modules, includes, scripting (perl, Lua, njs, XSLT), engines and every
/// `*_file` are refused, as are `access_log` to a file, quotes, `\` and
/// `$` (variables) in a value, and any word of a value that is an
/// absolute path or climbs out with `..` (a relative path stays in the
/// managed directory, nginx's prefix).
pub(crate) fn nginx(name: &str, value: &str) -> Result<(), String> {
    plain_value(name, value)?;
    if value.contains(['"', '\'', '\\', '$']) {
        return Err(format!(
            "the value of {name} holds a quote, '\\' or '$'; give plain words"
        ));
    }
    let n = name.to_ascii_lowercase();
    const PERFLABS: &[&str] = &[
        "daemon",
        "master_process",
        "pid",
        "error_log",
        "user",
        "working_directory",
        "lock_file",
        "root",
        "alias",
        "listen",
        "server_name",
        "ssl_certificate",
        "ssl_certificate_key",
    ];
    const CODE_NAMES: &[&str] = &[
        "load_module",
        "include",
        "env",
        "ssl_engine",
        "ssl_conf_command",
        "debug_points",
    ];
    if PERFLABS.contains(&n.as_str()) || n.ends_with("_temp_path") {
        return refused(name, OWN);
    }
    let scripting = [
        "perl",
        "lua",
        "js_",
        "njs",
        "xslt",
        "geoip",
        "google_perftools",
    ]
    .iter()
    .any(|p| n.starts_with(p))
        || n.contains("_by_lua")
        || n.ends_with("_pass");
    if CODE_NAMES.contains(&n.as_str()) || scripting {
        return refused(name, CODE);
    }
    if n.ends_with("_file") || (n == "access_log" && value != "off") {
        return refused(name, FILES);
    }
    if value
        .split_whitespace()
        .any(|w| w.starts_with(['/', '~']) || w.contains("..") || w.contains("=/"))
    {
        return Err(format!(
            "{name}={value} {FILES} (an absolute path or '..'); drop it"
        ));
    }
    Ok(())
}

/// The most threads varnishd may be given in one pool, and the most
/// pools: far above what a loopback lab needs, far below what exhausts
/// the host.
const MAX_POOL_THREADS: u64 = 10_000;
const MAX_POOLS: u64 = 64;

/// A varnishd parameter (`-p NAME=VALUE`) or perflab's `storage`: inline
/// C, the C compiler's command and the VMOD and VCL search paths are
/// refused; thread counts are bounded, the cache's storage by this host's
/// available memory (`available`, bytes, when known).
pub(crate) fn varnish(name: &str, value: &str, available: Option<u64>) -> Result<(), String> {
    plain_value(name, value)?;
    const CODE_NAMES: &[&str] = &[
        "vcc_allow_inline_c",
        "vcc_unsafe_path",
        "cc_command",
        "cc_warnings",
        "vmod_path",
        "vmod_dir",
        "vcl_path",
        "vcl_dir",
    ];
    let lower = value.to_ascii_lowercase();
    let unsafe_feature =
        name == "vcc_feature" && (lower.contains("inline_c") || lower.contains("unsafe_path"));
    if CODE_NAMES.contains(&name) || unsafe_feature {
        return refused(name, CODE);
    }
    let count = |most: u64| match value.parse::<u64>() {
        Ok(n) if (1..=most).contains(&n) => Ok(()),
        _ => Err(format!("{name}={value}: give 1 to {most}")),
    };
    match name {
        "thread_pool_max" | "thread_pool_min" => count(MAX_POOL_THREADS),
        "thread_pools" => count(MAX_POOLS),
        STORAGE => match (varnish_size(value), available) {
            (Some(size), Some(most)) if size > most => Err(format!(
                "{name}={value} is more than this host's available memory ({}); give less, e.g. {name}=256m",
                crate::units::Bytes(most)
            )),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// perflab's own setting: the cache's size, `-s malloc,SIZE`.
pub(crate) const STORAGE: &str = "storage";

/// A size as Varnish reads it (`64m`, `512k`, `1G`, `64MB`, bytes), in
/// bytes.
pub(crate) fn varnish_size(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let unitless = lower.strip_suffix('b').unwrap_or(&lower);
    let (digits, shift) = match unitless.chars().last()? {
        'k' => (&unitless[..unitless.len() - 1], 10),
        'm' => (&unitless[..unitless.len() - 1], 20),
        'g' => (&unitless[..unitless.len() - 1], 30),
        't' => (&unitless[..unitless.len() - 1], 40),
        _ => (unitless, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// This host's available memory (`MemAvailable` of /proc/meminfo), bytes.
pub(crate) fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forms that run code or take over perflab's own settings, on
    /// PostgreSQL, refused; ordinary tuning taken.
    #[test]
    fn postgres_settings_that_run_code_or_name_files_are_refused() {
        for (name, value) in [
            ("shared_preload_libraries", "'/tmp/evil.so'"),
            ("Shared_Preload_Libraries", "x"),
            ("local_preload_libraries", "x"),
            ("session_preload_libraries", "x"),
            ("dynamic_library_path", "/tmp"),
            ("archive_command", "sh -c id"),
            ("restore_command", "id"),
            ("ssl_passphrase_command", "id"),
            ("listen_addresses", "*"),
            ("port", "5432"),
            ("log_directory", "/etc"),
            ("ssl_key_file", "/etc/shadow"),
            ("config_file", "/tmp/x"),
            ("include_dir", "/tmp"),
            ("work_mem", "1MB\n-c shared_preload_libraries=x"),
            ("a;b", "1"),
        ] {
            assert!(postgres(name, value).is_err(), "{name}={value}");
        }
        for (name, value) in [
            ("shared_buffers", "128MB"),
            ("synchronous_commit", "off"),
            ("search_path", "public"),
            ("TimeZone", "Europe/Paris"),
            ("auto_explain.log_min_duration", "10ms"),
        ] {
            assert_eq!(postgres(name, value), Ok(()), "{name}={value}");
        }
        let e = postgres("shared_preload_libraries", "x").unwrap_err();
        assert!(
            e.starts_with("shared_preload_libraries loads or runs code"),
            "{e}"
        );
    }

    /// MariaDB's plugins, init SQL and files, under any spelling mariadbd
    /// takes (dashes, a loose- prefix, an abbreviation), refused.
    #[test]
    fn mariadb_options_that_load_plugins_or_name_files_are_refused() {
        for name in [
            "plugin_load",
            "plugin-load-add",
            "loose-plugin-load",
            "plugin_dir",
            "plugin-lo",
            "init_file",
            "init-connect",
            "skip-grant-tables",
            "general_log_file",
            "slow_query_log_file",
            "log-bin",
            "secure_file_priv",
            "datadir",
            "bind-address",
            "user",
            "ssl_key",
            "innodb_data_home_dir",
            "server_audit_file_path",
        ] {
            assert!(mariadb(name, "/tmp/x").is_err(), "{name}");
        }
        for name in [
            "innodb_buffer_pool_size",
            "innodb-flush-log-at-trx-commit",
            "max_connections",
            "general_log",
            "innodb_log_file_size",
        ] {
            assert_eq!(mariadb(name, "1"), Ok(()), "{name}");
        }
    }

    /// nginx's modules, scripting, includes, perflab's own paths, files
    /// outside its directory and quoting that could reshape the
    /// configuration, refused.
    #[test]
    fn nginx_directives_that_load_code_or_escape_the_directory_are_refused() {
        for (name, value) in [
            ("load_module", "modules/x.so"),
            ("include", "/etc/passwd"),
            ("perl_modules", "/tmp"),
            ("lua_package_path", "x"),
            ("content_by_lua_block", "x"),
            ("js_import", "x.js"),
            ("ssl_engine", "x"),
            ("env", "LD_PRELOAD=/tmp/x.so"),
            ("user", "root"),
            ("root", "/"),
            ("alias", "/etc/"),
            ("client_body_temp_path", "/tmp"),
            ("auth_basic_user_file", "x"),
            ("access_log", "/tmp/a.log"),
            ("ssl_dhparam", "/etc/shadow"),
            ("ssl_trusted_certificate", "../../etc/x"),
            ("open_file_cache", "max=10 inactive=\"60s"),
            ("add_header", "X $host"),
            ("add_header", "X a\\"),
        ] {
            assert!(nginx(name, value).is_err(), "{name}={value}");
        }
        for (name, value) in [
            ("worker_processes", "2"),
            ("sendfile", "off"),
            ("access_log", "off"),
            ("default_type", "application/octet-stream"),
            ("gzip_types", "text/plain text/css"),
            ("open_file_cache", "max=10000 inactive=60s"),
            ("proxy_cache_valid", "200 10m"),
        ] {
            assert_eq!(nginx(name, value), Ok(()), "{name}={value}");
        }
    }

    /// Inline C, the compiler and the search paths refused; thread counts
    /// and the storage bounded.
    #[test]
    fn varnish_parameters_that_run_code_or_exhaust_the_host_are_refused() {
        let gib = 1u64 << 30;
        for (name, value) in [
            ("vcc_allow_inline_c", "on"),
            ("vcc_feature", "+allow_inline_c"),
            ("vcc_unsafe_path", "on"),
            ("cc_command", "sh -c id"),
            ("vmod_path", "/tmp"),
            ("vcl_path", "/tmp"),
            ("thread_pool_max", "99999999"),
            ("thread_pool_min", "0"),
            ("thread_pools", "1000"),
            ("storage", "1000g"),
        ] {
            assert!(
                varnish(name, value, Some(4 * gib)).is_err(),
                "{name}={value}"
            );
        }
        for (name, value) in [
            ("thread_pool_max", "5000"),
            ("thread_pools", "2"),
            ("storage", "64m"),
            ("default_ttl", "60"),
            ("vcc_feature", "+err_unref"),
        ] {
            assert_eq!(
                varnish(name, value, Some(4 * gib)),
                Ok(()),
                "{name}={value}"
            );
        }
        let e = varnish("storage", "1000g", Some(4 * gib)).unwrap_err();
        assert!(e.contains("available memory"), "{e}");
        // Unknown memory: the size is left to varnishd.
        assert_eq!(varnish("storage", "1000g", None), Ok(()));
    }
}
