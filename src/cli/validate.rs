//! Raw flags → validated [`Plan`]. Every error names the flag and the fix.

use super::args::{
    CommonRunArgs, RunArgs, ServerArgs, DEFAULT_USERS, DURATION, QUICK_USERS, WARMUP,
};
use super::values;
use crate::error::PlanError;
use crate::plan::{LoadModel, Plan, Slack, StepDefaults, Sweep, ThinkTime};
use crate::probe::counters::process::ProcessSelector;
use crate::sut::TargetKind;
use crate::units::parse_duration;
use crate::workload::Validated;
use std::time::Duration;

fn duration_flag(flag: &str, text: &str) -> Result<Duration, PlanError> {
    parse_duration(text).map_err(|e| PlanError::flag(flag, e, "e.g. 500ms, 5s or 1m"))
}

/// Validates `perflab run WORKLOAD …` into the workload's spec and the plan.
pub fn plan_from(args: &RunArgs) -> Result<(Validated, Plan), PlanError> {
    let validated = args.workload.choice.validate()?;
    let plan = plan_for(&args.workload.common, &validated)?;
    Ok((validated, plan))
}

/// Validates the common flags into a plan for the validated workload.
pub fn plan_for(args: &CommonRunArgs, workload: &Validated) -> Result<Plan, PlanError> {
    let target = workload.target().traits();
    let workload = workload.spec()?;
    let steps = workload.steps();
    let (load, sweep) = load_and_sweep(args, &steps)?;
    let (warmup, duration, timeout) = timing(args, &steps)?;
    let (repeat, max_repeat) = repeats(args)?;
    let plan = Plan {
        workload,
        target: Some(target),
        load,
        sweep,
        warmup,
        duration,
        interval: interval(args, duration)?,
        threads: threads(args, &steps)?,
        alone_up_to: alone_up_to(args, &steps, target.kind),
        timeout,
        max_error_rate: args.max_error_rate,
        seed: args.seed.unwrap_or_else(random_seed),
        server: server_selector(&args.server)?,
        slos: parse_slos(&args.slo)?,
        find: find(args)?,
        max_cv: args.max_cv,
        repeat,
        max_repeat,
        generators: generators(args)?,
        on_generator_loss: args.on_generator_loss,
    };
    if !plan.generators.is_empty() {
        runs_on_generators(&plan, "--generators")?;
    }
    objectives_for(&plan)?;
    Ok(plan)
}

/// Whether the plan's workload can be offered by generators (`flag`
/// names what asked for them): a workload that runs in this process only
/// (its files or devices are this host's), or an embedded target that
/// lives inside it, is refused before anything is made.
pub fn runs_on_generators(plan: &Plan, flag: &str) -> Result<(), PlanError> {
    let name = plan.workload.name();
    let on_generators = crate::workload::generator_workloads();
    if !on_generators.contains(&name) {
        return Err(PlanError::flag(
            flag,
            format!("the {name} workload runs in this process only, not on generators"),
            &format!(
                "run it without generators; the workloads that run on generators are {}",
                on_generators.join(", ")
            ),
        ));
    }
    if plan
        .target
        .as_ref()
        .is_some_and(|t| t.kind == crate::sut::TargetKind::Sqlite)
    {
        return Err(PlanError::flag(
            flag,
            "an embedded target (sqlite:) lives inside this process, where no generator can reach it",
            "give a server target (postgres://, mysql://, a managed server) or drop the generators",
        ));
    }
    Ok(())
}

