//! The configuration lab (`perflab lab FILE.toml`): one experiment file
//! names a workload, its target and flags, and the variants of the
//! server's configuration; perflab runs every variant `repetitions` times
//! in a seeded interleaved order, each cell a run in the store tagged with
//! the lab, and prints the matrix: each variant's peak throughput with its
//! 95% interval, its bottleneck, and how it differs from the first.
//!
//! [`file`] reads and checks the file, [`plan`] orders the cells and
//! checks each cell's run as `perflab run` would, [`run`] runs them one by
//! one as `perflab run` processes and marks them in the store, [`report`]
//! builds the matrix from the store alone and [`render`] writes it (terminal,
//! Markdown, HTML); [`value`] reads costs and the scorecard, [`capacity`]
//! answers `--need`/`--slo`; [`hooks`] runs a variant's own
//! setup and teardown commands around its cells. Which knob a target takes is
//! the target's to say (`sut::knobs`).

pub(crate) mod capacity;
pub(crate) mod file;
#[cfg(test)]
mod file_props;
pub(crate) mod hooks;
pub(crate) mod live;
mod place;
pub(crate) mod plan;
pub(crate) mod render;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod value;
mod variant;

pub(crate) use file::LabFile;
pub(crate) use plan::{Cell, LabPlan};
pub(crate) use variant::{Axis, Variant};

use serde::{Deserialize, Serialize};

/// What the store keeps of a lab file: enough to rebuild the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LabSpec {
    /// The lab's name (given to setup and teardown commands).
    #[serde(default)]
    pub(crate) name: String,
    pub(crate) workload: String,
    pub(crate) target: Option<String>,
    pub(crate) args: Vec<String>,
    pub(crate) repetitions: u32,
    pub(crate) seed: u64,
    pub(crate) variants: Vec<Variant>,
    pub(crate) axes: Vec<Axis>,
    /// The cost unit and the scorecard's weights (each variant holds its
    /// cost and ratings).
    #[serde(default)]
    pub(crate) valuation: value::Valuation,
}

impl LabSpec {
    /// The spec of a checked lab file and its plan, as it may be shown
    /// and stored: the target's password and secret headers masked
    /// ([`crate::secret`]).
    pub(crate) fn of(file: &LabFile, plan: &LabPlan) -> Self {
        LabSpec {
            name: file.name.clone(),
            workload: file.workload.clone(),
            target: file.target.as_deref().map(crate::secret::redact),
            args: crate::secret::redact_args(&file.args),
            repetitions: file.repetitions,
            seed: plan.seed,
            variants: file.variants.clone(),
            axes: file.axes.clone(),
            valuation: file.valuation.clone(),
        }
    }

    /// The spec a stored lab kept.
    pub(crate) fn of_stored(stored: &crate::store::StoredLab) -> anyhow::Result<Self> {
        serde_json::from_str(&stored.spec).map_err(|e| {
            anyhow::anyhow!(
                "lab {} has a spec this perflab cannot read ({e})",
                stored.id
            )
        })
    }

    /// The setup and teardown of cell `position` (repetition `repetition`)
    /// of variant `variant`; none for a variant the spec does not have.
    pub(crate) fn hooks(
        &self,
        variant: usize,
        position: usize,
        repetition: u32,
    ) -> Option<hooks::Hooks> {
        self.variants
            .get(variant)
            .map(|v| hooks::Hooks::of(&self.name, &v.name, &v.knobs, position, repetition))
    }
}
