//! The agent's generator role (`perflab agent --generate`): it offers the
//! part of each step a coordinator (`perflab run … --generators`) sends
//! it, one step at a time. The protocol, every request with the token:
//! - `GET /v1/hello`: its version, roles and the workloads it can run;
//! - `GET /v1/clock`: its clock (ns since the Unix epoch), for the
//!   coordinator's offset estimate;
//! - `POST /v1/generate/prepare` `{workload, form, share}`: builds the
//!   workload, opens the share's sessions, answers once they are open;
//! - `POST /v1/generate/start` `{at_unix_ns}`: starts the clock then, by
//!   this host's clock;
//! - `GET /v1/generate/events?since=N`: what the share said after event
//!   N (its intervals, packed, and its end); asking past N forgets the
//!   events up to N, so a step's memory does not grow with its length;
//! - `POST /v1/generate/stop`: ends the share at its next interval.
//!
//! A prepared share not started within [`START_WAIT`] gives up, so a
//! coordinator that went away does not hold the sessions open.
//!
//! Every request is checked before anything is built: a share's part,
//! threads, level, load, timeout and intervals within the bounds a plan
//! takes ([`check_share`], `Split::check`), the workload's form by the
//! workload (its headers one line each, its numbers in range), a start
//! no later than [`START_WAIT`] from now. A bad request is a 400 with one
//! line naming the field. Whatever the share's thread does — fail, give
//! up, panic — it ends the share, so the next prepare is taken.

use super::http::{Request, Response};
use crate::engine::{run_share, Share, ShareEvent};
use crate::workload::{Started, SweepDriver, Workload};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long a prepared share waits for its start.
pub(crate) const START_WAIT: Duration = Duration::from_secs(120);

/// How long a prepare may take to open its sessions.
const PREPARE_WAIT: Duration = Duration::from_secs(120);

/// The shortest interval a share is cut into, and the longest.
const INTERVALS: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(3600));
/// The longest step a share runs, warm-up and measured window together.
const MAX_STEP: Duration = Duration::from_secs(30 * 24 * 3600);
/// The most intervals a share's step has (each is an event kept until
/// the coordinator reads it).
const MAX_INTERVALS: u128 = 1_000_000;

/// Whether a share can run here: its split (part, threads, level, load,
/// timeout) and its timing (an interval of [`INTERVALS`], a step of at
/// most [`MAX_STEP`] in at most [`MAX_INTERVALS`] intervals, a measured
/// window of at least one interval's minimum), in one line naming the
/// field that cannot.
fn check_share(share: &Share) -> Result<(), String> {
    share.split.check(share.level)?;
    let (shortest, longest) = INTERVALS;
    if !(shortest..=longest).contains(&share.interval) {
        return Err(format!(
            "interval is {:?}; give {shortest:?} to {longest:?}",
            share.interval
        ));
    }
    if share.duration < shortest {
        return Err(format!(
            "duration is {:?}; a measured window under {shortest:?} measures nothing",
            share.duration
        ));
    }
    let step = share
        .warmup
        .checked_add(share.duration)
        .filter(|step| *step <= MAX_STEP)
        .ok_or_else(|| {
            format!(
                "warmup and duration add up to more than {} days",
                MAX_STEP.as_secs() / 86_400
            )
        })?;
    let intervals = step.as_nanos().div_ceil(share.interval.as_nanos()) + 1;
    if intervals > MAX_INTERVALS {
        return Err(format!(
            "a step of {step:?} in intervals of {:?} has {intervals} of them; at most {MAX_INTERVALS}",
            share.interval
        ));
    }
    Ok(())
}

/// The generator: the share running, if any.
#[derive(Default)]
pub(crate) struct Generator {
    current: Mutex<Option<Running>>,
}

/// A share and what it said.
struct Running {
    events: Arc<Mutex<Events>>,
    start: mpsc::Sender<Option<SystemTime>>,
    stop: Arc<AtomicBool>,
}

