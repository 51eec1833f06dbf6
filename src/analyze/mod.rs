//! The verdict of a run — what a performance engineer would conclude from
//! it: capacity and knee, each resource's use per step (the USE method),
//! service demands and the bounds they imply, the bottleneck with its
//! evidence, the latency anatomy and its anomalies, the Universal
//! Scalability Law fit, and the stability of each step. Pure functions of
//! a stored run: `perflab analyze RUN` gives what the run printed.

mod admission;
pub(crate) mod bottleneck;
pub(crate) mod capacity;
pub(crate) mod compare;
pub(crate) mod demands;
pub(crate) mod gate;
pub(crate) mod held;
pub(crate) mod history;
pub(crate) mod host;
pub(crate) mod iopath;
pub(crate) mod latency;
pub(crate) mod memory;
pub mod mva;
pub(crate) mod objectives;
mod open_files;
pub(crate) mod points;
pub(crate) mod stats;
pub(crate) mod threads;
pub(crate) mod usl;
pub(crate) mod whatif;

pub(crate) use bottleneck::{Bottleneck, RunShape};
pub(crate) use capacity::Knee;
pub(crate) use demands::Demands;
pub(crate) use latency::TailAnomaly;
pub(crate) use objectives::SloOutcome;
pub(crate) use points::StepPoint;
pub(crate) use usl::UslFit;

use crate::plan::{Level, Slo};
use crate::store::StoredRun;
use crate::sut::{Network, Target};
use crate::units::RateUnit;
use crate::workload::figures::Figures;
use host::{probe_sources, HostSource};
use serde::Serialize;

/// A step's throughput from interval to interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Stability {
    pub(crate) load: f64,
    /// Runs of the level (`--repeat`, `--max-repeat`).
    pub(crate) runs: usize,
    /// What the variation is over: `runs` when the level ran more than
    /// once, else `intervals` (of its one run).
    pub(crate) across: &'static str,
    /// Coefficient of variation of the throughputs.
    pub(crate) cv: Option<f64>,
    /// Over the bound (`--max-cv`, 5% by default): never stabilised.
    pub(crate) unstable: bool,
}

/// The whole verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Verdict {
    /// Where the server's resources were read: `this host` or a probe.
    pub(crate) server_host: String,
    pub(crate) points: Vec<StepPoint>,
    /// Steps left out (failed, cut short), by load.
    pub(crate) left_out: Vec<f64>,
    pub(crate) peak: Option<usize>,
    pub(crate) knee: Option<Knee>,
    pub(crate) slo: Option<SloOutcome>,
    pub(crate) demands: Option<Demands>,
    pub(crate) bottleneck: Option<Bottleneck>,
    pub(crate) tail: Vec<TailAnomaly>,
    pub(crate) usl: Option<UslFit>,
    /// Why no USL fit, when there is none.
    pub(crate) usl_not_fitted: Option<String>,
    pub(crate) stability: Vec<Stability>,
    pub(crate) max_cv: f64,
    /// What may have disturbed the measurement.
    pub(crate) caveats: Vec<String>,
    /// What a faster bottleneck, or none, would give (a resource
    /// bottleneck only).
    pub(crate) what_if: Option<whatif::WhatIf>,
    /// Why no prediction is made for the cure of this bottleneck (more
    /// memory, the log on a device of its own, a link without loss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) no_what_if: Option<String>,
    /// What the throughputs count: the workload's unit.
    pub(crate) rate_unit: RateUnit,
}

/// The coefficient-of-variation bound used when none is given.
pub(crate) use crate::plan::DEFAULT_MAX_CV;

