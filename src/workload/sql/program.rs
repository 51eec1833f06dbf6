//! The scripts of a run and how one of them runs: the interpreter walks a
//! script's program (sets, sleeps, jumps, statements) with the session's
//! variables and random stream, and hands each statement to the backend
//! ([`Exec`]). One run of a script is one operation; on a retry it starts
//! over with the random stream as it stood at its first try, so the retry
//! runs the same transaction.

use super::clock::StatementClock;
use super::script::expr::{Env, EvalError, Val};
use super::script::vars::{Param, Slots, Vars};
use super::script::{Amount, Script, Statement, Step};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The scripts of a run, their variables' slots and the values every
/// session starts with.
#[derive(Clone)]
pub(crate) struct Scripts {
    pub(crate) scripts: Vec<Script>,
    pub(crate) slots: Slots,
    /// `-D NAME=VALUE` and the built-in variables, by slot.
    pub(crate) given: Vec<(usize, String)>,
    /// The slot of `client_id`, set per session.
    pub(crate) client_id: Option<usize>,
    /// The seed of `hash` when a script gives none.
    pub(crate) default_seed: i64,
    /// Cumulative weights, for drawing a script.
    cumulative: Vec<u64>,
    /// Each statement's runs and time, shared by the sessions.
    pub(crate) clock: Arc<StatementClock>,
}

impl Scripts {
    /// The run's scripts, read into `slots`, with the values given; every
    /// variable a script reads must be set by something (checked here, so
    /// that a typo fails before any load).
    pub(crate) fn new(
        scripts: Vec<Script>,
        slots: Slots,
        given: Vec<(String, String)>,
        seed: u64,
    ) -> Result<Scripts, String> {
        let mut given_slots = Vec::new();
        for (name, value) in given {
            if let Some(slot) = slots.get(&name) {
                given_slots.push((slot, value));
            }
        }
        let client_id = slots.get("client_id");
        let any_gset = scripts.iter().any(Script::gsets);
        if !any_gset {
            let set: std::collections::HashSet<usize> = scripts
                .iter()
                .flat_map(|s| s.assigns.iter().copied())
                .chain(given_slots.iter().map(|(s, _)| *s))
                .chain(client_id)
                .collect();
            let names = slots.names();
            if let Some((slot, name)) = names
                .iter()
                .enumerate()
                .find(|(slot, _)| !set.contains(slot))
            {
                let (script, line) = first_use(&scripts, slot).unwrap_or(("the scripts", 0));
                return Err(format!(
                    "{script}:{line}: :{name} is never set; set it with \\set {name} … or give it with -D {name}=VALUE"
                ));
            }
        }
        let mut total = 0u64;
        let cumulative = scripts
            .iter()
            .map(|s| {
                total = total.saturating_add(u64::from(s.weight));
                total
            })
            .collect();
        Ok(Scripts {
            clock: Arc::new(StatementClock::new(&scripts, &slots.names())),
            scripts,
            slots,
            given: given_slots,
            client_id,
            default_seed: seed as i64,
            cumulative,
        })
    }

    /// Draws the next script by weight.
    pub(crate) fn choose(&self, rng: &mut SmallRng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0);
        if total == 0 {
            return 0;
        }
        let at = rng.gen_range(0..total);
        self.cumulative.partition_point(|c| *c <= at)
    }

    /// A session's variables at its start.
    pub(crate) fn vars_for(&self, user: u32) -> Vars {
        let mut vars = Vars::new(&self.slots);
        for (slot, value) in &self.given {
            vars.set_text(*slot, value);
        }
        if let Some(slot) = self.client_id {
            vars.set(slot, Val::Int(i64::from(user)));
        }
        vars
    }

    /// For each statement of each script, the variable each returned
    /// column sets (`\gset`), given the columns the server said it returns.
    pub(crate) fn captures(
        &self,
        script: usize,
        stmt: usize,
        columns: &[String],
    ) -> Vec<Option<usize>> {
        let Some(prefix) = self
            .scripts
            .get(script)
            .and_then(|s| s.statements.get(stmt))
            .and_then(|s| s.gset.as_deref())
        else {
            return Vec::new();
        };
        columns
            .iter()
            .map(|c| self.slots.get(&format!("{prefix}{c}")))
            .collect()
    }
}

/// The script and line where `slot` is first read.
fn first_use(scripts: &[Script], slot: usize) -> Option<(&str, usize)> {
    for script in scripts {
        for st in &script.statements {
            if st.params.contains(&slot) {
                return Some((&script.name, st.line));
            }
        }
    }
    scripts.first().map(|s| (s.name.as_str(), 1))
}

/// A session's own state: its variables and random stream.
pub(crate) struct State {
    pub(crate) vars: Vars,
    pub(crate) rng: SmallRng,
    /// The stream as it stood when the operation's first try began.
    at_start: SmallRng,
}

impl State {
    pub(crate) fn new(vars: Vars, seed: u64) -> Self {
        let rng = SmallRng::seed_from_u64(seed);
        State {
            vars,
            at_start: rng.clone(),
            rng,
        }
    }

    /// An operation begins: its retries replay from here.
    pub(crate) fn mark(&mut self) {
        self.at_start.clone_from(&self.rng);
    }
}