/// The generators of `--generators` or `--generators-file`, each an
/// `agent://HOST:PORT`, none twice.
fn generators(args: &CommonRunArgs) -> Result<Vec<String>, PlanError> {
    let (flag, given) = match &args.generators_file {
        Some(file) => {
            let text = crate::util::read_text_bounded(file, 64 << 10).map_err(|e| {
                PlanError::flag(
                    "--generators-file",
                    format!("{}: {e}", file.display()),
                    "give a text file with one agent://HOST:PORT per line",
                )
            })?;
            let lines = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            ("--generators-file", lines)
        }
        None => ("--generators", args.generators.clone()),
    };
    let mut out: Vec<String> = Vec::new();
    for g in given.iter().map(|g| g.trim()) {
        let shown = crate::util::clipped(&crate::secret::redact(g)).into_owned();
        crate::probe::agent_client::AgentClient::new(g, Default::default()).map_err(|_| {
            PlanError::flag(
                flag,
                format!("'{shown}' is not a generator's address"),
                "give agent://HOST:PORT, e.g. agent://gen1:7071",
            )
        })?;
        if out.iter().any(|o| o == g) {
            return Err(PlanError::flag(
                flag,
                format!("'{shown}' is given twice"),
                "give each generator once",
            ));
        }
        out.push(g.to_string());
    }
    if flag == "--generators-file" && out.is_empty() {
        return Err(PlanError::flag(
            flag,
            "the file names no generator",
            "give one agent://HOST:PORT per line",
        ));
    }
    Ok(out)
}

/// The load model and its levels: a closed loop over `--users` (the
/// default or quick sweep when absent) or an open loop over `--rate`.
fn load_and_sweep(
    args: &CommonRunArgs,
    steps: &StepDefaults,
) -> Result<(LoadModel, Sweep), PlanError> {
    let think = args.think;
    let (users, rate, connections) = with_steps(args, steps)?;
    Ok(match (&users, &rate) {
        (Some(_), Some(_)) => {
            return Err(PlanError::new(
                "--users and --rate both given; choose a closed loop (--users) or an open loop (--rate)",
            ))
        }
        (_, Some(rate)) => {
            if think != ThinkTime::Zero {
                return Err(PlanError::flag(
                    "--think",
                    "think time belongs to a closed loop",
                    "drop --think when using --rate",
                ));
            }
            if connections == 0 || connections > crate::plan::load::MAX_USERS {
                return Err(PlanError::flag(
                    "--connections",
                    format!("{connections} sessions cannot serve arrivals"),
                    &format!("give 1 to {}", crate::plan::load::MAX_USERS),
                ));
            }
            if args.max_outstanding == 0 {
                return Err(PlanError::flag(
                    "--max-outstanding",
                    "0 would drop every arrival",
                    "give 1 or more",
                ));
            }
            (
                LoadModel::Open {
                    arrivals: args.arrivals,
                    connections,
                    max_outstanding: args.max_outstanding,
                    slack: args.slack.or(steps.slack).unwrap_or(Slack::Auto),
                },
                rate.clone(),
            )
        }
        (users, None) => {
            let longest = match think {
                ThinkTime::Uniform { max, .. } => max,
                other => other.mean(),
            };
            if longest > crate::engine::MAX_WAIT {
                return Err(PlanError::flag(
                    "--think",
                    "longer than a day",
                    "give e.g. --think 1s or --think exp:500ms",
                ));
            }
            let sweep = match users {
                Some(sweep) => sweep.clone(),
                None => values::users(if args.quick { QUICK_USERS } else { DEFAULT_USERS })
                    .map_err(|e| PlanError::flag("--users", e, "give --users"))?,
            };
            (LoadModel::Closed { think }, sweep)
        }
    })
}

/// The flags' users, rate and connections; where neither `--users` nor
/// `--rate` is given, the workload's own steps (one level of users, or a
/// rate served by that many connections).
fn with_steps(
    args: &CommonRunArgs,
    steps: &StepDefaults,
) -> Result<(Option<Sweep>, Option<Sweep>, u32), PlanError> {
    if args.users.is_some() || args.rate.is_some() {
        return Ok((args.users.clone(), args.rate.clone(), args.connections));
    }
    let bad = |e: String| PlanError::new(format!("the workload's own steps: {e}"));
    Ok(match (steps.rate, steps.users) {
        (Some(rate), users) => (
            None,
            Some(values::rates(&rate.to_string()).map_err(bad)?),
            users.unwrap_or(args.connections),
        ),
        (None, Some(users)) => (
            Some(values::users(&users.to_string()).map_err(bad)?),
            None,
            args.connections,
        ),
        (None, None) => (None, None, args.connections),
    })
}

