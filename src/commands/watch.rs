//! `perflab watch`: this host's resources without any load, a sample per
//! interval, organised by the USE method (utilisation, saturation, errors);
//! or one JSON object per sample.

use super::Exit;
use crate::cli::{server_selector, PlanError, WatchArgs};
use crate::probe::counters::process::ProcessGroup;
use crate::probe::counters::{HostRoot, HostSample, HostSnapshot};
use crate::report::use_line;
use crate::units::parse_duration;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `perflab watch`.
pub fn watch(args: &WatchArgs) -> anyhow::Result<Exit> {
    let interval = parse_duration(&args.interval)
        .map_err(|e| PlanError::flag("--interval", e, "e.g. --interval 1s or 100ms"))?;
    if interval < Duration::from_millis(10) {
        return Err(
            PlanError::flag("--interval", "shorter than 10ms", "give e.g. --interval 1s").into(),
        );
    }
    let duration = args
        .duration
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| PlanError::flag("--duration", e, "e.g. --duration 30s"))?;
    let mut groups = Vec::new();
    if let Some(selector) = server_selector(args.server_pid, args.server_proc.as_deref())? {
        groups.push(ProcessGroup {
            label: "server".to_string(),
            selector,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let root = HostRoot::live();
    let started = Instant::now();
    let mut last = HostSnapshot::read(&root, &groups);
    let mut next = started + interval;
    loop {
        // Sleep in short slices so Ctrl-C is answered promptly.
        while Instant::now() < next {
            if stop.load(Ordering::Relaxed) {
                return Ok(Exit::Interrupted);
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        let now = HostSnapshot::read(&root, &groups);
        let sample = HostSample::between(&last, &now);
        last = now;
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        let line = if args.json {
            let mut line = serde_json::to_value(&sample)?;
            if let Some(obj) = line.as_object_mut() {
                obj.insert("at".to_string(), serde_json::json!(stamp.to_string()));
            }
            line.to_string()
        } else {
            format!("{stamp} {}", use_line(&sample))
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            // The reader went away (`| head`): that ends the watch, quietly.
            return Ok(Exit::Ok);
        }
        next += interval;
        if duration.is_some_and(|d| started.elapsed() + Duration::from_millis(1) >= d) {
            return Ok(Exit::Ok);
        }
    }
}
