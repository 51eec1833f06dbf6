//! A hardware resource that ran out: at the peak or after it, a resource
//! is ≥ 90% busy per server while its work per operation stayed within
//! 1.5× of the fitted demand (the utilisation law; USE method: utilisation
//! first). A CPU the server is confined to — one CPU while the host has
//! room, or its cgroup's CPU quota — is named `cpu` with the confinement
//! as evidence; one CPU of several counts only when the server is held to
//! it or it stands 20 points above the others (not the scheduler's
//! scatter); a busy disk while memory is short is `memory → disk
//! reads`; a link shaped by a queueing discipline is judged against the
//! shaper's rate, not the interface's nominal speed. CPU busy shares leave
//! out others' niced time (spare to the server; see
//! `HostSample::cpu_yielded`), and a saturated CPU's evidence says how
//! long the server's threads waited for it per operation (run delay).

use super::super::capacity::load_text;
use super::super::demands::Demands;
use super::super::points::{ResourceKind, ResourceUse, StepPoint};
use super::waits::{WaitMeaning, Waits};
use super::{memory_evidence, Bottleneck, BottleneckKind};
use crate::units::{Latency, Percent};

/// Busy share per server from which a resource has run out.
pub(crate) const SATURATED: f64 = 0.9;
/// Work per operation grown past this multiple of the fitted demand is
/// spinning or retrying, not serving.
pub(crate) const GROWN: f64 = 1.5;

/// A resource at its busiest step from the peak on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Busiest<'a> {
    pub(crate) at: usize,
    pub(crate) resource: &'a ResourceUse,
    /// Work per operation there over the fitted demand.
    pub(crate) growth: Option<f64>,
}

/// A CPU the server is confined to (one CPU, a quota) this busy is its
/// limit even when its work per operation grew: lock holders pre-empted on
/// it make every operation cost more, unless operations were retried.
pub(crate) const CONFINED: f64 = 0.95;

/// Whether a resource at a step counts as run out: ≥ 90% busy without
/// working harder per operation, or a confined CPU ≥ 95% busy without
/// retries.
fn ran_out(q: &StepPoint, r: &ResourceUse, growth: Option<f64>) -> bool {
    let confined = matches!(r.kind, ResourceKind::OneCpu | ResourceKind::CpuQuota);
    let retried = super::contention::retried(q);
    r.utilisation >= SATURATED
        && (growth.is_none_or(|g| g <= GROWN)
            || (confined && r.utilisation >= CONFINED && !retried))
}

/// Every resource of the peak step at a step from the peak on where it ran
/// out (the busiest such), else at its busiest from the peak on.
pub(crate) fn busiest<'a>(
    points: &'a [StepPoint],
    peak: usize,
    demands: &Demands,
) -> Vec<Busiest<'a>> {
    points[peak]
        .resources
        .iter()
        .filter_map(|r| {
            let fitted = demands.resources.iter().find(|d| d.resource == r.name);
            let at = |i: usize| {
                let q = &points[i];
                let resource = q.resource(&r.name)?;
                let growth = fitted
                    .filter(|_| q.throughput > 0.0)
                    .map(|d| resource.servers * resource.utilisation / q.throughput / d.seconds);
                Some(Busiest {
                    at: i,
                    resource,
                    growth,
                })
            };
            let candidates: Vec<Busiest<'a>> = (peak..points.len()).filter_map(at).collect();
            let most = |a: &&Busiest<'a>, b: &&Busiest<'a>| {
                a.resource.utilisation.total_cmp(&b.resource.utilisation)
            };
            candidates
                .iter()
                .filter(|b| ran_out(&points[b.at], b.resource, b.growth))
                .max_by(most)
                .or_else(|| candidates.iter().max_by(most))
                .copied()
        })
        .collect()
}

/// The CPUs the server's own processes used at a step: none of their own
/// for a target that runs in perflab's threads (embedded SQLite, the null
/// target), whose CPU is counted as perflab's.
fn own_server_cpus(p: &StepPoint, embedded: bool) -> Option<f64> {
    if embedded {
        Some(0.0)
    } else {
        p.extras.server_cpus
    }
}

/// Whether the host's CPUs at a step were busy mostly with other work than
/// the followed server's and perflab's: then they are the neighbours'
/// limit (a caveat says so), not the server's.
pub(crate) fn others_dominate(p: &StepPoint, embedded: bool) -> bool {
    let (Some(busy), Some(server)) = (p.extras.busy_cpus, own_server_cpus(p, embedded)) else {
        return false;
    };
    busy > 0.0 && server + p.generator.cpus < 0.5 * busy
}

