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
pub(crate) use super::value::{EvalError, Val};
use super::vars::{Slots, Vars};
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
    fn named(name: &str) -> Option<(Func, std::ops::RangeInclusive<usize>)> {
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

/// Parses the expression in `text`, resolving variables through `slots`;
/// an error says what is wrong at which word.
pub(crate) fn parse(text: &str, slots: &mut Slots) -> Result<Expr, String> {
    let tokens = lex(text)?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
        slots,
        depth: 0,
    };
    let expr = p.or()?;
    match p.tokens.get(p.at) {
        None => Ok(expr),
        Some(t) => Err(format!("unexpected `{}` after the expression", t.text())),
    }
}

/// One word of an expression.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Double(f64),
    Var(String),
    Word(String),
    Sym(&'static str),
    /// 9223372036854775808: bigint's smallest value once negated, and
    /// out of range anywhere else.
    MinMagnitude,
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Int(i) => i.to_string(),
            Tok::Double(d) => d.to_string(),
            Tok::Var(v) => format!(":{v}"),
            Tok::Word(w) => w.clone(),
            Tok::Sym(s) => (*s).to_string(),
            Tok::MinMagnitude => "9223372036854775808".to_string(),
        }
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self, Tok::Word(w) if w.eq_ignore_ascii_case(word))
    }
}

/// The operators, longest first so that `<=` is not read as `<`.
const SYMBOLS: &[&str] = &[
    "<<", ">>", "<=", ">=", "<>", "!=", "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "#", "~",
    "(", ")", ",",
];

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                let exponent = matches!(bytes[i], b'e' | b'E');
                i += 1;
                if exponent && matches!(bytes.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
            }
            out.push(number(&text[start..i])?);
        } else if c == b':' {
            let start = i + 1;
            i = word_end(bytes, start);
            if i == start {
                return Err("`:` needs a variable's name after it".into());
            }
            out.push(Tok::Var(text[start..i].to_string()));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            i = word_end(bytes, i);
            out.push(Tok::Word(text[start..i].to_string()));
        } else if let Some(sym) = SYMBOLS.iter().find(|s| text[i..].starts_with(**s)) {
            out.push(Tok::Sym(sym));
            i += sym.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(format!("`{ch}` is not part of the expression language"));
        }
    }
    Ok(out)
}

fn word_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    i
}

fn number(text: &str) -> Result<Tok, String> {
    if let Ok(i) = text.parse::<i64>() {
        return Ok(Tok::Int(i));
    }
    if text == "9223372036854775808" {
        return Ok(Tok::MinMagnitude);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text} is out of bigint's range"));
    }
    match text.parse::<f64>() {
        Ok(d) if d.is_finite() => Ok(Tok::Double(d)),
        _ => Err(format!("`{text}` is not a number")),
    }
}

/// How deep parentheses and operators may nest: a hostile script cannot
/// exhaust the stack.
const MAX_DEPTH: usize = 64;

