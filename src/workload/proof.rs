//! A workload that exists only in tests, to prove that adding one takes
//! its own file and its lines in the registry (its `mod` line and its
//! entry in `workloads!`), and nothing else: `perflab run proof` counts
//! to `--count` in each operation and gives a figure of its own per step,
//! the numbers counted per operation, from a counter its sessions add to
//! and its statistics source stores with each interval. Help, the run,
//! the store, every report format, the export and the verdict take it
//! through the seams ([`super::WorkloadKind`], [`super::figures`]) alone;
//! the test at the end runs it through `perflab run` and `perflab report`.

use super::figures::{Figures, StepFigures};
use super::{CheckReport, OpCounts, Seat, Session, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::measure::{Outcome, Phase};
use crate::plan::Plan;
use crate::probe::{DbProbe, DbStatsSource};
use crate::record::StepResult;
use crate::sut::Target;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `perflab run proof`.
pub struct Proof;

/// Its flags.
#[derive(Debug, clap::Args)]
pub struct ProofArgs {
    /// Numbers counted in each operation.
    #[arg(long, default_value_t = 1000)]
    count: u32,
}

/// `perflab check proof` takes no flags.
#[derive(Debug, clap::Args)]
pub struct ProofCheckArgs {}

/// What the plan stores of it.
#[derive(Debug, serde::Serialize)]
pub struct ProofSpec {
    count: u32,
}

/// The counter its sessions add to, as stored with each interval.
const COUNTED: &str = "proof_counted";

impl WorkloadKind for Proof {
    const NAME: &'static str = "proof";
    const ABOUT: &'static str = "A workload of the tests: counts in each operation.";
    const CHECK_ABOUT: &'static str = "Nothing to check.";
    type RunArgs = ProofArgs;
    type CheckArgs = ProofCheckArgs;
    type Spec = ProofSpec;

    fn validate(args: &ProofArgs) -> Result<ProofSpec, PlanError> {
        if args.count == 0 {
            return Err(PlanError::flag(
                "--count",
                "0 counts nothing",
                "give 1 or more",
            ));
        }
        Ok(ProofSpec { count: args.count })
    }

    fn target(_spec: &ProofSpec) -> Target {
        Target::InProcess
    }

    fn start<D: SweepDriver>(
        spec: &ProofSpec,
        _plan: &Plan,
        driver: D,
    ) -> anyhow::Result<D::Output> {
        let counted = Arc::new(AtomicU64::new(0));
        let started = Started {
            db_probe: Some(DbProbe::start(Counter(Arc::clone(&counted)))?),
            ..Started::default()
        };
        let workload = ProofWorkload {
            count: spec.count,
            counted,
        };
        driver.drive(Arc::new(workload), started)
    }

    fn check(_args: &ProofCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new("the proof workload keeps nothing to check").into())
    }

    fn figures(steps: &[StepResult], _op_names: &[String]) -> Option<Figures> {
        let steps = steps
            .iter()
            .map(|step| {
                let (tally, _) = step.measured();
                let counted: f64 = step
                    .intervals
                    .iter()
                    .filter(|i| i.phase == Phase::Measured)
                    .filter_map(|i| i.db.as_ref()?.counters.get(COUNTED).copied())
                    .sum();
                let ops = tally.all_ops().completed();
                let per = (ops > 0).then(|| counted / ops as f64);
                StepFigures {
                    cells: vec![per.map_or("-".to_string(), |p| format!("{p:.0}"))],
                    export: serde_json::json!({ "counted_per_op": per }),
                    evidence: vec![format!("{} counted {counted:.0}", step.level)],
                    server_cpus: None,
                    cost: None,
                }
            })
            .collect();
        Some(Figures {
            title: "the counting".to_string(),
            about: "numbers counted per operation".to_string(),
            heads: vec!["counted/op".to_string()],
            key: "proof",
            cost: None,
            legend: Vec::new(),
            steps,
        })
    }
}

/// The started workload.
struct ProofWorkload {
    count: u32,
    counted: Arc<AtomicU64>,
}

impl Workload for ProofWorkload {
    type Session = ProofSession;

    fn op_names(&self) -> &[&'static str] {
        &["count"]
    }

    async fn open_session(
        &self,
        _user: u32,
        _seed: u64,
        _seat: Seat,
    ) -> anyhow::Result<ProofSession> {
        Ok(ProofSession {
            count: self.count,
            counted: Arc::clone(&self.counted),
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

/// One user.
struct ProofSession {
    count: u32,
    counted: Arc<AtomicU64>,
}

impl Session for ProofSession {
    fn choose(&mut self) -> usize {
        0
    }

    async fn execute(&mut self, _op: usize) -> Outcome {
        let mut n = 0u32;
        while n < self.count {
            n = std::hint::black_box(n + 1);
        }
        self.counted.fetch_add(u64::from(n), Ordering::Relaxed);
        Outcome::ok()
    }
}

/// The sessions' counter, read at each interval's end.
struct Counter(Arc<AtomicU64>);

impl DbStatsSource for Counter {
    fn sample_waits(&mut self, _waits: &mut BTreeMap<String, u64>) -> anyhow::Result<()> {
        Ok(())
    }

    fn counters(&mut self) -> anyhow::Result<BTreeMap<String, f64>> {
        Ok(BTreeMap::from([(
            COUNTED.to_string(),
            self.0.load(Ordering::Relaxed) as f64,
        )]))
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::run_in as perflab;

    #[test]
    fn a_workload_added_in_its_own_file_has_its_figure_in_every_report() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let run = "run proof --count 500 --users 1,2 --warmup 0s --duration 400ms --interval 100ms --store DIR/s.db";
        assert_eq!(perflab(dir, run), 0);
        let report = "report last --store DIR/s.db --md DIR/r.md --html DIR/r.html";
        assert_eq!(perflab(dir, report), 0);
        assert_eq!(
            perflab(dir, "show last --store DIR/s.db --json DIR/r.json"),
            0
        );
        let md = std::fs::read_to_string(dir.join("r.md")).unwrap();
        assert!(
            md.contains("### The counting\n\nNumbers counted per operation."),
            "{md}"
        );
        assert!(md.contains("| load | counted/op |"), "{md}");
        let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
        assert!(html.contains("Run 1: the counting</h3>"));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
        // Each operation counts to 500; the sessions' counter and the
        // engine's tally are read at an interval's end a moment apart.
        let per = json["steps"][1]["proof"]["counted_per_op"]
            .as_f64()
            .unwrap_or(0.0);
        assert!((per - 500.0).abs() <= 25.0, "{per}");
        // The verdict quotes the figure's evidence at its step.
        let verdict = json["verdict"]["bottleneck"]["evidence"].to_string();
        assert!(verdict.contains(" counted "), "{verdict}");
    }
}