/// A CPU resource kept busy by others: the host's CPUs mostly with other
/// work, or one CPU on which the server (perflab's threads, for an
/// embedded target) used under half of what was busy — all of its CPU
/// time on that one CPU could not have kept it that busy.
fn neighbours(p: &StepPoint, r: &ResourceUse, embedded: bool) -> bool {
    match r.kind {
        ResourceKind::Cpu => others_dominate(p, embedded),
        ResourceKind::OneCpu => {
            let server = if embedded {
                Some(p.generator.cpus)
            } else {
                p.extras.server_cpus
            };
            server.is_some_and(|server| server < 0.5 * r.utilisation)
        }
        _ => false,
    }
}

/// Whether others' work, not the run's, kept a resource busy at a step:
/// a CPU (see [`neighbours`]) or a disk busy with others' I/O.
pub(crate) fn others_kept_busy(p: &StepPoint, r: &ResourceUse, embedded: bool) -> bool {
    neighbours(p, r, embedded) || super::device::others_io(p, r)
}

/// Points by which one CPU must be busier than the mean of the others to
/// stand out as a limit of its own when the server may use several: a
/// thread or an interrupt load held to it, not the scheduler's scatter.
pub(crate) const STANDS_OUT: f64 = 0.2;

/// Whether one CPU can be a limit of its own at a step: the server is
/// confined to a single CPU (its cpuset or affinity), or this CPU is
/// [`STANDS_OUT`] busier than the mean of the others. A server free to run
/// on every CPU is limited by them together, not by the busier of two.
fn one_cpu_is_a_limit(p: &StepPoint, r: &ResourceUse) -> bool {
    if p.extras.server_cpus_allowed.is_some_and(|c| c < 1.5) {
        return true;
    }
    let others: Vec<f64> = p
        .resources
        .iter()
        .filter(|o| o.kind == ResourceKind::OneCpu && o.name != r.name)
        .map(|o| o.utilisation)
        .collect();
    if others.is_empty() {
        return true;
    }
    let mean = others.iter().sum::<f64>() / others.len() as f64;
    r.utilisation - mean >= STANDS_OUT
}

/// The saturated resources, the likeliest bottleneck first: the busiest,
/// a quota the server is held to before the host's CPUs, the host's CPUs
/// before a single CPU unless that one is busier by more than 2 points (a
/// server held to it).
pub(crate) fn saturated<'a>(
    points: &[StepPoint],
    all: &[Busiest<'a>],
    embedded: bool,
) -> Vec<Busiest<'a>> {
    let mut out: Vec<Busiest<'a>> = all
        .iter()
        .filter(|b| ran_out(&points[b.at], b.resource, b.growth))
        .filter(|b| !neighbours(&points[b.at], b.resource, embedded))
        .filter(|b| {
            b.resource.kind != ResourceKind::OneCpu || one_cpu_is_a_limit(&points[b.at], b.resource)
        })
        .filter(|b| {
            b.resource.kind != ResourceKind::Disk
                || !(super::device::still_scaling(points, b.at)
                    || super::device::others_io(&points[b.at], b.resource))
        })
        .copied()
        .collect();
    let rank = |r: &ResourceUse| {
        r.utilisation
            + match r.kind {
                ResourceKind::CpuQuota => 0.05,
                ResourceKind::Cpu => 0.02,
                _ => 0.0,
            }
    };
    out.sort_by(|a, b| rank(b.resource).total_cmp(&rank(a.resource)));
    out
}

/// The verdict for a saturated resource.
pub(crate) fn verdict(
    points: &[StepPoint],
    peak: usize,
    found: Busiest<'_>,
    demands: &Demands,
    waits: &Waits,
) -> Bottleneck {
    let (at, r) = (found.at, found.resource);
    let p = &points[peak];
    let q = &points[at];
    let mut evidence = how_busy(points, at, p, r, demands);
    let mut name = r.name.clone();
    if let Some(confined) = confined_cpu(r, q, &mut evidence) {
        name = confined;
    }
    if r.kind.is_cpu() {
        cpu_evidence(q, waits, &mut evidence);
    }
    if r.kind == ResourceKind::Disk {
        evidence.extend(super::device::saturated(points, peak, at, r));
        if memory_short(q, &mut evidence) {
            name = "memory → disk reads".to_string();
        }
    }
    if r.kind == ResourceKind::Link && r.name.ends_with(')') {
        evidence.push(
            "the link's capacity is its queueing discipline's rate, not the interface's nominal speed"
                .to_string(),
        );
    }
    let ruled_out = ruled_out(p, r, demands);
    // Short memory shows as disk reads: a faster disk is not the cure.
    let resource = (!name.starts_with("memory")).then(|| r.name.clone());
    Bottleneck {
        kind: BottleneckKind::Resource,
        name,
        evidence,
        ruled_out,
        unreliable: false,
        next: None,
        resource,
    }
}

