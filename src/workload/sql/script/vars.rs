//! A script's variables: every name is given a slot when the scripts are
//! read ([`Slots`]), and each session keeps its values in a vector of
//! slots ([`Vars`]). A value is a number, a boolean, NULL, or text (from
//! `-D` or `\gset`), read as a number where an expression needs one. A
//! text value keeps its buffer between operations: setting it again
//! allocates nothing once it is long enough.

use super::value::{EvalError, Val};
use std::collections::BTreeMap;

/// The most distinct variables the scripts of one run may name.
pub(crate) const MAX_VARS: usize = 1_000;

/// The longest text a variable keeps (a `\gset` of a longer column is cut
/// to it): a reply cannot grow a session's memory without bound.
pub(crate) const MAX_TEXT: usize = 64 * 1024;

/// Variable names and their slots.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slots {
    by_name: BTreeMap<String, usize>,
}

impl Slots {
    /// The slot of `name`, given one if it has none yet.
    pub(crate) fn slot(&mut self, name: &str) -> Result<usize, String> {
        if let Some(slot) = self.by_name.get(name) {
            return Ok(*slot);
        }
        if self.by_name.len() >= MAX_VARS {
            return Err(format!("the scripts name more than {MAX_VARS} variables"));
        }
        let slot = self.by_name.len();
        self.by_name.insert(name.to_string(), slot);
        Ok(slot)
    }

    /// The slot of `name`, if any script named it.
    pub(crate) fn get(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// How many slots there are.
    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The name of each slot, in slot order.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names = vec![""; self.by_name.len()];
        for (name, slot) in &self.by_name {
            names[*slot] = name;
        }
        names
    }
}

/// One variable's value.
#[derive(Debug, Clone, Default)]
struct Var {
    kind: Kind,
    int: i64,
    double: f64,
    text: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Unset,
    Null,
    Bool,
    Int,
    Double,
    Text,
}

/// A value as a statement binds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Param<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    Text(&'a str),
}

/// One session's values, by slot.
#[derive(Debug, Clone)]
pub(crate) struct Vars {
    vars: Vec<Var>,
}

impl Vars {
    /// Every slot of `slots`, unset.
    pub(crate) fn new(slots: &Slots) -> Self {
        Vars {
            vars: vec![Var::default(); slots.len()],
        }
    }

    /// Adds the slots named since this was made (unset).
    #[cfg(test)]
    pub(crate) fn grow(&mut self, slots: &Slots) {
        self.vars.resize(slots.len(), Var::default());
    }

    /// The value in `slot`, a text read as the number it holds.
    pub(crate) fn val(&self, slot: usize) -> Result<Val, EvalError> {
        let var = self.vars.get(slot).ok_or(EvalError::Unset)?;
        Ok(match var.kind {
            Kind::Unset => return Err(EvalError::Unset),
            Kind::Null => Val::Null,
            Kind::Bool => Val::Bool(var.int != 0),
            Kind::Int => Val::Int(var.int),
            Kind::Double => Val::Double(var.double),
            Kind::Text => {
                let t = var.text.trim();
                if let Ok(i) = t.parse::<i64>() {
                    Val::Int(i)
                } else {
                    match t.parse::<f64>() {
                        Ok(d) if d.is_finite() => Val::Double(d),
                        _ => return Err(EvalError::NotANumber),
                    }
                }
            }
        })
    }

    /// The value in `slot` as a statement binds it.
    pub(crate) fn param(&self, slot: usize) -> Result<Param<'_>, EvalError> {
        let var = self.vars.get(slot).ok_or(EvalError::Unset)?;
        Ok(match var.kind {
            Kind::Unset => return Err(EvalError::Unset),
            Kind::Null => Param::Null,
            Kind::Bool => Param::Bool(var.int != 0),
            Kind::Int => Param::Int(var.int),
            Kind::Double => Param::Double(var.double),
            Kind::Text => Param::Text(&var.text),
        })
    }

    /// Sets `slot` to a computed value.
    pub(crate) fn set(&mut self, slot: usize, val: Val) {
        if let Some(var) = self.vars.get_mut(slot) {
            match val {
                Val::Null => var.kind = Kind::Null,
                Val::Bool(b) => (var.kind, var.int) = (Kind::Bool, i64::from(b)),
                Val::Int(i) => (var.kind, var.int) = (Kind::Int, i),
                Val::Double(d) => (var.kind, var.double) = (Kind::Double, d),
            }
        }
    }

    /// Sets `slot` to text (cut to [`MAX_TEXT`] bytes at a character's edge).
    pub(crate) fn set_text(&mut self, slot: usize, text: &str) {
        if let Some(var) = self.vars.get_mut(slot) {
            let mut end = text.len().min(MAX_TEXT);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            var.kind = Kind::Text;
            var.text.clear();
            var.text.push_str(&text[..end]);
        }
    }

    /// Sets `slot` to NULL.
    pub(crate) fn set_null(&mut self, slot: usize) {
        self.set(slot, Val::Null);
    }
}
