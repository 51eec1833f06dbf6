//! The error every layer returns for input the user can fix: a bad flag, a
//! path that cannot be used, a run that does not exist, a refused token.
//! `commands` finds it anywhere in an error's chain and exits with code 2
//! (bad input); every other error exits with 1. It sits below every module
//! so that the store, the probes and the workloads can say "bad input"
//! without importing the command line.

/// Bad input: one line naming the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    message: String,
    /// The server's setting that refused a session, when a server that
    /// answered would not take another (`max_connections`).
    refused_by: Option<&'static str>,
}

impl PlanError {
    /// Bad input described by `message`, which names the problem and the fix.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
            refused_by: None,
        }
    }

    /// The same error, said of a session the server refused because of its
    /// setting `setting`: an admission limit, not bad input of the user's
    /// once the run has sessions open.
    pub(crate) fn refused_by(mut self, setting: &'static str) -> Self {
        self.refused_by = Some(setting);
        self
    }

    /// The setting that refused the session, when one did.
    pub(crate) fn refusing_setting(&self) -> Option<&'static str> {
        self.refused_by
    }

    /// The setting that refused a session anywhere in `e`'s chain.
    pub(crate) fn refusal_in(e: &anyhow::Error) -> Option<&'static str> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<PlanError>())
            .find_map(PlanError::refusing_setting)
    }

    /// A bad flag value: names the flag, the value's problem and the fix.
    pub(crate) fn flag(flag: &str, problem: impl std::fmt::Display, fix: &str) -> Self {
        PlanError::new(format!("{flag}: {problem}; {fix}"))
    }
}