/// Warm-up, measured window and operation timeout.
fn timing(
    args: &CommonRunArgs,
    steps: &StepDefaults,
) -> Result<(Duration, Duration, Duration), PlanError> {
    let (default_warmup, default_duration) = if args.quick {
        (WARMUP.1, DURATION.1)
    } else {
        (WARMUP.0, DURATION.0)
    };
    let warmup = match args.warmup {
        Some(warmup) => warmup,
        None => duration_flag("--warmup", default_warmup)?,
    };
    let duration = match args.duration.or(steps.duration) {
        Some(duration) => duration,
        None => duration_flag("--duration", default_duration)?,
    };
    if duration < Duration::from_millis(100) {
        return Err(PlanError::flag(
            "--duration",
            "a measured window under 100ms measures nothing",
            "give e.g. --duration 5s",
        ));
    }
    let timeout = args.timeout;
    if timeout.is_zero() {
        return Err(PlanError::flag(
            "--timeout",
            "0 would time out every operation",
            "give e.g. --timeout 30s",
        ));
    }
    if timeout > crate::engine::MAX_WAIT {
        return Err(PlanError::flag(
            "--timeout",
            "longer than a day",
            "give e.g. --timeout 30s",
        ));
    }
    Ok((warmup, duration, timeout))
}

/// Worker threads: as given, or as the workload asks, or one per CPU.
fn threads(args: &CommonRunArgs, steps: &StepDefaults) -> Result<usize, PlanError> {
    Ok(match args.threads {
        Some(0) => {
            return Err(PlanError::flag(
                "--threads",
                "0 threads cannot generate load",
                "give 1 or more, or leave it out for one per CPU",
            ))
        }
        Some(n) if n > crate::engine::MAX_THREADS => {
            return Err(PlanError::flag(
                "--threads",
                format!("{n} threads is more than one process runs"),
                &format!("give 1 to {}", crate::engine::MAX_THREADS),
            ))
        }
        Some(n) => n,
        None => steps
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    })
}

/// The users of a step up to which each gets a worker thread of its own:
/// [`crate::plan::ALONE_PER_CPU`] per CPU for a database whose sessions
/// hold their sockets (PostgreSQL, MySQL/MariaDB), unless the threads
/// were given or the workload asks for its own.
fn alone_up_to(args: &CommonRunArgs, steps: &StepDefaults, kind: TargetKind) -> usize {
    let holds = matches!(kind, TargetKind::Postgres | TargetKind::Mysql);
    if !holds || args.threads.is_some() || steps.threads.is_some() {
        return 0;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.saturating_mul(crate::plan::ALONE_PER_CPU)
        .min(crate::engine::MAX_THREADS)
}

/// Runs of each level, and the most while their throughputs vary.
fn repeats(args: &CommonRunArgs) -> Result<(u32, u32), PlanError> {
    if args.repeat == 0 || args.repeat > 100 {
        return Err(PlanError::flag(
            "--repeat",
            format!("{} runs per level", args.repeat),
            "give 1 to 100",
        ));
    }
    let max_repeat = args.max_repeat.unwrap_or(if args.find {
        crate::plan::FIND_REPEATS
    } else {
        args.repeat
    });
    if max_repeat < args.repeat || max_repeat > 100 {
        return Err(PlanError::flag(
            "--max-repeat",
            format!(
                "{max_repeat} is not between --repeat ({}) and 100",
                args.repeat
            ),
            "give at least --repeat, e.g. --repeat 3 --max-repeat 6",
        ));
    }
    // A variation needs two runs to be measured.
    let repeat = if max_repeat > args.repeat {
        args.repeat.max(2)
    } else {
        args.repeat
    };
    Ok((repeat, max_repeat))
}

/// Validates `--slo` objectives: each flag one or several joined with `,`.
pub fn parse_slos(given: &[String]) -> Result<Vec<crate::plan::Slo>, PlanError> {
    given
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| {
            crate::plan::Slo::parse(s)
                .map_err(|e| PlanError::flag("--slo", e, "e.g. --slo p95<50ms or --slo errors<1%"))
        })
        .collect()
}

