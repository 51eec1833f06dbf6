//! The net table of a `perflab run net` run (`analyze::net`): per step,
//! its transactions per second or gigabits per second, the latency's
//! median and p99, the TCP retransmits here and at the agent, and the CPU
//! each transaction (µs) or each gigabyte (ms) cost perflab's process,
//! this host, the agent's process and the agent's host. Empty for any
//! other workload.

use super::grid::Grid;
use crate::analyze::net::{net_steps, CostUnit, NetStep};
use crate::store::StoredRun;
use crate::units::Latency;

/// A CPU cost per unit as the table prints it: µs per transaction, ms
/// per gigabyte.
fn cost(seconds: Option<f64>, unit: CostUnit) -> String {
    let scale = match unit {
        CostUnit::Transaction => 1e6,
        CostUnit::Gigabyte => 1e3,
    };
    seconds.map_or("-".to_string(), |s| format!("{:.1}", s * scale))
}

fn count(n: Option<u64>) -> String {
    n.map_or("-".to_string(), |n| n.to_string())
}

/// The table's grid; none for a run of another workload.
pub(crate) fn net_grid(run: &StoredRun) -> Option<Grid> {
    let steps = net_steps(run);
    let unit = steps.first()?.unit;
    let (rate, per) = match unit {
        CostUnit::Transaction => ("tps", "µs/tx"),
        CostUnit::Gigabyte => ("Gbit/s", "ms/GB"),
    };
    let mut grid = Grid::new([
        "load".to_string(),
        rate.to_string(),
        "p50".to_string(),
        "p99".to_string(),
        "retrans".to_string(),
        "agent retrans".to_string(),
        format!("perflab {per}"),
        format!("host {per}"),
        format!("agent {per}"),
        format!("agent host {per}"),
    ]);
    for (net, step) in steps.iter().zip(&run.steps) {
        let summary = step.summary();
        grid.rows.push(row(net, &summary));
    }
    Some(grid)
}

fn row(net: &NetStep, summary: &crate::measure::StepSummary) -> Vec<String> {
    vec![
        net.load.clone(),
        match net.unit {
            CostUnit::Transaction => format!("{:.0}", net.transactions_per_s),
            CostUnit::Gigabyte => format!("{:.2}", net.bits_per_s / 1e9),
        },
        Latency(summary.response.p50).to_string(),
        Latency(summary.response.p99).to_string(),
        count(net.retransmits),
        count(net.agent_retransmits),
        cost(net.cpu.perflab, net.unit),
        cost(net.cpu.host, net.unit),
        cost(net.cpu.agent, net.unit),
        cost(net.cpu.agent_host, net.unit),
    ]
}

/// The terminal form, headed; empty for another workload.
pub(crate) fn net_table(run: &StoredRun) -> String {
    match net_grid(run) {
        Some(grid) => format!(
            "\nthe network path (CPU per {}: perflab's process, this host, the agent's process, its host):\n{}",
            unit_words(run),
            grid.terminal("")
        ),
        None => String::new(),
    }
}

/// What the costs are counted per, in words.
pub(crate) fn unit_words(run: &StoredRun) -> &'static str {
    match net_steps(run).first().map(|s| s.unit) {
        Some(CostUnit::Gigabyte) => "gigabyte moved, CPU-ms",
        _ => "transaction, CPU-µs",
    }
}