/// Events not yet read, numbered from 1.
#[derive(Default)]
struct Events {
    kept: Vec<(u64, ShareEvent)>,
    next: u64,
    ended: bool,
}

impl Events {
    fn push(&mut self, event: ShareEvent) {
        self.next += 1;
        if matches!(event, ShareEvent::Finished { .. } | ShareEvent::Failed(_)) {
            self.ended = true;
        }
        self.kept.push((self.next, event));
    }
}

#[derive(serde::Deserialize)]
struct Prepare {
    workload: String,
    form: serde_json::Value,
    share: Share,
}

#[derive(serde::Deserialize)]
struct Start {
    at_unix_ns: u128,
}

fn error(status: u16, message: &str) -> Response {
    Response::json(status, serde_json::json!({ "error": message }).to_string())
}

/// Now by this host's clock, ns since the Unix epoch.
pub(crate) fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Runs a share of workload `workload` on a thread of its own; however
/// it ends — run, failed, panicked, never started — its events end with
/// it, so the next prepare is taken.
fn spawn_share(
    workload: String,
    form: serde_json::Value,
    driver: ShareDriver,
) -> std::io::Result<()> {
    let events = driver.events.clone();
    std::thread::Builder::new()
        .name("perflab-generator".to_string())
        .spawn(move || {
            // A panic ends the share as a failure, as an error does.
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::workload::on_generator(&workload, form, driver)
            }));
            let failure = match built {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(crate::util::one_line(&format!("{e:#}"))),
                Err(panic) => Some(format!(
                    "the share's thread failed: {}",
                    crate::util::one_line(
                        crate::util::panic_text(panic.as_ref()).unwrap_or("no message")
                    )
                )),
            };
            if let Ok(mut events) = events.lock() {
                if !events.ended {
                    events.push(ShareEvent::Failed(failure.unwrap_or_else(|| {
                        "the share ended without running (no start came)".to_string()
                    })));
                }
            }
        })?;
    Ok(())
}

impl Generator {
    /// Answers a request under `/v1/generate/`; none for other paths.
    pub(crate) fn answer(&self, request: &Request, path: &str, query: &str) -> Option<Response> {
        Some(match (request.method.as_str(), path) {
            ("POST", "/v1/generate/prepare") => self.prepare(&request.body),
            ("POST", "/v1/generate/start") => self.start(&request.body),
            ("POST", "/v1/generate/stop") => self.stop(),
            ("GET", "/v1/generate/events") => self.events(query),
            (_, p) if p.starts_with("/v1/generate/") => {
                error(404, "the generator serves prepare, start, stop and events")
            }
            _ => return None,
        })
    }

