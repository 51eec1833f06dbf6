//! `perflab doctor`: reads this host twice, `--sample` apart, checks it
//! (and a database with `--target`) for the classic traps, and prints
//! each finding with its evidence, why it matters and the fix. Exits 1
//! when a critical finding was made.

use super::output::Destination;
use super::Exit;
use crate::cli::DoctorArgs;
use crate::doctor::{self, database_findings, Report, Root, Scope, Severity};
use crate::error::PlanError;
use crate::report::{Format, Output};
use crate::sut::settings::DbSettings;
use crate::sut::{validate_target, Opened, ServerOptions, Target};
use std::path::PathBuf;
use std::time::Duration;

/// Runs `perflab doctor`.
pub(crate) fn doctor(args: &DoctorArgs) -> anyhow::Result<Exit> {
    let sample = args.sample;
    check_flags(args)?;
    // The target is checked before anything is sampled: bad input costs
    // no waiting.
    let target = args
        .target
        .as_deref()
        .map(|t| validate_target(Some(t), t))
        .transpose()?;
    let embedded_dir = target.as_ref().map(embedded_dir).transpose()?.flatten();
    if !args.json && sample > Duration::ZERO {
        crate::util::err(format_args!(
            "perflab doctor: reading counters over {}…\n",
            crate::units::format_duration(sample)
        ));
    }
    let mut report = match args.probe.as_deref() {
        None | Some("local") => examine_here(args)?,
        Some(probe) => examine_remote(args, probe)?,
    };
    if let Some(dir) = embedded_dir {
        doctor::target_filesystem(&Root::live(), &dir, &mut report);
    } else if let Some(target) = &target {
        examine_database(args, target, &mut report)?;
    }
    if let Some(dir) = &args.flush_latency {
        if !args.json {
            crate::util::err(format_args!(
                "perflab doctor: timing flushes in {} for {}…\n",
                dir.display(),
                crate::units::format_duration(FLUSH_TIME)
            ));
        }
        let measured = crate::probe::flush::measure(dir, FLUSH_TIME, "--flush-latency")?;
        report.findings.push(doctor::flush::finding(&measured));
        report.flush = Some(measured);
    }
    report.findings.sort_by_key(|f| f.severity);
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    super::output::write(&Output::Doctor(&report), format, Destination::Stdout)?;
    Ok(if report.worst() == Some(Severity::Critical) {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

/// How long `--flush-latency` times flushes.
const FLUSH_TIME: Duration = Duration::from_secs(2);

/// Refuses a sample over 10 minutes, a server pid this host has not, and
/// a flush probe of a directory that is not one (or of another host).
fn check_flags(args: &DoctorArgs) -> Result<(), PlanError> {
    if let Some(dir) = &args.flush_latency {
        if args.probe.as_deref().is_some_and(|p| p != "local") {
            return Err(PlanError::flag(
                "--flush-latency",
                "flushes are timed in a directory of this host",
                "run perflab doctor --flush-latency DIR on the host that has the directory",
            ));
        }
        if !dir.is_dir() {
            return Err(PlanError::flag(
                "--flush-latency",
                format!(
                    "{} is not a directory",
                    crate::util::clipped(&dir.display().to_string())
                ),
                "give a directory on the device to measure",
            ));
        }
    }
    if args.sample > Duration::from_secs(600) {
        return Err(PlanError::flag(
            "--sample",
            "longer than 10 minutes",
            "e.g. --sample 5s",
        ));
    }
    if let Some(pid) = args.server_pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(PlanError::flag(
                "--server-pid",
                format!("no process {pid} on this host"),
                "give the pid of the server's main process",
            ));
        }
    }
    Ok(())
}

/// The directory of an embedded database's file (none for a server),
/// which must exist.
fn embedded_dir(target: &Target) -> Result<Option<PathBuf>, PlanError> {
    let Some(path) = target.file() else {
        return Ok(None);
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(PlanError::flag(
            "--target",
            format!(
                "the directory {} of the database file does not exist",
                dir.display()
            ),
            "give the path of a database file in an existing directory",
        ));
    }
    Ok(Some(dir.to_path_buf()))
}

/// Reads this host twice, `--sample` apart, and examines it.
fn examine_here(args: &DoctorArgs) -> anyhow::Result<Report> {
    let live = Root::live();
    let dir = tempfile::tempdir()?;
    let before = doctor::snapshot(&live, dir.path())?;
    std::thread::sleep(args.sample);
    Ok(doctor::examine(
        &before,
        &live,
        &Scope {
            server_pid: args.server_pid,
        },
    ))
}

/// Has the agent at `probe` examine its host.
fn examine_remote(args: &DoctorArgs, probe: &str) -> anyhow::Result<Report> {
    if !probe.starts_with("agent://") {
        return Err(PlanError::flag(
            "--probe",
            format!(
                "'{probe}' cannot be examined: node_exporter and others give counters, not files"
            ),
            "run perflab agent on that host and give --probe agent://HOST:PORT",
        )
        .into());
    }
    if args.server_pid.is_some() {
        return Err(PlanError::flag(
            "--server-pid",
            "processes can only be examined on this host",
            "drop --server-pid with an agent probe",
        )
        .into());
    }
    let access = crate::cli::agent_access(&args.agent_access)?;
    let client = crate::probe::agent_client::AgentClient::new(probe, access)?
        .with_timeout(args.sample + Duration::from_secs(10));
    Ok(client
        .doctor(args.sample.as_secs_f64())
        .map_err(|e| crate::probe::remote::not_answering(probe, e))?)
}

/// Adds the database server's findings: its settings against this host's
/// memory and `--users`, and its data directory's filesystem when it is
/// on this host.
fn examine_database(args: &DoctorArgs, target: &Target, report: &mut Report) -> anyhow::Result<()> {
    let settings = read_settings(target)?;
    if let Some(data) = settings.settings.get("data_directory") {
        if std::path::Path::new(data).exists() {
            doctor::target_filesystem(&Root::live(), std::path::Path::new(data), report);
        }
    }
    let ram = crate::probe::HostFacts::read().memory_bytes.unwrap_or(0);
    report
        .findings
        .extend(database_findings(&settings, ram, args.users));
    Ok(())
}

/// Connects to the target and reads the settings the checks need.
fn read_settings(target: &Target) -> anyhow::Result<DbSettings> {
    let not_checked = || {
        PlanError::flag(
            "--target",
            format!(
                "'{}' is not a database the doctor checks",
                target.redacted()
            ),
            "give postgres://…, mysql://… or sqlite:PATH",
        )
    };
    if target.traits().managed {
        return Err(not_checked().into());
    }
    let opened = Opened::open(target, &ServerOptions::default())?;
    opened.endpoint.settings().ok_or_else(not_checked)?
}
