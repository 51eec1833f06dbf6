//! Raw flags → validated [`Plan`]. Every error names the flag and the fix.

use super::args::{RunArgs, ServerArgs};
use super::error::PlanError;
use crate::plan::{
    Arrivals, BankMix, Isolation, LoadModel, NullStall, Plan, Sweep, Target, ThinkTime,
    WorkloadSpec,
};
use crate::probe::counters::process::ProcessSelector;
use crate::units::{parse_duration, parse_percent};
use std::time::Duration;

/// The bank's database when no `--target` is given.
pub const DEFAULT_BANK_TARGET: &str = "sqlite:perflab-bank.db";

/// Users of the default sweep: the seed labs' ramp.
const DEFAULT_USERS: &str = "10..150/10";
/// Users of `--quick`.
const QUICK_USERS: &str = "1,2,4,8,16,32";

fn duration_flag(flag: &str, text: &str) -> Result<Duration, PlanError> {
    parse_duration(text).map_err(|e| PlanError::flag(flag, e, "e.g. 500ms, 5s or 1m"))
}

/// Validates a bank `--target` (the embedded default when absent).
pub fn validate_target(text: Option<&str>) -> Result<Target, PlanError> {
    Target::parse(text.unwrap_or(DEFAULT_BANK_TARGET))
        .map_err(|e| PlanError::flag("--target", e, "e.g. --target sqlite:bank.db"))
}