/// Analyses a stored run against the objectives.
pub(crate) fn analyze(run: &StoredRun, slos: &[Slo], max_cv: f64) -> Verdict {
    let (source, server_host) = server_source(run);
    let mut points = Vec::new();
    let mut every_step = Vec::new();
    let mut left_out = Vec::new();
    let kernel_served = run.target_traits().kernel_served;
    let network = run_network(run);
    let unit = run.rate_unit();
    let figures = run.figures();
    for (i, step) in run.steps.iter().enumerate() {
        let mut p = StepPoint::of(step, source, unit);
        if matches!(source, HostSource::Local) {
            // A server the workload measured itself (a net run's echo agent
            // on this host): its CPU is the server's, and other work is what
            // the host did besides.
            if let Some(cpus) = figures.as_ref().and_then(|f| f.at(i)?.server_cpus) {
                p.extras.server_cpus.get_or_insert(cpus);
            }
        }
        keep_links_that_carry(&mut p.resources, network);
        if kernel_served {
            // No server process: the kernel serves the target in perflab's
            // system calls and in the threads of the devices its I/O
            // passes through (a loop device's worker, a journal): those
            // threads are the "server".
            p.extras
                .server_cpus
                .get_or_insert(p.io_path.kernel_cpus_total());
        }
        if kernel_served || run.target_traits().embedded {
            // Its storage I/O, too, is perflab's.
            p.extras.server_io_bytes_per_s.get_or_insert(0.0);
        }
        if p.complete && p.completed > 0 {
            points.push(p.clone());
        } else {
            left_out.push(p.load);
        }
        every_step.push(p);
    }
    let closed = run.steps.iter().all(|s| matches!(s.level, Level::Users(_)));
    let shape = RunShape {
        closed,
        embedded: run.target_traits().embedded,
        threads: run.plan.as_ref().map_or(1, |p| p.threads.max(1)) as u32,
        single_writer: run.target_traits().single_writer,
        kernel_served,
    };
    let seed = run.seed();
    let find = run.plan.as_ref().and_then(|p| p.find);
    let slo = objectives::outcome(&run.steps, &every_step, slos).map(|mut o| {
        if let Some(find) = find {
            objectives::note_budget(&mut o, run.steps.len(), find, closed);
        }
        objectives::with_verdicts(o, &points, |p| verdict_of(p, shape, max_cv, seed))
    });
    let mut verdict = verdict_of(points, shape, max_cv, seed);
    if let (Some(b), Some(o)) = (verdict.bottleneck.as_mut(), &slo) {
        if b.kind == bottleneck::BottleneckKind::NotReached {
            if let Some(next) = objectives::next_when_none_met(o, find.is_some(), closed) {
                b.next = Some(next);
            }
        }
    }
    verdict.slo = slo;
    verdict.rate_unit = unit;
    if server_host == "this host" {
        let others = others_on_the_host(&verdict.points, shape.embedded, shape.kernel_served);
        verdict.caveats.splice(0..0, others);
    }
    // Said once: the verdict's evidence when the overflows are its limit.
    if verdict
        .bottleneck
        .as_ref()
        .is_none_or(|b| b.name != bottleneck::backlog::NAME)
    {
        verdict
            .caveats
            .extend(latency::listen_overflows(&verdict.points, &server_host));
    }
    verdict.server_host = server_host;
    verdict.left_out = left_out;
    verdict.caveats.splice(0..0, stalls(run));
    if let Some(figures) = &figures {
        figures_evidence(run, figures, &mut verdict);
    }
    admission::apply(run, &mut verdict);
    verdict
}

/// A caveat per step in which the target stalled: its figures hold the
/// stall (the operations it held counted to the window's end), and a
/// verdict read off them is one about a server that stopped answering
/// for a while, not about its steady capacity.
fn stalls(run: &StoredRun) -> Vec<String> {
    run.steps
        .iter()
        .filter_map(|step| match &step.status {
            crate::engine::StepStatus::Stalled(why) => Some(format!(
                "the target stalled in step {} ({}): {why}; its latency counts the held operations to the window's end — look at the server then, or run the step again",
                step.index + 1,
                step.level
            )),
            _ => None,
        })
        .collect()
}

/// The verdict says, at its step, what the workload's own figures say
/// there (a net run: what a transaction cost each end, a shaped link that
/// was full). The verdict's points are the steps that completed, a
/// subset, so the step is found by its load.
fn figures_evidence(run: &StoredRun, figures: &Figures, verdict: &mut Verdict) {
    let Some(bottleneck) = verdict.bottleneck.as_mut() else {
        return;
    };
    let at = match (bottleneck.kind, verdict.peak) {
        (bottleneck::BottleneckKind::NotReached, _) | (_, None) => {
            verdict.points.len().checked_sub(1)
        }
        (_, peak) => peak,
    };
    let Some(load) = at.and_then(|i| verdict.points.get(i)).map(|p| p.load) else {
        return;
    };
    if let Some(step) = run
        .steps
        .iter()
        .position(|s| s.level.value() == load)
        .and_then(|i| figures.at(i))
    {
        bottleneck.evidence.extend(step.evidence.iter().cloned());
    }
}

