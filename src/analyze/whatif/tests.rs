//! The what-ifs' tests: the queueing model against known answers, and
//! each change (CPUs, memory, a resource out of the way) on measured and
//! built demands.

use super::*;
use crate::analyze::demands::Demand;

fn demand(name: &str, kind: ResourceKind, servers: f64, seconds: f64) -> Demand {
    Demand {
        from_steps: false,
        resource: name.to_string(),
        kind,
        servers,
        seconds,
        bound: servers / seconds,
        growth_at_peak: None,
    }
}

fn demands(resources: Vec<Demand>, total_s: f64) -> Demands {
    Demands {
        fitted_on: vec![0],
        unqueued: true,
        resources,
        total_s,
        think_s: 0.0,
        n_star: None,
        steps: Vec::new(),
    }
}

/// One queue and nothing else: the model is exact MVA, and a disk
/// twice as fast at a population far past the knee doubles throughput.
#[test]
fn a_disk_twice_as_fast_doubles_a_saturated_single_queue() {
    let d = demands(
        vec![demand("disk vda", ResourceKind::Disk, 1.0, 0.01)],
        0.01,
    );
    let c = centres(&d, "disk vda");
    let (x, r) = solve(&c, 0.0, 0.0, 64).unwrap();
    assert!((x - 100.0).abs() < 1e-6, "{x}");
    assert!((r - 0.64).abs() < 1e-6, "{r}");
    let Change {
        words: twice,
        after,
        server_cpus: cpus,
        ..
    } = changes(&c[0], &c, None).remove(0);
    assert_eq!(twice, "disk vda twice as fast");
    assert_eq!(cpus, None, "a disk's change is no change of CPUs");
    let (x2, _) = solve(&after, 0.0, 0.0, 64).unwrap();
    assert!((x2 / x - 2.0).abs() < 1e-6);
}

/// Seidmann: two CPUs of 10 ms each at one user give R = D (no
/// queueing), and the bound is m/D.
#[test]
fn a_multi_server_centre_keeps_its_demand_at_one_user_and_its_bound_beyond() {
    let d = demands(vec![demand("cpu", ResourceKind::Cpu, 2.0, 0.01)], 0.01);
    let c = centres(&d, "cpu");
    let delay = delay_for(&c, d.total_s);
    assert!((delay - 0.005).abs() < 1e-12, "{delay}");
    let (x1, r1) = solve(&c, delay, 0.0, 1).unwrap();
    assert!((r1 - 0.01).abs() < 1e-9 && (x1 - 100.0).abs() < 1e-6);
    let (x, _) = solve(&c, delay, 0.0, 500).unwrap();
    assert!(x > 199.0 && x <= 200.0 + 1e-9, "{x}");
    let Change {
        words: label,
        after,
        server_cpus: cpus,
        changed: what,
        ..
    } = changes(&c[0], &c, None).remove(0);
    assert_eq!(what.factor, Some(2.0));
    assert_eq!(label, "twice the CPUs (4)");
    assert_eq!(cpus, Some(4.0));
    let (x4, _) = solve(&after, delay, 0.0, 500).unwrap();
    assert!(x4 > 398.0 && x4 <= 400.0 + 1e-9, "{x4}");
}

/// The server's shaped link is faster at both ends at once (and in
/// both directions of its interface); another shaped link on the host
/// is left as it is, and with two shaped links on the host side none
/// is taken for the far end's peer.
#[test]
fn a_link_twice_as_fast_is_faster_at_both_ends() {
    let link = |name: &str, s: f64| demand(name, ResourceKind::Link, 1.0, s);
    let d = demands(
        vec![
            link("link pl9x0h (tbf)", 0.000471),
            link("link pl9x0s in the server's namespace (tbf)", 0.000442),
            link("link pl9x0h tx", 0.0000001),
            link("link eth0 rx", 0.0000001),
            demand("cpu", ResourceKind::Cpu, 2.0, 0.0000682),
        ],
        0.000471,
    );
    let c = centres(&d, "link pl9x0h (tbf)");
    let mut group = same_link(&c[0], &c);
    group.sort();
    assert_eq!(
        group,
        [
            "link pl9x0h tx",
            "link pl9x0s in the server's namespace (tbf)"
        ]
    );
    let Change { words, after, .. } = changes(&c[0], &c, None).remove(0);
    assert_eq!(words, "link pl9x0h (tbf) at twice the speed (both ways)");
    let bound = tightest(&after).unwrap().bound();
    assert!((bound - 2.0 / 0.000471).abs() < 1.0, "{bound}");
    let far = &c[1];
    assert_eq!(same_link(far, &c), ["link pl9x0h (tbf)", "link pl9x0h tx"]);
    let mut two = c.clone();
    two.push(Centre {
        name: "link other (tbf)".into(),
        kind: ResourceKind::Link,
        servers: 1.0,
        demand_s: 0.0001,
    });
    assert_eq!(same_link(far, &two), Vec::<String>::new());
}

