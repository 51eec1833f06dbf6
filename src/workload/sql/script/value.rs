//! The values a script's expressions compute and the errors computing
//! them can meet: plain data every part of the interpreter reads.

/// A value an expression computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
}

impl Val {
    /// Whether `\if` takes its branch: true, a non-zero number; NULL is false.
    pub(crate) fn truthy(self) -> Result<bool, EvalError> {
        Ok(match self {
            Val::Null => false,
            Val::Bool(b) => b,
            Val::Int(i) => i != 0,
            Val::Double(d) => d != 0.0,
        })
    }

    pub(crate) fn int(self) -> Result<i64, EvalError> {
        match self {
            Val::Int(i) => Ok(i),
            Val::Double(d) if d.is_finite() && d >= i64::MIN as f64 && d < i64::MAX as f64 => {
                Ok(d as i64)
            }
            Val::Double(_) => Err(EvalError::OutOfRange),
            Val::Bool(b) => Ok(i64::from(b)),
            Val::Null => Err(EvalError::Null),
        }
    }

    pub(crate) fn double(self) -> Result<f64, EvalError> {
        match self {
            Val::Int(i) => Ok(i as f64),
            Val::Double(d) => Ok(d),
            Val::Bool(b) => Ok(f64::from(u8::from(b))),
            Val::Null => Err(EvalError::Null),
        }
    }
}

/// Why an expression could not be computed: the operation's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvalError {
    /// An integer result out of bigint's range.
    OutOfRange,
    DivisionByZero,
    /// NULL where a number is needed.
    Null,
    /// A variable read before anything set it.
    Unset,
    /// A variable's text that is no number.
    NotANumber,
    /// A function's argument outside what it accepts (`random(5, 1)`).
    BadArgument,
}

impl EvalError {
    /// The error code the step counts it under.
    pub(crate) fn code(self) -> &'static str {
        match self {
            EvalError::OutOfRange => "script-out-of-range",
            EvalError::DivisionByZero => "script-division-by-zero",
            EvalError::Null => "script-null",
            EvalError::Unset => "script-unset-variable",
            EvalError::NotANumber => "script-not-a-number",
            EvalError::BadArgument => "script-bad-argument",
        }
    }
}
