//! The subcommands: each takes validated input, calls the library, prints,
//! and says how the process should exit.

mod agent;
mod analyze;
mod check;
mod compare;
mod doctor;
mod kube;
mod lab;
mod output;
mod report;
mod run;
mod serve;
mod show;
mod watch;

use crate::cli::{Cli, Command};
use crate::error::PlanError;
use crate::util::one_line;
use clap::Parser;
use std::ffi::OsString;

/// How the process ends (documented in docs/running.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Everything ran and every check passed.
    Ok = 0,
    /// A step broke the error limit, a check failed, or the run could not go on.
    Failed = 1,
    /// Bad input: a flag, a path, a run number.
    BadInput = 2,
    /// Ctrl-C: the finished steps are stored and the run is marked partial.
    Interrupted = 130,
    /// SIGTERM: the same as Ctrl-C.
    Terminated = 143,
}

/// Parses the command line, runs the command, and returns the exit code.
/// Errors are printed here, as one line.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return refused(&e, &args) as i32,
    };
    // The command line is stored with the run: never with a password,
    // nor a secret header's value.
    let argv: Vec<String> = crate::secret::redact_args(
        &args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
    );
    match dispatch(&cli.command, argv) {
        Ok(exit) => exit as i32,
        Err(e) => {
            crate::util::err(format_args!("error: {}\n", one_line(&format!("{e:#}"))));
            if e.chain()
                .any(|cause| cause.downcast_ref::<PlanError>().is_some())
            {
                Exit::BadInput as i32
            } else {
                Exit::Failed as i32
            }
        }
    }
}

/// Runs the command; `argv` is the command line, its secrets redacted.
fn dispatch(command: &Command, argv: Vec<String>) -> anyhow::Result<Exit> {
    match command {
        Command::Run(run_args) => run::run(run_args, argv),
        Command::Runs(store) => show::runs(&store.store),
        Command::Show(show_args) => show::show(show_args),
        Command::Check(check_args) => check::check(check_args),
        Command::Watch(watch_args) => watch::watch(watch_args),
        Command::Agent(agent_args) => agent::agent(agent_args),
        Command::Analyze(analyze_args) => analyze::analyze(analyze_args),
        Command::Doctor(doctor_args) => doctor::doctor(doctor_args),
        Command::DiffHosts(diff_args) => show::diff_hosts(diff_args),
        Command::Compare(compare_args) => compare::compare(compare_args),
        Command::Report(report_args) => report::report(report_args),
        Command::Lab(lab_args) => lab::lab(lab_args),
        Command::Kube(kube_args) => kube::kube(kube_args),
        Command::Serve(serve_args) => serve::serve(serve_args),
    }
}

/// What a command line clap did not take ends in: help or the version
/// printed, or one line naming the problem.
fn refused(e: &clap::Error, args: &[OsString]) -> Exit {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return Exit::Ok;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return Exit::BadInput;
        }
        _ => {}
    }
    // A workload is a subcommand of run and check: name the ones there are.
    let parent = args.get(1).map(|a| a.to_string_lossy());
    if e.kind() == ErrorKind::InvalidSubcommand
        && matches!(parent.as_deref(), Some("run" | "check"))
    {
        let given = args
            .get(2)
            .map_or(String::new(), |a| a.to_string_lossy().into_owned());
        crate::util::err(format_args!(
            "error: '{}' is not a workload; use {}\n",
            crate::target::redact(&given),
            crate::workload::registry_names()
        ));
        return Exit::BadInput;
    }
    crate::util::err(format_args!("{}; see perflab --help\n", clap_line(e)));
    Exit::BadInput
}

/// clap's error in one line: its first line names the flag and the
/// problem; the rest is usage — but a first line ending in ':' lists its
/// subject (the missing arguments) on the indented lines that follow, and
/// a choice's possible values are on a line of their own.
fn clap_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines();
    let mut first = lines.next().unwrap_or("error: bad arguments").to_string();
    if first.ends_with(':') {
        let listed: Vec<&str> = lines
            .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
            .map(str::trim)
            .collect();
        first = format!("{} {}", first, listed.join(", "));
    }
    let choices = rendered
        .lines()
        .find(|l| l.trim_start().starts_with("[possible values:"))
        .map_or(String::new(), |l| format!(" {}", l.trim()));
    format!("{first}{choices}")
}

/// Ctrl-C and SIGTERM for a command that serves until told to stop
/// (`watch`, `agent`): each sets `stop`, and the first one's number is
/// kept for the exit code ([`StopSignals::exit`]).
pub(crate) struct StopSignals {
    /// The number of the signal that came (0: none yet).
    seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StopSignals {
    /// Registers SIGINT and SIGTERM on `stop`.
    pub(crate) fn register(
        stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<Self> {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // The number before the flag: whoever sees the flag finds it.
            signal_hook::flag::register_usize(signal, seen.clone(), signal as usize)?;
            signal_hook::flag::register(signal, stop.clone())?;
        }
        Ok(StopSignals { seen })
    }

    /// How a command stopped by a signal exits: 143 for SIGTERM, 130 for
    /// Ctrl-C; `otherwise` when no signal came (a `--duration` ended).
    pub(crate) fn exit(&self, otherwise: Exit) -> Exit {
        match self.seen.load(std::sync::atomic::Ordering::Relaxed) {
            0 => otherwise,
            n if n == signal_hook::consts::SIGTERM as usize => Exit::Terminated,
            _ => Exit::Interrupted,
        }
    }
}
