//! A caching accelerator in front of an origin, from its own accounting
//! (the cache counters its log gave each step) and the processes of both:
//!
//! - **a cache too small for the working set** — the cache answers under
//!   95% of requests or bytes at the last step, its ratio did not rise
//!   from the first step to the last (a cold cache warming rises), and the
//!   origin sent more bytes over the measured windows than the cache
//!   holds: it sent again what the cache had to drop.
//! - **the origin** — throughput stopped growing while the origin's
//!   replies took at least half of the accelerator's time on requests,
//!   or the origin's processes worked harder than the accelerator's.
//! - **the accelerator's CPU** — throughput stopped growing with the
//!   cache answering ≥ 90% of requests and a CPU ≥ 90% busy, the
//!   accelerator's processes busier than the origin's; its share of
//!   interrupts and softirqs (the network stack's) is said.
//! - **the link** — throughput stopped growing with the cache answering
//!   ≥ 90% of requests and a link ≥ 90% busy.
//!
//! Nothing here decides a run without cache counters; a cache that fits
//! with none of these signs leaves the verdict to the other rules.

use super::super::capacity::{load_text, Knee};
use super::super::points::{ResourceKind, StepPoint};
use super::{Bottleneck, BottleneckKind};
use crate::units::{Bytes, Latency, Percent};

/// A hit ratio, by requests or bytes, over which the cache serves the
/// load itself.
const SERVES: f64 = 0.9;
/// A hit ratio, by requests or bytes, under which a cache the origin
/// overflowed misses enough to matter: a few heavy files refetched weigh
/// on the bytes long before the requests.
const MISSES: f64 = 0.95;
/// How much a warming cache's ratio rises from the first step to the
/// last.
const WARMING: f64 = 0.05;
/// The share of the accelerator's time on requests spent waiting for the
/// origin from which the origin sets the pace.
const ORIGIN_BOUND: f64 = 0.5;
/// A resource this busy is saturated.
const SATURATED: f64 = 0.9;

/// What the cache's log said over one step's window.
#[derive(Debug, Clone, Copy)]
struct Seen {
    hit_ratio: f64,
    byte_hit_ratio: f64,
    origin_requests: f64,
    origin_bytes: f64,
    /// The origin's time over the accelerator's time on requests.
    origin_share: Option<f64>,
    origin_seconds: f64,
}

impl Seen {
    fn of(p: &StepPoint) -> Option<Seen> {
        let get = |k: &str| p.db.get(k).copied();
        let requests = get("cache_requests").filter(|r| *r > 0.0)?;
        let served = get("served_bytes").unwrap_or(0.0);
        let origin_bytes = get("origin_bytes").unwrap_or(0.0);
        let request_seconds = get("request_seconds").unwrap_or(0.0);
        let origin_seconds = get("origin_seconds").unwrap_or(0.0);
        Some(Seen {
            hit_ratio: get("cache_hit").unwrap_or(0.0) / requests,
            byte_hit_ratio: if served > 0.0 {
                (1.0 - origin_bytes / served).clamp(0.0, 1.0)
            } else {
                1.0
            },
            origin_requests: get("origin_requests").unwrap_or(0.0),
            origin_bytes,
            origin_share: (request_seconds > 0.0)
                .then(|| (origin_seconds / request_seconds).min(1.0)),
            origin_seconds,
        })
    }

    /// The lower of the two ratios.
    fn ratio(&self) -> f64 {
        self.hit_ratio.min(self.byte_hit_ratio)
    }

    fn ratios_text(&self) -> String {
        format!(
            "{} of requests and {} of bytes",
            Percent(self.hit_ratio),
            Percent(self.byte_hit_ratio)
        )
    }
}

/// The accelerator's verdict, when the run went through one and one of
/// its rules holds.
pub(crate) fn verdict(
    points: &[StepPoint],
    peak: usize,
    knee: Option<&Knee>,
) -> Option<Bottleneck> {
    let seen: Vec<(usize, Seen)> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.complete)
        .filter_map(|(i, p)| Some((i, Seen::of(p)?)))
        .collect();
    if seen.is_empty() {
        return None;
    }
    if let Some(found) = too_small(points, &seen) {
        return Some(found);
    }
    // The others name what stopped throughput: they need it stopped,
    // and look at the step of its peak.
    knee?;
    let (at, here) = seen.iter().rev().find(|(i, _)| *i <= peak)?;
    let p = &points[*at];
    origin(p, here)
        .or_else(|| accelerator_cpu(p, here))
        .or_else(|| link(p, here))
}

