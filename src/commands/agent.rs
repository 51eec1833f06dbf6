//! `perflab agent`: validate the flags, serve until Ctrl-C or SIGTERM
//! (exit 130 or 143) or `--idle-exit` (exit 0).

use super::Exit;
use crate::agent::{read_token_file, serve, AgentConfig};
use crate::cli::AgentArgs;
use crate::error::PlanError;
use crate::wire::tls::Identity;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Runs `perflab agent`.
pub(crate) fn agent(args: &AgentArgs) -> anyhow::Result<Exit> {
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
    let deadline = args.echo_deadline;
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&deadline) {
        return Err(PlanError::flag(
            "--echo-deadline",
            format!("{deadline:?} is outside 1s to 1h"),
            "give e.g. --echo-deadline 60s (the default)",
        )
        .into());
    }
    let token = args
        .token_file
        .as_deref()
        .map(|path| read_token_file(path, "--token-file"))
        .transpose()?;
    let tls = match (&args.tls_cert, &args.tls_key, args.tls_self_signed) {
        (Some(cert), Some(key), _) => Some(Identity::from_files(cert, key)?),
        (_, _, true) => Some(Identity::self_signed(crate::wire::tls::self_signed_names(
            &listen,
        ))?),
        _ => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let signals = super::StopSignals::register(&stop)?;
    serve(
        AgentConfig {
            listen,
            token,
            interval,
            tls,
            generate: args.generate,
            idle_exit: args.idle_exit,
            echo: args.echo.then_some(args.echo_port),
            echo_deadline: args.echo_deadline,
        },
        stop,
    )?;
    // Stopped by a signal: 130 or 143, as every command; by --idle-exit: 0.
    Ok(signals.exit(Exit::Ok))
}