/// How busy the resource was where it ran out, step by step, and against
/// the bound its demand sets at the peak `p`.
fn how_busy(
    points: &[StepPoint],
    at: usize,
    p: &StepPoint,
    r: &ResourceUse,
    demands: &Demands,
) -> Vec<String> {
    let mut evidence = Vec::new();
    let mut line = format!(
        "{} {} busy at {}",
        r.name,
        Percent(r.utilisation),
        load_text(&points[at])
    );
    if let Some((name, v)) = &r.saturation {
        line.push_str(&format!(" ({name} {v:.2})"));
    }
    evidence.push(line);
    let trend: Vec<String> = points
        .iter()
        .filter_map(|q| {
            q.resource(&r.name)
                .map(|u| Percent(u.utilisation).to_string())
        })
        .collect();
    evidence.push(format!("{} by step: {}", r.name, trend.join(" → ")));
    if let Some((waited, share)) = points[at].run_delay_per_op().filter(|_| r.kind.is_cpu()) {
        evidence.push(format!(
            "the server's threads waited for a CPU {} per operation at {} ({} of the response time; schedstat run delay)",
            Latency(waited),
            load_text(&points[at]),
            Percent(share)
        ));
    }
    if let Some(d) = demands
        .resources
        .iter()
        .find(|d| d.resource == r.name)
        .filter(|d| p.throughput <= 1.05 * d.bound)
    {
        evidence.push(format!(
            "demand {} per operation → X ≤ {}; the peak {} is {} of that bound",
            Latency::secs(d.seconds),
            p.rate(d.bound),
            p.rate(p.throughput),
            Percent(p.throughput / d.bound)
        ));
    }
    evidence
}

/// For a CPU the server is confined to (one CPU, a cgroup quota), what
/// confines it, and the name the verdict gives that limit.
fn confined_cpu(r: &ResourceUse, q: &StepPoint, evidence: &mut Vec<String>) -> Option<String> {
    let host_cpu = q.resource("cpu").map_or(0.0, |c| c.utilisation);
    match r.kind {
        ResourceKind::OneCpu => {
            evidence.push(if host_cpu < 0.8 {
                format!(
                    "the host's CPUs were {} busy overall: the server is held to one CPU (pinned, or single-threaded)",
                    Percent(host_cpu)
                )
            } else {
                format!("the host's CPUs together were {} busy", Percent(host_cpu))
            });
            if let Some(line) = single_threaded(q) {
                evidence.push(line);
            }
            Some("cpu".to_string())
        }
        ResourceKind::CpuQuota => {
            let throttled = r.saturation.as_ref().map_or(String::new(), |(_, t)| {
                format!(", throttled in {} of its periods", Percent(*t))
            });
            evidence.push(format!(
                "the server's cgroup may use {:.2} CPUs (its CPU quota) and used {:.2} at {}{throttled}, while the host's CPUs were {} busy overall",
                r.servers,
                r.servers * r.utilisation,
                load_text(q),
                Percent(host_cpu)
            ));
            Some(format!(
                "cpu (the server's cgroup quota of {:.2} CPUs)",
                r.servers
            ))
        }
        _ => None,
    }
}

/// The server's work at `q` done by one single-threaded process (at least
/// half a CPU, and 70% of the server's CPU time), which no second CPU can
/// help: said when the saturated CPU is that process's.
fn single_threaded(q: &StepPoint) -> Option<String> {
    let one = q.extras.server_single_thread.filter(|c| *c >= 0.5)?;
    let all = q.extras.server_cpus.filter(|c| *c > 0.0)?;
    if q.extras.server_cpus_allowed.is_some_and(|a| a < 1.5) || one < 0.7 * all {
        return None;
    }
    Some(format!(
        "one single-threaded process of the server ran {:.2} CPUs of the server's {:.2} at {}: it cannot use a second CPU; more worker processes or threads (nginx's worker_processes, a pool) would",
        one,
        all,
        load_text(q)
    ))
}

/// Share of one CPU at which a single-threaded process is saturated: its
/// own time, with the interrupts and the scheduler's gaps on its CPU,
/// leave no more.
const ONE_PROCESS_SATURATED: f64 = 0.85;

