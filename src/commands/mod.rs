//! The subcommands: each takes validated input, calls the library, prints,
//! and says how the process should exit.

mod agent;
mod analyze;
mod check;
mod compare;
mod doctor;
mod gate;
mod history;
mod kube;
mod lab;
mod output;
mod panic_line;
mod report;
mod report_signals;
mod run;
mod serve;
mod show;
mod unstored;
mod up;
mod watch;

pub use panic_line::one_line_panics;

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

/// Runs perflab's command line `args` (words split at spaces, `DIR`
/// standing for `dir`) in this process, for the proofs' tests; its exit
/// code.
#[cfg(test)]
pub(crate) fn run_in(dir: &std::path::Path, args: &str) -> i32 {
    let args = std::iter::once("perflab")
        .chain(args.split_whitespace())
        .map(|a| a.replace("DIR", &dir.display().to_string()).into());
    main_with_args(args)
}

/// Parses the command line, runs the command, and returns the exit code.
/// Errors are printed here, as one line.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = with_cell_secrets(args.into_iter().collect());
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

/// A lab's cell (`perflab run` started by `perflab lab`) shows its
/// command line redacted to every user of the host: its secrets come in
/// its environment ([`crate::secret::CELL_ARGS_ENV`]), taken here and
/// removed, so that nothing this process starts inherits them.
fn with_cell_secrets(args: Vec<OsString>) -> Vec<OsString> {
    let Some(given) = std::env::var_os(crate::secret::CELL_ARGS_ENV) else {
        return args;
    };
    std::env::remove_var(crate::secret::CELL_ARGS_ENV);
    let visible: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match crate::secret::cell_args(&visible, &given.to_string_lossy()) {
        Some(whole) => {
            let rest = args.iter().skip(1 + whole.len()).cloned();
            args.iter()
                .take(1)
                .cloned()
                .chain(whole.into_iter().map(OsString::from))
                .chain(rest)
                .collect()
        }
        None => args,
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
        Command::History(history_args) => history::history(history_args),
        Command::Report(report_args) => report::report(report_args),
        Command::Lab(lab_args) => lab::lab(lab_args),
        Command::Kube(kube_args) => kube::kube(kube_args),
        Command::Serve(serve_args) => serve::serve(serve_args),
        Command::Up(up_args) => up::up(up_args),
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
            crate::sut::redact(&given),
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

/// The signals that stop a command: Ctrl-C, SIGTERM, and SIGHUP (the
/// terminal closed), which is treated as SIGTERM: cleaned up after and
/// exiting 143, as the exit codes have no code of their own for it (the
/// shell's 128 + 1 = 129 is not used). A SIGHUP that `nohup` ignores
/// stays ignored.
pub(crate) const STOP_SIGNALS: [libc::c_int; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// The stop signals of a command that honours them: each sets `stop`,
/// and the first one's number is kept for the reason and the exit code
/// ([`StopSignals::exit`]) — a SIGTERM followed by Ctrl-C still exits
/// as after SIGTERM.
pub(crate) struct StopSignals {
    /// The number of the first signal that came (0: none yet).
    seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StopSignals {
    /// Registers [`STOP_SIGNALS`] on `stop`.
    pub(crate) fn register(
        stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<Self> {
        Self::register_then(stop, |_| Ok(()))
    }

    /// Registers [`STOP_SIGNALS`] on the process's interrupt flag (which
    /// it gives) for a command that may start a managed server: a second
    /// signal ends the process at once, unless a managed server lives,
    /// whose stop it then hurries (see `sut::managed::stop`).
    pub(crate) fn register_with_servers(
    ) -> std::io::Result<(Self, std::sync::Arc<std::sync::atomic::AtomicBool>)> {
        let interrupted = crate::util::interrupt_flag();
        let signals = Self::register_then(&interrupted, |number| {
            crate::sut::managed::stop::register_second_signal(
                number,
                signal_exit(number as usize).1 as i32,
                interrupted.clone(),
            )
        })?;
        Ok((signals, interrupted))
    }

    /// Registers [`STOP_SIGNALS`] on `stop`, each after what `before`
    /// registers for it (a managed server's second-signal rule, which
    /// must find `stop` unset at the first signal).
    pub(crate) fn register_then(
        stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
        before: impl Fn(libc::c_int) -> std::io::Result<()>,
    ) -> std::io::Result<Self> {
        use std::sync::atomic::Ordering;
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for signal in STOP_SIGNALS {
            // `nohup perflab …` asked for a run that outlives its terminal.
            if signal == signal_hook::consts::SIGHUP && ignored(signal) {
                continue;
            }
            before(signal)?;
            let (seen, stop) = (seen.clone(), stop.clone());
            // SAFETY: the action only touches atomics, which is
            // async-signal-safe. The number goes in before the flag, so
            // whoever sees the flag finds it.
            unsafe {
                signal_hook::low_level::register(signal, move || {
                    let _ = seen.compare_exchange(
                        0,
                        signal as usize,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                    stop.store(true, Ordering::SeqCst);
                })
            }?;
        }
        Ok(StopSignals { seen })
    }

    /// The number of the first signal that came (0: none).
    pub(crate) fn first(&self) -> usize {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The first signal's number, shared (0 while none came).
    pub(crate) fn shared(&self) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        self.seen.clone()
    }

    /// How a command stopped by a signal exits: 143 for SIGTERM or
    /// SIGHUP, 130 for Ctrl-C; `otherwise` when no signal came (a
    /// `--duration` ended).
    pub(crate) fn exit(&self, otherwise: Exit) -> Exit {
        match self.first() {
            0 => otherwise,
            n => signal_exit(n).1,
        }
    }
}

/// Whether `signal` is ignored in this process (as `nohup` leaves SIGHUP).
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a null new
    // action only reads the current one.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) };
    read == 0 && current.sa_sigaction == libc::SIG_IGN
}

/// The name of a stop signal as the user knows it, and the code a
/// command it stopped exits with (0 or SIGINT: Ctrl-C, 130).
pub(crate) fn signal_exit(signal: usize) -> (&'static str, Exit) {
    match signal as libc::c_int {
        signal_hook::consts::SIGTERM => ("SIGTERM", Exit::Terminated),
        signal_hook::consts::SIGHUP => ("SIGHUP", Exit::Terminated),
        _ => ("Ctrl-C", Exit::Interrupted),
    }
}
