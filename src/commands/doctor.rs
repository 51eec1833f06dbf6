//! `perflab doctor`: reads this host twice, `--sample` apart, checks it
//! (and a database with `--target`) for the classic traps, and prints
//! each finding with its evidence, why it matters and the fix. Exits 1
//! when a critical finding was made.

use super::Exit;
use crate::cli::{DoctorArgs, PlanError};
use crate::doctor::{self, database_findings, Report, Root, Scope, Severity};
use crate::target::settings::DbSettings;
use crate::target::{validate_target, Opened, ServerOptions, Target};
use crate::units::parse_duration;
use std::time::Duration;

/// Runs `perflab doctor`.
pub fn doctor(args: &DoctorArgs) -> anyhow::Result<Exit> {
    let sample = parse_duration(&args.sample)
        .map_err(|e| PlanError::flag("--sample", e, "e.g. --sample 5s, or 0s for one reading"))?;
    if sample > Duration::from_secs(600) {
        return Err(
            PlanError::flag("--sample", "longer than 10 minutes", "e.g. --sample 5s").into(),
        );
    }
    if let Some(pid) = args.server_pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(PlanError::flag(
                "--server-pid",
                format!("no process {pid} on this host"),
                "give the pid of the server's main process",
            )
            .into());
        }
    }
    if !args.json && sample > Duration::ZERO {
        eprintln!(
            "perflab doctor: reading counters over {}…",
            crate::units::format_duration(sample)
        );
    }
    let mut report = match args.probe.as_deref() {
        None | Some("local") => {
            let live = Root::live();
            let dir = tempfile::tempdir()?;
            let before = doctor::snapshot(&live, dir.path())?;
            std::thread::sleep(sample);
            doctor::examine(
                &before,
                &live,
                &Scope {
                    server_pid: args.server_pid,
                },
            )
        }
        Some(probe) => {
            if !probe.starts_with("agent://") {
                return Err(PlanError::flag(
                    "--probe",
                    format!("'{probe}' cannot be examined: node_exporter and others give counters, not files"),
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
            let token = args
                .token_file
                .as_deref()
                .map(crate::agent::read_token)
                .transpose()?;
            let client = crate::agent::AgentClient::new(probe, token)?
                .with_timeout(sample + Duration::from_secs(10));
            client.doctor(sample.as_secs_f64())?
        }
    };
    let target = args
        .target
        .as_deref()
        .map(|t| validate_target(Some(t), t))
        .transpose()?;
    if let Some(Target::Sqlite { path }) = &target {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        doctor::target_filesystem(&Root::live(), dir, &mut report);
    } else if let Some(target) = &target {
        let settings = read_settings(target)?;
        if let Some(data) = settings.settings.get("data_directory") {
            if std::path::Path::new(data).exists() {
                doctor::target_filesystem(&Root::live(), std::path::Path::new(data), &mut report);
            }
        }
        let ram = crate::probe::HostFacts::read().memory_bytes.unwrap_or(0);
        report
            .findings
            .extend(database_findings(&settings, ram, args.users));
    }
    report.findings.sort_by_key(|f| f.severity);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.worst() == Some(Severity::Critical) {
        Exit::Failed
    } else {
        Exit::Ok
    })
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

/// The findings, worst first, then what could not be looked at.
fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let count = |s: Severity| report.findings.iter().filter(|f| f.severity == s).count();
    let _ = writeln!(
        out,
        "perflab doctor: {} critical, {} warning, {} info",
        count(Severity::Critical),
        count(Severity::Warning),
        count(Severity::Info)
    );
    for f in &report.findings {
        let _ = writeln!(
            out,
            "\n{:<8} {:<10} {}",
            f.severity.as_str().to_uppercase(),
            f.area,
            f.title
        );
        for e in &f.evidence {
            let _ = writeln!(out, "  evidence  {e}");
        }
        let _ = writeln!(out, "  why       {}", f.why);
        let _ = writeln!(out, "  fix       {}", f.fix);
    }
    if !report.unavailable.is_empty() {
        let _ = writeln!(out, "\nnot available on this host:");
        for u in &report.unavailable {
            let _ = writeln!(out, "  - {u}");
        }
    }
    out
}