/// The single CPUs stand in for the host's CPUs only when the
/// bottleneck is one of them.
#[test]
fn single_cpus_replace_the_host_cpus_only_when_one_is_the_bottleneck() {
    let d = demands(
        vec![
            demand("cpu0", ResourceKind::OneCpu, 1.0, 0.004),
            demand("cpu", ResourceKind::Cpu, 2.0, 0.005),
            demand("cpu1", ResourceKind::OneCpu, 1.0, 0.001),
            demand("disk vda", ResourceKind::Disk, 1.0, 0.002),
        ],
        0.008,
    );
    let names = |b: &str| -> Vec<String> { centres(&d, b).into_iter().map(|c| c.name).collect() };
    assert_eq!(names("cpu0"), ["cpu0", "disk vda"]);
    assert_eq!(names("disk vda"), ["cpu", "disk vda"]);
}

/// The centres of a server held to cpu0 with `demand_s` of it per
/// operation, `total_s` in all at the lowest load.
fn on_cpu0(demand_s: f64, total_s: f64) -> Vec<Centre> {
    let d = demands(
        vec![demand("cpu0", ResourceKind::OneCpu, 1.0, demand_s)],
        total_s,
    );
    centres(&d, "cpu0")
}

/// A host of `cpus` where perflab used `perflab_cpus`, `per_op_s` an
/// operation, and the host's CPU per operation ranged over `range`.
fn host_room(cpus: f64, perflab_cpus: f64, per_op_s: f64, range: Option<[f64; 2]>) -> HostRoom {
    HostRoom {
        cpus,
        perflab_cpus,
        perflab_cpu_per_op_s: per_op_s,
        cpu_per_op_s: range,
    }
}

/// A second CPU on a two-CPU host where perflab uses 0.8 of one: the
/// server's two CPUs are shared with perflab, whose work per
/// operation queues there too. On a host of four, nothing is shared.
#[test]
fn a_second_cpu_shared_with_perflab_carries_perflabs_work() {
    let c = on_cpu0(0.000050, 0.000050);
    let room = |cpus: f64| host_room(cpus, 0.8, 0.000040, None);
    let Change {
        words,
        after,
        server_cpus: cpus,
        changed: what,
        ..
    } = changes(&c[0], &c, Some(room(2.0))).remove(0);
    assert_eq!(
        words,
        "the server allowed a second CPU besides cpu0 (shared with perflab's 0.80 CPUs)"
    );
    assert_eq!((cpus, what.factor), (Some(2.0), Some(2.0)));
    assert_eq!(after[0].servers, 2.0);
    assert!((after[0].demand_s - 0.000090).abs() < 1e-12, "{after:?}");
    let Change { words, after, .. } = changes(&c[0], &c, Some(room(4.0))).remove(0);
    assert_eq!(words, "the server allowed a second CPU besides cpu0");
    assert!((after[0].demand_s - 0.000050).abs() < 1e-12, "{after:?}");
}

/// A second CPU shared with perflab, on a host whose CPU per operation
/// moved from 46 µs (the one-CPU server's peak) to 69 µs (one user)
/// over the run's loads: the change leaves that much uncertain — the
/// server and perflab handing operations over on one CPU or across two —
/// and says so; the CPU out of the way shares nothing, nor does a
/// second CPU on a host of four.
#[test]
fn a_second_cpu_shared_with_perflab_counts_how_far_the_work_per_operation_moved() {
    let c = on_cpu0(0.000030, 0.000089);
    let room = |cpus: f64| host_room(cpus, 0.47, 0.0000142, Some([0.000046, 0.000069]));
    let [second, gone] = <[Change; 2]>::try_from(changes(&c[0], &c, Some(room(2.0)))).unwrap();
    assert!((second.sharing - 0.5).abs() < 1e-9, "{}", second.sharing);
    assert_eq!(
        second.words,
        "the server allowed a second CPU besides cpu0 (shared with perflab's 0.47 CPUs, which changes how the CPUs hand each operation over: the host's CPU per operation moved 50.0% over this run's loads (46.0µs to 69.0µs), and the interval allows as much)"
    );
    assert_eq!(gone.sharing, 0.0);
    let second = changes(&c[0], &c, Some(room(4.0))).remove(0);
    assert_eq!(second.sharing, 0.0);
    assert_eq!(second.words, "the server allowed a second CPU besides cpu0");
}

