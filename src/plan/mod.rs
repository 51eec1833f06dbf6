//! The validated, typed description of what a run does: which workload
//! against which target, the load model, the sweep of load levels and the
//! step timing. Only `cli` builds a [`Plan`]; the engine never sees a string
//! option. A plan serialises to JSON so that a run stores it as resolved,
//! and a stored run reads it back typed (fields that older stores lack
//! have defaults).

pub(crate) mod load;
pub(crate) mod slack;
mod slo;
mod workload;

pub use load::{Arrivals, Level, LoadModel, Sweep, ThinkTime};
pub use slack::Slack;
pub use slo::{Slo, SloMetric};
pub use workload::{StepDefaults, WorkloadSpec};

use crate::sut::Traits;
use crate::util::serde_duration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One validated run plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// What each virtual user does, and against what.
    pub workload: WorkloadSpec,
    /// What the target is (kind, embedded, single writer, managed). Runs
    /// stored before it was recorded read it from their target's text.
    #[serde(default)]
    pub target: Option<Traits>,
    /// Closed (users, think time) or open (arrival rate) load.
    pub load: LoadModel,
    /// The load levels, in the order they run.
    pub sweep: Sweep,
    /// Warm-up before each measured window; not counted.
    #[serde(with = "serde_duration")]
    pub warmup: Duration,
    /// The measured window of each step.
    #[serde(with = "serde_duration")]
    pub duration: Duration,
    /// Length of one interval snapshot (1 s).
    #[serde(with = "serde_duration")]
    pub interval: Duration,
    /// Worker threads generating load (each with its own runtime).
    pub threads: usize,
    /// In a closed loop, a step of at most this many users in one process
    /// gives each user a worker thread of its own, past `threads`, so
    /// that its session holds its socket ([`ALONE_PER_CPU`]); 0: never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub alone_up_to: usize,
    /// An operation slower than this is an error of kind `timeout`.
    #[serde(with = "serde_duration")]
    pub timeout: Duration,
    /// A step whose failed share of operations exceeds this fraction ends the sweep.
    pub max_error_rate: f64,
    /// Seed of every random stream of the run.
    pub seed: u64,
    /// The server under test's processes, followed by the host probe.
    pub server: Option<crate::probe::counters::process::ProcessSelector>,
    /// Service level objectives the verdict judges the steps by.
    #[serde(default)]
    pub slos: Vec<Slo>,
    /// The verdict flags steps whose throughputs vary more than this; with
    /// `max_repeat` above `repeat`, a level runs again while they do.
    #[serde(default = "default_max_cv")]
    pub max_cv: f64,
    /// Runs of each level.
    #[serde(default = "one")]
    pub repeat: u32,
    /// Most runs of a level whose throughputs vary more than `max_cv`.
    #[serde(default = "one")]
    pub max_repeat: u32,
    /// The generators that offer the load (`agent://HOST:PORT`), none
    /// when this process does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<String>,
    /// What a step does when a generator is lost in it.
    #[serde(default, skip_serializing_if = "GeneratorLoss::is_stop")]
    pub on_generator_loss: GeneratorLoss,
    /// `--find`: the levels are searched for the highest that meets the
    /// objectives, from the sweep's first, instead of run as listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find: Option<Find>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Users per CPU up to which a database session with a lean socket of its
/// own (PostgreSQL's and MySQL's, for the bank and the scripts) gets a
/// worker thread to itself when `--threads` is not given. Alone, it reads
/// its replies with blocking calls; past it, the users share one thread
/// per CPU, each thread's loop polling their sockets. Measured on 2 CPUs
/// at 4 users against `pgbench -j 2`, paired rounds of 5 s: a thread per
/// user made 0.86 (0.83–0.90) of pgbench's tps on a custom script, 0.89
/// (0.84–0.95) on its simple-update and 0.90 (0.84–0.98) on the bank, its
/// CPU per transaction 1.04–1.10 of pgbench's; two shared threads (whose
/// users try their sockets straight after a request, as pgbench does) made
/// 0.95 (0.93–0.97), 0.94 (0.89–0.99) and 0.95 (0.89–1.02), at 1.03–1.09:
/// four client threads sleeping and waking on every statement beside four
/// server processes cost the server more than two that often find a
/// reply waiting. At 1 and 2 users a thread each holds its own.
pub const ALONE_PER_CPU: usize = 1;

/// How the search of `--find` ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Find {
    /// The search stops when the lowest level that did not meet is within
    /// this fraction above the highest that did.
    pub precision: f64,
    /// The most steps the search runs, runs again of an undecided level
    /// included: at this budget it stops with the bracket it has.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
}

/// The `--max-steps` default: about five times what a search to 5% of a
/// queue takes, so that only a search that wanders is cut.
pub(crate) const DEFAULT_MAX_STEPS: u32 = 30;

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS
}

/// The `--precision` default: the bracket within 5%.
pub(crate) const DEFAULT_PRECISION: f64 = 0.05;

/// The runs of an undecided level under `--find` when `--max-repeat` is
/// not given.
pub(crate) const FIND_REPEATS: u32 = 2;

/// What a run on generators does when one stops answering mid-step: the
/// step is kept (marked degraded, the generator named) either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum GeneratorLoss {
    /// The sweep goes on with the generators left.
    Continue,
    /// The sweep ends after that step.
    #[default]
    Stop,
}

impl GeneratorLoss {
    fn is_stop(&self) -> bool {
        *self == GeneratorLoss::Stop
    }
}

/// The `--max-cv` default, for plans stored before it was.
pub(crate) const DEFAULT_MAX_CV: f64 = 0.05;

/// The longest operation timeout, and the longest think time (or wait a
/// workload's form may ask for).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

fn default_max_cv() -> f64 {
    DEFAULT_MAX_CV
}

fn one() -> u32 {
    1
}
