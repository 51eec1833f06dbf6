//! A workload's own figures per step: what only it knows how to count
//! (the CPU a network transaction cost both ends, an accelerator's hits
//! and misses), computed from the steps as stored. A workload declares
//! them by [`super::WorkloadKind::figures`]; every report format shows
//! them in one generic section (a table headed by [`Figures::title`]), the
//! JSON export keeps each step's under [`Figures::key`], the verdict adds
//! a step's [`StepFigures::evidence`] at its bottleneck, and `compare`
//! tests a [`StepFigures::cost`] between runs. Nothing outside the
//! workload's own folder knows which figures they are.

/// A workload's figures for every step of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// The section's title, e.g. `the network path`.
    pub(crate) title: String,
    /// What the columns count and in which units, one sentence.
    pub(crate) about: String,
    /// The columns' heads, after the load's, a unit in each.
    pub(crate) heads: Vec<String>,
    /// The key each step's figures are exported under (`steps[].KEY`).
    pub(crate) key: &'static str,
    /// How a step's [`StepFigures::cost`] is said, when it has one.
    pub(crate) cost: Option<CostWords>,
    /// Lines printed under the table (what a short column head stands
    /// for).
    pub(crate) legend: Vec<String>,
    /// One per step of the run, in the run's order.
    pub(crate) steps: Vec<StepFigures>,
}

/// One step's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFigures {
    /// Its cells, one per head, as printed (`-` for a figure not measured).
    pub(crate) cells: Vec<String>,
    /// The same figures for the JSON export.
    pub(crate) export: serde_json::Value,
    /// What the verdict says of them when the bottleneck is judged at
    /// this step.
    pub(crate) evidence: Vec<String>,
    /// The server's CPUs, when the workload measured its server itself
    /// (an echo agent on this host): the verdict counts them as the
    /// server's.
    pub(crate) server_cpus: Option<f64>,
    /// What one unit of work cost, for a comparison between runs.
    pub(crate) cost: Option<Cost>,
}

/// What one unit of work cost over a step: over its whole measured
/// window, and in each measured interval (the comparison's samples).
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub(crate) whole: f64,
    pub(crate) per_interval: Vec<f64>,
}

/// How a cost is said: its value times `scale` in `unit` per `work`,
/// spent by `whom`, e.g. 12.5 CPU-µs per transaction (perflab + agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CostWords {
    #[serde(skip)]
    pub(crate) scale: u32,
    pub(crate) unit: &'static str,
    pub(crate) work: &'static str,
    pub(crate) whom: &'static str,
}

impl CostWords {
    /// `value` (in the cost's base unit) in these words' unit.
    pub(crate) fn scaled(&self, value: f64) -> f64 {
        value * f64::from(self.scale)
    }
}

impl Figures {
    /// The figures of the step at `index` of the run, when the workload
    /// gave them.
    pub(crate) fn at(&self, index: usize) -> Option<&StepFigures> {
        self.steps.get(index)
    }
}