/// A read-only server held to cpu0, perflab on cpu1 at 0.7 CPU:
/// 15.4k/s at 1 user, then thrashing down to 7.7k/s at 32 (run queue
/// 35). With a second CPU it measured 18.1k/s at 32 users. Scaling
/// the thrashing point by the model's gain said 13.0k/s (−28%); from
/// the demand measured cleanly the prediction is within 10%.
#[test]
fn a_thrashing_one_cpu_run_predicts_a_second_cpu_from_its_clean_demand() {
    use crate::analyze::fixture::{mva_points, resource as one, SHAPE};
    let users = [1, 2, 4, 8, 16, 32];
    let xs = [15_400.0, 15_600.0, 15_500.0, 12_500.0, 9_800.0, 7_700.0];
    let mut points = mva_points(0.00006, 0.000001, 0.0, &users);
    for (p, x) in points.iter_mut().zip(xs) {
        p.throughput = x;
        p.completed = (x * 10.0) as u64;
        let r = std::time::Duration::from_secs_f64(p.load / x);
        p.response.mean = r;
        p.response.p99 = r * 3;
        p.interval_throughputs = vec![x; 10];
        p.generator.cpus = 0.7;
        p.generator.capacity = Some(1.0);
        p.extras.server_cpus_allowed = Some(1.0);
        p.extras.server_run_delay = Some(p.load - 1.0);
        p.extras.run_queue = Some(p.load + 3.0);
        p.resources = vec![
            one("cpu", ResourceKind::Cpu, 2.0, (0.99 + 0.7) / 2.0),
            one("cpu0", ResourceKind::OneCpu, 1.0, 0.99),
            one("cpu1", ResourceKind::OneCpu, 1.0, 0.7),
        ];
    }
    let v = crate::analyze::verdict_of(points, SHAPE, crate::analyze::DEFAULT_MAX_CV, 1);
    let b = v.bottleneck.as_ref().unwrap();
    assert_eq!(b.resource.as_deref(), Some("cpu0"), "{b:?}");
    let w = v.what_if.expect("a prediction");
    assert!(!w.scaled, "{w:?}");
    assert!(
        w.basis.contains("measured cleanly up to the peak"),
        "{}",
        w.basis
    );
    let second = &w.scenarios[0];
    assert!(second.change.contains("second CPU"), "{second:?}");
    assert_eq!(second.load, 32.0);
    let error = 18_100.0 / second.throughput - 1.0;
    assert!(
        error.abs() <= 0.10,
        "predicted {} ({error:+.3})",
        second.throughput
    );
    let at_peak = second.at_peak.expect("a prediction at the peak's load");
    assert_eq!(at_peak.load, 2.0);
    assert!(at_peak.throughput > 15_600.0, "{at_peak:?}");
    // Steady intervals: the interval is the model's miss alone, and the
    // second CPU, shared with perflab, adds how far the host's CPU per
    // operation moved up to the peak (1.3%: 1.69 CPUs at 15.4k/s and
    // 15.6k/s).
    assert_eq!(w.noise, 0.0);
    assert!((w.width - w.model_error).abs() < 1e-12, "{w:?}");
    assert!(
        (second.sharing - (15_600.0 / 15_400.0 - 1.0)).abs() < 1e-9,
        "{second:?}"
    );
    let width = w.width.hypot(second.sharing);
    let [lo, hi] = second.interval.expect("an interval");
    let x = second.throughput;
    assert!((lo - x * (1.0 - width)).abs() < 1e-6 && (hi - x * (1.0 + width)).abs() < 1e-6);
    assert!(at_peak.interval.is_some());
}

