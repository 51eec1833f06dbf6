//! Text from outside that would reach a managed server's configuration
//! or command line: each sink's hostile value refused in one line naming
//! the flag, exit 2, before anything starts (no server is needed: the
//! refusals come before any is asked or started).

use crate::support::{refused, tempdir};

const WEB: &[&str] = &["run", "web", "--rate", "100", "--duration", "1s"];

fn web(extra: &[&str]) -> Vec<String> {
    WEB.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn refused_web(extra: &[&str], says: &[&str]) {
    let args = web(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, says);
}

/// An origin's path that would close the VCL's string or end nginx's
/// `proxy_pass` directive, for both accelerators.
#[test]
fn an_origin_path_that_could_reshape_the_configuration_is_refused() {
    for hostile in [
        "http://127.0.0.1:1/x\"+server.identity+\"/",
        "http://127.0.0.1:1/x;include;/",
        "http://127.0.0.1:1/x}{/",
        "http://127.0.0.1:1/$host/",
    ] {
        refused_web(
            &["--target", "varnish:managed", "--origin", hostile],
            &["--origin: the origin's path", "percent-encode"],
        );
        refused_web(
            &[
                "--target",
                "nginx:managed",
                "--nginx-role",
                "accelerator",
                "--origin",
                hostile,
            ],
            &["--origin: the origin's path"],
        );
    }
}

/// Varnish: inline C, the compiler, the search paths refused; thread
/// counts and the storage bounded.
#[test]
fn varnish_settings_that_run_code_or_exhaust_the_host_are_refused() {
    for (setting, says) in [
        ("vcc_allow_inline_c=on", "loads or runs code"),
        ("vcc_feature=+allow_inline_c", "loads or runs code"),
        ("cc_command=id", "loads or runs code"),
        ("vmod_path=/tmp", "loads or runs code"),
        ("thread_pool_max=99999999", "give 1 to 10000"),
        ("thread_pools=100000", "give 1 to 64"),
        ("storage=1000000g", "available memory"),
    ] {
        refused_web(
            &[
                "--target",
                "varnish:managed",
                "--origin",
                "nginx:managed",
                "--varnish-set",
                setting,
            ],
            &["--varnish-set: ", says],
        );
    }
}

/// nginx: modules, includes, scripting, perflab's own paths and values
/// that quote or climb out of its directory.
#[test]
fn nginx_directives_that_load_code_or_escape_its_directory_are_refused() {
    for (setting, says) in [
        ("load_module=/tmp/x.so", "loads or runs code"),
        ("include=/etc/passwd", "loads or runs code"),
        ("perl_modules=/tmp", "loads or runs code"),
        ("content_by_lua_block=x", "loads or runs code"),
        ("user=root", "perflab's own"),
        ("root=/", "perflab's own"),
        ("access_log=/tmp/a.log", "names files"),
        ("ssl_dhparam=/etc/shadow", "names files"),
        ("add_header=X \"a", "quote"),
    ] {
        refused_web(
            &["--target", "nginx:managed", "--nginx-set", setting],
            &["--nginx-set: ", says],
        );
    }
}

/// PostgreSQL: preloaded libraries, shell commands, perflab's addresses
/// and files.
#[test]
fn postgres_settings_that_run_code_or_name_files_are_refused() {
    for (setting, says) in [
        ("shared_preload_libraries=/tmp/x.so", "loads or runs code"),
        ("session_preload_libraries=x", "loads or runs code"),
        ("archive_command=id", "loads or runs code"),
        ("ssl_passphrase_command=id", "loads or runs code"),
        ("dynamic_library_path=/tmp", "loads or runs code"),
        ("listen_addresses=*", "perflab's own"),
        ("log_directory=/etc", "names files"),
    ] {
        refused(
            &[
                "run",
                "bank",
                "--target",
                "postgres:managed",
                "--pg-set",
                setting,
                "--quick",
            ],
            &["--pg-set: ", says],
        );
    }
}

/// MariaDB: plugins, init SQL, files, under the spellings mariadbd takes.
#[test]
fn mariadb_options_that_load_plugins_or_name_files_are_refused() {
    for (setting, says) in [
        ("plugin_load=x.so", "loads or runs code"),
        ("plugin-load-add=x.so", "loads or runs code"),
        ("loose-plugin-dir=/tmp", "loads or runs code"),
        ("init-connect=DROP DATABASE perflab", "loads or runs code"),
        ("init_file=/tmp/x.sql", "perflab's own"),
        ("skip-grant-tables=1", "perflab's own"),
        ("general_log_file=/etc/x", "names files"),
    ] {
        refused(
            &[
                "run",
                "bank",
                "--target",
                "mariadb:managed",
                "--mariadb-set",
                setting,
                "--quick",
            ],
            &["--mariadb-set: ", says],
        );
    }
}

/// An `--nginx-set` value that opens a quote and leaves it open (nginx
/// would read the rest of its configuration as one word, and its own
/// check says only "unexpected end of file") is refused naming the
/// setting, as every quote in a value is.
#[test]
fn an_nginx_setting_with_a_quote_left_open_is_refused_naming_it() {
    for value in ["add_header=X-A \"b", "add_header='b"] {
        refused_web(
            &["--target", "nginx:managed", "--nginx-set", value],
            &["--nginx-set", "the value of add_header holds a quote"],
        );
    }
}

/// A certificate's path that nginx's configuration cannot hold, and a
/// missing one, name the flag; messages name the server they are about.
#[test]
fn certificates_and_managed_servers_are_named_right() {
    let dir = tempdir();
    let odd = dir.path().join("a;b.pem");
    std::fs::write(&odd, "x").unwrap();
    let odd = odd.display().to_string();
    refused_web(
        &[
            "--target",
            "nginx:managed",
            "--nginx-tls-cert",
            &odd,
            "--nginx-tls-key",
            &odd,
        ],
        &["--nginx-tls-cert: ", "plain path"],
    );
    refused_web(
        &[
            "--target",
            "nginx:managed",
            "--nginx-tls-cert",
            "no-such.pem",
            "--nginx-tls-key",
            "no-such.pem",
        ],
        &["--nginx-tls-cert: ", "no-such.pem"],
    );
    refused_web(
        &["--target", "nginx:managed", "--nginx-memory", "1KiB"],
        &["--nginx-memory: ", "managed server"],
    );
    let urls = dir.path().join("urls.txt");
    std::fs::write(&urls, "/a\n").unwrap();
    refused_web(
        &[
            "--target",
            "varnish:managed",
            "--origin",
            "nginx:managed",
            "--urls",
            &urls.display().to_string(),
        ],
        &["--urls: a managed Varnish"],
    );
}