struct Parser<'t, 's> {
    tokens: &'t [Tok],
    at: usize,
    slots: &'s mut Slots,
    depth: usize,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym);
        self.at += usize::from(hit);
        hit
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.is_word(word));
        self.at += usize::from(hit);
        hit
    }

    fn expect_sym(&mut self, sym: &str) -> Result<(), String> {
        if self.eat_sym(sym) {
            Ok(())
        } else {
            Err(format!("`{sym}` expected{}", self.here()))
        }
    }

    fn here(&self) -> String {
        match self.peek() {
            Some(t) => format!(" at `{}`", t.text()),
            None => " at the end".to_string(),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the expression nests deeper than {MAX_DEPTH}"));
        }
        let mut e = self.and()?;
        while self.eat_word("or") {
            e = Expr::Binary(Op::Or, Box::new(e), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        while self.eat_word("and") {
            e = Expr::Binary(Op::And, Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat_word("not") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.is()
    }

    fn is(&mut self) -> Result<Expr, String> {
        let e = self.cmp()?;
        if self.eat_word("isnull") {
            return Ok(Expr::IsNull(Box::new(e), false));
        }
        if self.eat_word("notnull") {
            return Ok(Expr::IsNull(Box::new(e), true));
        }
        if self.eat_word("is") {
            let negated = self.eat_word("not");
            if !self.eat_word("null") {
                return Err(format!("IS takes NULL or NOT NULL{}", self.here()));
            }
            return Ok(Expr::IsNull(Box::new(e), negated));
        }
        Ok(e)
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let e = self.binary_level(0)?;
        for (sym, op) in [
            ("=", Op::Eq),
            ("<>", Op::Ne),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ] {
            if self.eat_sym(sym) {
                return Ok(Expr::Binary(
                    op,
                    Box::new(e),
                    Box::new(self.binary_level(0)?),
                ));
            }
        }
        Ok(e)
    }

    /// The binary operators from the loosest (`|`) to the tightest (`*`).
    fn binary_level(&mut self, level: usize) -> Result<Expr, String> {
        const LEVELS: &[&[(&str, Op)]] = &[
            &[("|", Op::BitOr), ("#", Op::BitXor)],
            &[("&", Op::BitAnd)],
            &[("<<", Op::Shl), (">>", Op::Shr)],
            &[("+", Op::Add), ("-", Op::Sub)],
            &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Mod)],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut e = self.binary_level(level + 1)?;
        'more: loop {
            for (sym, op) in *ops {
                if self.eat_sym(sym) {
                    e = Expr::Binary(*op, Box::new(e), Box::new(self.binary_level(level + 1)?));
                    continue 'more;
                }
            }
            return Ok(e);
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat_sym("-") {
            if self.peek() == Some(&Tok::MinMagnitude) {
                self.at += 1;
                return Ok(Expr::Const(Val::Int(i64::MIN)));
            }
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_sym("+") {
            return self.unary();
        }
        if self.eat_sym("~") {
            return Ok(Expr::BitNot(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some(tok) = self.peek().cloned() else {
            return Err("the expression ends where a value is expected".into());
        };
        self.at += 1;
        match tok {
            Tok::Int(i) => Ok(Expr::Const(Val::Int(i))),
            Tok::Double(d) => Ok(Expr::Const(Val::Double(d))),
            Tok::Var(name) => Ok(Expr::Var(self.slots.slot(&name)?)),
            Tok::Sym("(") => {
                let e = self.or()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Word(w) => self.word(&w),
            Tok::Sym(s) => Err(format!("`{s}` where a value is expected")),
            Tok::MinMagnitude => Err("9223372036854775808 is out of bigint's range".into()),
        }
    }

    fn word(&mut self, w: &str) -> Result<Expr, String> {
        match w.to_ascii_lowercase().as_str() {
            "true" => return Ok(Expr::Const(Val::Bool(true))),
            "false" => return Ok(Expr::Const(Val::Bool(false))),
            "null" => return Ok(Expr::Const(Val::Null)),
            "case" => return self.case(),
            _ => {}
        }
        let Some((func, arity)) = Func::named(w) else {
            return Err(format!(
                "`{w}` is no function perflab knows (abs, double, int, exp, ln, sqrt, pi, pow, greatest, least, mod, random, random_exponential, random_gaussian, random_zipfian, hash, hash_murmur2, hash_fnv1a)"
            ));
        };
        self.expect_sym("(")?;
        let mut args = Vec::new();
        if !self.eat_sym(")") {
            loop {
                args.push(self.or()?);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        if !arity.contains(&args.len()) {
            return Err(format!(
                "{w}() takes {} arguments, not {}",
                arity_text(&arity),
                args.len()
            ));
        }
        check_constants(func, &args)?;
        Ok(Expr::Call(func, args))
    }

    fn case(&mut self) -> Result<Expr, String> {
        let mut arms = Vec::new();
        while self.eat_word("when") {
            let when = self.or()?;
            if !self.eat_word("then") {
                return Err(format!("CASE WHEN needs THEN{}", self.here()));
            }
            arms.push((when, self.or()?));
        }
        if arms.is_empty() {
            return Err("CASE needs at least one WHEN".into());
        }
        let otherwise = if self.eat_word("else") {
            self.or()?
        } else {
            Expr::Const(Val::Null)
        };
        if !self.eat_word("end") {
            return Err(format!("CASE needs END{}", self.here()));
        }
        Ok(Expr::Case(arms, Box::new(otherwise)))
    }
}

fn arity_text(arity: &std::ops::RangeInclusive<usize>) -> String {
    match (*arity.start(), *arity.end()) {
        (a, b) if a == b => a.to_string(),
        (a, usize::MAX) => format!("{a} or more"),
        (a, b) => format!("{a} to {b}"),
    }
}

/// A distribution's parameter given as a constant is checked when the
/// script is read, so that a wrong one fails before any load.
fn check_constants(func: Func, args: &[Expr]) -> Result<(), String> {
    let param = |i: usize| match args.get(i) {
        Some(Expr::Const(Val::Int(v))) => Some(*v as f64),
        Some(Expr::Const(Val::Double(v))) => Some(*v),
        _ => None,
    };
    let check = match func {
        Func::RandomExponential => param(2).map(draw::check_exponential),
        Func::RandomGaussian => param(2).map(draw::check_gaussian),
        Func::RandomZipfian => param(2).map(draw::check_zipfian),
        _ => None,
    };
    check.unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn eval_with(text: &str, set: &[(&str, &str)]) -> Result<Val, EvalError> {
        let mut slots = Slots::default();
        let expr = parse(text, &mut slots).unwrap();
        let mut vars = Vars::new(&slots);
        for (name, value) in set {
            let slot = slots.slot(name).unwrap();
            vars.grow(&slots);
            vars.set_text(slot, value);
        }
        vars.grow(&slots);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut env = Env {
            vars: &vars,
            rng: &mut rng,
            default_seed: 0,
        };
        expr.eval(&mut env)
    }

    fn eval(text: &str) -> Result<Val, EvalError> {
        eval_with(text, &[])
    }

    #[test]
    fn arithmetic_follows_the_precedence_and_types_of_the_language() {
        for (text, want) in [
            ("1 + 2 * 3", Val::Int(7)),
            ("(1 + 2) * 3", Val::Int(9)),
            ("7 / 2", Val::Int(3)),
            ("-7 / 2", Val::Int(-3)),
            ("7 % 3", Val::Int(1)),
            ("7.0 / 2", Val::Double(3.5)),
            ("1 << 4 | 1", Val::Int(17)),
            ("6 & 3", Val::Int(2)),
            ("6 # 3", Val::Int(5)),
            ("~0", Val::Int(-1)),
            ("2 < 3 AND NOT 3 <= 2", Val::Bool(true)),
            ("1 = 1 OR 1 / 0 = 1", Val::Bool(true)),
            ("NULL IS NULL", Val::Bool(true)),
            ("1 + NULL", Val::Null),
            (
                "CASE WHEN 1 > 2 THEN 10 WHEN 2 > 1 THEN 20 ELSE 30 END",
                Val::Int(20),
            ),
            (
                "abs(-5) + greatest(1, 9, 3) - least(4, 2.5)",
                Val::Double(11.5),
            ),
            ("int(3.9) + mod(-7, 3)", Val::Int(2)),
            ("-9223372036854775808", Val::Int(i64::MIN)),
        ] {
            assert_eq!(eval(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn overflow_division_by_zero_and_unset_variables_are_errors_not_panics() {
        for (text, want) in [
            ("9223372036854775807 + 1", EvalError::OutOfRange),
            ("-9223372036854775808 / -1", EvalError::OutOfRange),
            ("abs(-9223372036854775808)", EvalError::OutOfRange),
            ("1 / 0", EvalError::DivisionByZero),
            ("1 % 0", EvalError::DivisionByZero),
            ("1 << 64", EvalError::OutOfRange),
            ("int(1e300)", EvalError::OutOfRange),
            (":never + 1", EvalError::Unset),
            ("random(5, 1)", EvalError::BadArgument),
        ] {
            assert_eq!(eval(text), Err(want), "{text}");
        }
        assert_eq!(eval("-9223372036854775808 % -1"), Ok(Val::Int(0)));
    }

    #[test]
    fn a_variables_text_is_read_as_the_number_it_holds() {
        assert_eq!(eval_with(":a * 2", &[("a", "21")]), Ok(Val::Int(42)));
        assert_eq!(eval_with(":a * 2", &[("a", "1.5")]), Ok(Val::Double(3.0)));
        assert_eq!(
            eval_with(":a * 2", &[("a", "abc")]),
            Err(EvalError::NotANumber)
        );
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        for (text, needle) in [
            ("1 +", "ends where a value"),
            ("random(1)", "takes 2 arguments"),
            ("nosuch(1)", "no function"),
            ("(1 + 2", "`)` expected"),
            ("1 2", "unexpected `2`"),
            ("1 $ 2", "`$`"),
            ("99999999999999999999", "out of bigint"),
            ("random_gaussian(1, 10, 1.0)", "2.0"),
            ("random_zipfian(1, 10, 0.5)", "1.001"),
            ("CASE 1 END", "WHEN"),
        ] {
            let err = parse(text, &mut Slots::default()).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
        assert!(parse(&deep, &mut Slots::default())
            .unwrap_err()
            .contains("nests"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            /// Any text parses or is refused, and whatever parses evaluates
            /// to a value or an error: never a panic.
            #[test]
            fn any_text_parses_or_is_refused_and_never_panics(text in "[-+*/%()<>=!&|#~, 0-9.eE:a-z_]{0,40}") {
                let mut slots = Slots::default();
                if let Ok(expr) = parse(&text, &mut slots) {
                    let vars = Vars::new(&slots);
                    let mut rng = SmallRng::seed_from_u64(3);
                    let mut env = Env { vars: &vars, rng: &mut rng, default_seed: 5 };
                    let _ = expr.eval(&mut env);
                }
            }

            #[test]
            fn any_integers_combine_without_a_panic(a in any::<i64>(), b in any::<i64>(), op in 0usize..12) {
                let ops = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "#", "<", "="];
                let text = format!("{a} {} {b}", ops[op]);
                let _ = eval(&text);
                let _ = eval(&format!("random({a}, {b})"));
            }
        }
    }
}
