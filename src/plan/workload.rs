//! What a plan knows of a workload: its name and its validated options as
//! the workload records them. The options' meaning belongs to the workload
//! (`src/workload/NAME/`); the plan only carries and stores them.

use serde::{Deserialize, Serialize};

/// A workload's part of the plan: `{"name": …, …its options}` when stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// The workload's name, as typed on the command line.
    pub name: String,
    /// Its validated options, as it serialises them.
    #[serde(flatten)]
    pub options: serde_json::Map<String, serde_json::Value>,
}

impl WorkloadSpec {
    /// Records `options` (a struct) of the workload `name`.
    pub fn new(name: &str, options: &impl Serialize) -> Result<Self, serde_json::Error> {
        let options = match serde_json::to_value(options)? {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "options must be a map, not {other}"
                )))
            }
        };
        Ok(WorkloadSpec {
            name: name.to_string(),
            options,
        })
    }

    /// The workload's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the workload's own input (a job file) sets for the steps where
    /// no flag does: its recorded `steps`, or nothing.
    pub(crate) fn steps(&self) -> StepDefaults {
        self.options
            .get(STEPS)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

/// The key of a workload's recorded options that holds its [`StepDefaults`].
pub(crate) const STEPS: &str = "steps";

/// The steps a workload's input asks for, each taken only where its flag
/// is not given: one level of `users` (or, with `rate`, an offered rate
/// served by `users` connections), the measured window, and the worker
/// threads that generate the load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    /// Operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<std::time::Duration>,
    /// Worker threads, where one per CPU would not measure what the
    /// workload models (a queue perflab keeps itself must see its arrivals
    /// in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// The open loop's pacing, where `auto`'s batches would not model
    /// what the workload does (a queue perflab keeps itself paces each
    /// arrival at its time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<super::Slack>,
}
