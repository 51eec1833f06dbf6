//! A server whose listen (accept) queue overflows: connections arrive
//! faster than it accepts them, the kernel turns the SYNs beyond its
//! listen backlog away (`ListenOverflows`), and each such client waits
//! for its SYN retransmit — 1 s, then 3 s — before it is served. Nothing
//! on the server is busy for that wait, so no resource shows it; the
//! users' time does. In a closed loop, from the peak on, a step where the
//! server's host counted ≥ 10 overflows and its operations over 1 s held
//! at least a fifth of the users' time (counting those still held at the
//! window's end), and whose server's threads (when followed) waited for
//! requests, had room, is limited by the listen backlog: an admission
//! limit of the server's own configuration (its `listen()` backlog, which
//! `net.core.somaxconn` caps), not a resource.

use super::super::capacity::load_text;
use super::super::points::StepPoint;
use super::{Bottleneck, RunShape};
use crate::units::Percent;

/// The verdict's name.
pub(crate) const NAME: &str = "admission limit (listen backlog)";

/// Overflows in a step from which the listen queue is looked at.
const OVERFLOWS: f64 = 10.0;

/// Share of the users' time held in operations over 1 s from which the
/// listen queue, not the server's work, set the throughput.
const HELD: f64 = 0.2;

/// The share of a closed-loop step's users' time spent in operations
/// over 1 s: those served and those still held at the window's end, each
/// at its own time (a SYN retransmitted twice waited 3 s).
fn held_share(p: &StepPoint) -> Option<f64> {
    let window = p.completed as f64 / p.throughput;
    let users_time = p.load * window;
    (p.throughput > 0.0 && users_time > 0.0).then(|| p.held_over_1s_s / users_time)
}

/// The verdict of a closed loop the listen queue's overflows held back,
/// when one is.
pub(crate) fn verdict(points: &[StepPoint], shape: RunShape, peak: usize) -> Option<Bottleneck> {
    if !shape.closed {
        return None;
    }
    let (p, share) = points[peak..].iter().find_map(|p| {
        // Workers that never waited for a request had no room for more:
        // the queue past them is theirs (see `workers`).
        if super::workers::never_idle(p).is_some() {
            return None;
        }
        let overflows = p.extras.listen_overflows?;
        let share = held_share(p)?;
        (overflows >= OVERFLOWS && share >= HELD).then_some((p, share))
    })?;
    let trend: Vec<String> = points
        .iter()
        .filter_map(|q| Some(format!("{:.0}", q.extras.listen_overflows?)))
        .collect();
    let evidence = vec![
        format!(
            "a full listen queue turned away {:.0} connection attempts at {} (TCP ListenOverflows on the server's host; by step: {})",
            p.extras.listen_overflows.unwrap_or(0.0),
            load_text(p),
            trend.join(" → ")
        ),
        format!(
            "{} of operations at {} took over 1 s, each a client waiting for its SYN retransmit (1 s, then 3 s): with those still waiting at the window's end they held {} of the users' time there",
            Percent(p.over_1s),
            load_text(p),
            Percent(share.min(1.0))
        ),
        format!(
            "an accepted request was served in {} (p50): the wait is before the server, in its listen queue",
            crate::units::Latency(p.response.p50)
        ),
    ];
    Some(Bottleneck::admission_limit(NAME.to_string(), evidence,
            "raise the server's listen backlog (nginx: listen … backlog=N; a socket's listen() argument), which net.core.somaxconn caps, or let it accept sooner (more workers, multi_accept)"
                .to_string(),
        ))
}