/// The one-CPU cell of a 2×2 measured on this host (PostgreSQL on cpu0,
/// balance enquiries, perflab on cpu1): 11.1k/s at 1 user to the peak's
/// 32.8k/s at 4. Given both CPUs, the two-CPU cell measured 51,465/s at 4
/// users (its hand-offs on one CPU cost less) and 35,352/s at 16 (the
/// server's sessions crowded onto perflab's CPU). The prediction counts
/// how far the host's CPU per operation moved over the steps that kept
/// it half busy (58.4 µs at 2 users, 46.3 µs at 4: 26%), and its
/// intervals hold both; perflab's work, moved onto the server's CPUs,
/// leaves the delay (counted in both, the peak's prediction was 37.4k).
#[test]
fn a_second_cpu_shared_with_perflab_holds_what_the_two_cpu_cell_measured() {
    use crate::analyze::fixture::{mva_points, resource as one, SHAPE};
    let users = [1, 2, 4, 8, 16];
    let xs = [11_141.0, 22_070.0, 32_814.0, 30_326.0, 30_123.0];
    let means_us = [89.3, 90.1, 121.0, 263.0, 531.0];
    let host = [0.384, 0.644, 0.759, 0.762, 0.752];
    let cpu0 = [0.34, 0.66, 0.99, 1.0, 1.0];
    let perflab = [0.298, 0.428, 0.481, 0.479, 0.466];
    let mut points = mva_points(0.00003, 0.000001, 0.0, &users);
    for (i, p) in points.iter_mut().enumerate() {
        let x = xs[i];
        p.throughput = x;
        p.completed = (x * 5.0) as u64;
        let r = std::time::Duration::from_secs_f64(means_us[i] * 1e-6);
        p.response.mean = r;
        p.response.p99 = r * 2;
        p.interval_throughputs = vec![x * 0.97, x, x * 1.03, x, x];
        p.generator.cpus = perflab[i];
        p.generator.capacity = Some(1.0);
        p.extras.server_cpus_allowed = Some(1.0);
        p.resources = vec![
            one("cpu", ResourceKind::Cpu, 2.0, host[i]),
            one("cpu0", ResourceKind::OneCpu, 1.0, cpu0[i]),
            one("cpu1", ResourceKind::OneCpu, 1.0, 2.0 * host[i] - cpu0[i]),
        ];
    }
    let v = crate::analyze::verdict_of(points, SHAPE, crate::analyze::DEFAULT_MAX_CV, 1);
    let w = v.what_if.expect("a prediction");
    let second = &w.scenarios[0];
    assert!(second.change.contains("second CPU"), "{second:?}");
    let spread = (1.288 / 22_070.0) / (1.518 / 32_814.0) - 1.0;
    assert!((second.sharing - spread).abs() < 1e-9, "{second:?}");
    assert!(
        second.change.contains("(46.3µs to 58.4µs)"),
        "{}",
        second.change
    );
    let holds = |interval: Option<[f64; 2]>, measured: f64| {
        interval.is_some_and(|[lo, hi]| lo <= measured && measured <= hi)
    };
    assert_eq!(second.load, 16.0);
    assert!(holds(second.interval, 35_352.0), "{second:?}");
    let at_peak = second.at_peak.expect("a prediction at the peak's load");
    assert_eq!(at_peak.load, 4.0);
    assert!(holds(at_peak.interval, 51_465.0), "{at_peak:?}");
    assert!(at_peak.throughput > 38_500.0, "{at_peak:?}");
}

/// The interval widens with the noise of the step the predictions
/// start from, combined with the model's miss: 5% of each makes 7.1%.
#[test]
fn an_interval_combines_the_steps_noise_and_the_models_miss() {
    use crate::analyze::fixture::{mva_points, SHAPE};
    let mut points = mva_points(0.001, 0.0, 0.0, &[1, 2, 4, 8]);
    // Intervals whose 95% half-width is 5% of their mean at every step.
    for p in &mut points {
        let x = p.throughput;
        let t = crate::util::t_975(9);
        let d = 0.05 * x * (10.0f64).sqrt() / t;
        // Ten values with sample standard deviation d: five at x − e
        // and five at x + e, e = d·√(9/10).
        let e = d * (0.9f64).sqrt();
        p.interval_throughputs = (0..10)
            .map(|i| if i % 2 == 0 { x - e } else { x + e })
            .collect();
    }
    let v = crate::analyze::verdict_of(points, SHAPE, crate::analyze::DEFAULT_MAX_CV, 1);
    let w = v.what_if.expect("a prediction");
    assert!((w.noise - 0.05).abs() < 1e-9, "{w:?}");
    assert!((w.width - w.noise.hypot(w.model_error)).abs() < 1e-12);
    for s in w.scenarios.iter().filter(|s| s.throughput.is_finite()) {
        let [lo, hi] = s.interval.expect("an interval");
        assert!(lo < s.throughput && s.throughput < hi, "{s:?}");
    }
}

