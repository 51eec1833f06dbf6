//! `perflab agent`: validate the flags, serve until Ctrl-C.

use super::Exit;
use crate::agent::{read_token, serve, AgentConfig};
use crate::cli::AgentArgs;
use crate::error::PlanError;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Runs `perflab agent`.
pub fn agent(args: &AgentArgs) -> anyhow::Result<Exit> {
    let listen = args.listen.parse().map_err(|_| {
        PlanError::flag(
            "--listen",
            format!("'{}' is not an address", args.listen),
            "give IP:PORT, e.g. --listen 127.0.0.1:7071",
        )
    })?;
    let interval = args.interval;
    if interval < Duration::from_millis(100) {
        return Err(PlanError::flag(
            "--interval",
            "shorter than 100ms",
            "give e.g. --interval 1s",
        )
        .into());
    }
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    serve(
        AgentConfig {
            listen,
            token,
            interval,
        },
        stop,
    )?;
    Ok(Exit::Ok)
}