/// `--find` with its `--precision` and `--max-steps`: a search needs
/// objectives to search by.
fn find(args: &CommonRunArgs) -> Result<Option<crate::plan::Find>, PlanError> {
    let precision = match &args.precision {
        None => crate::plan::DEFAULT_PRECISION,
        Some(text) => values::percent(text)
            .ok()
            .filter(|p| *p > 0.0 && *p < 0.5)
            .ok_or_else(|| {
                PlanError::flag(
                    "--precision",
                    format!("'{text}' is not a share above 0% and below 50%"),
                    "e.g. --precision 5%",
                )
            })?,
    };
    let max_steps = args.max_steps.unwrap_or(crate::plan::DEFAULT_MAX_STEPS);
    if !(1..=1000).contains(&max_steps) {
        return Err(PlanError::flag(
            "--max-steps",
            format!("{max_steps} is not between 1 and 1000"),
            "e.g. --max-steps 12",
        ));
    }
    if !args.find {
        for (given, flag, what) in [
            (
                args.precision.is_some(),
                "--precision",
                "how narrow --find's answer is",
            ),
            (
                args.max_steps.is_some(),
                "--max-steps",
                "how long --find searches",
            ),
        ] {
            if given {
                return Err(PlanError::flag(
                    flag,
                    format!("it sets {what}, and --find is not given"),
                    &format!("add --find (with --slo), or drop {flag}"),
                ));
            }
        }
        return Ok(None);
    }
    if args.slo.is_empty() {
        return Err(PlanError::flag(
            "--find",
            "a search needs objectives to search by, and no --slo is given",
            "add one, e.g. --slo p95<200ms",
        ));
    }
    Ok(Some(crate::plan::Find {
        precision,
        max_steps,
    }))
}

/// The objectives this plan's load can be judged by: `lag` needs an
/// offered rate.
fn objectives_for(plan: &Plan) -> Result<(), PlanError> {
    let open = matches!(plan.load, LoadModel::Open { .. });
    match plan.slos.iter().find(|s| s.metric == crate::plan::SloMetric::Lag) {
        Some(s) if !open => Err(PlanError::flag(
            "--slo",
            format!("'{s}' judges how far an open loop falls behind its rate, and this run is a closed loop (--users)"),
            "give --rate for an open loop, or judge p95<…, mean<… or errors<…",
        )),
        _ => Ok(()),
    }
}

/// The interval a run measures by when `--interval` is not given.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// `--interval`: between 100 ms and 60 s, and no longer than the window;
/// unset, one second or the whole window when that is shorter.
fn interval(args: &CommonRunArgs, duration: Duration) -> Result<Duration, PlanError> {
    let Some(i) = args.interval else {
        return Ok(DEFAULT_INTERVAL.min(duration).max(Duration::from_millis(1)));
    };
    if i < Duration::from_millis(100) || i > Duration::from_secs(60) || i > duration {
        return Err(PlanError::flag(
            "--interval",
            format!(
                "{} is not between 100ms and the smaller of 60s and --duration ({})",
                crate::units::format_duration(i),
                crate::units::format_duration(duration)
            ),
            "e.g. --interval 250ms",
        ));
    }
    Ok(i)
}

/// Validates `--server-pid` / `--server-proc` into the processes to follow.
pub fn server_selector(args: &ServerArgs) -> Result<Option<ProcessSelector>, PlanError> {
    match (args.server_pid, args.server_proc.as_deref()) {
        (Some(pid), _) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(PlanError::flag(
                    "--server-pid",
                    format!("no process {pid} on this host"),
                    "give the pid of the server's main process (e.g. the postmaster)",
                ));
            }
            Ok(Some(ProcessSelector::Tree(pid)))
        }
        (None, Some(name)) if name.trim().is_empty() => Err(PlanError::flag(
            "--server-proc",
            "an empty name",
            "give a command name such as postgres or mariadbd",
        )),
        (None, Some(name)) => Ok(Some(ProcessSelector::Name(name.trim().to_string()))),
        (None, None) => Ok(None),
    }
}

