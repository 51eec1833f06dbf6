//! Synthetic steps for the analysis' tests: what exact MVA predicts for a
//! network of CPU and disk, with noise on every measured figure.

use super::points::{GeneratorUse, HostExtras, ResourceKind, ResourceUse, StepPoint};
use super::{mva, RunShape};
use crate::measure::LatencySummary;
use crate::plan::Level;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// A closed loop on another host's server, two worker threads.
pub(crate) const SHAPE: RunShape = RunShape {
    closed: true,
    embedded: false,
    threads: 2,
    single_writer: false,
    kernel_served: false,
};

/// A resource `name` of `servers` busy `u` of the time, nothing else
/// said of it.
pub(crate) fn resource(name: &str, kind: ResourceKind, servers: f64, u: f64) -> ResourceUse {
    ResourceUse {
        name: name.to_string(),
        kind,
        servers,
        utilisation: u,
        saturation: None,
        errors: None,
    }
}

/// A step as exact MVA predicts it for single-server CPU and disk
/// centres, with ±2% noise on every measured figure.
pub(crate) fn mva_points(d_cpu: f64, d_disk: f64, think: f64, users: &[u32]) -> Vec<StepPoint> {
    let solved = mva::solve(&[d_cpu, d_disk], think, *users.iter().max().unwrap());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut noise = move || 1.0 + rng.gen_range(-0.02..0.02);
    users
        .iter()
        .enumerate()
        .map(|(index, &n)| {
            let m = &solved[n as usize - 1];
            let r = m.response_s * noise();
            let d = |s: f64| Duration::from_secs_f64(s);
            let resource = |name: &str, kind, u: f64| ResourceUse {
                name: name.to_string(),
                kind,
                servers: 1.0,
                utilisation: u.min(1.0),
                saturation: None,
                errors: None,
            };
            StepPoint {
                index,
                level: Level::Users(n),
                load: f64::from(n),
                complete: true,
                throughput: m.throughput * noise(),
                unit: crate::units::RateUnit::Operations,
                completed: (m.throughput * 20.0) as u64,
                error_rate: 0.0,
                retries: 0,
                failed_s: 0.0,
                response: LatencySummary {
                    count: (m.throughput * 20.0) as u64,
                    mean: d(r),
                    p50: d(r * 0.7),
                    p90: d(r * 2.3),
                    p95: d(r * 3.0),
                    p99: d(r * 4.6),
                    p999: d(r * 6.9),
                    max: d(r * 9.0),
                },
                over_200ms: 0.0,
                over_1s: 0.0,
                held_over_1s_s: 0.0,
                far_tail: 0.0,
                slow_group: None,
                think_s: think,
                interval_throughputs: vec![m.throughput; 20],
                resources: vec![
                    resource("cpu", ResourceKind::Cpu, m.utilisation[0] * noise()),
                    resource("disk vda", ResourceKind::Disk, m.utilisation[1] * noise()),
                ],
                extras: HostExtras::default(),
                busiest_generator: None,
                generator: GeneratorUse {
                    cpus: 0.05,
                    capacity: Some(2.0),
                    ..GeneratorUse::default()
                },
                waits: Default::default(),
                db: Default::default(),
                disk_await_s: Default::default(),
                disk_iops: Default::default(),
                disk_bytes_per_s: Default::default(),
                io_path: Default::default(),
                threads: Default::default(),
            }
        })
        .collect()
}
