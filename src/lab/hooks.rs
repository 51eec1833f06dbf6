//! A variant's own set-up and tear-down: for a server perflab does not
//! manage, the lab runs the user's `setup` command before each of the
//! variant's cells and its `teardown` command after (even when the setup
//! or the run failed, or Ctrl-C stopped it), each with the variant's values
//! in the environment. Knobs of the form `var.NAME` exist for them alone:
//! they change nothing themselves and reach the commands as
//! `PERFLAB_VAR_NAME`; every other knob of the variant comes as
//! `PERFLAB_KNOB` too (`cpus` → `PERFLAB_CPUS`, `pg.work_mem` →
//! `PERFLAB_PG_WORK_MEM`), beside `PERFLAB_LAB`, `PERFLAB_VARIANT`,
//! `PERFLAB_CELL` and `PERFLAB_REPETITION`.
//!
//! A command runs as `sh -c COMMAND` in a process group of its own, its
//! output shown line by line; it has [`HOOK_TIMEOUT`] to end, after which
//! its group is killed and it counts as failed.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a setup or teardown command may run.
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether `knob` is the lab's own (a command, or a value for them) and
/// not the target's; its mistake in words when it is one but is wrong.
pub(crate) fn lab_knob(knob: &str, value: &str) -> Option<Result<(), String>> {
    if knob == "setup" || knob == "teardown" {
        return Some(match value.trim().is_empty() {
            true => Err(format!("'{knob}' is empty; give a command")),
            false => Ok(()),
        });
    }
    let name = knob.strip_prefix("var.")?;
    let fine = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    Some(match fine {
        true => Ok(()),
        false => Err(format!(
            "'{knob}' is no variable's name; write var.NAME with letters, digits and _"
        )),
    })
}

/// The environment variable that carries `knob`'s value.
pub(crate) fn env_name(knob: &str) -> String {
    let upper: String = knob
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    format!("PERFLAB_{upper}")
}

/// A cell's commands and the environment they run with.
pub(crate) struct Hooks {
    pub(crate) setup: Option<String>,
    pub(crate) teardown: Option<String>,
    pub(crate) env: Vec<(String, String)>,
}

impl Hooks {
    /// The hooks of `knobs` (a variant's) for one cell.
    pub(crate) fn of(
        lab: &str,
        variant: &str,
        knobs: &[(String, String)],
        cell: usize,
        repetition: u32,
    ) -> Hooks {
        let find = |name: &str| {
            knobs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut env = vec![
            ("PERFLAB_LAB".to_string(), lab.to_string()),
            ("PERFLAB_VARIANT".to_string(), variant.to_string()),
            ("PERFLAB_CELL".to_string(), (cell + 1).to_string()),
            ("PERFLAB_REPETITION".to_string(), repetition.to_string()),
        ];
        env.extend(
            knobs
                .iter()
                .filter(|(k, _)| k != "setup" && k != "teardown")
                .map(|(k, v)| (env_name(k), v.clone())),
        );
        Hooks {
            setup: find("setup"),
            teardown: find("teardown"),
            env,
        }
    }
}

/// Reads `from` line by line on a thread of its own, handing each line to
/// `show`; the thread returns the last line that was not blank.
pub(crate) fn follow_lines<R: std::io::Read + Send + 'static>(
    from: R,
    show: impl Fn(&str) -> bool + Send + 'static,
) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        let mut last = None;
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            show(&line);
            if !line.trim().is_empty() {
                last = Some(line);
            }
        }
        last
    })
}

/// Runs `command` (`what`: setup or teardown) with `env`, showing its
/// output; stops it when `stop` is set. Why it failed, in one line.
pub(crate) fn run_hook(
    what: &str,
    command: &str,
    env: &[(String, String)],
    stop: &AtomicBool,
) -> Result<(), String> {
    crate::util::out(format_args!("  {what}: {command}\n"));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the {what} command with sh ({e})"))?;
    let pid = child.id() as libc::pid_t;
    let show =
        |what: String| move |line: &str| crate::util::out(format_args!("  {what}: {line}\n"));
    let stdout = child
        .stdout
        .take()
        .map(|o| follow_lines(o, show(what.to_string())));
    let stderr = child
        .stderr
        .take()
        .map(|o| follow_lines(o, show(what.to_string())));
    let deadline = Instant::now() + HOOK_TIMEOUT;
    let mut ended_by = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for the {what} command ({e})")),
        }
        let why = if stop.load(Ordering::Relaxed) {
            Some("it was stopped by Ctrl-C or SIGTERM".to_string())
        } else if Instant::now() >= deadline {
            Some(format!("it did not end in {} s", HOOK_TIMEOUT.as_secs()))
        } else {
            None
        };
        if let Some(why) = why {
            // SAFETY: signalling the process group this function started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            ended_by = Some(why);
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let last_out = stdout.and_then(|t| t.join().ok().flatten());
    let last_err = stderr.and_then(|t| t.join().ok().flatten());
    if let Some(why) = ended_by {
        return Err(format!("the {what} command was killed: {why}"));
    }
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!(
            "the {what} command failed ({s}){}",
            last_err
                .or(last_out)
                .map_or(String::new(), |l| format!(": {}", l.trim()))
        )),
        None => Err(format!("the {what} command did not run")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_reach_the_commands_as_environment_variables() {
        assert_eq!(env_name("var.mode"), "PERFLAB_VAR_MODE");
        assert_eq!(env_name("pg.work_mem"), "PERFLAB_PG_WORK_MEM");
        assert_eq!(env_name("link.rate"), "PERFLAB_LINK_RATE");
        let knobs = vec![
            ("var.mode".to_string(), "fast".to_string()),
            ("setup".to_string(), "./up.sh".to_string()),
        ];
        let hooks = Hooks::of("l", "v", &knobs, 0, 2);
        assert_eq!(hooks.setup.as_deref(), Some("./up.sh"));
        assert_eq!(hooks.teardown, None);
        assert!(hooks
            .env
            .contains(&("PERFLAB_VAR_MODE".to_string(), "fast".to_string())));
        assert!(hooks
            .env
            .contains(&("PERFLAB_CELL".to_string(), "1".to_string())));
        assert!(!hooks.env.iter().any(|(k, _)| k == "PERFLAB_SETUP"));
    }

    #[test]
    fn lab_knobs_are_checked() {
        assert_eq!(lab_knob("cpus", "0"), None);
        assert_eq!(lab_knob("var.mode", "x"), Some(Ok(())));
        assert!(lab_knob("var.", "x").unwrap().is_err());
        assert!(lab_knob("var.a-b", "x").unwrap().is_err());
        assert!(lab_knob("setup", " ").unwrap().is_err());
    }

    #[test]
    fn a_failing_command_says_why_and_a_stopped_one_is_killed() {
        let go = AtomicBool::new(false);
        let env = vec![("PERFLAB_VAR_X".to_string(), "7".to_string())];
        assert_eq!(
            run_hook("setup", "test \"$PERFLAB_VAR_X\" = 7", &env, &go),
            Ok(())
        );
        let e = run_hook("setup", "echo no such mode >&2; exit 3", &env, &go).unwrap_err();
        assert!(
            e.contains("exit status: 3") && e.ends_with(": no such mode"),
            "{e}"
        );
        let stop = AtomicBool::new(true);
        let e = run_hook("teardown", "sleep 30", &env, &stop).unwrap_err();
        assert!(e.contains("killed"), "{e}");
    }
}