/// Which network the run's traffic crossed, from its stored target.
fn run_network(run: &StoredRun) -> Network {
    if run.target == "in-process" {
        return Network::None;
    }
    Target::parse(&run.target).map_or(Network::Any, |t| t.network())
}

/// Keeps only the links that can have carried the run's traffic: none
/// when it crossed no network, loopback's alone when every address it
/// named was a loopback one. A link busy with others' traffic is no
/// candidate for what stopped the run.
fn keep_links_that_carry(resources: &mut Vec<points::ResourceUse>, network: Network) {
    let loopback = |r: &points::ResourceUse| r.name.split(' ').nth(1) == Some("lo");
    resources.retain(|r| {
        r.kind != points::ResourceKind::Link
            || match network {
                Network::None => false,
                Network::Loopback => loopback(r) && !r.name.contains("namespace"),
                Network::Any => true,
            }
    });
}

/// Where a run's server resources were read: its first remote probe when
/// it had one (the server's host), else this host; and its name.
pub(crate) fn server_source(run: &StoredRun) -> (HostSource<'_>, String) {
    match probe_sources(&run.steps).first() {
        Some(name) => (HostSource::Probe(name), name.to_string()),
        None => (HostSource::Local, "this host".to_string()),
    }
}

/// The verdict of a stored run by its own objectives, or by those given.
pub(crate) fn verdict_of_run(
    run: &StoredRun,
    slos: Option<Vec<Slo>>,
    max_cv: Option<f64>,
) -> Verdict {
    let plan = run.plan.as_ref();
    let slos = slos.unwrap_or_else(|| plan.map(|p| p.slos.clone()).unwrap_or_default());
    let max_cv = max_cv
        .or_else(|| plan.map(|p| p.max_cv))
        .unwrap_or(DEFAULT_MAX_CV);
    analyze(run, &slos, max_cv)
}

