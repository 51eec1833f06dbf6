//! The expression language of a script's `\set` and `\if`: integers and
//! doubles, booleans and NULL, variables (`:name`), arithmetic, bitwise,
//! comparison and logical operators, `CASE WHEN … THEN … ELSE … END`, and
//! the functions real scripts call (`random` and its exponential, Gaussian
//! and Zipfian kin, `abs`, `least`, `greatest`, `hash`, …).
//!
//! An expression is parsed once, with every variable resolved to its slot,
//! and evaluated per operation on `Copy` values: nothing allocates. Every
//! integer operation is checked: an overflow or a division by zero is the
//! operation's error, never a panic.

use super::draw;
mod parse;

pub(crate) use super::value::{EvalError, Val};
use super::vars::Vars;
pub(crate) use parse::parse;
use rand::rngs::SmallRng;

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// Functions, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Abs,
    Double,
    Int,
    Exp,
    Ln,
    Sqrt,
    Pi,
    Pow,
    Greatest,
    Least,
    Mod,
    Random,
    RandomExponential,
    RandomGaussian,
    RandomZipfian,
    HashMurmur2,
    HashFnv1a,
}

impl Func {
    /// The function called `name`, and how many arguments it takes.
    pub(super) fn named(name: &str) -> Option<(Func, std::ops::RangeInclusive<usize>)> {
        Some(match name.to_ascii_lowercase().as_str() {
            "abs" => (Func::Abs, 1..=1),
            "double" => (Func::Double, 1..=1),
            "int" => (Func::Int, 1..=1),
            "exp" => (Func::Exp, 1..=1),
            "ln" => (Func::Ln, 1..=1),
            "sqrt" => (Func::Sqrt, 1..=1),
            "pi" => (Func::Pi, 0..=0),
            "pow" | "power" => (Func::Pow, 2..=2),
            "greatest" => (Func::Greatest, 1..=usize::MAX),
            "least" => (Func::Least, 1..=usize::MAX),
            "mod" => (Func::Mod, 2..=2),
            "random" => (Func::Random, 2..=2),
            "random_exponential" => (Func::RandomExponential, 3..=3),
            "random_gaussian" => (Func::RandomGaussian, 3..=3),
            "random_zipfian" => (Func::RandomZipfian, 3..=3),
            "hash" | "hash_murmur2" => (Func::HashMurmur2, 1..=2),
            "hash_fnv1a" => (Func::HashFnv1a, 1..=2),
            _ => return None,
        })
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Const(Val),
    Var(usize),
    Neg(Box<Expr>),
    BitNot(Box<Expr>),
    Not(Box<Expr>),
    IsNull(Box<Expr>, bool),
    Binary(Op, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
    /// `CASE WHEN c THEN v … ELSE e END`.
    Case(Vec<(Expr, Expr)>, Box<Expr>),
}

/// What an expression may use while it runs.
pub(crate) struct Env<'a> {
    pub(crate) vars: &'a Vars,
    pub(crate) rng: &'a mut SmallRng,
    /// The seed of `hash` when none is given.
    pub(crate) default_seed: i64,
}

impl Expr {
    /// The expression's value.
    pub(crate) fn eval(&self, env: &mut Env<'_>) -> Result<Val, EvalError> {
        Ok(match self {
            Expr::Const(v) => *v,
            Expr::Var(slot) => env.vars.val(*slot)?,
            Expr::Neg(e) => match e.eval(env)? {
                Val::Int(i) => Val::Int(i.checked_neg().ok_or(EvalError::OutOfRange)?),
                Val::Null => Val::Null,
                v => Val::Double(-v.double()?),
            },
            Expr::BitNot(e) => match e.eval(env)? {
                Val::Null => Val::Null,
                v => Val::Int(!v.int()?),
            },
            Expr::Not(e) => match e.eval(env)? {
                Val::Null => Val::Null,
                v => Val::Bool(!v.truthy()?),
            },
            Expr::IsNull(e, negated) => Val::Bool((e.eval(env)? == Val::Null) != *negated),
            Expr::Binary(op, a, b) => binary(*op, a, b, env)?,
            Expr::Call(f, args) => call(*f, args, env)?,
            Expr::Case(arms, otherwise) => {
                for (when, then) in arms {
                    if when.eval(env)?.truthy()? {
                        return then.eval(env);
                    }
                }
                otherwise.eval(env)?
            }
        })
    }
}

fn binary(op: Op, a: &Expr, b: &Expr, env: &mut Env<'_>) -> Result<Val, EvalError> {
    // AND and OR look at their right side only when they must.
    if matches!(op, Op::And | Op::Or) {
        let left = a.eval(env)?;
        if left != Val::Null && left.truthy()? == (op == Op::Or) {
            return Ok(Val::Bool(op == Op::Or));
        }
        let right = b.eval(env)?;
        return Ok(match (left, right) {
            (Val::Null, r) if r != Val::Null && r.truthy()? == (op == Op::Or) => {
                Val::Bool(op == Op::Or)
            }
            (Val::Null, _) | (_, Val::Null) => Val::Null,
            (_, r) => Val::Bool(r.truthy()?),
        });
    }
    let (x, y) = (a.eval(env)?, b.eval(env)?);
    if x == Val::Null || y == Val::Null {
        return Ok(Val::Null);
    }
    let ints = matches!(
        (x, y),
        (Val::Int(_) | Val::Bool(_), Val::Int(_) | Val::Bool(_))
    );
    Ok(match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div if ints => {
            let (x, y) = (x.int()?, y.int()?);
            let r = match op {
                Op::Add => x.checked_add(y),
                Op::Sub => x.checked_sub(y),
                Op::Mul => x.checked_mul(y),
                _ if y == 0 => return Err(EvalError::DivisionByZero),
                _ => x.checked_div(y),
            };
            Val::Int(r.ok_or(EvalError::OutOfRange)?)
        }
        Op::Add => Val::Double(x.double()? + y.double()?),
        Op::Sub => Val::Double(x.double()? - y.double()?),
        Op::Mul => Val::Double(x.double()? * y.double()?),
        Op::Div => {
            let d = y.double()?;
            if d == 0.0 {
                return Err(EvalError::DivisionByZero);
            }
            Val::Double(x.double()? / d)
        }
        Op::Mod => Val::Int(int_mod(x.int()?, y.int()?)?),
        Op::BitAnd => Val::Int(x.int()? & y.int()?),
        Op::BitOr => Val::Int(x.int()? | y.int()?),
        Op::BitXor => Val::Int(x.int()? ^ y.int()?),
        Op::Shl | Op::Shr => {
            let by = u32::try_from(y.int()?).map_err(|_| EvalError::OutOfRange)?;
            let x = x.int()?;
            Val::Int(
                if op == Op::Shl {
                    x.checked_shl(by)
                } else {
                    x.checked_shr(by)
                }
                .ok_or(EvalError::OutOfRange)?,
            )
        }
        Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => Val::Bool(compare(op, x, y, ints)?),
        Op::And | Op::Or => unreachable_logic()?,
    })
}