/// More memory's prediction is a floor where the CPU sets it, however
/// busy the CPU was (the reads' and the reclaim's kernel work go with the
/// misses), and where another limit was under half busy; a limit over
/// half busy that is not a CPU gives a figure.
#[test]
fn more_memory_is_a_floor_under_a_cpu_or_an_idle_limit() {
    let memory = Change {
        server_memory: Some(1024.0 * 1024.0 * 1024.0),
        idle_floor: true,
        read_free_s: 0.0,
        ..Change::of(
            "a memory limit of 1.0 GiB".to_string(),
            Vec::new(),
            None,
            Changed {
                kind: ResourceKind::Disk,
                factor: None,
            },
        )
    };
    let centre = |name: &str, kind, demand_s| Centre {
        name: name.to_string(),
        kind,
        servers: 1.0,
        demand_s,
    };
    // At 290 tps: the CPU 58% busy, the link 58% or 2.9% busy.
    let cpu = centre("cpu0", ResourceKind::Cpu, 0.002);
    let busy_link = centre("link eth0 tx", ResourceKind::Link, 0.002);
    let idle_link = centre("link eth0 tx", ResourceKind::Link, 0.0001);
    assert!(floor(&memory, Some(&cpu), 290.0));
    assert!(floor(&memory, Some(&idle_link), 290.0));
    assert!(!floor(&memory, Some(&busy_link), 290.0));
    assert!(!floor(&memory, None, 290.0));
    let reads = centre("reads (disk vda)", ResourceKind::Disk, 0.0001);
    assert!(!floor(&memory, Some(&reads), 290.0));
    // A change that is not memory's (or the log's) is never a floor.
    let cpus = Change {
        server_memory: None,
        idle_floor: false,
        read_free_s: 0.0,
        ..memory.clone()
    };
    assert!(!floor(&cpus, Some(&cpu), 290.0));
}

/// A bank behind a link shaped to 2 Mbit/s each way, as measured: 2,120
/// tps from one user to sixteen, the host side's token bucket 99% busy
/// (468 µs of tokens per operation), the far side's 93% (440 µs), the
/// host's two CPUs 160 µs. Queued in series, the two buckets and the CPU
/// made 1,068 µs where one user measured 471 µs: the model missed by
/// 52%, and a link twice as fast was predicted at 3,526 tps where it
/// measured 4,256. As limiters the model reproduces the run, the doubled
/// link is its new cap at sixteen users, and at one user — whose time
/// without the link the delay hides — a floor.
#[test]
fn a_token_bucket_caps_the_throughput_rather_than_queueing_in_series() {
    use crate::analyze::bottleneck::{Bottleneck, BottleneckKind};
    use crate::analyze::points::ResourceUse;
    let (host, far) = (
        "link pl9x0h (tbf)",
        "link pl9x0s in the server's namespace (tbf)",
    );
    let mut points = crate::analyze::fixture::mva_points(0.0001, 0.0001, 0.0, &[1, 2, 4, 8, 16]);
    for p in &mut points {
        p.throughput = if p.load == 1.0 { 2124.0 } else { 2120.0 };
        p.interval_throughputs = vec![p.throughput; 20];
        let r = std::time::Duration::from_secs_f64(p.load / p.throughput);
        p.response.mean = r;
        let use_of = |name: &str, kind, servers: f64, demand_s: f64| ResourceUse {
            name: name.to_string(),
            kind,
            servers,
            utilisation: (demand_s * p.throughput / servers).min(1.0),
            saturation: None,
            errors: None,
        };
        p.resources = vec![
            use_of("cpu", ResourceKind::Cpu, 2.0, 0.000160),
            use_of(host, ResourceKind::Link, 1.0, 0.000468),
            use_of(far, ResourceKind::Link, 1.0, 0.000440),
        ];
    }
    let demands = crate::analyze::demands::demands(&points, true, Some(0));
    let link = Bottleneck {
        kind: BottleneckKind::Resource,
        name: host.to_string(),
        evidence: Vec::new(),
        ruled_out: Vec::new(),
        unreliable: false,
        next: None,
        resource: Some(host.to_string()),
    };
    let w = what_if(&points, &demands, &link, true, 0, None).expect("predictions for the link");
    assert!(w.model_error < 0.02, "{w:#?}");
    let twice = w
        .scenarios
        .iter()
        .find(|s| s.change.contains("twice the speed"))
        .unwrap_or_else(|| panic!("{w:#?}"));
    let bound = 2.0 / 0.000468;
    assert!((twice.throughput / bound - 1.0).abs() < 0.01, "{twice:?}");
    assert!(!twice.at_least && twice.interval.is_some(), "{twice:?}");
    // Sixteen users at the cap wait their turn: Little's law.
    let r = twice.response_s.unwrap();
    assert!((r * twice.throughput / 16.0 - 1.0).abs() < 1e-6, "{r}");
    let one = twice.at_peak.as_ref().expect("at the peak's one user");
    assert_eq!(one.load, 1.0);
    assert!(one.at_least && one.interval.is_none(), "{one:?}");
    assert!((one.throughput / 2124.0 - 1.0).abs() < 0.01, "{one:?}");
}
