//! Where the followed processes' threads spent a step: the length-weighted
//! mean of each interval's thread states (see `probe::counters::threads`),
//! for the server under test and for perflab, and the question the rules
//! ask of it — where did the server's threads spend their time at a step,
//! as shares.

use crate::probe::counters::threads::ThreadStates;
use crate::probe::counters::HostSample;
use serde::Serialize;

/// The server's and perflab's thread states over a step's window.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub(crate) struct StepThreads {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<ThreadStates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) perflab: Option<ThreadStates>,
}

impl StepThreads {
    /// The mean over the samples of a step.
    pub(crate) fn of(samples: &[&HostSample]) -> Self {
        let group = |label: &str| {
            let parts: Vec<(&ThreadStates, f64)> = samples
                .iter()
                .filter_map(|s| {
                    let p = s.processes.iter().find(|p| p.label == label)?;
                    Some((p.thread_states.as_ref()?, s.seconds))
                })
                .collect();
            ThreadStates::mean(&parts)
        };
        StepThreads {
            server: group("server"),
            perflab: group("perflab"),
        }
    }

    /// Where the server's serving threads spent their time: each class's
    /// share, largest first (`on CPU`, `waiting for a CPU`,
    /// `I/O (journal commit)`, `locks`, `clients/network`, `sleep`,
    /// `other`); none when its threads were not followed.
    pub(crate) fn server_shares(&self) -> Option<Vec<(String, f64)>> {
        let shares = self.server.as_ref()?.serving().shares();
        (!shares.is_empty()).then_some(shares)
    }

    /// Neither group's threads were read.
    pub(crate) fn is_empty(&self) -> bool {
        self.server.is_none() && self.perflab.is_none()
    }
}

/// The largest `n` shares of a group's serving threads, in words
/// (`locks 79%, I/O (journal commit) 12%, on CPU 4%`).
pub(crate) fn shares_text(states: &ThreadStates, n: usize) -> String {
    states
        .serving()
        .shares()
        .iter()
        .take(n)
        .map(|(name, s)| format!("{name} {}", crate::units::Percent(*s)))
        .collect::<Vec<_>>()
        .join(", ")
}