/// A comparison of two values that are not NULL: as integers when both
/// are, else as doubles.
fn compare(op: Op, x: Val, y: Val, ints: bool) -> Result<bool, EvalError> {
    let ord = if ints {
        x.int()?.partial_cmp(&y.int()?)
    } else {
        x.double()?.partial_cmp(&y.double()?)
    };
    let ord = ord.ok_or(EvalError::NotANumber)?;
    Ok(match op {
        Op::Eq => ord.is_eq(),
        Op::Ne => ord.is_ne(),
        Op::Lt => ord.is_lt(),
        Op::Le => ord.is_le(),
        Op::Gt => ord.is_gt(),
        _ => ord.is_ge(),
    })
}

/// AND and OR return before the arithmetic above; this keeps the match whole.
fn unreachable_logic() -> Result<Val, EvalError> {
    Err(EvalError::BadArgument)
}

fn int_mod(x: i64, y: i64) -> Result<i64, EvalError> {
    if y == 0 {
        return Err(EvalError::DivisionByZero);
    }
    // i64::MIN % -1 overflows in Rust; its remainder is 0.
    Ok(x.checked_rem(y).unwrap_or(0))
}

/// Argument `i` of a call, which must not be NULL.
fn nth(args: &[Expr], i: usize, env: &mut Env<'_>) -> Result<Val, EvalError> {
    let v = args.get(i).ok_or(EvalError::BadArgument)?.eval(env)?;
    if v == Val::Null {
        Err(EvalError::Null)
    } else {
        Ok(v)
    }
}

