//! Reading an expression: its words (numbers, `:variables`, names,
//! operators), then a recursive descent from the loosest operator to the
//! tightest, each variable given its slot, nesting bounded.

use super::super::draw;
use super::super::vars::Slots;
use super::{Expr, Func, Op, Val};

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
