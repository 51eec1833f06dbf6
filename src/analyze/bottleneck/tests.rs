//! The rules on synthetic runs built for each class of bottleneck the
//! verdict once got wrong: a knife-edge fall on a saturated CPU, a CPU
//! quota, commit waits on an idle-looking device, memory starvation read
//! through the server's own reads, the server waiting on its client, noise
//! that looks like a fall, failures that look like a generator.

use super::super::fixture::{mva_points, SHAPE};
use super::super::points::{ResourceKind, StepPoint};
use super::super::{verdict_of, Verdict, DEFAULT_MAX_CV};
use super::BottleneckKind;
use std::time::Duration;

use crate::analyze::fixture::resource;

/// A closed-loop curve with the given throughputs, idle resources and
/// Little's law holding, ready to be given the signs of a bottleneck.
fn curve(throughputs: &[f64]) -> Vec<StepPoint> {
    let users: Vec<u32> = (0..throughputs.len()).map(|i| 1 << i).collect();
    let mut points = mva_points(0.0004, 0.0006, 0.0, &users);
    for (p, x) in points.iter_mut().zip(throughputs) {
        p.throughput = *x;
        let r = Duration::from_secs_f64(p.load / x);
        p.response.mean = r;
        p.response.p50 = r;
        p.response.p95 = r * 3;
        p.interval_throughputs = vec![*x; 10];
        for r in &mut p.resources {
            r.utilisation = x * 0.0003;
        }
    }
    points
}

fn judge(points: Vec<StepPoint>) -> Verdict {
    verdict_of(points, SHAPE, DEFAULT_MAX_CV, 1)
}

fn waits(p: &mut StepPoint, pairs: &[(&str, u64)]) {
    for (k, n) in pairs {
        p.waits.insert(k.to_string(), *n);
    }
}

/// The server pinned to cpu0, 99% busy from 8 users on; the last step
/// falls to 80% of the peak with lock waits: still the CPU, the lock
/// waits said to be its symptom — whichever side of 85% the fall lands.
#[test]
fn a_saturated_pinned_cpu_is_the_bottleneck_whatever_the_last_step_does() {
    for last in [0.80, 0.90] {
        let xs = [900.0, 1700.0, 2600.0, 3000.0, 3000.0, 3000.0 * last];
        let mut points = curve(&xs);
        for (i, p) in points.iter_mut().enumerate() {
            let busy = (p.throughput / 3000.0).min(0.99);
            let busy = if i >= 3 { 0.99 } else { busy };
            p.resources
                .push(resource("cpu0", ResourceKind::OneCpu, 1.0, busy));
            p.resources
                .push(resource("cpu1", ResourceKind::OneCpu, 1.0, 0.3));
            p.resources[0].utilisation = (busy + 0.3) / 2.0;
            p.resources[0].servers = 2.0;
            p.extras.server_run_delay = Some(busy);
            waits(p, &[("Lock:transactionid", 40), ("CPU", 60)]);
        }
        let v = judge(points);
        let b = v.bottleneck.unwrap();
        assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
        assert_eq!(b.name, "cpu", "{b:?}");
        assert!(
            b.evidence
                .iter()
                .any(|e| e.contains("a symptom of the saturated CPU")),
            "{b:?}"
        );
        // The server's wait for its CPU is part of the evidence.
        assert!(
            b.evidence
                .iter()
                .any(|e| e.starts_with("the server's threads waited for a CPU")),
            "{b:?}"
        );
        // The what-if for a second CPU is made.
        let w = v.what_if.expect("a what-if for the pinned CPU");
        assert!(w.scenarios[0].change.contains("a second CPU"), "{w:?}");
    }
}