fn call(f: Func, args: &[Expr], env: &mut Env<'_>) -> Result<Val, EvalError> {
    if matches!(
        f,
        Func::Random | Func::RandomExponential | Func::RandomGaussian | Func::RandomZipfian
    ) {
        return draw_call(f, args, env);
    }
    let mut arg = |i: usize| nth(args, i, env);
    Ok(match f {
        Func::Abs => match arg(0)? {
            Val::Int(i) => Val::Int(i.checked_abs().ok_or(EvalError::OutOfRange)?),
            v => Val::Double(v.double()?.abs()),
        },
        Func::Double => Val::Double(arg(0)?.double()?),
        Func::Int => Val::Int(arg(0)?.int()?),
        Func::Exp => Val::Double(arg(0)?.double()?.exp()),
        Func::Ln => Val::Double(arg(0)?.double()?.ln()),
        Func::Sqrt => Val::Double(arg(0)?.double()?.sqrt()),
        Func::Pi => Val::Double(std::f64::consts::PI),
        Func::Pow => Val::Double(arg(0)?.double()?.powf(arg(1)?.double()?)),
        Func::Mod => Val::Int(int_mod(arg(0)?.int()?, arg(1)?.int()?)?),
        Func::Greatest | Func::Least => return extreme(f == Func::Greatest, args, env),
        Func::Random | Func::RandomExponential | Func::RandomGaussian | Func::RandomZipfian => {
            return Err(EvalError::BadArgument)
        }
        Func::HashMurmur2 | Func::HashFnv1a => {
            let value = arg(0)?.int()?;
            let seed = if args.len() > 1 {
                arg(1)?.int()?
            } else {
                return Ok(Val::Int(hash(f, value, env.default_seed)));
            };
            Val::Int(hash(f, value, seed))
        }
    })
}

fn hash(f: Func, value: i64, seed: i64) -> i64 {
    if f == Func::HashMurmur2 {
        draw::murmur2(value, seed)
    } else {
        draw::fnv1a(value, seed)
    }
}

/// The random draws: their bounds first, then the stream.
fn draw_call(f: Func, args: &[Expr], env: &mut Env<'_>) -> Result<Val, EvalError> {
    let lb = nth(args, 0, env)?.int()?;
    let ub = nth(args, 1, env)?.int()?;
    if f == Func::Random {
        return Ok(Val::Int(draw::uniform(env.rng, lb, ub)?));
    }
    let p = nth(args, 2, env)?.double()?;
    Ok(Val::Int(match f {
        Func::RandomExponential => draw::exponential(env.rng, lb, ub, p)?,
        Func::RandomGaussian => draw::gaussian(env.rng, lb, ub, p)?,
        _ => draw::zipfian(env.rng, lb, ub, p)?,
    }))
}

/// `greatest` or `least`: an integer when every argument is one.
fn extreme(greatest: bool, args: &[Expr], env: &mut Env<'_>) -> Result<Val, EvalError> {
    let mut best: Option<Val> = None;
    for a in args {
        let v = a.eval(env)?;
        if v == Val::Null {
            continue;
        }
        best = Some(match best {
            None => v,
            Some(b) => {
                let ints = matches!((b, v), (Val::Int(_), Val::Int(_)));
                let take = if ints {
                    (v.int()? > b.int()?) == greatest
                } else {
                    (v.double()? > b.double()?) == greatest
                };
                let pick = if take { v } else { b };
                if ints {
                    pick
                } else {
                    Val::Double(pick.double()?)
                }
            }
        });
    }
    Ok(best.unwrap_or(Val::Null))
}

#[cfg(test)]
mod tests;
