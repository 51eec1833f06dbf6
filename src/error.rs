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
}

impl PlanError {
    /// Bad input described by `message`, which names the problem and the fix.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
        }
    }

    /// A bad flag value: names the flag, the value's problem and the fix.
    pub(crate) fn flag(flag: &str, problem: impl std::fmt::Display, fix: &str) -> Self {
        PlanError::new(format!("{flag}: {problem}; {fix}"))
    }
}
