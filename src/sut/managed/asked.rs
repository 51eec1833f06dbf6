//! Whether a managed server takes its settings, asked of the server's own
//! program before anything is made: `postgres -C` over an empty
//! configuration with each `-c NAME=VALUE` (PostgreSQL checks every name
//! and value as it would at start), `mariadbd --verbose --help` with each
//! option (an unknown option or a bad size is an `[ERROR]`), `nginx -t`
//! over the configuration perflab would write. A run or a lab with a
//! setting the server rejects ends in one line quoting the server, before
//! a data directory is made. A server program that is not installed is
//! not asked (starting it says so), and each answer is kept for the
//! process: a lab asks once per variant, not once per cell.

use super::{server_command, server_user};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a server program may take to answer.
const DEADLINE: Duration = Duration::from_secs(15);

/// What was asked (the server and its settings) and the answer.
type Answers = HashMap<(&'static str, Vec<(String, String)>), Result<(), String>>;
static ASKED: Mutex<Option<Answers>> = Mutex::new(None);

/// The kept answer for `server`'s `settings`, or `ask`'s.
pub(super) fn remembered(
    server: &'static str,
    settings: &[(String, String)],
    ask: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    if settings.is_empty() {
        return Ok(());
    }
    let key = (server, settings.to_vec());
    if let Some(answer) = ASKED
        .lock()
        .ok()
        .and_then(|a| a.as_ref().and_then(|m| m.get(&key).cloned()))
    {
        return answer;
    }
    let answer = ask();
    if let Ok(mut kept) = ASKED.lock() {
        kept.get_or_insert_with(HashMap::new)
            .insert(key, answer.clone());
    }
    answer
}

/// Runs `cmd` to its end (killed at [`DEADLINE`]): whether it succeeded,
/// and what it wrote to stderr. `None` when it could not run or took too
/// long: no answer.
pub(super) fn answer_of(mut cmd: Command) -> Option<(bool, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let err = child.stderr.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::Read::take(err, 1 << 20), &mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < DEADLINE => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some((status.success(), reader.join().unwrap_or_default()))
}

/// The server's own complaint: the text after `marker` on the first line
/// holding it, with a following `HINT:` line.
pub(super) fn complaint(stderr: &str, marker: &str) -> Option<String> {
    let mut lines = stderr.lines();
    let first = lines.by_ref().find(|l| l.contains(marker))?;
    let mut said = first[first.find(marker)? + marker.len()..]
        .trim()
        .to_string();
    if let Some(hint) = lines.next().and_then(|l| l.split("HINT:").nth(1)) {
        said.push_str(&format!(" ({})", hint.trim()));
    }
    Some(said)
}

/// The server's complaint as a refusal of the settings when it speaks of
/// them (one of `about`); any other failure of the check (a directory
/// the server's user cannot enter, a program that will not run) is no
/// answer: starting the server will say what is wrong.
fn refusal(said: Option<String>, about: &[&str]) -> Result<(), String> {
    match said {
        Some(said) if about.iter().any(|w| said.to_lowercase().contains(w)) => Err(said),
        _ => Ok(()),
    }
}

/// Whether a PostgreSQL takes `settings` (name and value each), its
/// programs in the directory `find_bindir` finds.
pub(crate) fn postgres(
    settings: &[(String, String)],
    find_bindir: impl FnOnce() -> Option<PathBuf>,
) -> Result<(), String> {
    remembered("postgres", settings, || {
        let Some(bindir) = find_bindir() else {
            return Ok(());
        };
        let Ok(user) = server_user("postgres", "PostgreSQL") else {
            return Ok(());
        };
        let Ok(dir) = tempfile::Builder::new()
            .prefix("perflab-pg-settings-")
            .tempdir()
        else {
            return Ok(());
        };
        let conf = dir.path().join("postgresql.conf");
        if std::fs::write(&conf, "").is_err() {
            return Ok(());
        }
        if let Some((uid, gid)) = user {
            for path in [dir.path(), conf.as_path()] {
                let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
            }
        }
        let mut cmd = server_command(&bindir.join("postgres"), user, &[]);
        cmd.arg("-D").arg(dir.path()).args(["-C", "shared_buffers"]);
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        match answer_of(cmd) {
            Some((false, stderr)) => refusal(complaint(&stderr, "FATAL:"), &["parameter"]),
            _ => Ok(()),
        }
    })
}

/// Whether a MariaDB takes `settings` as server options, asked of the
/// server program `find_mariadbd` finds.
pub(crate) fn mariadb(
    settings: &[(String, String)],
    find_mariadbd: impl FnOnce() -> Option<PathBuf>,
) -> Result<(), String> {
    remembered("mariadb", settings, || {
        let Some(mariadbd) = find_mariadbd() else {
            return Ok(());
        };
        let Ok(user) = server_user("mysql", "MariaDB") else {
            return Ok(());
        };
        let mut cmd = server_command(&mariadbd, None, &[]);
        cmd.arg("--no-defaults");
        if user.is_some() {
            cmd.arg("--user=mysql");
        }
        for (name, value) in settings {
            cmd.arg(format!("--{name}={value}"));
        }
        cmd.args(["--verbose", "--help"]);
        match answer_of(cmd) {
            Some((ok, stderr)) if !ok || stderr.contains("[ERROR]") => {
                refusal(complaint(&stderr, "[ERROR] "), &["variable", "option"])
            }
            _ => Ok(()),
        }
    })
}

/// Whether the nginx program `nginx` takes `configuration` (the text
/// perflab would write in `dir`, holding `directives`), asked with
/// `nginx -t`.
pub(crate) fn nginx(
    nginx: &Path,
    directives: &[(String, String)],
    configuration: impl FnOnce(&Path) -> String,
) -> Result<(), String> {
    remembered("nginx", directives, || {
        let Ok(dir) = tempfile::Builder::new()
            .prefix("perflab-nginx-settings-")
            .tempdir()
        else {
            return Ok(());
        };
        let conf = dir.path().join("nginx.conf");
        let made = ["html", "tmp", "cache"]
            .iter()
            .all(|sub| std::fs::create_dir(dir.path().join(sub)).is_ok());
        if !made || std::fs::write(&conf, configuration(dir.path())).is_err() {
            return Ok(());
        }
        let mut cmd = Command::new(nginx);
        cmd.arg("-t")
            .arg("-q")
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.path().join("error.log"));
        match answer_of(cmd) {
            Some((false, stderr)) => refusal(
                complaint(&stderr, "[emerg] ")
                    .map(|c| c.split(" in /").next().unwrap_or(&c).to_string()),
                &["directive", "invalid"],
            ),
            _ => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::complaint;

    #[test]
    fn the_servers_own_words_are_quoted_with_their_hint() {
        let pg = "2026-11-26 00:07:09 GMT [1] FATAL:  invalid value for parameter \"synchronous_commit\": \"sometimes\"\n2026-11-26 00:07:09 GMT [1] HINT:  Available values: local, on, off.\n";
        assert_eq!(
            complaint(pg, "FATAL:").unwrap(),
            "invalid value for parameter \"synchronous_commit\": \"sometimes\" (Available values: local, on, off.)"
        );
        let maria = "0 [Warning] Could not increase\n0 [ERROR] mariadbd: unknown variable 'no-such-thing=1'\n0 [ERROR] Aborting\n";
        assert_eq!(
            complaint(maria, "[ERROR] ").unwrap(),
            "mariadbd: unknown variable 'no-such-thing=1'"
        );
        assert_eq!(complaint("nothing", "FATAL:"), None);
    }

    /// Only a complaint about the settings refuses them.
    #[test]
    fn a_check_that_fails_for_another_reason_is_no_answer() {
        use super::refusal;
        let bad = "unrecognized configuration parameter \"no_such\"".to_string();
        assert_eq!(refusal(Some(bad.clone()), &["parameter"]), Err(bad));
        let denied = "could not access directory \"/tmp/x\": Permission denied".to_string();
        assert_eq!(refusal(Some(denied), &["parameter"]), Ok(()));
        assert_eq!(refusal(None, &["parameter"]), Ok(()));
        let nginx = "mkdir() \"/tmp/x/tmp/body\" failed (2: No such file or directory)".to_string();
        assert_eq!(refusal(Some(nginx), &["directive", "invalid"]), Ok(()));
    }
}