/// The working set does not fit: low and not rising, and the origin sent
/// more than the cache holds.
fn too_small(points: &[StepPoint], seen: &[(usize, Seen)]) -> Option<Bottleneck> {
    let (first_at, first) = seen.first()?;
    let (last_at, last) = seen.last()?;
    if last.ratio() >= MISSES || last.ratio() > first.ratio() + WARMING {
        return None;
    }
    let max = points[*last_at].db.get("cache_max_bytes").copied()?;
    let sent: f64 = seen.iter().map(|(_, s)| s.origin_bytes).sum();
    if max <= 0.0 || sent <= max {
        return None;
    }
    let mut evidence = vec![if first_at == last_at {
        format!(
            "at {}, measured after its warm-up, the cache answered {}",
            load_text(&points[*last_at]),
            last.ratios_text()
        )
    } else {
        format!(
            "at {} the cache answered {}; at {} it answered {}: the ratio did not rise as a warming cache's does",
            load_text(&points[*last_at]),
            last.ratios_text(),
            load_text(&points[*first_at]),
            first.ratios_text()
        )
    }];
    evidence.push(format!(
        "the origin sent {} in {:.0} requests over the measured windows, {:.1}× the cache's {}: it sent again what the cache had to drop",
        Bytes(sent as u64),
        seen.iter().map(|(_, s)| s.origin_requests).sum::<f64>(),
        sent / max,
        Bytes(max as u64)
    ));
    Some(Bottleneck {
        kind: BottleneckKind::CacheTooSmall,
        name: "cache too small for the working set".to_string(),
        evidence,
        ruled_out: vec![
            "a cold cache filling: it fetches each file once, never more than it holds".to_string(),
        ],
        unreliable: false,
        next: Some(format!(
            "give the cache room for the working set{}, or vary it in a lab to find the knee",
            crate::sut::managed::advice(|a| a.cache_size)
                .map_or(String::new(), |a| format!(" ({a})"))
        )),
        resource: None,
    })
}

/// The origin's replies, or its processes, set the pace.
fn origin(p: &StepPoint, here: &Seen) -> Option<Bottleneck> {
    let share = here.origin_share.filter(|s| *s >= ORIGIN_BOUND);
    let origin_cpus = p.extras.origin_cpus;
    let busier = match (origin_cpus, p.extras.server_cpus) {
        (Some(o), Some(s)) => o > s && here.hit_ratio < SERVES,
        _ => false,
    };
    if share.is_none() && !busier {
        return None;
    }
    let mut evidence = vec![format!(
        "at {} the cache answered {}; {:.0} requests went to the origin",
        load_text(p),
        here.ratios_text(),
        here.origin_requests
    )];
    if let Some(share) = here.origin_share {
        evidence.push(format!(
            "waiting for the origin took {} of the accelerator's time on requests (its replies took {} each)",
            Percent(share),
            Latency::secs(here.origin_seconds / here.origin_requests.max(1.0))
        ));
    }
    if let Some(o) = origin_cpus {
        evidence.push(format!(
            "the origin's processes used {o:.2} CPUs, the accelerator's {}",
            p.extras
                .server_cpus
                .map_or("?".to_string(), |s| format!("{s:.2}"))
        ));
    }
    Some(Bottleneck {
        kind: BottleneckKind::Origin,
        name: "the origin".to_string(),
        evidence,
        ruled_out: vec![
            "the accelerator: its own work is the smaller part of each request's time".to_string(),
        ],
        unreliable: false,
        next: Some(format!(
            "a faster origin, or more hits: a larger cache or a longer time to live{}",
            crate::sut::managed::advice(|a| a.cache_ttl)
                .map_or(String::new(), |a| format!(" ({a})"))
        )),
        resource: None,
    })
}

/// The accelerator's CPU, serving hits.
fn accelerator_cpu(p: &StepPoint, here: &Seen) -> Option<Bottleneck> {
    if here.hit_ratio < SERVES {
        return None;
    }
    let cpu = p
        .resources
        .iter()
        .filter(|r| r.kind.is_cpu() && r.utilisation >= SATURATED)
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))?;
    if let (Some(o), Some(s)) = (p.extras.origin_cpus, p.extras.server_cpus) {
        if o >= s {
            return None;
        }
    }
    let mut evidence = vec![format!(
        "at {} {} was {} busy while the cache answered {}: the accelerator served from its cache",
        load_text(p),
        cpu.name,
        Percent(cpu.utilisation),
        here.ratios_text()
    )];
    if let Some(isr) = p.extras.cpu_isr {
        evidence.push(format!(
            "interrupts and softirqs (the network stack) took {} of all CPU time",
            Percent(isr)
        ));
    }
    if let Some(s) = p.extras.server_cpus {
        evidence.push(format!(
            "the accelerator's processes used {s:.2} CPUs{}",
            p.extras
                .origin_cpus
                .map_or(String::new(), |o| format!(", the origin's {o:.2}"))
        ));
    }
    Some(Bottleneck {
        kind: BottleneckKind::Resource,
        name: "the accelerator's CPU".to_string(),
        evidence,
        ruled_out: vec![format!(
            "the origin: it saw {:.0} requests, the cache answered the rest",
            here.origin_requests
        )],
        unreliable: false,
        next: None,
        resource: Some(cpu.name.clone()),
    })
}

/// The link, carrying hits.
fn link(p: &StepPoint, here: &Seen) -> Option<Bottleneck> {
    if here.hit_ratio < SERVES {
        return None;
    }
    let link = p
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::Link && r.utilisation >= SATURATED)
        .max_by(|a, b| a.utilisation.total_cmp(&b.utilisation))?;
    Some(Bottleneck {
        kind: BottleneckKind::Resource,
        name: link.name.clone(),
        evidence: vec![format!(
            "at {} {} was {} busy while the cache answered {}",
            load_text(p),
            link.name,
            Percent(link.utilisation),
            here.ratios_text()
        )],
        ruled_out: vec!["the accelerator's CPU and the origin: the link filled first".to_string()],
        unreliable: false,
        next: None,
        resource: Some(link.name.clone()),
    })
}