/// CPU used on this host by processes other than perflab and the server:
/// a step that shared the host with other work measured that work too.
fn others_on_the_host(points: &[StepPoint], embedded: bool, kernel_served: bool) -> Vec<String> {
    let stolen = points.iter().filter_map(|p| {
        let steal = p.extras.steal.filter(|s| *s >= 0.05)?;
        Some(format!(
            "at {} the hypervisor gave {} of the CPU time to other guests (steal): the host was shared",
            capacity::load_text(p),
            crate::units::Percent(steal)
        ))
    });
    let others = points
        .iter()
        .filter_map(|p| {
            let busy = p.extras.busy_cpus?;
            let server = if embedded {
                0.0
            } else {
                p.extras.server_cpus?
            };
            // The kernel threads of the devices the run's I/O passed
            // through worked for the run (counted already as the server
            // of a kernel-served target).
            let kernel = if embedded || kernel_served {
                0.0
            } else {
                p.io_path.kernel_cpus_total()
            };
            // Interrupts are no process's: the run's own completions and
            // packets are served there.
            let isr = p.extras.isr_cpus.unwrap_or(0.0);
            let others = busy - p.generator.cpus - server - kernel - isr;
            (others >= 0.3).then(|| {
                let mut text = format!(
                    "at {} other processes kept {:.2} CPUs busy besides perflab and the server: the host was not quiet",
                    capacity::load_text(p),
                    others
                );
                if let Some(niced) = p.extras.niced_unyielded_cpus.filter(|n| *n >= 0.1) {
                    text.push_str(&format!(
                        "; {:.2} CPUs of it ran at low priority (nice above 0), which gave no way: the kernel schedules each session as a group of equal weight (autogroup, /proc/sys/kernel/sched_autogroup_enabled), whatever its nice values",
                        niced.min(others)
                    ));
                }
                text
            })
        });
    // Niced work of others, once, where it was most.
    let yielded = points
        .iter()
        .filter_map(|p| Some((p, p.extras.yielded_cpus.filter(|y| *y >= 0.1)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(p, yielded)| {
            let mut text = format!(
                "at {} other processes ran {:.2} CPUs at low priority (nice above 0): counted as spare capacity, since the scheduler gives them way to the server and perflab",
                capacity::load_text(p),
                yielded
            );
            if let Some((waited, share)) = p.run_delay_per_op().filter(|(_, share)| *share >= 0.1) {
                text.push_str(&format!(
                    "; yet the server's threads waited for a CPU {} per operation there (schedstat run delay), {} of the response time: that work cost latency, if not capacity",
                    crate::units::Latency(waited),
                    crate::units::Percent(share)
                ));
            }
            text
        });
    // A busy disk that served others, once, at the highest load it did.
    let disk = points
        .iter()
        .filter_map(bottleneck::device::others_caveat)
        .next_back();
    stolen.chain(others).chain(yielded).chain(disk).collect()
}

/// The verdict of complete points (any order), for a run of this shape.
pub(crate) fn verdict_of(
    points: Vec<StepPoint>,
    shape: RunShape,
    max_cv: f64,
    seed: u64,
) -> Verdict {
    let groups = levels(points);
    let every_run: Vec<StepPoint> = groups.iter().flatten().cloned().collect();
    let stability = stability(&groups, max_cv);
    let points: Vec<StepPoint> = groups
        .into_iter()
        .map(|mut g| g.swap_remove(g.len() / 2))
        .collect();
    let mut verdict = Verdict {
        server_host: "this host".to_string(),
        points: Vec::new(),
        left_out: Vec::new(),
        peak: None,
        knee: None,
        slo: None,
        demands: None,
        bottleneck: None,
        tail: latency::tail_anomalies(&points),
        usl: None,
        usl_not_fitted: None,
        stability,
        max_cv,
        caveats: Vec::new(),
        what_if: None,
        no_what_if: None,
        rate_unit: points.first().map_or(RateUnit::default(), |p| p.unit),
    };
    if points.is_empty() {
        verdict.usl_not_fitted = Some("no complete step".to_string());
        return verdict;
    }
    let peak = points
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.throughput.total_cmp(&b.1.throughput))
        .map(|(i, _)| i)
        .unwrap_or(0);
    let closed = shape.closed;
    let knee = capacity::knee(&points);
    let demands = demands::demands(&points, closed, Some(peak));
    let unstable = !verdict.stability.is_empty() && verdict.stability.iter().all(|s| s.unstable);
    let found = bottleneck::bottleneck(&points, shape, peak, knee.as_ref(), &demands, unstable);
    let room = host_room(&points, peak, shape);
    verdict.what_if = whatif::what_if(&points, &demands, &found, closed, peak, room);
    if verdict.what_if.is_none() {
        verdict.no_what_if = whatif::not_predicted(&found, points.get(peak));
    }
    if found.kind != bottleneck::BottleneckKind::LoadGenerator {
        verdict.caveats = bottleneck::generator::little_breaches(&points, &demands);
    }
    verdict.bottleneck = Some(found);
    match usl_of(
        &every_run,
        closed,
        points.iter().any(|p| p.think_s > 0.0),
        seed,
    ) {
        Ok(fit) => verdict.usl = Some(fit),
        Err(why) => verdict.usl_not_fitted = Some(why),
    }
    verdict.peak = Some(peak);
    verdict.knee = knee;
    verdict.demands = Some(demands);
    verdict.points = points;
    verdict
}

/// Points sorted by load (then throughput), grouped into the runs of each
/// level.
fn levels(mut points: Vec<StepPoint>) -> Vec<Vec<StepPoint>> {
    points.sort_by(|a, b| {
        a.load
            .total_cmp(&b.load)
            .then(a.throughput.total_cmp(&b.throughput))
    });
    // Runs of one level (--repeat): the run of median throughput stands
    // for the level; their spread is its stability; all feed the USL fit.
    let mut groups: Vec<Vec<StepPoint>> = Vec::new();
    for p in points {
        match groups.last_mut() {
            Some(g) if g[0].load == p.load => g.push(p),
            _ => groups.push(vec![p]),
        }
    }
    groups
}

/// Each level's stability: its runs' throughputs vary (`--repeat`), or its
/// one run's intervals do.
fn stability(groups: &[Vec<StepPoint>], max_cv: f64) -> Vec<Stability> {
    groups
        .iter()
        .map(|g| {
            let (values, across) = if g.len() >= 2 {
                (g.iter().map(|p| p.throughput).collect(), "runs")
            } else {
                (g[0].interval_throughputs.clone(), "intervals")
            };
            let cv = (values.len() >= 2).then(|| crate::engine::coefficient_of_variation(&values));
            Stability {
                load: g[0].load,
                runs: g.len(),
                across,
                cv,
                unstable: cv.is_some_and(|c| c > max_cv),
            }
        })
        .collect()
}

/// What the host leaves for a what-if at the peak (step `peak` of
/// `points`): its CPUs, perflab's share, and how far the host's CPU per
/// operation moved over the steps up to the peak that kept its CPUs at
/// least half busy, as they are where more CPU matters (all of them
/// when fewer than two did: a step of idle CPUs also pays for waking
/// them); none for an embedded target (it shares perflab's).
fn host_room(points: &[StepPoint], peak: usize, shape: RunShape) -> Option<whatif::HostRoom> {
    let p = points.get(peak).filter(|_| !shape.embedded)?;
    let per_op = |least_busy: f64| -> Vec<f64> {
        points
            .iter()
            .take(peak + 1)
            .filter(|q| q.complete && q.throughput > 0.0)
            .filter_map(|q| {
                let cpu = q.resource("cpu").filter(|c| c.utilisation >= least_busy)?;
                Some(cpu.utilisation * cpu.servers / q.throughput)
            })
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect()
    };
    let busy = per_op(0.5);
    let per_op = if busy.len() >= 2 { busy } else { per_op(0.0) };
    let least = per_op.iter().copied().fold(f64::INFINITY, f64::min);
    let most = per_op.iter().copied().fold(0.0, f64::max);
    Some(whatif::HostRoom {
        cpus: p.resource("cpu")?.servers,
        perflab_cpus: p.generator.cpus,
        perflab_cpu_per_op_s: if p.throughput > 0.0 {
            p.generator.cpus / p.throughput
        } else {
            0.0
        },
        cpu_per_op_s: (per_op.len() >= 2).then_some([least, most]),
    })
}

/// The USL fitted on every run: concurrency is users for a closed loop
/// without think time, X·R (Little's law) otherwise.
fn usl_of(every_run: &[StepPoint], closed: bool, think: bool, seed: u64) -> Result<UslFit, String> {
    let (n, concurrency): (Vec<f64>, &'static str) = if closed && !think {
        (every_run.iter().map(|p| p.load).collect(), "users")
    } else {
        (
            every_run
                .iter()
                .map(|p| p.throughput * p.response_s())
                .collect(),
            "X·R (Little's law)",
        )
    };
    let x: Vec<f64> = every_run.iter().map(|p| p.throughput).collect();
    usl::fit(&n, &x, concurrency, seed)
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::bottleneck::BottleneckKind;
    use super::fixture::{mva_points, SHAPE};
    use super::*;
    use std::time::Duration;

    /// A shaped link that carried none of the run's traffic (another
    /// namespace's veth, a NIC beside a loopback run) is no candidate:
    /// only loopback's links stay for a loopback run, none for a run that
    /// crossed no network, all of them otherwise.
    #[test]
    fn only_links_that_carried_the_run_are_candidates() {
        let link = |name: &str| points::ResourceUse {
            name: name.to_string(),
            kind: points::ResourceKind::Link,
            servers: 1.0,
            utilisation: 1.0,
            saturation: None,
            errors: None,
        };
        let all = || {
            vec![
                link("link veth-other (tbf)"),
                link("link eth0 tx"),
                link("link lo (tbf)"),
                link("link lo in the server's namespace (tbf)"),
                points::ResourceUse {
                    kind: points::ResourceKind::Cpu,
                    ..link("cpu")
                },
            ]
        };
        let kept = |network| {
            let mut r = all();
            keep_links_that_carry(&mut r, network);
            r.into_iter().map(|r| r.name).collect::<Vec<_>>()
        };
        assert_eq!(kept(Network::Loopback), ["link lo (tbf)", "cpu"]);
        assert_eq!(kept(Network::None), ["cpu"]);
        assert_eq!(kept(Network::Any).len(), 5);
    }

    fn within(a: f64, b: f64, share: f64) -> bool {
        (a - b).abs() <= share * b
    }

    /// CPU 4 ms, disk 6 ms, with and without think time: the verdict names
    /// the disk, the demands come back within 10%, and the knee lies within
    /// one step of N* = (D+Z)/D_max.
    #[test]
    fn synthetic_mva_curves_give_back_their_truth() {
        for (think, users) in [
            (0.0, vec![1, 2, 3, 4, 6, 8, 12, 16]),
            (0.1, vec![1, 2, 4, 8, 12, 16, 20, 24, 32, 48, 64]),
        ] {
            let points = mva_points(0.004, 0.006, think, &users);
            let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
            let b = v.bottleneck.as_ref().unwrap();
            assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
            assert_eq!(b.name, "disk vda", "{b:?}");
            assert!(!b.ruled_out.is_empty());
            let demands = v.demands.as_ref().unwrap();
            let demand = |name: &str| {
                demands
                    .resources
                    .iter()
                    .find(|d| d.resource == name)
                    .unwrap()
                    .seconds
            };
            assert!(within(demand("cpu"), 0.004, 0.1), "{demands:?}");
            assert!(within(demand("disk vda"), 0.006, 0.1), "{demands:?}");
            let n_star = (0.010 + think) / 0.006;
            let knee = v.knee.as_ref().unwrap();
            // Within one step: the knee is the step just below or just above N*.
            let below = users
                .iter()
                .rev()
                .find(|u| f64::from(**u) <= n_star)
                .unwrap();
            let above = users.iter().find(|u| f64::from(**u) >= n_star).unwrap();
            let at = knee.load as u32;
            let lo = users[users
                .iter()
                .position(|u| u == below)
                .unwrap()
                .saturating_sub(1)];
            let hi =
                users[(users.iter().position(|u| u == above).unwrap() + 1).min(users.len() - 1)];
            assert!(
                (lo..=hi).contains(&at),
                "knee {at} for N* {n_star:.1}: {knee:?}"
            );
            assert!(within(demands.n_star.unwrap(), n_star, 0.1), "{demands:?}");
        }
    }

    /// The what-if of a disk-bound run: the model fitted on the measured
    /// demands reproduces the run, and its "disk twice as fast" is what
    /// exact MVA gives for CPU 4 ms, disk 3 ms; out of the way, the CPU
    /// limits next.
    #[test]
    fn the_what_if_of_a_faster_disk_matches_the_network_it_describes() {
        let users = [1, 2, 4, 8, 12, 16, 24, 32];
        for think in [0.0, 0.1] {
            let points = mva_points(0.004, 0.006, think, &users);
            let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
            let w = v
                .what_if
                .as_ref()
                .expect("a resource bottleneck has a what-if");
            assert!(w.credible, "{w:?}");
            let faster = &w.scenarios[0];
            assert_eq!(faster.change, "disk vda twice as fast");
            let truth = mva::solve(&[0.004, 0.003], think, 32).pop().unwrap();
            assert!(
                within(faster.throughput, truth.throughput, 0.05),
                "{faster:?} vs {truth:?}"
            );
            assert!(within(faster.response_s.unwrap(), truth.response_s, 0.1));
            assert_eq!(faster.limited_by.as_deref(), Some("cpu"));
            let cleared = &w.scenarios[1];
            assert_eq!(cleared.change, "disk vda out of the way");
            assert!(within(cleared.bound.unwrap(), 250.0, 0.1), "{cleared:?}");
        }
    }

    /// Niced work of others is reported once, where it was most, as spare
    /// capacity; with the server's wait for a CPU when that was a tenth
    /// or more of the response time. Without niced work, no such caveat.
    #[test]
    fn niced_neighbours_are_a_caveat_with_the_latency_they_cost() {
        let mut points = mva_points(0.0004, 0.0006, 0.0, &[1, 2, 4]);
        for (p, yielded) in points.iter_mut().zip([1.8, 1.5, 1.2]) {
            p.extras.yielded_cpus = Some(yielded);
            p.extras.busy_cpus = Some(0.3);
            p.extras.server_cpus = Some(0.2);
            p.generator.cpus = 0.1;
        }
        // At 1 user: 0.2 s/s of waiting over its throughput, per operation.
        let x = points[0].throughput;
        points[0].extras.server_run_delay = Some(0.2);
        let per_op = 0.2 / x;
        let caveats = others_on_the_host(&points, false, false);
        assert_eq!(caveats.len(), 1, "{caveats:?}");
        let c = &caveats[0];
        assert!(
            c.starts_with("at 1 user other processes ran 1.80 CPUs at low priority"),
            "{c}"
        );
        let share = per_op / points[0].response_s();
        assert!(
            c.contains(&format!(
                "{} of the response time",
                crate::units::Percent(share)
            )),
            "{c}"
        );
        points[0].extras.server_run_delay = Some(0.0);
        let c = &others_on_the_host(&points, false, false)[0];
        assert!(!c.contains("waited for a CPU"), "{c}");
        for p in &mut points {
            p.extras.yielded_cpus = Some(0.0);
        }
        assert!(others_on_the_host(&points, false, false).is_empty());
        // Under autogroup the niced work gave no way: it is others' busy
        // CPU, and the caveat says why it counts.
        points[2].extras.busy_cpus = Some(1.5);
        points[2].extras.niced_unyielded_cpus = Some(1.2);
        let caveats = others_on_the_host(&points, false, false);
        assert_eq!(caveats.len(), 1, "{caveats:?}");
        assert!(
            caveats[0].starts_with("at 4 users other processes kept 1.20 CPUs busy")
                && caveats[0].contains("; 1.20 CPUs of it ran at low priority (nice above 0), which gave no way: the kernel schedules each session as a group"),
            "{caveats:?}"
        );
    }

    /// Interrupts are no process's: a step whose only CPU beside perflab's
    /// and the server's served interrupts (a RAM-backed loop device's
    /// completions) was quiet; the same CPU in a process was not.
    #[test]
    fn interrupts_are_not_other_processes() {
        let mut points = mva_points(0.0004, 0.0006, 0.0, &[1, 2]);
        for p in &mut points {
            p.extras.busy_cpus = Some(1.5);
            p.extras.server_cpus = Some(0.6);
            p.generator.cpus = 0.5;
            p.extras.isr_cpus = Some(0.3);
        }
        assert!(others_on_the_host(&points, false, false).is_empty());
        points[1].extras.isr_cpus = Some(0.0);
        let caveats = others_on_the_host(&points, false, false);
        assert_eq!(caveats.len(), 1, "{caveats:?}");
        assert!(
            caveats[0].starts_with("at 2 users other processes kept 0.40 CPUs busy"),
            "{caveats:?}"
        );
    }

    /// Throughput that plateaus with every resource idle is contention.
    #[test]
    fn a_plateau_no_resource_explains_is_software_contention() {
        let mut points = mva_points(0.0004, 0.0006, 0.0, &[1, 2, 4, 8, 16, 32]);
        for (p, x) in points
            .iter_mut()
            .zip([100.0, 180.0, 200.0, 198.0, 196.0, 190.0])
        {
            p.throughput = x;
            // Little's law: R = N/X in a closed loop without think time.
            let r = Duration::from_secs_f64(p.load / x);
            p.response.mean = r;
            p.response.p50 = r;
            p.response.p95 = r * 3;
            for r in &mut p.resources {
                r.utilisation = x * 0.0005;
            }
            p.waits.insert("Lock".to_string(), 70);
            p.waits.insert("CPU".to_string(), 30);
        }
        let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
        // More hardware is no cure for contention: no what-if.
        assert!(v.what_if.is_none());
        let b = v.bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
        assert_eq!(b.name, "software contention (Lock waits)");
        assert!(b.ruled_out[0].contains("bound"), "{b:?}");
    }

    /// A generator throttled by its cgroup makes the verdict unreliable.
    #[test]
    fn a_throttled_generator_is_named_and_the_rest_unreliable() {
        let mut points = mva_points(0.004, 0.006, 0.0, &[1, 2, 4, 8, 16, 32]);
        points[3].generator.throttled_share = Some(0.4);
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::LoadGenerator);
        assert!(b.unreliable);
        assert!(
            b.evidence[0].contains("quota held it back for 40.0%"),
            "{b:?}"
        );
    }

    /// On generators, the busiest generator's use is the step's, and the
    /// verdict names that generator when it set the pace.
    #[test]
    fn a_saturated_generator_among_several_is_named() {
        let mut points = mva_points(0.004, 0.006, 0.0, &[1, 2, 4, 8, 16, 32]);
        points[4].generator.cpus = 1.95;
        points[4].generator.capacity = Some(2.0);
        points[4].busiest_generator = Some("agent://gen-2.perflab:7071".to_string());
        let b = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
        assert!(b.unreliable);
        assert!(
            b.evidence[0]
                .contains("generator agent://gen-2.perflab:7071 used 1.95 of the 2.00 CPUs"),
            "{b:?}"
        );
    }

    /// Throughput that keeps pace with load and idle resources: not reached.
    #[test]
    fn a_sweep_below_saturation_says_what_to_try_next() {
        let points = mva_points(0.0004, 0.0006, 1.0, &[1, 2, 4, 8]);
        let v = verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1);
        let b = v.bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
        assert!(b.next.unwrap().contains("--users"));
        assert_eq!(v.usl, None);
        assert!(v.usl_not_fitted.unwrap().contains("4 load levels"));
    }
}