/// MariaDB at scale 1 on two CPUs it may both use: at the peak one CPU
/// is 93% busy and the other 85% (the scheduler's scatter, the host 89%),
/// then throughput falls, within the steps' noise, while the sessions wait
/// on row locks and the CPUs ease: contention, not "cpu1".
#[test]
fn the_busier_of_two_cpus_a_server_may_use_is_not_its_limit() {
    let xs = [350.0, 1865.0, 1364.0, 1341.0, 1455.0];
    let mut points = curve(&xs);
    for (i, p) in points.iter_mut().enumerate() {
        let (one, other) = [
            (0.61, 0.45),
            (0.933, 0.855),
            (0.84, 0.79),
            (0.82, 0.81),
            (0.82, 0.80),
        ][i];
        p.resources[0].servers = 2.0;
        p.resources[0].utilisation = (one + other) / 2.0;
        p.resources
            .push(resource("cpu0", ResourceKind::OneCpu, 1.0, other));
        p.resources
            .push(resource("cpu1", ResourceKind::OneCpu, 1.0, one));
        p.extras.server_cpus_allowed = Some(2.0);
        p.interval_throughputs = (0..10)
            .map(|k| p.throughput * if k % 2 == 0 { 0.88 } else { 1.12 })
            .collect();
        let locks = [5, 30, 74, 88, 93][i];
        waits(p, &[("Lock:row lock", locks), ("CPU", 100 - locks)]);
    }
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
    // Held to cpu1 (its affinity), the same CPU is the limit.
    for p in &mut points {
        p.extras.server_cpus_allowed = Some(1.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "cpu", "{b:?}");
}

/// A server held to half a CPU by its cgroup: named by its quota, with a
/// what-if of a larger quota that the host can give.
#[test]
fn a_cpu_quota_used_to_the_full_is_named() {
    let mut points = curve(&[400.0, 700.0, 800.0, 810.0, 805.0]);
    for p in &mut points {
        let used = (p.throughput / 810.0 * 0.5).min(0.495);
        p.resources.push(resource(
            "cpu quota",
            ResourceKind::CpuQuota,
            0.5,
            used / 0.5,
        ));
        p.resources[0].servers = 2.0;
        p.resources[0].utilisation = (used + 0.1) / 2.0;
        p.extras.cpu_quota_cpus = Some(0.5);
        p.generator.cpus = 0.1;
    }
    let v = judge(points);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert_eq!(b.name, "cpu (the server's cgroup quota of 0.50 CPUs)");
    assert!(
        b.evidence.iter().any(|e| e.contains("its CPU quota")),
        "{b:?}"
    );
    let w = v.what_if.expect("a what-if for the quota");
    assert_eq!(
        w.scenarios[0].change,
        "the server's CPU quota raised from 0.50 to 1.00 CPUs"
    );
    assert!(w.scenarios[0].throughput > 1.5 * 805.0, "{w:?}");
}

/// Commits wait on the log while the disk looks idle: commit I/O, not
/// contention.
#[test]
fn commit_waits_on_an_idle_looking_device_are_commit_io() {
    let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
    for p in &mut points {
        p.resources
            .push(resource("disk vdb", ResourceKind::Disk, 1.0, 0.01));
        waits(
            p,
            &[
                ("LWLock:WALWrite", 55),
                ("IO:WALSync", 20),
                ("Lock:transactionid", 10),
                ("CPU", 15),
            ],
        );
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert_eq!(b.name, "commit I/O (the log's device), saturated");
    assert!(b.evidence[0].contains("LWLock:WALWrite most"), "{b:?}");
    assert!(b.evidence.iter().any(|e| e.contains("vdb")), "{b:?}");
}

/// Data read through the server's own reads while its cgroup sits at its
/// memory limit: memory, not the CPU and not contention.
#[test]
fn reads_past_a_full_memory_cgroup_are_memory() {
    let mut points = curve(&[300.0, 520.0, 600.0, 610.0, 605.0]);
    for p in &mut points {
        waits(p, &[("IO:DataFileRead", 80), ("CPU", 20)]);
        p.extras.memory_limit_bytes = Some(64.0 * 1048576.0);
        p.extras.memory_usage_bytes = Some(63.5 * 1048576.0);
        p.extras.memory_limit_hits = Some(120.0);
        p.extras.server_read_bytes_per_s = Some(p.throughput * 8192.0);
        p.db.insert("blocks_hit".to_string(), 1000.0);
        p.db.insert("blocks_read".to_string(), 3000.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "memory → disk reads", "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("found 25.0% of the blocks")),
        "{b:?}"
    );
    assert!(
        b.evidence.iter().any(|e| e.contains("memory limit")),
        "{b:?}"
    );
    // Without a sign of short memory it is the I/O path.
    let mut points = curve(&[300.0, 520.0, 600.0, 610.0, 605.0]);
    for p in &mut points {
        waits(p, &[("IO:DataFileRead", 80), ("CPU", 20)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "disk reads (the I/O path)", "{b:?}");
}

/// A memory cgroup at its limit in the steps where the reads held the
/// users, but reclaimed a little below it at the last step, is still
/// short of memory: the evidence is the last step that showed it.
#[test]
fn reads_past_a_memory_cgroup_full_before_the_last_step_are_memory() {
    let mut points = curve(&[269.0, 258.0, 265.0, 267.0, 243.0]);
    let last = points.len() - 1;
    for (i, p) in points.iter_mut().enumerate() {
        waits(p, &[("IO:DataFileRead", 80), ("CPU", 20)]);
        p.extras.memory_limit_bytes = Some(96.0 * 1048576.0);
        let usage = if i == last { 80.0 } else { 95.5 };
        p.extras.memory_usage_bytes = Some(usage * 1048576.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "memory → disk reads", "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("95.5 MiB of its 96.0 MiB memory limit at 8 users")),
        "{b:?}"
    );
    // At no step near its limit: the I/O path.
    let mut points = curve(&[269.0, 258.0, 265.0, 267.0, 243.0]);
    for p in &mut points {
        waits(p, &[("IO:DataFileRead", 80), ("CPU", 20)]);
        p.extras.memory_limit_bytes = Some(96.0 * 1048576.0);
        p.extras.memory_usage_bytes = Some(80.0 * 1048576.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "disk reads (the I/O path)", "{b:?}");
}

/// The server waits on its client while nothing is busy: the round trip,
/// never contention.
#[test]
fn a_server_waiting_on_its_client_is_the_round_trip() {
    let mut points = curve(&[100.0, 180.0, 200.0, 199.0, 201.0]);
    for p in &mut points {
        waits(p, &[("Client:ClientRead", 95), ("CPU", 5)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert!(b.name.starts_with("network round trip"), "{b:?}");
}

/// A shaped link is judged against its shaper's rate.
#[test]
fn a_link_at_its_shapers_rate_is_the_bottleneck() {
    let mut points = curve(&[100.0, 180.0, 200.0, 199.0, 201.0]);
    for p in &mut points {
        let u = (p.throughput / 200.0).min(0.99);
        p.resources
            .push(resource("link veth0 (tbf)", ResourceKind::Link, 1.0, u));
        waits(p, &[("Client:ClientRead", 95), ("CPU", 5)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "link veth0 (tbf)", "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("queueing discipline's rate")),
        "{b:?}"
    );
}

/// A plateau with nothing to explain it is inconclusive, never
/// contention by elimination; with no step stable, even lock waits only
/// make contention a candidate.
#[test]
fn nothing_to_explain_a_plateau_is_inconclusive() {
    let points = curve(&[100.0, 180.0, 200.0, 199.0, 201.0]);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Inconclusive, "{b:?}");
    assert!(b.next.unwrap().contains("to decide"));
    let mut points = curve(&[100.0, 180.0, 200.0, 199.0, 201.0]);
    for p in &mut points {
        waits(p, &[("Lock:tuple", 35), ("CPU", 65)]);
        let x = p.throughput;
        p.interval_throughputs = (0..10).map(|i| x * (0.8 + 0.04 * f64::from(i))).collect();
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Inconclusive, "{b:?}");
    assert!(
        b.evidence[0].contains("software contention (row locks)"),
        "{b:?}"
    );
}

/// Row locks are named as such; retries that rise with load are said to.
#[test]
fn row_locks_and_rising_retries_name_contention() {
    let mut points = curve(&[500.0, 800.0, 900.0, 700.0, 500.0]);
    for (i, p) in points.iter_mut().enumerate() {
        waits(
            p,
            &[("Lock:transactionid", 60), ("Lock:tuple", 10), ("CPU", 30)],
        );
        p.retries = (p.throughput * 3.0 * i as f64 * 0.1) as u64;
        p.completed = (p.throughput * 3.0) as u64;
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "software contention (row locks)", "{b:?}");
    assert!(b.evidence[0].contains("fell to"), "{b:?}");
    assert!(
        b.evidence.iter().any(|e| e.contains("rose with load")),
        "{b:?}"
    );
}

/// A curve past its knee still rising at its last step (×1.36 for ×2
/// the load) while most of the sessions' samples are on a row lock, the
/// CPU a third busy: contention, the rise said beside it, not a limit
/// the curve approaches. The same rise with the samples on the CPU is
/// not reached.
#[test]
fn a_curve_still_rising_under_lock_waits_is_contention() {
    let rising = || curve(&[245.0, 308.0, 378.0, 441.0, 601.0]);
    let mut points = rising();
    for p in &mut points {
        waits(p, &[("Lock:transactionid", 87), ("CPU", 13)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
    assert!(
        b.evidence[1].starts_with("throughput still grew at the last step, 441 ops/s at 8 users → 601 ops/s at 16 users (×1.36 for ×2.00 the load)"),
        "{b:?}"
    );
    let mut points = rising();
    for p in &mut points {
        waits(p, &[("Lock:transactionid", 20), ("CPU", 80)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
}

/// A last step 3% under the peak, inside steps whose intervals vary by 4%,
/// is not a fall.
#[test]
fn a_fall_inside_the_noise_is_no_fall() {
    let mut points = curve(&[500.0, 1000.0, 2000.0, 3000.0, 3000.0 * 0.97]);
    // The knee at 8 users keeps a plateau; only the wording is at stake.
    for p in &mut points {
        let x = p.throughput;
        p.interval_throughputs = (0..10)
            .map(|i| x * if i % 2 == 0 { 1.04 } else { 0.96 })
            .collect();
        waits(p, &[("Lock:tuple", 50), ("CPU", 50)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert!(
        b.evidence[0].contains("within the steps' own variation"),
        "{b:?}"
    );
}

/// Failed operations keep no latency: a shortfall in Little's law they
/// can hold is not the generator's.
#[test]
fn failures_are_not_blamed_on_the_generator() {
    let mut points = curve(&[500.0, 800.0, 900.0, 700.0, 500.0]);
    for p in &mut points {
        p.completed = (p.throughput * 20.0) as u64;
        waits(p, &[("Lock:transactionid", 60), ("CPU", 40)]);
    }
    // A third of the users' time went into operations that failed.
    let last = points.last_mut().unwrap();
    last.error_rate = 0.3;
    last.response.mean = Duration::from_secs_f64(last.load / last.throughput * 0.7);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
}

/// Exact MVA curves with noise as large as real steps show (4% between
/// intervals, 3% on throughput): the resource, never contention, and no
/// bound below any step.
#[test]
fn noise_alone_never_makes_contention_and_bounds_hold_every_step() {
    use rand::{Rng, SeedableRng};
    for seed in 0..40 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let users = [1, 2, 4, 8, 16, 32, 64];
        let mut points = mva_points(0.004, 0.006, 0.0, &users);
        for p in &mut points {
            let x = p.throughput * rng.gen_range(0.97..1.03);
            p.throughput = x;
            p.interval_throughputs = (0..10).map(|_| x * rng.gen_range(0.93..1.07)).collect();
            for r in &mut p.resources {
                r.utilisation = (r.utilisation * rng.gen_range(0.97..1.03)).min(1.0);
            }
        }
        let v = judge(points);
        let b = v.bottleneck.as_ref().unwrap();
        assert_ne!(
            b.kind,
            BottleneckKind::SoftwareContention,
            "seed {seed}: {b:?}"
        );
        let d = v.demands.as_ref().unwrap();
        for p in &v.points {
            for r in &d.resources {
                assert!(
                    r.bound >= p.throughput * 0.999_999,
                    "seed {seed}: {} bound {} under {} at {}",
                    r.resource,
                    r.bound,
                    p.throughput,
                    p.load
                );
            }
        }
    }
}

/// Background work on the CPU at low load (another process) does not make
/// a bound below what was measured.
#[test]
fn a_busy_low_load_step_gives_no_bound_under_the_peak() {
    let mut points = curve(&[1000.0, 2000.0, 4000.0, 8000.0, 9000.0, 9100.0]);
    for p in &mut points {
        p.resources = vec![resource(
            "cpu",
            ResourceKind::Cpu,
            2.0,
            (0.3 + p.throughput / 9100.0 * 0.55).min(0.85),
        )];
    }
    let v = judge(points);
    let d = v.demands.unwrap();
    let cpu = &d.resources[0];
    assert!(cpu.bound >= 9100.0, "{cpu:?}");
}

/// Sessions queued on row locks whose holders wait on the log: commit
/// I/O, the lock queue its symptom; with holders on the CPU instead, row
/// lock contention.
#[test]
fn lock_holders_waiting_on_the_log_are_commit_io() {
    let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
    for p in &mut points {
        waits(
            p,
            &[
                ("Lock:transactionid", 53),
                ("LWLock:WALWrite", 20),
                ("IO:WALSync", 12),
                ("CPU", 10),
                ("Client:ClientRead", 5),
            ],
        );
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "commit I/O (the log's device), saturated", "{b:?}");
    assert!(
        b.evidence.iter().any(|e| e.contains("the log's symptom")),
        "{b:?}"
    );
    let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
    for p in &mut points {
        waits(
            p,
            &[
                ("Lock:transactionid", 53),
                ("LWLock:WALWrite", 10),
                ("CPU", 32),
                ("Client:ClientRead", 5),
            ],
        );
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "software contention (row locks)", "{b:?}");
}

/// The host's CPUs busy with other work than the server's and perflab's
/// are the neighbours' limit, not the server's.
#[test]
fn cpus_busy_with_other_work_are_not_the_servers_bottleneck() {
    let mut points = curve(&[150.0, 280.0, 400.0, 420.0, 415.0]);
    for p in &mut points {
        p.resources[0].servers = 2.0;
        p.resources[0].utilisation = 0.98;
        p.extras.busy_cpus = Some(1.96);
        p.extras.server_cpus = Some(0.3);
        p.generator.cpus = 0.2;
        waits(p, &[("Lock:transactionid", 60), ("CPU", 40)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "software contention (row locks)", "{b:?}");
}

/// A CPU saturated at the peak that then burns on retries while
/// throughput collapses: contention, the CPU ruled out with its growth.
#[test]
fn a_cpu_burning_on_retries_past_the_peak_is_contention() {
    let mut points = curve(&[280.0, 474.0, 450.0, 300.0, 93.0]);
    for (i, p) in points.iter_mut().enumerate() {
        let busy = [0.5, 0.94, 0.95, 0.95, 0.95][i];
        p.resources = vec![resource("cpu", ResourceKind::Cpu, 1.0, busy)];
        p.completed = (p.throughput * 3.0) as u64;
        p.retries = p.completed * [0, 1, 4, 10, 23][i];
        waits(p, &[("Client:ClientRead", 70), ("CPU", 30)]);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
    assert!(b.ruled_out[0].contains("retried"), "{b:?}");
}

/// nginx with one worker on two CPUs: the worker's CPU saturates (its own
/// time and the interrupts on its CPU) while the other CPU has room. The
/// limit is named with the process that cannot use a second CPU; with
/// the work spread over processes, or the server pinned, that is not said.
#[test]
fn a_saturated_cpu_held_by_one_single_threaded_process_says_so() {
    let xs = [580.0, 1300.0, 1610.0, 1620.0, 1865.0];
    let mut points = curve(&xs);
    for (i, p) in points.iter_mut().enumerate() {
        let one = [0.40, 0.66, 0.88, 0.87, 0.975][i];
        let other = [0.40, 0.68, 0.72, 0.79, 0.66][i];
        p.resources[0].servers = 2.0;
        p.resources[0].utilisation = (one + other) / 2.0;
        p.resources
            .push(resource("cpu0", ResourceKind::OneCpu, 1.0, one));
        p.resources
            .push(resource("cpu1", ResourceKind::OneCpu, 1.0, other));
        p.extras.server_cpus_allowed = Some(2.0);
        p.extras.server_cpus = Some(0.66 * one / 0.975);
        p.extras.server_single_thread = Some(0.65 * one / 0.975);
    }
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_eq!(b.name, "cpu", "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("one single-threaded process of the server ran 0.65 CPUs")),
        "{b:?}"
    );
    for p in &mut points {
        p.extras.server_single_thread = p.extras.server_single_thread.map(|c| c / 2.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert!(
        !b.evidence
            .iter()
            .any(|e| e.contains("single-threaded process")),
        "{b:?}"
    );
}

/// nginx with one worker, the worker at 0.91 of a CPU from 8 users on and
/// the host's CPUs 90% busy with no single CPU saturated: the process, not
/// "inconclusive", and more workers as the cure. Pinned, it is not said.
#[test]
fn a_plateau_at_one_saturated_single_threaded_process_names_it() {
    let xs = [580.0, 1340.0, 2685.0, 3556.0, 3928.0];
    let mut points = curve(&xs);
    for (i, p) in points.iter_mut().enumerate() {
        let single = [0.38, 0.62, 0.87, 0.92, 0.91][i];
        let host = [0.39, 0.65, 0.83, 0.89, 0.897][i];
        p.resources[0].servers = 2.0;
        p.resources[0].utilisation = host;
        p.extras.server_cpus_allowed = Some(2.0);
        p.extras.server_cpus = Some(single + 0.005);
        p.extras.server_single_thread = Some(single);
        // The disk idles.
        p.resources[1].utilisation = 0.01;
    }
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_eq!(b.name, "cpu (one single-threaded server process)", "{b:?}");
    assert!(b.next.as_deref().unwrap_or("").contains("worker"), "{b:?}");
    for p in &mut points {
        p.extras.server_cpus_allowed = Some(1.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_ne!(b.name, "cpu (one single-threaded server process)", "{b:?}");
}

/// Serialisable TPC-B on a shared host: 3-second steps whose slow tail
/// (p99 209 ms, retries' back-off) leaves X·R 5% short of the users at
/// 8 of them. The window's edges hold that much: not the generator.
#[test]
fn a_shortfall_the_windows_edges_hold_is_not_the_generator() {
    let mut points = curve(&[454.0, 516.0, 493.0, 235.0, 181.0]);
    for p in &mut points {
        p.completed = (p.throughput * 3.0) as u64;
        p.retries = (p.throughput * 0.5) as u64;
        waits(p, &[("Lock:transactionid", 50), ("Client:ClientRead", 50)]);
    }
    let at8 = &mut points[3];
    at8.response.mean = Duration::from_secs_f64(7.59 / at8.throughput);
    at8.response.p99 = Duration::from_millis(209);
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    // A 10% shortfall with a tail too short to hold it is a caveat, not
    // the generator: perflab showed none of its own signs.
    points[3].response.mean = Duration::from_secs_f64(7.2 / points[3].throughput);
    points[3].response.p99 = Duration::from_millis(20);
    let v = judge(points);
    let b = v.bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    assert!(
        v.caveats
            .iter()
            .any(|c| c.contains("Little's law broken at 8 users")),
        "{:?}",
        v.caveats
    );
}

/// Serialisable transactions retried up to 100 times: thousands of
/// serialisation failures a second, perflab at 0.35 of its 2 CPUs with no
/// quota, and X·(R+Z) 9% short of the users at 4. The retries are the
/// server's contention; the shortfall alone never names the generator.
#[test]
fn a_little_shortfall_with_many_retries_is_contention_not_the_generator() {
    let mut points = curve(&[420.0, 610.0, 640.0, 600.0, 520.0, 430.0]);
    for p in &mut points {
        p.completed = (p.throughput * 10.0) as u64;
        p.retries = (p.completed as f64 * 0.4 * p.load) as u64;
        p.generator.cpus = 0.35;
        p.generator.capacity = Some(2.0);
        p.extras.perflab_run_delay = Some(0.01);
        waits(
            p,
            &[
                ("Lock:transactionid", 30),
                ("CPU", 40),
                ("Client:ClientRead", 30),
            ],
        );
    }
    let at4 = &mut points[2];
    at4.response.mean = Duration::from_secs_f64(3.64 / at4.throughput);
    let v = judge(points);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
    assert!(!b.unreliable, "{b:?}");
    assert!(
        v.caveats
            .iter()
            .any(|c| c.contains("Little's law broken at 4 users")),
        "{:?}",
        v.caveats
    );
}

/// The generator's own signs name it: its threads waiting for a CPU a
/// third of the time while the server's did not, or the hypervisor
/// taking the host while perflab used most of what it could.
#[test]
fn the_generators_run_delay_or_steal_names_it() {
    let base = || {
        let mut points = curve(&[900.0, 1700.0, 2000.0, 2050.0, 2040.0]);
        for p in &mut points {
            p.generator.capacity = Some(2.0);
            p.generator.cpus = 0.4;
            waits(p, &[("CPU", 60), ("Client:ClientRead", 40)]);
        }
        points
    };
    // SHAPE has two worker threads: each waited 60% of the time.
    let mut points = base();
    for p in &mut points[2..] {
        p.extras.perflab_run_delay = Some(1.2);
        p.extras.server_run_delay = Some(0.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    assert!(
        b.evidence.iter().any(|e| e.contains("waited for a CPU")),
        "{b:?}"
    );
    // The server waited as long per operation: a host short of CPU, not
    // the generator.
    let mut points = base();
    for p in &mut points[2..] {
        p.extras.perflab_run_delay = Some(1.2);
        p.extras.server_run_delay = Some(p.load * 0.6);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    // Steal while perflab used most of its CPUs.
    let mut points = base();
    for p in &mut points[2..] {
        p.extras.steal = Some(0.2);
        p.generator.cpus = 1.5;
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    assert!(b.evidence.iter().any(|e| e.contains("steal")), "{b:?}");
}

/// A disk sweep at depths 1…32: `throughputs` per depth, each operation
/// one I/O of `vda` (its IOPS the throughput, its queue the depth, its
/// await the response time), the device busy from the second level on,
/// the CPUs nearly idle.
fn disk_sweep(throughputs: &[f64]) -> Vec<StepPoint> {
    let mut points = curve(throughputs);
    for p in &mut points {
        let r = p.load / p.throughput;
        p.resources.retain(|r| r.kind != ResourceKind::Disk);
        for r in &mut p.resources {
            r.utilisation = 0.2;
        }
        let mut disk = resource(
            "disk vda",
            ResourceKind::Disk,
            1.0,
            if p.load > 1.0 { 1.0 } else { 0.7 },
        );
        disk.saturation = Some(("queue".to_string(), p.load * 0.97));
        p.resources.push(disk);
        p.disk_iops.insert("disk vda".to_string(), p.throughput);
        p.disk_await_s.insert("disk vda".to_string(), r);
    }
    points
}

/// A device that serves I/Os in parallel, 100% busy from depth 2, while
/// throughput doubles with every doubling of the depth at the same
/// latency: not its limit — the depth was too shallow, and the verdict
/// says so by Little's law at the device, naming no disk.
#[test]
fn a_busy_disk_still_scaling_is_a_depth_too_shallow_not_a_saturated_disk() {
    let xs: Vec<f64> = (0..6).map(|i| 10_000.0 * f64::from(1 << i)).collect();
    let v = judge(disk_sweep(&xs));
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
    let all = b.evidence.join("\n");
    assert!(all.contains("had not run out"), "{all}");
    assert!(all.contains("Little's law at disk vda"), "{all}");
    assert!(all.contains("too shallow to saturate the device"), "{all}");
    assert!(!all.contains("its bound is"), "{all}");
}

/// The same device running out at 100,000 IOPS from depth 16: busy,
/// its queue the depth and its await growing while throughput holds —
/// the disk, with Little's law at the device as evidence.
#[test]
fn a_disk_whose_throughput_stops_while_its_await_grows_is_saturated() {
    let xs = [10_000.0, 20_000.0, 40_000.0, 80_000.0, 100_000.0, 100_000.0];
    let v = judge(disk_sweep(&xs));
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert_eq!(b.name, "disk vda", "{b:?}");
    let all = b.evidence.join("\n");
    assert!(all.contains("Little's law at disk vda"), "{all}");
    assert!(all.contains("deeper queues only waited longer"), "{all}");
}

/// The saturated device of the test above, but moving 100 MB/s of which
/// the run's own processes moved 1: another process kept it busy, so it
/// is not named; with the run moving it all, it is.
#[test]
fn a_disk_busy_with_others_io_is_not_the_runs_limit() {
    let xs = [10_000.0, 20_000.0, 40_000.0, 80_000.0, 100_000.0, 100_000.0];
    for (ours, named) in [(1e6, false), (99e6, true)] {
        let mut points = disk_sweep(&xs);
        for p in &mut points {
            p.disk_bytes_per_s.insert("disk vda".to_string(), 100e6);
            p.extras.server_io_bytes_per_s = Some(0.0);
            p.extras.perflab_io_bytes_per_s = Some(ours);
        }
        let caveat = super::device::others_caveat(&points[5]);
        assert_eq!(caveat.is_some(), !named, "{caveat:?}");
        let b = judge(points).bottleneck.unwrap();
        assert_eq!(b.name == "disk vda", named, "{b:?}");
    }
}

/// A commit-bound MySQL (or MariaDB before 10.8) without
/// performance_schema: each commit waits ~100 ms for its log flush,
/// throughput grows with the users at a flat response time (group
/// commit), and every running session is sampled as `CPU`. Its own
/// counters — one log fsync in flight nearly all the time, ten a second —
/// name the log.
#[test]
fn a_commit_bound_mariadb_without_wait_events_is_commit_io() {
    let xs = [19.0, 38.0, 75.0, 150.0, 300.0];
    let mut points = curve(&xs);
    for p in &mut points {
        p.completed = (p.throughput * 10.0) as u64;
        p.response.mean = Duration::from_millis(105);
        p.response.p99 = Duration::from_millis(130);
        waits(p, &[("CPU", 90), ("Client:ClientRead", 10)]);
        for (k, v) in [
            ("commits", p.completed as f64),
            ("log_fsyncs", 95.0),
            ("log_fsyncs_pending", 97.0),
            ("pending_looks", 100.0),
            ("buffer_pool_reads", 0.0),
            ("buffer_pool_read_requests", 50_000.0),
        ] {
            p.db.insert(k.to_string(), v);
        }
    }
    let b = judge(points).bottleneck.unwrap();
    // Throughput in proportion to the users at a flat response: the
    // commit I/O is latency-bound, not saturated.
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
    assert_eq!(
        b.name, "commit I/O (the log's device), latency-bound: not reached",
        "{b:?}"
    );
    assert!(
        b.evidence.iter().any(|e| e.contains("fsyncs in flight")),
        "{b:?}"
    );
}

/// MariaDB's row-lock time, with no lock seen in the wait samples (no
/// PROCESS privilege: none at all): contention on row locks.
#[test]
fn row_lock_time_names_contention_when_no_wait_shows_it() {
    let mut points = curve(&[500.0, 800.0, 900.0, 700.0, 500.0]);
    for p in &mut points {
        p.completed = (p.throughput * 10.0) as u64;
        let r = p.response_s();
        p.db.insert("row_lock_waits".to_string(), p.completed as f64);
        p.db.insert(
            "row_lock_time_ms".to_string(),
            p.completed as f64 * r * 1e3 * (0.1 * p.load).min(0.8),
        );
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::SoftwareContention, "{b:?}");
    assert_eq!(b.name, "software contention (row locks)", "{b:?}");
}

/// What a caching accelerator's log says of every step: its hit ratio
/// by requests and bytes, the origin's bytes and its share of the
/// accelerator's time, and the cache's size.
fn cached(points: &mut [StepPoint], ratios: &[(f64, f64)], origin_share: f64, max_bytes: f64) {
    for (p, (hit, bytes)) in points.iter_mut().zip(ratios) {
        let requests = p.throughput * 10.0;
        let served = requests * 50_000.0;
        let origin_requests = requests * (1.0 - hit);
        for (k, v) in [
            ("cache_requests", requests),
            ("cache_hit", requests * hit),
            ("cache_miss", origin_requests),
            ("served_bytes", served),
            ("origin_bytes", served * (1.0 - bytes)),
            ("origin_requests", origin_requests),
            ("request_seconds", requests * 0.002),
            ("origin_seconds", requests * 0.002 * origin_share),
            ("cache_max_bytes", max_bytes),
        ] {
            p.db.insert(k.to_string(), v);
        }
    }
}

const PLATEAU: [f64; 6] = [900.0, 1700.0, 2600.0, 3000.0, 3000.0, 3000.0];

/// A cache that stays at 60% while the origin sends many times its size
/// does not fit the working set; a cache still warming, or one that the
/// origin never overflowed, is not called too small.
#[test]
fn a_cache_missing_what_it_dropped_is_too_small_for_the_working_set() {
    let mut points = curve(&PLATEAU);
    cached(&mut points, &[(0.6, 0.55); 6], 0.3, 10e6);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::CacheTooSmall, "{b:?}");
    assert!(
        b.evidence.iter().any(|e| e.contains("the cache's 9.5 MiB")),
        "{b:?}"
    );
    assert!(b.next.as_deref().unwrap().contains("proxy_cache_max_size"));

    let mut warming = curve(&PLATEAU);
    let rising: Vec<(f64, f64)> = (0..6)
        .map(|i| (0.3 + 0.1 * f64::from(i), 0.3 + 0.1 * f64::from(i)))
        .collect();
    cached(&mut warming, &rising, 0.3, 10e6);
    let b = judge(warming).bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::CacheTooSmall, "{b:?}");

    let mut roomy = curve(&PLATEAU);
    cached(&mut roomy, &[(0.6, 0.55); 6], 0.3, 1e15);
    let b = judge(roomy).bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::CacheTooSmall, "{b:?}");
}

/// Throughput flat while waiting for the origin took most of the
/// accelerator's time: the origin; the same plateau with the origin
/// answering fast is not blamed on it.
#[test]
fn misses_waiting_on_the_origin_make_the_origin_the_bottleneck() {
    let mut points = curve(&PLATEAU);
    cached(&mut points, &[(0.5, 0.5); 6], 0.8, 1e15);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Origin, "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("80.0% of the accelerator's time")),
        "{b:?}"
    );

    let mut fast = curve(&PLATEAU);
    cached(&mut fast, &[(0.5, 0.5); 6], 0.2, 1e15);
    let b = judge(fast).bottleneck.unwrap();
    assert_ne!(b.kind, BottleneckKind::Origin, "{b:?}");

    // The origin's processes busier than the accelerator's, misses many.
    let mut busy = curve(&PLATEAU);
    cached(&mut busy, &[(0.5, 0.5); 6], 0.2, 1e15);
    for p in &mut busy {
        p.extras.origin_cpus = Some(1.5);
        p.extras.server_cpus = Some(0.4);
    }
    let b = judge(busy).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Origin, "{b:?}");
}

/// Hits served at a saturated CPU: the accelerator's CPU, with its
/// interrupt share; the same CPU with the origin's processes the busier
/// is not the accelerator's.
#[test]
fn hits_on_a_saturated_cpu_name_the_accelerators_cpu_and_its_interrupts() {
    let saturate = |points: &mut [StepPoint]| {
        for p in points.iter_mut() {
            p.resources[0].utilisation = (p.throughput / 3000.0 * 0.97).min(0.97);
            p.extras.cpu_isr = Some(0.3);
            p.extras.server_cpus = Some(1.6);
        }
    };
    let mut points = curve(&PLATEAU);
    cached(&mut points, &[(0.99, 0.98); 6], 0.05, 1e15);
    saturate(&mut points);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert_eq!(b.name, "the accelerator's CPU", "{b:?}");
    assert_eq!(b.resource.as_deref(), Some("cpu"), "{b:?}");
    assert!(
        b.evidence
            .iter()
            .any(|e| e.contains("interrupts and softirqs") && e.contains("30.0%")),
        "{b:?}"
    );

    let mut origin_busier = curve(&PLATEAU);
    cached(&mut origin_busier, &[(0.99, 0.98); 6], 0.05, 1e15);
    saturate(&mut origin_busier);
    for p in &mut origin_busier {
        p.extras.origin_cpus = Some(1.8);
    }
    let b = judge(origin_busier).bottleneck.unwrap();
    assert_ne!(b.name, "the accelerator's CPU", "{b:?}");
}

/// Hits filling a link: the link; misses on the same link are not the
/// link's doing.
#[test]
fn hits_filling_a_link_name_the_link() {
    let fill = |points: &mut [StepPoint]| {
        for p in points.iter_mut() {
            let u = (p.throughput / 3000.0 * 0.96).min(0.96);
            p.resources
                .push(resource("link veth0 tx", ResourceKind::Link, 1.0, u));
        }
    };
    let mut points = curve(&PLATEAU);
    cached(&mut points, &[(0.99, 0.99); 6], 0.05, 1e15);
    fill(&mut points);
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "link veth0 tx", "{b:?}");
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");

    let mut missing = curve(&PLATEAU);
    cached(&mut missing, &[(0.5, 0.5); 6], 0.05, 1e15);
    fill(&mut missing);
    let b = super::cache::verdict(&missing, 5, None);
    assert!(b.is_none(), "{b:?}");
}

/// A run through no accelerator is not the cache rules' to decide.
#[test]
fn a_run_without_a_cache_is_left_to_the_other_rules() {
    let points = curve(&PLATEAU);
    assert!(super::cache::verdict(&points, 3, None).is_none());
}

/// One step is enough: measured after its warm-up, a cache whose origin
/// sent more than it holds is too small, said without a rise to compare.
#[test]
fn one_step_through_a_cache_too_small_says_so_after_its_warm_up() {
    let mut points = curve(&[900.0]);
    cached(&mut points, &[(0.99, 0.84)], 0.1, 2e6);
    let b = super::cache::verdict(&points, 0, None).unwrap();
    assert_eq!(b.kind, BottleneckKind::CacheTooSmall, "{b:?}");
    assert!(
        b.evidence[0].contains("measured after its warm-up"),
        "{b:?}"
    );
    assert!(b.ruled_out[0].starts_with("a cold cache filling"), "{b:?}");
}

/// A disk sweep still rising at its last depths, as `run disk --quick`
/// measured it: 45.5k → 58.1k → 71.2k IOPS at depths 8, 16, 32 (×1.23
/// for the last doubling, a knee by the 80% rule) while p95 went 251 →
/// 403 → 624 µs, the device's demand bounding it at 81.6k IOPS. Not a
/// plateau: not reached, approaching the device's limit, the next step
/// deeper queues — and never the device by its bound alone.
fn rising_disk(last: f64) -> Vec<StepPoint> {
    let mut points = mva_points(0.0004, 0.0006, 0.0, &[8, 16, 32]);
    let xs = [45_500.0, 58_100.0, last];
    let p95s = [251, 403, 624];
    for (p, (x, p95)) in points.iter_mut().zip(xs.iter().zip(p95s)) {
        p.throughput = *x;
        p.response.mean = Duration::from_secs_f64(p.load / x);
        p.response.p95 = Duration::from_micros(p95);
        p.interval_throughputs = vec![x * 0.97, *x, x * 1.03];
        p.generator.user_cpus = Some(0.1);
        p.generator.system_cpus = Some(0.5);
        p.resources = vec![
            resource("cpu", ResourceKind::Cpu, 1.0, x * 5e-6),
            resource("disk vda", ResourceKind::Disk, 1.0, x / 81_600.0),
        ];
    }
    points
}

#[test]
fn a_disk_curve_still_rising_is_not_reached_approaching_the_device() {
    let shape = super::RunShape {
        kernel_served: true,
        ..SHAPE
    };
    let v = verdict_of(rising_disk(71_200.0), shape, DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
    assert_eq!(
        b.name, "not reached (approaching disk vda's limit)",
        "{b:?}"
    );
    let all = b.evidence.join("\n");
    assert!(!all.contains("stopped growing"), "{all}");
    assert!(
        all.contains("throughput still grew at the last step"),
        "{all}"
    );
    assert!(
        all.contains("251µs → 624µs") || all.contains("403µs → 624µs"),
        "{all}"
    );
    assert!(all.contains("bounds throughput at 81600 ops/s"), "{all}");
    assert!(
        b.next
            .as_deref()
            .is_some_and(|n| n.starts_with("deeper queues")),
        "{b:?}"
    );
    // perflab's own share of its CPU at the last step is stated.
    assert!(
        all.contains("0.10 CPUs of perflab's own code as the generator (user time: 16.7%"),
        "{all}"
    );
    // The same steps, the last no higher than its noise allows: the curve
    // stopped growing, and the rising rule says nothing.
    let v = verdict_of(rising_disk(59_000.0), shape, DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.unwrap();
    assert!(!b.name.starts_with("not reached (approaching"), "{b:?}");
    assert!(super::growth::still_rising(&rising_disk(59_000.0)).is_none());
}

/// The same rising curve with a flat p95 (latencies under the clock's
/// resolution, as an in-process target's are): not reached, and its
/// first line says how much the last step grew for the load, never that
/// throughput kept pace with it after a knee of 23%.
#[test]
fn a_bent_curve_with_a_flat_latency_is_not_said_to_have_kept_pace() {
    let mut points = rising_disk(71_200.0);
    for p in &mut points {
        p.response.p95 = Duration::from_micros(300);
    }
    let shape = super::RunShape {
        kernel_served: true,
        ..SHAPE
    };
    let v = verdict_of(points, shape, DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
    let first = &b.evidence[0];
    assert!(
        first.starts_with("throughput still grew at the last step: 58100 ops/s at ")
            && first.contains("(×1.23 for ×2.00 the load)"),
        "{b:?}"
    );
    assert!(!b.evidence.join("\n").contains("kept pace"), "{b:?}");
}

/// One thread's schedstat and state at a reading: nanoseconds on a CPU
/// and waiting for one, timeslices, the wait it was seen in.
fn reading(
    on_cpu_s: f64,
    run_delay_s: f64,
    slices: u64,
) -> crate::probe::counters::threads::ThreadReading {
    crate::probe::counters::threads::ThreadReading {
        pid: 7,
        on_cpu_ns: (on_cpu_s * 1e9) as u64,
        run_delay_ns: (run_delay_s * 1e9) as u64,
        timeslices: slices,
        wait: crate::probe::counters::threads::ThreadWait::Clients,
        ..Default::default()
    }
}

/// A contrived schedstat series of perflab's threads: four worker threads
/// that each, every second, ran 0.3 s and waited 0.6 s for a CPU, and a
/// sampler thread that ran twice and waited 0.9 s. Summed over the
/// process and divided by its two configured workers that is 165% of the
/// time and 1.65 responses per operation — impossible figures. Of the
/// serving threads' own time it is 60%, and each operation waits 0.6 of
/// its response; with no thread states, at most the whole response.
#[test]
fn the_generators_wait_for_a_cpu_is_a_share_of_its_threads_time_within_each_response() {
    use crate::probe::counters::threads::{GroupThreads, ThreadStates};
    let group = |seconds: f64| {
        let mut g = GroupThreads::default();
        for tid in 10..14 {
            g.threads.insert(
                tid,
                reading(0.3 * seconds, 0.6 * seconds, 100 * seconds as u64),
            );
        }
        g.threads.insert(
            20,
            reading(0.01 * seconds, 0.9 * seconds, 2 * seconds as u64),
        );
        g
    };
    let (a, b) = (group(10.0), group(11.0));
    let states = ThreadStates::between(&a, &b, 1.0).expect("two readings");
    let mut points = curve(&[900.0, 1700.0, 2000.0, 2050.0, 2040.0]);
    for p in &mut points {
        p.generator.capacity = Some(2.0);
        p.generator.cpus = 0.4;
        waits(p, &[("CPU", 60), ("Client:ClientRead", 40)]);
        p.extras.perflab_run_delay = Some(4.0 * 0.6 + 0.9);
        p.extras.server_run_delay = Some(0.0);
        p.threads.perflab = Some(states.clone());
    }
    for p in &points {
        let w = super::generator::PerflabWait::of(p, SHAPE).expect("a wait");
        assert!((w.share - 0.6).abs() < 1e-9, "{w:?}");
        assert!((w.threads - 4.0).abs() < 1e-9, "{w:?}");
        assert!(w.per_op_s <= p.response_s(), "{w:?} vs {}", p.response_s());
        assert!((w.per_op_s - 0.6 * p.response_s()).abs() < 1e-12, "{w:?}");
    }
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::LoadGenerator, "{b:?}");
    let p = &points[4];
    let expected = format!(
        "at 16 users perflab's 4.0 serving threads waited for a CPU 60.0% of their time (schedstat run delay; the rest on a CPU, in I/O or asleep): about {} of each operation's {} response",
        crate::units::Latency::secs(0.6 * p.response_s()),
        crate::units::Latency(p.response.mean)
    );
    assert!(
        b.evidence.iter().any(|e| e.starts_with(&expected)),
        "{expected}\n{b:#?}"
    );
    assert!(!b.evidence.join("\n").contains("100.0% of"), "{b:#?}");
    // Without the threads' states: the process's run delay over its two
    // worker threads, never more than all their time.
    for p in &mut points {
        p.threads.perflab = None;
    }
    for p in &points {
        let w = super::generator::PerflabWait::of(p, SHAPE).expect("a wait");
        assert!(w.share <= 1.0 && w.per_op_s <= p.response_s(), "{w:?}");
    }
}

/// A file tree served by the kernel in perflab's own threads, as `run
/// files --quick` measured it: perflab used 1.90 of the host's 2 CPUs,
/// 97% busy, its threads waiting for a CPU most of their time, and
/// throughput flat. With 1.60 of those CPUs system time (the file
/// system's work) and 0.30 its own user time, the CPU serving the I/O is
/// the limit, the split its evidence; with the shares the other way round
/// the generator's own work is what limits, and it is named.
fn served_in_process(user: f64, system: f64) -> Vec<StepPoint> {
    let xs = [8_000.0, 15_000.0, 19_000.0, 19_500.0, 19_400.0];
    let mut points = curve(&xs);
    for p in &mut points {
        let x = p.throughput;
        p.resources = vec![resource("cpu", ResourceKind::Cpu, 2.0, x * 1e-4 / 2.0)];
        let busy = (x * 1e-4).min(1.9);
        p.generator.capacity = Some(2.0);
        p.generator.cpus = busy;
        p.generator.user_cpus = Some(busy * user / (user + system));
        p.generator.system_cpus = Some(busy * system / (user + system));
        p.extras.perflab_run_delay = Some(busy * 0.8);
    }
    points
}

#[test]
fn the_cpu_serving_an_in_process_target_is_its_limit_not_the_generator() {
    let shape = super::RunShape {
        kernel_served: true,
        ..SHAPE
    };
    let v = verdict_of(served_in_process(0.30, 1.60), shape, DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:#?}");
    assert_eq!(b.name, "cpu (the kernel serving the run's I/O)", "{b:#?}");
    assert!(!b.unreliable);
    let all = b.evidence.join("\n");
    assert!(all.contains("perflab itself used 1.90 CPUs"), "{all}");
    assert!(
        all.contains("1.60 CPUs in the kernel serving the run's I/O"),
        "{all}"
    );
    assert!(
        all.contains(
            "0.30 CPUs of perflab's own code as the generator (user time: 15.8% of perflab's CPU"
        ),
        "{all}"
    );
    // The generator's own code the larger part: it is what limits.
    let v = verdict_of(served_in_process(1.60, 0.30), shape, DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::LoadGenerator, "{b:#?}");
    let all = b.evidence.join("\n");
    assert!(
        all.contains("used 1.90 of the 2.00 CPUs it could use"),
        "{all}"
    );
    assert!(all.contains("(user time: 84.2% of perflab's CPU"), "{all}");
    // A target outside perflab's process: its CPU is the generator's own.
    let v = verdict_of(served_in_process(0.30, 1.60), SHAPE, DEFAULT_MAX_CV, 1);
    assert_eq!(v.bottleneck.unwrap().kind, BottleneckKind::LoadGenerator);
}

/// A virtual disk that stopped at 99k IOPS from depth 16 to 32 while its
/// queue and await doubled, as a noisy `run disk --quick` measured it:
/// the last level read 86% busy, the one before 96%, the last a hair
/// higher in throughput (so the peak). The device ran out — deeper
/// queues only waited longer — whatever its busy share at the peak.
#[test]
fn a_device_whose_queue_and_await_grow_at_a_flat_throughput_ran_out() {
    let xs = [13_500.0, 16_400.0, 36_900.0, 60_100.0, 98_785.0, 98_864.0];
    let mut points = disk_sweep(&xs);
    for (p, busy) in points
        .iter_mut()
        .zip([0.69, 0.71, 0.80, 0.79, 0.955, 0.856])
    {
        if let Some(d) = p.resources.iter_mut().find(|r| r.name == "disk vda") {
            d.utilisation = busy;
        }
    }
    let b = judge(points.clone()).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:#?}");
    assert_eq!(b.name, "disk vda", "{b:#?}");
    let all = b.evidence.join("\n");
    assert!(all.contains("deeper queues only waited longer"), "{all}");
    assert!(all.contains("Little's law at disk vda"), "{all}");
    // Its await holding while the depth doubled: not the device's queue.
    for p in &mut points[5..] {
        p.disk_await_s
            .insert("disk vda".to_string(), 16.0 / 98_785.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_ne!(b.name, "disk vda", "{b:#?}");
}

/// The disk quick start on a noisy host: 62.7k → 66.8k → 89.8k IOPS at
/// depths 8, 16, 32, the device 91.5% busy at the last and its await
/// growing. Throughput still rose ×1.34 beyond its noise: the device was
/// approaching its limit, not out of it — its busy share is no verdict.
#[test]
fn a_busy_disk_whose_throughput_still_rises_beyond_the_noise_is_not_yet_its_limit() {
    let xs = [10_579.0, 24_536.0, 37_003.0, 62_656.0, 66_804.0, 89_756.0];
    let mut points = disk_sweep(&xs);
    for (p, busy) in points
        .iter_mut()
        .zip([0.756, 0.831, 0.835, 0.819, 0.902, 0.915])
    {
        if let Some(d) = p.resources.iter_mut().find(|r| r.name == "disk vda") {
            d.utilisation = busy;
        }
        p.response.p95 = Duration::from_secs_f64(p.load / p.throughput * 1.5);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::NotReached, "{b:#?}");
    assert!(b.name.starts_with("not reached"), "{b:#?}");
}

/// A write limit of `limit` IOPS on dm-0 set on the server's v1 blkio
/// cgroup, which the server's writes used at `writes` per second.
fn server_throttle(p: &mut StepPoint, limit: u64, writes: f64) {
    use super::super::iopath::LimitUse;
    use crate::probe::cgroup::IoLimit;
    p.io_path.limits.push(LimitUse {
        owner: "the server's cgroup".to_string(),
        limit: IoLimit {
            device: "dm-0".to_string(),
            number: "253:0".to_string(),
            cgroup: "/lab/db".to_string(),
            dir: "/sys/fs/cgroup/blkio/lab/db".to_string(),
            write_iops: Some(limit),
            interface: "blkio throttle".to_string(),
            ..IoLimit::default()
        },
        writes_per_s: writes,
        ..LimitUse::default_for_tests()
    });
}

/// The words every commit flush held by the server's 100-IOPS throttle
/// is named in, whichever server.
const THROTTLED_COMMITS: &str =
    "commit I/O (a blkio throttle of 100 write IOPS on the server's cgroup, device dm-0)";

/// A PostgreSQL whose sessions wait on the WAL while its cgroup's write
/// throttle holds its flushes, and throughput stops growing: the
/// throttle is named with its value, where it is set and what the server
/// wrote against it — not guessed at as "a throttle, a remote or
/// fsync-bound device".
#[test]
fn commit_waits_under_the_servers_write_throttle_name_it() {
    let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
    for p in &mut points {
        p.resources
            .push(resource("disk dm-0", ResourceKind::Disk, 1.0, 0.05));
        waits(
            p,
            &[("LWLock:WALWrite", 55), ("IO:WALSync", 20), ("CPU", 25)],
        );
        server_throttle(p, 100, 98.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.kind, BottleneckKind::Resource, "{b:?}");
    assert_eq!(b.name, format!("{THROTTLED_COMMITS}, saturated"));
    let all = b.evidence.join("\n");
    assert!(
        all.contains("write IOPS limited to 100 on dm-0 (253:0) by the server's cgroup /sys/fs/cgroup/blkio/lab/db (blkio throttle); the server wrote 98/s against it at 16 users, 98% of the limit"),
        "{all}"
    );
    assert!(
        !all.contains("fsync-bound"),
        "no guess beside the limit: {all}"
    );
    assert!(b.next.unwrap().contains("raise or lift the blkio throttle of 100 write IOPS on the server's cgroup (/sys/fs/cgroup/blkio/lab/db)"));
}

/// The same throttle under group commit: throughput grows with the users
/// at a flat ~105 ms. PostgreSQL says it through its WAL waits, MariaDB
/// without performance_schema through its log fsyncs in flight; both
/// verdicts are commit I/O under the server's throttle, latency-bound.
#[test]
fn a_throttled_commit_flush_is_the_same_words_on_postgresql_and_mariadb() {
    let xs = [19.0, 38.0, 75.0, 150.0, 300.0];
    let sweep = |server: &dyn Fn(&mut StepPoint)| {
        let mut points = curve(&xs);
        for p in &mut points {
            p.completed = (p.throughput * 10.0) as u64;
            p.response.mean = Duration::from_millis(105);
            server_throttle(p, 100, 97.0);
            server(p);
        }
        judge(points).bottleneck.unwrap()
    };
    let postgres = sweep(&|p| {
        waits(
            p,
            &[("LWLock:WALWrite", 50), ("IO:WALSync", 30), ("CPU", 20)],
        )
    });
    let mariadb = sweep(&|p| {
        waits(p, &[("CPU", 90), ("Client:ClientRead", 10)]);
        for (k, v) in [
            ("commits", p.completed as f64),
            ("log_fsyncs", 95.0),
            ("log_fsyncs_pending", 97.0),
            ("pending_looks", 100.0),
        ] {
            p.db.insert(k.to_string(), v);
        }
    });
    for b in [&postgres, &mariadb] {
        assert_eq!(b.kind, BottleneckKind::NotReached, "{b:?}");
        assert_eq!(
            b.name,
            format!("{THROTTLED_COMMITS}, latency-bound: not reached")
        );
        let all = b.evidence.join("\n");
        assert!(all.contains("capacity not reached up to 16 users"), "{all}");
        assert!(all.contains("write IOPS limited to 100 on dm-0 (253:0) by the server's cgroup /sys/fs/cgroup/blkio/lab/db"), "{all}");
        assert!(all.contains("the server wrote 97/s against it"), "{all}");
    }
}

/// A throttle the server's writes stayed well under is not named.
#[test]
fn a_write_throttle_the_server_did_not_reach_is_not_named() {
    let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
    for p in &mut points {
        waits(
            p,
            &[("LWLock:WALWrite", 55), ("IO:WALSync", 20), ("CPU", 25)],
        );
        server_throttle(p, 1000, 98.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert_eq!(b.name, "commit I/O (the log's device), saturated", "{b:?}");
    assert!(!b.evidence.join("\n").contains("limited to"), "{b:?}");
}

/// The server's cgroup at its pids.max, forks refused: said whatever the
/// verdict; under it, nothing.
#[test]
fn a_server_cgroup_at_its_pids_max_is_said() {
    let run = |current: f64, refused: f64| {
        let mut points = curve(&[150.0, 190.0, 200.0, 201.0, 199.0]);
        for p in &mut points {
            let s = &mut p.io_path.server_limits;
            s.pids_max = Some(64);
            s.pids_current = Some(current);
            s.pids_limit_hits = Some(refused);
        }
        judge(points).bottleneck.unwrap().evidence.join("\n")
    };
    let at = run(64.0, 12.0);
    assert!(
        at.contains(
            "the server's cgroup held 64 tasks at its pids.max of 64 at 1 user (12 forks refused)"
        ),
        "{at}"
    );
    assert!(!run(40.0, 0.0).contains("pids.max"));
}

/// Reads past a memory.high the server's cgroup keeps going over: its
/// memory is short, said with the limit and the reclaim.
#[test]
fn a_memory_high_the_server_went_over_is_memory_evidence() {
    let mut points = curve(&[300.0, 520.0, 600.0, 610.0, 605.0]);
    for p in &mut points {
        waits(p, &[("IO:DataFileRead", 80), ("CPU", 20)]);
        let s = &mut p.io_path.server_limits;
        s.memory_high_bytes = Some(256 << 20);
        s.memory_high_hits = Some(30.0);
        s.reclaimed_pages_per_s = Some(1000.0);
    }
    let b = judge(points).bottleneck.unwrap();
    assert!(b.name.starts_with("memory"), "{b:?}");
    let all = b.evidence.join("\n");
    assert!(
        all.contains("the server's cgroup went over its memory.high of 256.0 MiB 30 times at 16 users, 1000 pages/s reclaimed from it"),
        "{all}"
    );
}

/// The null target at 10 ms a call, two users, beside a process that
/// keeps one CPU busy: the busy CPU is the neighbour's, not the target's
/// (it runs in perflab's threads, which used 0.05 CPUs). Throughput kept
/// pace with the users: not reached, whether the busy CPU is one of two
/// or the host's CPUs together.
#[test]
fn an_embedded_target_beside_a_cpu_hog_is_not_held_by_the_hogs_cpu() {
    let shape = super::RunShape {
        embedded: true,
        ..SHAPE
    };
    for (cpu, one) in [(0.52, 1.0), (0.99, 1.0)] {
        let mut points = curve(&[99.0, 198.0]);
        for p in &mut points {
            p.response.mean = Duration::from_millis(10);
            p.response.p50 = Duration::from_millis(10);
            p.response.p95 = Duration::from_micros(10_100);
            p.resources = vec![
                resource("cpu", ResourceKind::Cpu, 2.0, cpu),
                resource("cpu0", ResourceKind::OneCpu, 1.0, one),
                resource("cpu1", ResourceKind::OneCpu, 1.0, 2.0 * cpu - one),
            ];
            p.extras.busy_cpus = Some(2.0 * cpu);
            p.extras.server_cpus = None;
            p.generator.cpus = 0.05;
        }
        let b = verdict_of(points, shape, DEFAULT_MAX_CV, 1)
            .bottleneck
            .unwrap();
        assert_eq!(b.kind, BottleneckKind::NotReached, "{cpu}: {b:?}");
        assert!(!b.name.contains("cpu"), "{cpu}: {b:?}");
        let all = b.evidence.join("\n");
        assert!(!all.contains("cpu"), "{cpu}: {all}");
    }
}

/// A closed loop whose connections a full listen queue turned away: the
/// users spent a third of their time waiting for SYN retransmits while
/// no resource was busy. The listen backlog is the limit, whether the
/// waits ended in the window or were still held at its end; a few
/// overflows, or operations over 1 s holding little of the users' time,
/// are not.
#[test]
fn a_listen_queue_that_overflows_is_the_listen_backlog() {
    let judged = |overflows: f64, over_1s: f64, held_s: f64| {
        let mut points = curve(&[1800.0, 5800.0, 6300.0, 6200.0]);
        for (i, p) in points.iter_mut().enumerate() {
            p.extras.listen_overflows = Some([0.0, 2.0, overflows, overflows * 1.2][i]);
            p.over_1s = [0.0, 0.0, over_1s, over_1s][i];
            p.held_over_1s_s = [0.0, 0.0, held_s, held_s][i];
            p.completed = (p.throughput * 3.0) as u64;
            for r in &mut p.resources {
                r.utilisation = 0.3;
            }
        }
        judge(points).bottleneck.unwrap()
    };
    // At 4 users over 3 s, 0.02% of 18,900 operations over 1 s held
    // 3.8 s of the users' 12 s (31%); or 0.001% of them ended over 1 s,
    // and the clients still waiting at the window's end held 6 s more.
    for (over_1s, held_s) in [(0.0002, 3.8), (0.00001, 6.2)] {
        let b = judged(144.0, over_1s, held_s);
        assert_eq!(b.kind, BottleneckKind::AdmissionLimit, "{b:?}");
        assert_eq!(b.name, "admission limit (listen backlog)", "{b:?}");
        let all = b.evidence.join("\n");
        assert!(
            all.contains("turned away 144 connection attempts at 4 users"),
            "{all}"
        );
        assert!(all.contains("by step: 0 → 2 → 144 → 173"), "{all}");
        let share = format!("they held {:.1}% of the users' time", held_s / 12.0 * 100.0);
        assert!(all.contains(&share), "{share}: {all}");
    }
    // Few overflows; or 0.2 s of the users' 12 s held (2%).
    for (overflows, over_1s, held_s) in [(5.0, 0.0002, 3.8), (144.0, 0.00001, 0.2)] {
        let b = judged(overflows, over_1s, held_s);
        assert_ne!(
            b.name, "admission limit (listen backlog)",
            "{overflows} {over_1s}: {b:?}"
        );
    }
}