    /// Prepares a share: checks it, starts its thread, and answers once
    /// its sessions are open (or could not be).
    fn prepare(&self, body: &[u8]) -> Response {
        let prepare: Prepare = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => return error(400, &format!("not a share: {e}")),
        };
        if let Err(why) = check_share(&prepare.share) {
            return error(400, &format!("share: {why}"));
        }
        if let Err(e) = crate::workload::check_generator_form(&prepare.workload, &prepare.form) {
            return error(400, &crate::util::one_line(&format!("{e:#}")));
        }
        let Ok(mut current) = self.current.lock() else {
            return error(500, "the generator's state is lost");
        };
        if let Some(running) = current.as_ref() {
            let ended = running.events.lock().map_or(true, |e| e.ended);
            if !ended {
                return error(
                    409,
                    "a step is already running here; one coordinator at a time",
                );
            }
        }
        let events = Arc::new(Mutex::new(Events::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (start_tx, start_rx) = mpsc::channel();
        let driver = ShareDriver {
            share: prepare.share,
            stop: stop.clone(),
            start: start_rx,
            events: events.clone(),
        };
        if let Err(e) = spawn_share(prepare.workload, prepare.form, driver) {
            return error(500, &format!("cannot start the share's thread: {e}"));
        }
        *current = Some(Running {
            events: events.clone(),
            start: start_tx,
            stop,
        });
        drop(current);
        self.wait_ready(&events)
    }

    /// Answers once the share's sessions are open, or could not be, or
    /// [`PREPARE_WAIT`] has passed (then the share is stopped).
    fn wait_ready(&self, events: &Mutex<Events>) -> Response {
        let deadline = Instant::now() + PREPARE_WAIT;
        loop {
            let said = events.lock().ok().and_then(|e| {
                e.kept.iter().find_map(|(_, event)| match event {
                    ShareEvent::Ready => Some(Ok(())),
                    ShareEvent::Failed(why) => Some(Err(why.clone())),
                    _ => None,
                })
            });
            match said {
                Some(Ok(())) => return Response::json(200, r#"{"ready":true}"#),
                Some(Err(why)) => return error(422, &why),
                None if Instant::now() > deadline => {
                    self.stop();
                    return error(504, "the share's sessions did not open in time");
                }
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    fn start(&self, body: &[u8]) -> Response {
        let start: Start = match serde_json::from_slice(body) {
            Ok(s) => s,
            Err(e) => return error(400, &format!("not a start: {e}")),
        };
        // A start far ahead would hold the share's thread asleep past any
        // stop: it comes within the wait a prepared share gives it.
        let latest = unix_ns() + START_WAIT.as_nanos();
        let Some(at) = u64::try_from(start.at_unix_ns)
            .ok()
            .filter(|ns| u128::from(*ns) <= latest)
            .map(|ns| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns))
        else {
            return error(
                400,
                &format!(
                    "at_unix_ns is {}; a start comes at most {} s from now",
                    start.at_unix_ns,
                    START_WAIT.as_secs()
                ),
            );
        };
        let sent = self
            .current
            .lock()
            .ok()
            .and_then(|c| c.as_ref().map(|r| r.start.send(Some(at)).is_ok()));
        match sent {
            Some(true) => Response::json(200, r#"{"started":true}"#),
            _ => error(409, "no share is prepared here"),
        }
    }

    fn stop(&self) -> Response {
        if let Ok(current) = self.current.lock() {
            if let Some(running) = current.as_ref() {
                running.stop.store(true, Ordering::Relaxed);
                let _ = running.start.send(None);
            }
        }
        Response::json(200, r#"{"stopping":true}"#)
    }

    fn events(&self, query: &str) -> Response {
        let since = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("since="))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let Ok(current) = self.current.lock() else {
            return error(500, "the generator's state is lost");
        };
        let Some(running) = current.as_ref() else {
            return error(409, "no share is prepared here");
        };
        let Ok(mut events) = running.events.lock() else {
            return error(500, "the share's events are lost");
        };
        events.kept.retain(|(n, _)| *n > since);
        let body = serde_json::json!({ "events": events.kept });
        Response::json(200, body.to_string())
    }
}

/// Runs the share on the workload the registry built.
struct ShareDriver {
    share: Share,
    stop: Arc<AtomicBool>,
    start: mpsc::Receiver<Option<SystemTime>>,
    events: Arc<Mutex<Events>>,
}

impl SweepDriver for ShareDriver {
    type Output = ();

    fn drive<W: Workload>(self, workload: Arc<W>, _started: Started) -> anyhow::Result<()> {
        // A start that never comes is given up after START_WAIT.
        let (start_tx, start_rx) = mpsc::channel();
        let waiting = self.start;
        std::thread::Builder::new()
            .name("perflab-generator-start".to_string())
            .spawn(move || {
                let _ = start_tx.send(waiting.recv_timeout(START_WAIT).ok().flatten());
            })?;
        let events = self.events;
        // The workload is dropped here, after every worker has ended: a
        // workload holding a runtime of its own (the bank's) must not be
        // dropped inside a worker's.
        run_share(
            workload.clone(),
            &self.share,
            &self.stop,
            &start_rx,
            &mut |event| {
                if let Ok(mut events) = events.lock() {
                    events.push(event);
                }
            },
        );
        drop(workload);
        Ok(())
    }
}
