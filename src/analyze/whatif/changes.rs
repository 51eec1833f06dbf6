//! The changes a what-if predicts for its bottleneck centre: twice its
//! capacity (a confined server's CPUs up to what the host has, shared
//! with perflab where the host has no more room; a link faster in both
//! directions and at both ends) and out of the way altogether, each as
//! the network of centres after it, in words.

use super::{Centre, Changed, HostRoom};
use crate::analyze::points::ResourceKind;
use crate::units::{Latency, Percent};

/// One change to predict.
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub(super) words: String,
    /// The network after it.
    pub(super) after: Vec<Centre>,
    /// The CPUs the server has after it, for a change of its CPUs.
    pub(super) server_cpus: Option<f64>,
    /// The memory limit the server has after it, bytes, for a change of
    /// its memory.
    pub(super) server_memory: Option<f64>,
    pub(super) changed: Changed,
    /// The network at the two ends of what the change itself leaves
    /// uncertain (the cache a memory limit gives), when it does.
    pub(super) ends: Option<[Vec<Centre>; 2]>,
    /// The relative uncertainty the change adds to its interval: for a
    /// server's CPUs shared with perflab, how far the host's CPU per
    /// operation moved over the run's loads ([`HostRoom::handoff_spread`]).
    pub(super) sharing: f64,
    /// Seconds per operation the change moves out of the delay into a
    /// centre: perflab's own work, which ran beside the server's CPUs
    /// (in the delay, in series with each operation) and now queues on
    /// them.
    pub(super) moved_s: f64,
    /// A limit after the change that was measured far from busy is a
    /// floor, not a figure ([`super::floor`]): a change that moves the
    /// limit off a resource which kept the rest idle (memory, the log).
    pub(super) idle_floor: bool,
    /// Seconds an operation the change spares its reads from storage
    /// takes at most at the lowest load: the median of that load's
    /// responses, reads and all, for a cache that then reads none; zero
    /// otherwise. The delay after the change is at least this less the
    /// queues after it ([`super::closed`]).
    pub(super) read_free_s: f64,
}

impl Change {
    pub(super) fn of(
        words: String,
        after: Vec<Centre>,
        server_cpus: Option<f64>,
        changed: Changed,
    ) -> Self {
        Change {
            words,
            after,
            server_cpus,
            server_memory: None,
            changed,
            ends: None,
            sharing: 0.0,
            moved_s: 0.0,
            idle_floor: false,
            read_free_s: 0.0,
        }
    }
}

/// The interface a link centre's name holds: `link eth0 tx`,
/// `link veth0 (tbf)`, `link veth1 in the server's namespace (tbf)`.
fn interface(name: &str) -> Option<&str> {
    name.strip_prefix("link ")?.split(' ').next()
}

/// The other centres of the link `target` is part of: a link is faster
/// or gone in both directions at once. They are the centres of the same
/// interface (its two directions, the queueing discipline on it) and,
/// for the server's own link (a shaped pair whose far end is in the
/// server's namespace), the shaped far end — paired when there is one
/// shaped interface on each side, so that no other shaped link is taken
/// for it.
pub(super) fn same_link(target: &Centre, centres: &[Centre]) -> Vec<String> {
    if target.kind != ResourceKind::Link {
        return Vec::new();
    }
    let Some(iface) = interface(&target.name) else {
        return Vec::new();
    };
    let links = || centres.iter().filter(|c| c.kind == ResourceKind::Link);
    let far = |c: &&Centre| c.name.contains(" in the server's namespace ");
    let shaped = |c: &&Centre| c.name.ends_with(')');
    let sides: Vec<Option<&str>> = [true, false]
        .iter()
        .map(|&in_namespace| {
            let mut names: Vec<&str> = links()
                .filter(|c| shaped(c) && far(c) == in_namespace)
                .filter_map(|c| interface(&c.name))
                .collect();
            names.dedup();
            (names.len() == 1).then(|| names[0])
        })
        .collect();
    let peer = match (sides[0], sides[1]) {
        (Some(ns), Some(host)) if ns == iface => Some(host),
        (Some(ns), Some(host)) if host == iface => Some(ns),
        _ => None,
    };
    links()
        .filter(|c| c.name != target.name)
        .filter(|c| interface(&c.name).is_some_and(|i| i == iface || Some(i) == peer))
        .map(|c| c.name.clone())
        .collect()
}