/// Validates the flags of `perflab run` into a plan.
pub fn plan_from(args: &RunArgs) -> Result<Plan, PlanError> {
    let workload = match args.workload.as_str() {
        "bank" => {
            let target = validate_target(args.target.as_deref())?;
            if args.scale == 0 || args.scale > 100_000 {
                return Err(PlanError::flag(
                    "--scale",
                    format!("{} is out of range", args.scale),
                    "give 1 or more (each unit is 100,000 accounts)",
                ));
            }
            let mix = BankMix::parse(&args.mix).map_err(|e| {
                PlanError::flag(
                    "--mix",
                    e,
                    "e.g. --mix tpcb or --mix atm:balance=40,withdraw=30",
                )
            })?;
            let isolation = Isolation::parse(&args.isolation)
                .map_err(|e| PlanError::flag("--isolation", e, "e.g. --isolation serializable"))?;
            let is_sqlite = matches!(target, Target::Sqlite { .. });
            if is_sqlite && isolation != Isolation::ReadCommitted {
                return Err(PlanError::flag(
                    "--isolation",
                    "SQLite transactions are always serializable",
                    "drop --isolation, or use a postgres:// target",
                ));
            }
            if !matches!(target, Target::Postgres { .. } | Target::PostgresManaged)
                && mix == BankMix::Pgbench
            {
                return Err(PlanError::flag(
                    "--mix",
                    "pgbench runs on pgbench's tables in PostgreSQL",
                    "use --target postgres://USER@HOST/DB or postgres:managed",
                ));
            }
            if args.max_tries == 0 {
                return Err(PlanError::flag(
                    "--max-tries",
                    "0 tries runs nothing",
                    "give 1 or more (default 10)",
                ));
            }
            let managed = target == Target::PostgresManaged;
            if !managed && (!args.pg_set.is_empty() || args.keep || args.pg_cpus.is_some()) {
                return Err(PlanError::flag(
                    if args.keep {
                        "--keep"
                    } else if args.pg_cpus.is_some() {
                        "--pg-cpus"
                    } else {
                        "--pg-set"
                    },
                    "only a managed server can be configured by perflab",
                    "use --target postgres:managed, or set it on your server",
                ));
            }
            let server_settings = args
                .pg_set
                .iter()
                .map(|kv| {
                    kv.split_once('=')
                        .filter(|(k, _)| !k.trim().is_empty())
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .ok_or_else(|| {
                            PlanError::flag(
                                "--pg-set",
                                format!("'{kv}' is not NAME=VALUE"),
                                "e.g. --pg-set shared_buffers=128MB",
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            WorkloadSpec::Bank {
                target,
                scale: args.scale,
                mix,
                reload: args.reload,
                isolation,
                max_tries: args.max_tries,
                server_settings,
                keep: args.keep,
                server_cpus: args
                    .pg_cpus
                    .as_deref()
                    .map(parse_cpu_list)
                    .transpose()?
                    .unwrap_or_default(),
            }
        }
        "null" => {
            if args.target.is_some() {
                return Err(PlanError::flag(
                    "--target",
                    "the null workload has no target",
                    "drop --target, or run the bank workload",
                ));
            }
            WorkloadSpec::Null {
                service: duration_flag("--service", &args.service)?,
                stall: args
                    .stall
                    .as_deref()
                    .map(NullStall::parse)
                    .transpose()
                    .map_err(|e| PlanError::flag("--stall", e, "e.g. --stall 3s:1s"))?,
            }
        }
        other => {
            return Err(PlanError::new(format!(
                "'{other}' is not a workload; use bank or null"
            )))
        }
    };

    let think = ThinkTime::parse(&args.think).map_err(|e| {
        PlanError::flag(
            "--think",
            e,
            "e.g. --think 0, 1s, exp:1s or uniform:0.5s..1.5s",
        )
    })?;
    let (load, sweep) = match (&args.users, &args.rate) {
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
            let arrivals = match args.arrivals.as_str() {
                "poisson" => Arrivals::Poisson,
                "uniform" => Arrivals::Uniform,
                other => {
                    return Err(PlanError::flag(
                        "--arrivals",
                        format!("'{other}' is not an arrival process"),
                        "use poisson or uniform",
                    ))
                }
            };
            if args.connections == 0 {
                return Err(PlanError::flag(
                    "--connections",
                    "0 sessions cannot serve any arrival",
                    "give 1 or more",
                ));
            }
            if args.max_outstanding == 0 {
                return Err(PlanError::flag(
                    "--max-outstanding",
                    "0 would drop every arrival",
                    "give 1 or more",
                ));
            }
            let sweep = Sweep::parse_rates(rate).map_err(|e| {
                PlanError::flag("--rate", e, "e.g. --rate 500 or --rate 100..1000/100")
            })?;
            (
                LoadModel::Open {
                    arrivals,
                    connections: args.connections,
                    max_outstanding: args.max_outstanding,
                },
                sweep,
            )
        }
        (users, None) => {
            let text = users
                .as_deref()
                .unwrap_or(if args.quick { QUICK_USERS } else { DEFAULT_USERS });
            let sweep = Sweep::parse_users(text).map_err(|e| {
                PlanError::flag("--users", e, "e.g. --users 8, 1,2,4,8 or 10..150/10")
            })?;
            (LoadModel::Closed { think }, sweep)
        }
    };

    let (default_warmup, default_duration) = if args.quick {
        ("1s", "3s")
    } else {
        ("5s", "20s")
    };
    let warmup = duration_flag("--warmup", args.warmup.as_deref().unwrap_or(default_warmup))?;
    let duration = duration_flag(
        "--duration",
        args.duration.as_deref().unwrap_or(default_duration),
    )?;
    if duration < Duration::from_millis(100) {
        return Err(PlanError::flag(
            "--duration",
            "a measured window under 100ms measures nothing",
            "give e.g. --duration 5s",
        ));
    }
    let timeout = duration_flag("--timeout", &args.timeout)?;
    if timeout.is_zero() {
        return Err(PlanError::flag(
            "--timeout",
            "0 would time out every operation",
            "give e.g. --timeout 30s",
        ));
    }
    let max_error_rate = parse_percent(&args.max_error_rate)
        .map_err(|e| PlanError::flag("--max-error-rate", e, "e.g. --max-error-rate 5%"))?;
    let threads = match args.threads {
        Some(0) => {
            return Err(PlanError::flag(
                "--threads",
                "0 threads cannot generate load",
                "give 1 or more, or leave it out for one per CPU",
            ))
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let server = server_selector(&args.server)?;
    let slos = parse_slos(&args.slo)?;
    let max_cv = parse_max_cv(&args.max_cv)?;
    if args.repeat == 0 || args.repeat > 100 {
        return Err(PlanError::flag(
            "--repeat",
            format!("{} runs per level", args.repeat),
            "give 1 to 100",
        ));
    }
    let max_repeat = args.max_repeat.unwrap_or(args.repeat);
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
    Ok(Plan {
        workload,
        load,
        sweep,
        warmup,
        duration,
        interval: Duration::from_secs(1),
        threads,
        timeout,
        max_error_rate,
        seed: args.seed.unwrap_or_else(random_seed),
        server,
        slos,
        max_cv,
        // A variation needs two runs to be measured.
        repeat: if max_repeat > args.repeat {
            args.repeat.max(2)
        } else {
            args.repeat
        },
        max_repeat,
    })
}

/// Validates `--pg-cpus`: CPUs the managed server may be placed on, e.g.
/// `0` or `0-1,3`. The server starts with perflab's affinity and is then
/// moved to these CPUs with sched_setaffinity(2), which may leave
/// perflab's own mask (`taskset -c 1 perflab … --pg-cpus 0` keeps the
/// generator off the server's CPU) but not perflab's cpuset cgroup: a
/// container's CPUs, which need not start at 0.
fn parse_cpu_list(text: &str) -> Result<Vec<usize>, PlanError> {
    let allowed = placeable_cpus();
    let shown = format_cpu_list(&allowed);
    let bad = |why: String| {
        PlanError::flag(
            "--pg-cpus",
            why,
            &format!(
                "give CPUs from {shown}, e.g. --pg-cpus {}",
                allowed.first().copied().unwrap_or(0)
            ),
        )
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        let Some((a, b)) = parse_cpu_range(part) else {
            return Err(bad(format!("'{part}' is not a CPU number or range")));
        };
        if let Some(cpu) = (a..=b).find(|c| !allowed.contains(c)) {
            return Err(bad(format!(
                "CPU {cpu} is not among the CPUs perflab's cgroup lets a server run on ({shown})"
            )));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `3` or `0-3` as (first, last); none when malformed or reversed.
fn parse_cpu_range(part: &str) -> Option<(usize, usize)> {
    let (a, b) = part.split_once('-').unwrap_or((part, part));
    let (a, b) = (
        a.trim().parse::<usize>().ok()?,
        b.trim().parse::<usize>().ok()?,
    );
    (a <= b).then_some((a, b))
}

/// A kernel CPU list (`0-3,6`) as CPU numbers.
fn parse_kernel_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = parse_cpu_range(part)?;
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// `0-1,3` for CPUs 0, 1 and 3.
fn format_cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &cpu in cpus {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    runs.iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs a child of perflab can be moved to: its cpuset cgroup's
/// effective CPUs (cgroup v2 `cpuset.cpus.effective`, v1
/// `cpuset.effective_cpus`; see the kernel's cgroup-v2.rst and
/// cgroup-v1/cpusets.rst), else the online CPUs, else as many as perflab
/// may use from 0.
fn placeable_cpus() -> Vec<usize> {
    let read = |path: String| std::fs::read_to_string(path).ok();
    let mut candidates = Vec::new();
    for line in read("/proc/self/cgroup".to_string())
        .unwrap_or_default()
        .lines()
    {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/cpuset.cpus.effective"));
        } else if controllers.split(',').any(|c| c == "cpuset") {
            candidates.push(format!("/sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus"));
        }
    }
    // Inside a cgroup namespace the paths above may be the host's; the
    // mount's root is then this cgroup.
    candidates.push("/sys/fs/cgroup/cpuset.cpus.effective".to_string());
    candidates.push("/sys/fs/cgroup/cpuset/cpuset.effective_cpus".to_string());
    candidates.push("/sys/devices/system/cpu/online".to_string());
    candidates
        .into_iter()
        .find_map(|path| read(path).as_deref().and_then(parse_kernel_cpu_list))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// Validates `--slo` objectives.
pub fn parse_slos(given: &[String]) -> Result<Vec<crate::analyze::Slo>, PlanError> {
    given
        .iter()
        .map(|s| {
            crate::analyze::Slo::parse(s)
                .map_err(|e| PlanError::flag("--slo", e, "e.g. --slo p95<50ms or --slo errors<1%"))
        })
        .collect()
}

/// Validates `--max-cv`.
pub fn parse_max_cv(given: &str) -> Result<f64, PlanError> {
    parse_percent(given)
        .ok()
        .filter(|v| *v > 0.0)
        .ok_or_else(|| {
            PlanError::flag(
                "--max-cv",
                format!("'{given}' is not a percentage above 0"),
                "e.g. --max-cv 5%",
            )
        })
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
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<Plan, PlanError> {
        let mut argv = vec!["perflab", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).expect("flags parse");
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        plan_from(&run)
    }

    #[test]
    fn server_cpus_are_checked_against_the_cpus_a_server_can_get() {
        assert_eq!(format_cpu_list(&[0, 1, 3, 5, 6, 7]), "0-1,3,5-7");
        assert_eq!(parse_kernel_cpu_list("0-1,3\n"), Some(vec![0, 1, 3]));
        assert_eq!(parse_kernel_cpu_list("3-1"), None);
        let allowed = placeable_cpus();
        assert!(!allowed.is_empty());
        let first = allowed[0].to_string();
        assert_eq!(parse_cpu_list(&first).unwrap(), vec![allowed[0]]);
        let outside = (0..).find(|c| !allowed.contains(c)).unwrap();
        let err = parse_cpu_list(&format!("{first},{outside}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("CPU {outside} is not among the CPUs")),
            "{err}"
        );
        assert!(err.contains(&format_cpu_list(&allowed)), "{err}");
        assert!(parse_cpu_list("1-0").is_err());
    }

    #[test]
    fn quick_bank_uses_the_embedded_default() {
        let p = plan(&["bank", "--quick"]).unwrap();
        assert_eq!(p.sweep.levels.len(), 6);
        assert_eq!(p.warmup, Duration::from_secs(1));
        assert_eq!(p.workload.target().redacted(), "sqlite:perflab-bank.db");
    }

    #[test]
    fn bad_values_name_their_flag() {
        for (args, flag) in [
            (vec!["bank", "--users", "0"], "--users"),
            (vec!["bank", "--users", "10..5/1"], "--users"),
            (vec!["bank", "--think", "exp:-1s"], "--think"),
            (vec!["bank", "--mix", "tpcc"], "--mix"),
            (vec!["bank", "--duration", "5"], "--duration"),
            (
                vec!["null", "--rate", "100", "--arrivals", "bursty"],
                "--arrivals",
            ),
            (vec!["bank", "--threads", "0"], "--threads"),
        ] {
            let err = plan(&args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
        assert!(plan(&["tpcc"]).is_err());
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
    }
}