/// A plateau explained by one single-threaded process of the server that
/// ran out of its one CPU while the host had CPU to spare (nginx with one
/// worker): no hardware resource is saturated, and more CPUs would not
/// help; more workers would. None when the server is pinned to one CPU
/// (that is the one-CPU verdict) or its work is spread over processes.
pub(crate) fn one_process(points: &[StepPoint], peak: usize) -> Option<Bottleneck> {
    let p = &points[peak];
    let one = p
        .extras
        .server_single_thread
        .filter(|c| *c >= ONE_PROCESS_SATURATED)?;
    let all = p.extras.server_cpus.filter(|c| *c > 0.0)?;
    if p.extras.server_cpus_allowed.is_some_and(|a| a < 1.5) || one < 0.7 * all {
        return None;
    }
    let trend: Vec<String> = points
        .iter()
        .filter_map(|q| q.extras.server_single_thread.map(|c| format!("{c:.2}")))
        .collect();
    let mut evidence = vec![
        format!(
            "one single-threaded process of the server ran {one:.2} CPUs at {} ({} of the server's CPU time): it cannot go faster, nor use a second CPU",
            load_text(p),
            Percent(one / all)
        ),
        format!("that process's CPU by step: {}", trend.join(" → ")),
    ];
    if let Some(cpu) = p.resource("cpu") {
        let spare = (1.0 - cpu.utilisation) * cpu.servers;
        evidence.push(format!(
            "the host's CPUs were {} busy: {spare:.2} CPUs to spare{}",
            Percent(cpu.utilisation),
            if spare < 0.3 {
                ", so more workers could gain little before the host's CPUs run out too"
            } else {
                ""
            }
        ));
    }
    if let Some(isr) = p.extras.cpu_isr.filter(|i| *i >= 0.1) {
        evidence.push(format!(
            "{} of CPU time went to interrupts (%ISR)",
            Percent(isr)
        ));
    }
    Some(Bottleneck {
        kind: BottleneckKind::Resource,
        name: "cpu (one single-threaded server process)".to_string(),
        evidence,
        ruled_out: Vec::new(),
        unreliable: false,
        next: Some(format!(
            "give the server more worker processes or threads{}",
            crate::sut::managed::advice(|a| a.more_workers)
                .map_or(String::new(), |a| format!(" ({a})"))
        )),
        resource: None,
    })
}

/// What else a saturated CPU did at `q`: interrupts, perflab's own share,
/// lock waits as its symptom.
fn cpu_evidence(q: &StepPoint, waits: &Waits, evidence: &mut Vec<String>) {
    if let Some(isr) = q.extras.cpu_isr.filter(|i| *i >= 0.1) {
        evidence.push(format!(
            "{} of CPU time went to interrupts (%ISR)",
            Percent(isr)
        ));
    }
    let g = &q.generator;
    if g.cpus > 0.0 {
        evidence.push(format!("perflab itself used {:.2} CPUs of it", g.cpus));
    }
    // The kernel threads of the devices the I/O passes through: a loop
    // device on tmpfs turns every I/O into a copy on a CPU.
    for (disk, cpus) in q.io_path.kernel_cpus.iter().filter(|(_, c)| **c >= 0.05) {
        let below = q.io_path.below(disk);
        let on = if below.is_empty() {
            String::new()
        } else {
            format!(" (on {})", below.join(" on "))
        };
        evidence.push(format!(
            "the kernel threads serving {disk}{on} used {cpus:.2} CPUs of it: the run's I/O is CPU work there"
        ));
    }
    // Sessions queue for a lock whose holder waits for the CPU.
    let locks = waits.share(WaitMeaning::is_contention);
    if locks >= 0.2 {
        evidence.push(format!(
            "the sessions also waited on locks in {} of samples: a symptom of the saturated CPU (lock holders pre-empted while others queue), not a separate limit",
            Percent(locks)
        ));
    }
}

/// Whether a busy disk at `q` is memory that is short (faults, swapping,
/// the server's own reads), with the evidence.
fn memory_short(q: &StepPoint, evidence: &mut Vec<String>) -> bool {
    let faults = q.extras.major_faults_per_s.unwrap_or(0.0);
    let swap = q.extras.swap_in_per_s.unwrap_or(0.0);
    if faults >= 50.0 || swap > 0.0 {
        evidence.push(format!(
            "the host faulted {faults:.0} pages/s in from disk and swapped in {swap:.0} pages/s: memory is short"
        ));
        true
    } else if let Some(memory) = memory_evidence(q) {
        evidence.extend(memory);
        true
    } else {
        false
    }
}

/// The next resource by demand, and how far its bound is from the peak `p`.
fn ruled_out(p: &StepPoint, r: &ResourceUse, demands: &Demands) -> Vec<String> {
    demands
        .resources
        .iter()
        .filter(|d| d.resource != r.name && !(d.kind.is_cpu() && r.kind.is_cpu()))
        .take(1)
        .filter_map(|d| {
            let u = p.resource(&d.resource)?.utilisation;
            Some(format!(
                "{}: {} busy at the peak; its bound {} is {:.1}× the peak",
                d.resource,
                Percent(u),
                p.rate(d.bound),
                d.bound / p.throughput.max(f64::MIN_POSITIVE)
            ))
        })
        .collect()
}