/// The changes worth predicting for a bottleneck centre. A confined
/// server gets twice what it had, at most the host's CPUs; where that is
/// more than the host has besides perflab's own use, perflab's work per
/// operation shares the server's CPUs. None when that gives no more than
/// it had.
pub(super) fn changes(target: &Centre, centres: &[Centre], room: Option<HostRoom>) -> Vec<Change> {
    let (more, shared_s) = cpus_after_doubling(target, room);
    let group = same_link(target, centres);
    let changed = |c: &Centre| c.name == target.name || group.contains(&c.name);
    let both = if group.is_empty() { "" } else { " (both ways)" };
    let doubled: Vec<Centre> = centres
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if changed(&c) {
                match c.kind {
                    ResourceKind::Disk | ResourceKind::Link => c.demand_s /= 2.0,
                    _ => {
                        c.servers = more;
                        c.demand_s += shared_s;
                    }
                }
            }
            c
        })
        .collect();
    let grows = match target.kind {
        ResourceKind::Disk | ResourceKind::Link | ResourceKind::Cpu => true,
        _ => more / (target.demand_s + shared_s) > target.bound() * 1.05,
    };
    let cleared: Vec<Centre> = centres.iter().filter(|c| !changed(c)).cloned().collect();
    let (cpus_after, factor) = match target.kind {
        ResourceKind::Cpu | ResourceKind::OneCpu | ResourceKind::CpuQuota => {
            (Some(more), more / target.servers)
        }
        ResourceKind::Disk | ResourceKind::Link => (None, 2.0),
    };
    let kind = target.kind;
    let mut out = Vec::new();
    if grows {
        let twice = doubling_words(target, more, shared_s, room, both);
        let changed = Changed {
            kind,
            factor: Some(factor),
        };
        out.push(Change {
            sharing: sharing(shared_s, room),
            moved_s: shared_s,
            ..Change::of(twice, doubled, cpus_after, changed)
        });
    }
    let gone = Changed { kind, factor: None };
    out.push(Change::of(
        format!("{} out of the way{both}", target.name),
        cleared,
        None,
        gone,
    ));
    out
}

/// The servers a CPU centre has once doubled (a confined server's at most
/// the host's CPUs), and the seconds of perflab's work per operation that
/// land on them when the host has no more room than that.
fn cpus_after_doubling(target: &Centre, room: Option<HostRoom>) -> (f64, f64) {
    let want = match target.kind {
        ResourceKind::Cpu => target.servers * 2.0,
        ResourceKind::OneCpu => 2.0,
        ResourceKind::CpuQuota => target.servers * 2.0,
        ResourceKind::Disk | ResourceKind::Link => target.servers,
    };
    let confined = matches!(target.kind, ResourceKind::OneCpu | ResourceKind::CpuQuota);
    match room.filter(|_| confined) {
        Some(r) if r.cpus - r.perflab_cpus < want => {
            let more = want.min(r.cpus);
            let overlap = (more + r.perflab_cpus - r.cpus).clamp(0.0, r.perflab_cpus);
            let share = if r.perflab_cpus > 0.0 {
                overlap / r.perflab_cpus
            } else {
                0.0
            };
            (more, r.perflab_cpu_per_op_s * share)
        }
        _ => (want, 0.0),
    }
}

/// What sharing the server's CPUs with perflab adds to a prediction's
/// interval: nothing when nothing of perflab's lands on them. Measured,
/// one CPU against two on a two-CPU host (perflab held to the second):
/// the host did an operation in 46 µs at the one-CPU server's peak and
/// 69 µs at one user, and in 36 µs at 4 users once the server had both
/// CPUs — the server and perflab then handed operations over on one CPU
/// as often as across two, which cost less — while at 16 users the
/// server's sessions woken by perflab crowded onto perflab's CPU and the
/// throughput fell by a third with the host 80% busy. One run holds
/// neither; how far its own work per operation moved with the way its
/// CPUs handed work over is the measure it has of how much that matters.
fn sharing(shared_s: f64, room: Option<HostRoom>) -> f64 {
    match room.and_then(|r| r.handoff_spread()) {
        Some(spread) if shared_s > 0.0 => spread,
        _ => 0.0,
    }
}

/// The host's CPU per operation over the run's loads, in words, for a
/// change whose interval counts it.
fn handoff_words(room: Option<HostRoom>) -> String {
    match room.and_then(|r| Some((r.cpu_per_op_s?, r.handoff_spread()?))) {
        Some(([least, most], spread)) if spread > 0.0 => format!(
            ", which changes how the CPUs hand each operation over: the host's CPU per operation moved {} over this run's loads ({} to {}), and the interval allows as much",
            Percent(spread),
            Latency::secs(least),
            Latency::secs(most)
        ),
        _ => String::new(),
    }
}

/// The doubling of a centre in words.
fn doubling_words(
    target: &Centre,
    more: f64,
    shared_s: f64,
    room: Option<HostRoom>,
    both: &str,
) -> String {
    let perflab_cpus = room.map_or(0.0, |r| r.perflab_cpus);
    match target.kind {
        ResourceKind::Cpu => format!("twice the CPUs ({})", target.servers * 2.0),
        ResourceKind::OneCpu if shared_s > 0.0 => format!(
            "the server allowed a second CPU besides {} (shared with perflab's {perflab_cpus:.2} CPUs{})",
            target.name,
            handoff_words(room),
        ),
        ResourceKind::OneCpu => {
            format!("the server allowed a second CPU besides {}", target.name)
        }
        ResourceKind::CpuQuota if shared_s > 0.0 => format!(
            "the server's CPU quota raised from {:.2} to {:.2} CPUs (shared with perflab's {perflab_cpus:.2}{})",
            target.servers,
            more,
            handoff_words(room),
        ),
        ResourceKind::CpuQuota => format!(
            "the server's CPU quota raised from {:.2} to {:.2} CPUs",
            target.servers, more
        ),
        ResourceKind::Disk => format!("{} twice as fast", target.name),
        ResourceKind::Link => format!("{} at twice the speed{both}", target.name),
    }
}