/// The token and trust of `--token-file`, `--agent-fingerprint` and
/// `--agent-cacert`.
pub fn agent_access(
    args: &super::AgentAccessArgs,
) -> Result<crate::probe::agent_client::AgentAccess, PlanError> {
    use crate::wire::tls::Trust;
    let token = args
        .token_file
        .as_deref()
        .map(|p| crate::agent::read_token_file(p, "--token-file"))
        .transpose()?;
    let pins = args
        .agent_fingerprint
        .iter()
        .map(|pin| crate::wire::tls::parse_fingerprint(pin, "--agent-fingerprint"))
        .collect::<Result<Vec<_>, _>>()?;
    let trust = match (pins.is_empty(), &args.agent_cacert) {
        (false, _) => Some(Trust::Pinned(pins)),
        (true, Some(file)) => Some(Trust::CaFile {
            file: file.clone(),
            flag: "--agent-cacert",
        }),
        (true, None) => None,
    };
    Ok(crate::probe::agent_client::AgentAccess { token, trust })
}

/// The token and TLS of a served view (`--serve-token-file`,
/// `--serve-tls-…`), for `addr` given by `flag`.
fn serve_access(
    addr: std::net::SocketAddr,
    flag: &'static str,
    args: &super::args::ServeAccessArgs,
    linger: Duration,
) -> Result<crate::live::ServeConfig, PlanError> {
    use crate::wire::tls::Identity;
    let token = args
        .serve_token_file
        .as_deref()
        .map(|p| crate::agent::read_token_file(p, "--serve-token-file"))
        .transpose()?;
    let tls = match (&args.serve_tls_cert, &args.serve_tls_key) {
        (Some(cert), Some(key)) => Some(Identity::from_files(cert, key)?),
        _ if args.serve_tls_self_signed => Some(Identity::self_signed(
            crate::wire::tls::self_signed_names(&addr),
        )?),
        _ => None,
    };
    let config = crate::live::ServeConfig {
        addr,
        flag,
        token,
        tls,
        linger,
    };
    config.check()?;
    Ok(config)
}

/// An address to serve on, as `flag` gives it.
fn serve_addr(text: &str, flag: &str) -> Result<std::net::SocketAddr, PlanError> {
    text.trim().parse().map_err(|_| {
        PlanError::flag(
            flag,
            format!("'{}' is not an address", crate::util::printable(text)),
            &format!("give IP:PORT, e.g. {flag} 127.0.0.1:8090 (port 0 picks a free one)"),
        )
    })
}

/// The live view of a run (`--serve`), none without it.
pub(crate) fn live_view(
    args: &CommonRunArgs,
) -> Result<Option<crate::live::ServeConfig>, PlanError> {
    served(args.serve.as_deref(), &args.serve_access, args.serve_linger)
}

/// The live view of a lab (`perflab lab --serve`), none without it: the
/// same address and access rules as a run's.
pub(crate) fn lab_view(
    args: &super::args::LabArgs,
) -> Result<Option<crate::live::ServeConfig>, PlanError> {
    served(args.serve.as_deref(), &args.serve_access, args.serve_linger)
}

fn served(
    serve: Option<&str>,
    access: &super::args::ServeAccessArgs,
    linger: Option<Duration>,
) -> Result<Option<crate::live::ServeConfig>, PlanError> {
    let Some(text) = serve else {
        return Ok(None);
    };
    let addr = serve_addr(text, "--serve")?;
    serve_access(addr, "--serve", access, linger.unwrap_or_default()).map(Some)
}

/// Where and how `perflab serve` serves the stored runs.
pub(crate) fn store_view(
    args: &super::args::ServeArgs,
) -> Result<crate::live::ServeConfig, PlanError> {
    let addr = serve_addr(&args.addr, "--addr")?;
    serve_access(addr, "--addr", &args.access, Duration::ZERO)
}

