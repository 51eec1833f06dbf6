//! What lies between the client and the server:
//!
//! - **network loss** — from the knee on, TCP retransmits are ≥ 1% of
//!   segments sent, at least twice the lowest load's rate, with a latency
//!   tail (≥ 0.5% over 200 ms, or a slow group apart from the body); or a
//!   queueing discipline on the path drops a share of packets on purpose
//!   (netem) with such a tail.
//! - **the network round trip** — throughput stopped growing while
//!   nothing on the server was busy and its sessions waited on their
//!   client (`Client:ClientRead`) in ≥ 50% of samples: the time goes
//!   outside the server, on the link or in the round trip, never in
//!   software contention.

use super::super::capacity::{load_text, Knee};
use super::super::points::StepPoint;
use super::waits::{WaitMeaning, Waits};
use super::{Bottleneck, BottleneckKind};
use crate::units::{Latency, Percent};

/// Share of the sessions' samples waiting on the client from which the
/// time is outside the server.
const CLIENT_BOUND: f64 = 0.5;

fn tail(p: &StepPoint) -> bool {
    p.over_200ms >= 0.005 || p.far_tail >= 0.002 || p.slow_group.is_some()
}

/// Loss that retransmissions and a latency tail show.
pub(crate) fn loss(points: &[StepPoint], knee: Option<&Knee>) -> Option<Bottleneck> {
    let from = knee.map_or(0, |k| k.at);
    let share = |p: &StepPoint| {
        let segs = p.extras.segments_out_per_s?;
        (segs > 0.0).then(|| p.extras.retransmits_per_s.unwrap_or(0.0) / segs)
    };
    let base = points
        .first()
        .and_then(|p| p.extras.retransmits_per_s)
        .unwrap_or(0.0);
    let hit = points[from..].iter().find(|p| {
        let retransmitting = share(p).is_some_and(|s| s >= 0.01)
            && p.extras.retransmits_per_s.unwrap_or(0.0) >= 2.0 * base.max(0.5);
        let dropping = p.extras.qdisc_loss.is_some_and(|l| l >= 0.005);
        (retransmitting || dropping) && tail(p)
    })?;
    let mut evidence = Vec::new();
    if let Some(r) = hit.extras.retransmits_per_s {
        evidence.push(format!(
            "at {} {:.1} TCP segments/s were retransmitted ({} of those sent), against {:.1}/s at the lowest load",
            load_text(hit),
            r,
            Percent(share(hit).unwrap_or(0.0)),
            base
        ));
    }
    if let Some(l) = hit.extras.qdisc_loss {
        evidence.push(format!(
            "a queueing discipline on the path drops {} of packets on purpose (netem loss)",
            Percent(l)
        ));
    }
    evidence.push(match hit.slow_group {
        Some(g) if hit.over_200ms < 0.005 || g.share > hit.over_200ms => format!(
            "{} of operations formed a slow group from {} up (its median {}) while the median was {}",
            Percent(g.share),
            Latency::secs(g.from_s),
            Latency::secs(g.median_s),
            Latency(hit.response.p50)
        ),
        _ => format!(
            "{} of operations took over 200 ms ({} over 1 s) while the median was {}",
            Percent(hit.over_200ms),
            Percent(hit.over_1s),
            Latency(hit.response.p50)
        ),
    });
    Some(Bottleneck {
        kind: BottleneckKind::NetworkLoss,
        resource: None,
        name: "network loss".to_string(),
        evidence,
        ruled_out: vec![
            "a busy resource: none of the server's was ≥ 90% busy at the peak".to_string(),
        ],
        unreliable: false,
        next: Some(
            "check the link's duplex and errors (perflab doctor, ethtool) on both ends".to_string(),
        ),
    })
}

/// The server waiting on its client while throughput stays flat.
pub(crate) fn round_trip(points: &[StepPoint], from: usize, waits: &Waits) -> Option<Bottleneck> {
    let client = waits.share(|m| m == WaitMeaning::Client);
    // The server idle between statements because it is busy elsewhere
    // (its CPU saturated, its lock holders pre-empted) is not waiting on
    // the link.
    let busy = points[from..]
        .iter()
        .flat_map(|p| p.resources.iter())
        .any(|r| r.utilisation >= 0.8);
    if client < CLIENT_BOUND || busy {
        return None;
    }
    let last = &points[points.len() - 1];
    let busiest = last
        .resources
        .iter()
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation));
    let mut evidence = vec![format!(
        "the database's sessions waited on their client in {} of samples from {} on: the server was idle between statements",
        Percent(client),
        load_text(&points[from])
    )];
    if let Some(r) = busiest {
        evidence.push(format!(
            "nothing on the server was 80% busy: the busiest resource, {}, at {} at {}",
            r.name,
            Percent(r.utilisation),
            load_text(last)
        ));
    }
    let first = &points[0];
    evidence.push(format!(
        "mean response {} at {} against {} at {}: the time went to the round trip between client and server",
        Latency(last.response.mean),
        load_text(last),
        Latency(first.response.mean),
        load_text(first)
    ));
    Some(Bottleneck {
        kind: BottleneckKind::Resource,
        name: "network round trip (the server waits on its client)".to_string(),
        evidence,
        ruled_out: vec![
            "software contention: the sessions waited on the client, not on each other".to_string(),
        ],
        unreliable: false,
        next: Some(
            "measure the link between client and server (its rate, shaping, latency: perflab doctor, or a probe on the server's host)".to_string(),
        ),
        resource: None,
    })
}