/// One operation on a server's connection: which script, and the
/// session's state it runs with.
pub(crate) struct Turn {
    pub(crate) script: usize,
    pub(crate) state: State,
    pub(crate) scripts: std::sync::Arc<Scripts>,
}

impl Turn {
    /// The turn of operation `script`: its retries replay from here.
    pub(crate) fn next(&mut self, script: usize) -> &mut Turn {
        self.script = script;
        self.state.mark();
        self
    }

    /// One try of the turn's script on `conn`.
    pub(crate) async fn run<X: Exec>(
        &mut self,
        conn: &mut X,
    ) -> Result<crate::measure::OpResult, Fail<X::Error>> {
        run(conn, &self.scripts, self.script, &mut self.state).await?;
        Ok(crate::measure::OpResult::Ok)
    }
}

/// Why a script's run failed.
#[derive(Debug)]
pub(crate) enum Fail<E> {
    /// The database's error.
    Db(E),
    /// The script's own (an expression, an unset variable, a `\gset`
    /// without its one row).
    Script(&'static str),
}

impl<E> From<EvalError> for Fail<E> {
    fn from(e: EvalError) -> Self {
        Fail::Script(e.code())
    }
}

/// The code of a `\gset` whose statement returned other than one row.
pub(crate) const GSET_ROWS: &str = "script-gset-not-one-row";

/// A connection that runs a script's statements.
pub(crate) trait Exec {
    type Error;

    /// Runs statement `stmt` of script `script`, its parameters bound from
    /// `vars`; a `\gset` statement writes its row's columns into `vars`.
    fn exec(
        &mut self,
        script: usize,
        stmt: usize,
        statement: &Statement,
        vars: &mut Vars,
    ) -> impl Future<Output = Result<(), Fail<Self::Error>>>;

    /// Waits `for_` (a `\sleep`).
    fn sleep(&mut self, for_: Duration) -> impl Future<Output = ()>;
}

/// The longest `\sleep` a script may ask for.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// One try of script `index`: from its first step to its last.
pub(crate) async fn run<X: Exec>(
    conn: &mut X,
    scripts: &Scripts,
    index: usize,
    state: &mut State,
) -> Result<(), Fail<X::Error>> {
    state.rng.clone_from(&state.at_start);
    let Some(script) = scripts.scripts.get(index) else {
        return Ok(());
    };
    let mut pc = 0;
    // When the last statement ended, while the steps since have been
    // statements only: the next one begins then, with no clock read.
    let mut ended: Option<Instant> = None;
    while let Some(step) = script.program.get(pc) {
        pc += 1;
        let after = ended.take();
        match step {
            Step::Sql { stmt } => {
                if let Some(statement) = script.statements.get(*stmt) {
                    let began = after.unwrap_or_else(Instant::now);
                    conn.exec(index, *stmt, statement, &mut state.vars).await?;
                    let now = Instant::now();
                    scripts
                        .clock
                        .record(index, *stmt, now.saturating_duration_since(began));
                    ended = Some(now);
                }
            }
            Step::Set { slot, expr } => {
                let value = expr.eval(&mut env(scripts, state))?;
                state.vars.set(*slot, value);
            }
            Step::JumpUnless { cond, to } => {
                if !cond.eval(&mut env(scripts, state))?.truthy()? {
                    pc = *to;
                }
            }
            Step::Jump { to } => pc = *to,
            Step::Sleep { amount, unit_us } => {
                let n = match amount {
                    Amount::Const(n) => *n,
                    Amount::Var(slot) => match state.vars.val(*slot)? {
                        Val::Int(n) => n,
                        Val::Double(d) => d as i64,
                        _ => return Err(Fail::Script(EvalError::NotANumber.code())),
                    },
                };
                let micros = u64::try_from(n).unwrap_or(0).saturating_mul(*unit_us);
                conn.sleep(Duration::from_micros(micros).min(MAX_SLEEP))
                    .await;
            }
        }
    }
    Ok(())
}

fn env<'a>(scripts: &Scripts, state: &'a mut State) -> Env<'a> {
    Env {
        vars: &state.vars,
        rng: &mut state.rng,
        default_seed: scripts.default_seed,
    }
}

/// Checks that every variable `statement` binds is set: the first unset
/// one is the statement's error.
pub(crate) fn check_params(statement: &Statement, vars: &Vars) -> Result<(), EvalError> {
    for slot in &statement.params {
        vars.param(*slot)?;
    }
    Ok(())
}

/// Keeps a `\gset` row's values as variables: each column's value (as
/// text, or NULL) goes to the slot `capture` names for it.
pub(crate) fn keep_row<'r>(
    vars: &mut Vars,
    capture: &[Option<usize>],
    values: impl Iterator<Item = Option<&'r [u8]>>,
) {
    for (value, slot) in values.zip(capture) {
        let Some(slot) = *slot else { continue };
        match value {
            None => vars.set_null(slot),
            Some(bytes) => vars.set_text(slot, &String::from_utf8_lossy(bytes)),
        }
    }
}

/// The parameters of `statement`, once [`check_params`] has passed.
pub(crate) fn params<'v>(
    statement: &'v Statement,
    vars: &'v Vars,
) -> impl Iterator<Item = Param<'v>> + 'v {
    statement
        .params
        .iter()
        .map(|slot| vars.param(*slot).unwrap_or(Param::Null))
}