/// A seed from the clock and the process id, for runs that did not give one.
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::plan::Arrivals;
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<Plan, PlanError> {
        let mut argv = vec!["perflab", "run"];
        argv.extend_from_slice(args);
        // A typed flag's bad value is clap's error: its first line.
        let cli = Cli::try_parse_from(argv).map_err(|e| {
            PlanError::new(e.render().to_string().lines().next().unwrap_or_default())
        })?;
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        plan_from(&run).map(|(_, plan)| plan)
    }

    /// A database whose sessions hold their sockets gives each of a few
    /// users a thread of its own, one per CPU, unless the threads are
    /// given; other targets never.
    #[test]
    fn few_users_of_a_database_get_a_thread_each_unless_threads_are_given() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        for target in [
            "postgres://u@127.0.0.1:5432/bank",
            "mysql://u@127.0.0.1:3306/bank",
        ] {
            let p = plan(&["bank", "--target", target]).unwrap();
            assert_eq!(p.alone_up_to, cpus, "{target}");
            let p = plan(&["bank", "--target", target, "--threads", "3"]).unwrap();
            assert_eq!((p.threads, p.alone_up_to), (3, 0), "{target}");
        }
        for args in [
            vec!["null"],
            vec!["bank"],
            vec!["web", "--target", "http://127.0.0.1:8080/"],
        ] {
            assert_eq!(plan(&args).unwrap().alone_up_to, 0, "{args:?}");
        }
    }

    #[test]
    fn quick_runs_the_quick_sweep_and_timing() {
        let p = plan(&["null", "--quick"]).unwrap();
        assert_eq!(p.sweep.levels.len(), QUICK_USERS.split(',').count());
        assert_eq!(p.warmup, Duration::from_secs(1));
        assert_eq!(p.duration, Duration::from_secs(3));
        assert_eq!(p.workload.name, "null");
    }

    #[test]
    fn bad_values_name_their_flag() {
        for (args, flag) in [
            (vec!["null", "--users", "0"], "--users"),
            (vec!["null", "--users", "10..5/1"], "--users"),
            (vec!["null", "--think", "exp:-1s"], "--think"),
            (vec!["null", "--duration", "5"], "--duration"),
            (
                vec!["null", "--rate", "100", "--arrivals", "bursty"],
                "--arrivals",
            ),
            (vec!["null", "--threads", "0"], "--threads"),
            // Absurd values are refused, as a generator refuses them.
            (vec!["null", "--threads", "100000"], "--threads"),
            (vec!["null", "--timeout", "25h"], "--timeout"),
            (vec!["null", "--think", "uniform:1s..25h"], "--think"),
            (
                vec!["null", "--rate", "10", "--connections", "4000000"],
                "--connections",
            ),
        ] {
            let err = plan(&args).unwrap_err().to_string();
            assert!(err.contains(flag), "{args:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
        assert!(Cli::try_parse_from(["perflab", "run", "tpcc"]).is_err());
    }

    #[test]
    fn open_loop_plans_carry_their_bounds() {
        let p = plan(&["null", "--rate", "100..300/100", "--max-outstanding", "7"]).unwrap();
        assert_eq!(p.sweep.levels.len(), 3);
        assert!(matches!(
            p.load,
            LoadModel::Open {
                max_outstanding: 7,
                arrivals: Arrivals::Poisson,
                ..
            }
        ));
        let p = plan(&["null", "--rate", "100", "--slack", "300us"]).unwrap();
        assert!(
            matches!(p.load, LoadModel::Open { slack, .. } if slack == Slack::Fixed(Duration::from_micros(300)))
        );
        let p = plan(&["null", "--rate", "100"]).unwrap();
        assert!(matches!(
            p.load,
            LoadModel::Open {
                slack: Slack::Auto,
                ..
            }
        ));
        // The null queue models an exact arrival process, unless told.
        let queue = plan(&["null", "--servers", "4", "--rate", "100"]).unwrap();
        let exact = Slack::Fixed(Duration::ZERO);
        assert!(matches!(queue.load, LoadModel::Open { slack, .. } if slack == exact));
        let told = plan(&["null", "--servers", "4", "--rate", "100", "--slack", "auto"]).unwrap();
        assert!(matches!(
            told.load,
            LoadModel::Open {
                slack: Slack::Auto,
                ..
            }
        ));
        for bad in ["1s", "soon"] {
            let e = plan(&["null", "--rate", "100", "--slack", bad]).unwrap_err();
            assert!(e.to_string().contains("--slack"), "{e}");
        }
    }

    /// A workload's own input may set the worker threads where no flag
    /// does: the null queue asks for one.
    #[test]
    fn threads_are_as_given_or_as_the_workload_asks() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(plan(&["null", "--rate", "100"]).unwrap().threads, cpus);
        let queue = ["null", "--servers", "4", "--rate", "100"];
        assert_eq!(plan(&queue).unwrap().threads, 1);
        let given = plan(&[&queue[..], &["--threads", "3"]].concat()).unwrap();
        assert_eq!(given.threads, 3);
    }
}
