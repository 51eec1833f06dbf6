//! `perflab watch`: this host's resources without any load, a sample per
//! interval, organised by the USE method (utilisation, saturation, errors);
//! or one JSON object per sample.

use super::Exit;
use crate::cli::{server_selector, WatchArgs};
use crate::error::PlanError;
use crate::probe::agent_client::AgentClient;
use crate::probe::counters::process::ProcessGroup;
use crate::probe::counters::{HostReader, HostRoot, HostSample, HostSnapshot};
use crate::probe::remote::{RemoteProbe, RemoteWatch};
use crate::report::{Format, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a watch's samples come from.
enum Source {
    Local {
        reader: Box<HostReader>,
        last: Box<HostSnapshot>,
        groups: Vec<ProcessGroup>,
    },
    Agent {
        client: AgentClient,
        /// False while the agent is not answering (said once).
        answering: bool,
    },
    /// A node_exporter, scraped at every interval.
    Remote(Box<RemoteWatch>),
}

impl Source {
    /// The samples taken since the last call, with their times.
    fn samples(&mut self) -> anyhow::Result<Vec<(String, HostSample)>> {
        match self {
            Source::Local {
                reader,
                last,
                groups,
            } => {
                let now = reader.read(groups);
                let sample = HostSample::between(last, &now);
                **last = now;
                Ok(vec![(now_stamp(), sample)])
            }
            Source::Remote(remote) => Ok(remote
                .sample()
                .sample
                .map(|s| (now_stamp(), s))
                .into_iter()
                .collect()),
            Source::Agent { client, answering } => match client.fetch() {
                Ok(samples) => {
                    if !*answering {
                        crate::util::err(format_args!("perflab watch: the agent answers again\n"));
                        *answering = true;
                    }
                    Ok(samples.into_iter().map(|s| (s.at, s.sample)).collect())
                }
                Err(e) if e.downcast_ref::<PlanError>().is_some() => Err(e),
                Err(e) => {
                    // A gap, said once; the watch goes on.
                    if *answering {
                        crate::util::err(format_args!(
                            "warning: {}; watching on\n",
                            crate::util::one_line(&format!("{e:#}"))
                        ));
                        *answering = false;
                    }
                    Ok(Vec::new())
                }
            },
        }
    }
}

/// Processes are read from this host's /proc only.
fn local_only() -> PlanError {
    PlanError::flag(
        "--server-pid",
        "processes can only be followed on this host",
        "drop --server-pid/--server-proc with a remote probe",
    )
}

/// The wall clock now, to the second.
fn now_stamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Runs `perflab watch`.
pub(crate) fn watch(args: &WatchArgs) -> anyhow::Result<Exit> {
    let (interval, duration) = timing(args)?;
    let mut groups = Vec::new();
    if let Some(selector) = server_selector(&args.server)? {
        groups.push(ProcessGroup {
            label: "server".to_string(),
            selector,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    // A signal sets the flag and writes to the pipe, which wakes the sleep
    // below at once: no waking in slices to look at the flag.
    let (wake, waker) = std::os::unix::net::UnixStream::pair()?;
    let signals = super::StopSignals::register(&stop)?;
    for signal in super::STOP_SIGNALS {
        signal_hook::low_level::pipe::register(signal, waker.try_clone()?)?;
    }
    let mut source = open_source(args, groups)?;
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    let started = Instant::now();
    let mut next = started + interval;
    loop {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(signals.exit(Exit::Interrupted));
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            wait_readable(&wake, next - now);
        }
        for (at, sample) in source.samples()? {
            let output = Output::Sample {
                at: &at,
                sample: &sample,
            };
            if !super::output::stream(&output, format)? {
                return Ok(Exit::Ok);
            }
        }
        next += interval;
        if duration.is_some_and(|d| started.elapsed() + Duration::from_millis(1) >= d) {
            return Ok(Exit::Ok);
        }
    }
}

/// `--interval` (at least 10 ms) and `--duration` (none: until Ctrl-C).
fn timing(args: &WatchArgs) -> anyhow::Result<(Duration, Option<Duration>)> {
    let interval = args.interval;
    if interval < Duration::from_millis(10) {
        return Err(
            PlanError::flag("--interval", "shorter than 10ms", "give e.g. --interval 1s").into(),
        );
    }
    let duration = args.duration;
    Ok((interval, duration))
}

/// This host's counters, a node_exporter or a perflab agent (`--probe`);
/// processes (`groups`) are followed on this host only.
fn open_source(args: &WatchArgs, groups: Vec<ProcessGroup>) -> anyhow::Result<Source> {
    Ok(match args.probe.as_str() {
        "local" => {
            let mut reader = Box::new(HostReader::new(HostRoot::live()));
            let last = Box::new(reader.read(&groups));
            Source::Local {
                reader,
                last,
                groups,
            }
        }
        probe if probe.starts_with("node-exporter://") => {
            if !groups.is_empty() {
                return Err(local_only().into());
            }
            let remote = RemoteProbe::parse(probe, &Default::default(), Duration::from_secs(5))?;
            Source::Remote(Box::new(RemoteWatch::start(remote)?))
        }
        probe => {
            if !groups.is_empty() {
                return Err(local_only().into());
            }
            let client = AgentClient::new(probe, crate::cli::agent_access(&args.agent_access)?)?;
            // An agent that does not answer at the start is bad input, as
            // a node_exporter's is; a gap later is said and waited out.
            client
                .snapshot()
                .map_err(|e| crate::probe::remote::not_answering(probe, e))?;
            Source::Agent {
                client,
                answering: true,
            }
        }
    })
}

/// Waits until `stream` has something to read (a signal arrived) or
/// `timeout` has passed.
fn wait_readable(stream: &std::os::unix::net::UnixStream, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up, so the wait never ends just before the deadline.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe {
        libc::poll(&mut fd, 1, ms);
    }
}
