//! The error for input the user can fix: a bad flag, a path that cannot be
//! used, a run that does not exist. It exits with code 2.

/// Bad input: one line naming the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    message: String,
}

impl PlanError {
    pub fn new(message: impl Into<String>) -> Self {
        PlanError {
            message: message.into(),
        }
    }

    /// A bad flag value: names the flag, the value's problem and the fix.
    pub fn flag(flag: &str, problem: impl std::fmt::Display, fix: &str) -> Self {
        PlanError::new(format!("{flag}: {problem}; {fix}"))
    }
}
