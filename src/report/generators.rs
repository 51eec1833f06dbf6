//! The generators' table of a run on many generators: per step and
//! generator, its throughput and p95, its CPU against what it could use
//! (the figure the verdict's generator check reads), its host's CPU busy
//! and stolen by the hypervisor, when its clock started after the
//! step's first generator (by the coordinator's clock), and its clock's
//! offset from the coordinator's with the estimate's error. Empty for a
//! local run.

use super::grid::Grid;
use crate::engine::StepResult;
use crate::plan::Level;
use crate::units::{Latency, Percent};

/// The table, headed, each step's load written by `load`; empty when no
/// step ran on generators.
pub(crate) fn generator_table(steps: &[StepResult], load: fn(Level) -> String) -> String {
    match generator_grid(steps, load) {
        Some(grid) => format!(
            "\nthe generators during each step (cpu: CPUs used, of those it could use):\n{}",
            grid.terminal("")
        ),
        None => String::new(),
    }
}

/// The table's grid, for every form of report; none when no step ran on
/// generators.
pub(crate) fn generator_grid(steps: &[StepResult], load: fn(Level) -> String) -> Option<Grid> {
    let mut grid = Grid::new([
        "load",
        "generator",
        "ops/s",
        "p95",
        "cpu",
        "of",
        "host busy",
        "steal",
        "started",
        "clock offset",
    ]);
    grid.left = vec![1];
    for step in steps {
        let first = step
            .generators
            .iter()
            .map(|g| g.started)
            .fold(f64::INFINITY, f64::min);
        for g in &step.generators {
            grid.rows.push(vec![
                load(step.level),
                g.generator.clone(),
                format!("{:.0}", g.throughput),
                Latency::secs(g.p95).to_string(),
                format!("{:.2}", g.usage.cpu_share()),
                g.usage
                    .cpu_capacity
                    .map_or("-".to_string(), |c| format!("{c:.2}")),
                g.host_busy
                    .map_or("-".to_string(), |b| Percent(b).to_string()),
                g.host_steal
                    .map_or("-".to_string(), |b| Percent(b).to_string()),
                format!("+{:.1} ms", (g.started - first) * 1e3),
                format!(
                    "{:+.3} ms ±{:.3}",
                    g.clock_offset * 1e3,
                    g.clock_delay * 1e3 / 2.0
                ),
            ]);
        }
    }
    (!grid.rows.is_empty()).then_some(grid)
}
