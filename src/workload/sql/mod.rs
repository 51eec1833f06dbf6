//! `perflab run sql`: the user's own transactions, as SQL scripts in
//! pgbench's format, on PostgreSQL, MySQL/MariaDB or SQLite (`--script FILE[@WEIGHT]`, repeatable, or a built-in
//! by name), with variables given by `-D NAME=VALUE`. One run of a script
//! is one operation; each script is an operation kind of its own, with its
//! latency, errors and retries. perflab creates nothing and drops nothing
//! in the database for a script: the tables are the user's (made by
//! `--init FILE`, a script of plain SQL run once before the load, or
//! beforehand).

mod builtin;
pub(crate) mod clock;
mod figures;
mod literal;
mod my;
mod pg;
mod prepare;
mod program;
pub(crate) mod script;
mod sqlite;

use super::{CheckReport, OpCounts, Seat, Session, Started, SweepDriver, Workload, WorkloadKind};
use crate::error::PlanError;
use crate::measure::Outcome;
use crate::plan::Plan;
use crate::sut::{Endpoint, Opened, ServerOptions, Target, TargetArgs};
use program::{Scripts, State, Turn};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The target when none is given: a PostgreSQL perflab starts (the
/// scripts' tables made by `--init`).
const DEFAULT_TARGET: &str =
    <crate::sut::managed::postgres::Postgres as crate::sut::managed::server::ManagedKind>::SCHEME;

/// `perflab run sql`.
pub struct Sql;

/// The flags of `perflab run sql`.
#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,

    /// A script in pgbench's format, FILE or FILE@WEIGHT (repeatable), or a
    /// built-in: tpcb-like, simple-update, select-only.
    #[arg(long, value_name = "FILE[@WEIGHT]", required = true)]
    pub(crate) script: Vec<String>,

    /// A variable every script starts with, NAME=VALUE (repeatable).
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub(crate) define: Vec<String>,

    /// The value of :scale (default: the branches in pgbench_branches for
    /// a built-in script, else 1).
    #[arg(long, value_name = "N")]
    pub(crate) scale: Option<u32>,

    /// Plain SQL run once before the load (CREATE TABLE, INSERT …): the
    /// scripts' tables.
    #[arg(long, value_name = "FILE")]
    pub(crate) init: Option<std::path::PathBuf>,

    /// Tries per script run on serialisation failures and deadlocks.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) max_tries: u32,
}

/// One script as the plan records it: its name, weight and text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptSpec {
    pub(crate) name: String,
    pub(crate) weight: u32,
    pub(crate) text: String,
}

/// The validated options of `perflab run sql`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlSpec {
    pub(crate) target: Target,
    pub(crate) scripts: Vec<ScriptSpec>,
    pub(crate) defines: Vec<(String, String)>,
    pub(crate) scale: Option<u32>,
    pub(crate) init: Option<ScriptSpec>,
    pub(crate) max_tries: u32,
    pub(crate) server: ServerOptions,
}

/// `perflab check sql` takes no flags.
#[derive(Debug, clap::Args)]
pub struct SqlCheckArgs {}

/// The most scripts one run takes.
const MAX_SCRIPTS: usize = 32;

impl WorkloadKind for Sql {
    const NAME: &'static str = "sql";
    const ABOUT: &'static str =
        "Your own transactions: SQL scripts in pgbench's format on PostgreSQL, MySQL/MariaDB or SQLite.";
    const CHECK_ABOUT: &'static str = "A script's data is the user's: nothing to check.";
    const RATE_UNIT: crate::units::RateUnit = crate::units::RateUnit::Transactions;
    type RunArgs = SqlArgs;
    type CheckArgs = SqlCheckArgs;
    type Spec = SqlSpec;

    fn figures(
        steps: &[crate::record::StepResult],
        op_names: &[String],
    ) -> Option<crate::workload::figures::Figures> {
        figures::figures(steps, op_names)
    }

    fn validate(args: &SqlArgs) -> Result<SqlSpec, PlanError> {
        let (target, server) = args.target.validate(DEFAULT_TARGET)?;
        if !target.traits().kind.is_database() {
            return Err(PlanError::flag(
                "--target",
                format!("{} is no SQL database", target.redacted()),
                &format!(
                    "scripts run on {}",
                    crate::sut::schemes_of(crate::sut::TargetKind::is_database)
                ),
            ));
        }
        if args.max_tries == 0 {
            return Err(PlanError::flag(
                "--max-tries",
                "0 tries runs nothing",
                "give 1 or more (default 10)",
            ));
        }
        if args.script.len() > MAX_SCRIPTS {
            return Err(PlanError::flag(
                "--script",
                format!("{} scripts", args.script.len()),
                &format!("give at most {MAX_SCRIPTS}"),
            ));
        }
        let scripts = args
            .script
            .iter()
            .map(|s| read_script(s))
            .collect::<Result<Vec<_>, _>>()?;
        let defines = args
            .define
            .iter()
            .map(|d| read_define(d))
            .collect::<Result<Vec<_>, _>>()?;
        let init = args.init.as_deref().map(read_init).transpose()?;
        let spec = SqlSpec {
            target,
            scripts,
            defines,
            scale: args.scale,
            init,
            max_tries: args.max_tries,
            server,
        };
        // Every script is read now, so that a mistake fails before any load.
        compile(&spec, spec.scale.unwrap_or(1), 0).map_err(PlanError::new)?;
        Ok(spec)
    }

    fn target(spec: &SqlSpec) -> Target {
        spec.target.clone()
    }

    fn start<D: SweepDriver>(spec: &SqlSpec, plan: &Plan, driver: D) -> anyhow::Result<D::Output> {
        let opened = Opened::open(&spec.target, &spec.server)?;
        let (backend, scale) = match &opened.endpoint {
            Endpoint::Postgres(pg) => {
                let scale = opened.unthrottled(|| prepare::pg(spec, pg))?;
                (Backend::Pg(pg.clone()), scale)
            }
            Endpoint::Mysql(my) => {
                let scale = opened.unthrottled(|| prepare::my(spec, my))?;
                (Backend::My(my.clone()), scale)
            }
            Endpoint::Sqlite(path) => (Backend::Sqlite(path.clone()), prepare::sqlite(spec, path)?),
            _ => anyhow::bail!("scripts run on PostgreSQL, MySQL/MariaDB or SQLite"),
        };
        let scripts = Arc::new(compile(spec, scale, plan.seed).map_err(PlanError::new)?);
        backend.check_statements(&scripts)?;
        let started = Started {
            server: opened.server_processes(),
            addresses: Some(opened.endpoint.addresses()),
            endpoint: Some(opened.endpoint.clone()),
            setup: Some(crate::workload::merged_setup(
                &opened.setup,
                serde_json::json!({ "scale": scale }),
            )),
            // The server's statistics (when it keeps any perflab reads, and
            // they can be read) and each statement's time, together.
            db_probe: crate::probe::DbProbe::start(clock::ClockSource {
                clock: Arc::clone(&scripts.clock),
                server: opened.endpoint.stats_source().and_then(Result::ok),
            })
            .ok(),
            ..Started::default()
        };
        let names = super::leak_names(unique_names(spec.scripts.iter().map(|s| s.name.as_str())));
        let workload = SqlWorkload {
            backend,
            scripts,
            names,
            max_tries: spec.max_tries,
        };
        driver.drive(Arc::new(workload), started)
    }

    fn check(_args: &SqlCheckArgs) -> anyhow::Result<(String, CheckReport)> {
        Err(PlanError::new(
            "a script's data is the user's, so perflab has nothing to check; see perflab check --help for the workloads that do",
        )
        .into())
    }
}

/// Reads `--script FILE[@WEIGHT]` or a built-in's name.
fn read_script(arg: &str) -> Result<ScriptSpec, PlanError> {
    let (name, weight) = match arg.rsplit_once('@') {
        Some((name, w)) => {
            let weight = w
                .parse::<u32>()
                .ok()
                .filter(|w| (1..=1_000_000).contains(w))
                .ok_or_else(|| {
                    PlanError::flag(
                        "--script",
                        format!("`{w}` is no weight"),
                        "give FILE@WEIGHT with a weight from 1 to 1000000, e.g. buy.sql@3",
                    )
                })?;
            (name, weight)
        }
        None => (arg, 1),
    };
    let text = match builtin::text(name) {
        Some(text) => text,
        None => {
            crate::util::read_text_bounded(std::path::Path::new(name), script::MAX_SCRIPT as u64)
                .map_err(|e| {
                    PlanError::flag(
                        "--script",
                        format!("cannot read {name}: {e}"),
                        &format!(
                            "give a script file, or a built-in: {}",
                            builtin::NAMES.join(", ")
                        ),
                    )
                })?
        }
    };
    Ok(ScriptSpec {
        name: name.to_string(),
        weight,
        text,
    })
}

fn read_init(path: &std::path::Path) -> Result<ScriptSpec, PlanError> {
    let text = crate::util::read_text_bounded(path, script::MAX_SCRIPT as u64).map_err(|e| {
        PlanError::flag(
            "--init",
            format!("cannot read {}: {e}", path.display()),
            "give a file of SQL statements",
        )
    })?;
    Ok(ScriptSpec {
        name: path.display().to_string(),
        weight: 1,
        text,
    })
}

/// Reads `-D NAME=VALUE`.
fn read_define(arg: &str) -> Result<(String, String), PlanError> {
    match arg.split_once('=') {
        Some((name, value)) if script::is_name(name) => Ok((name.to_string(), value.to_string())),
        _ => Err(PlanError::flag(
            "-D",
            format!("`{arg}` is not NAME=VALUE"),
            "e.g. -D accounts=100000",
        )),
    }
}

/// The scripts read into one program, with `:scale` and the seed.
fn compile(spec: &SqlSpec, scale: u32, seed: u64) -> Result<Scripts, String> {
    let mut slots = script::vars::Slots::default();
    let mut read = Vec::new();
    for s in &spec.scripts {
        let mut parsed = script::parse(&s.name, &s.text, &mut slots)?;
        parsed.weight = s.weight;
        read.push(parsed);
    }
    let mut given = vec![
        ("scale".to_string(), scale.to_string()),
        ("random_seed".to_string(), seed.to_string()),
        ("default_seed".to_string(), seed.to_string()),
    ];
    given.extend(spec.defines.iter().cloned());
    Scripts::new(read, slots, given, seed)
}

/// Each script's operation name: its own, numbered when two share one.
fn unique_names<'a>(scripts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for script in scripts {
        let mut name = script.to_string();
        let mut n = 1;
        while names.contains(&name) {
            n += 1;
            name = format!("{script}#{n}");
        }
        names.push(name);
    }
    names
}

/// Where the scripts run.
enum Backend {
    Pg(Box<crate::sut::postgres::PgTarget>),
    My(crate::sut::mysql::MyTarget),
    Sqlite(std::path::PathBuf),
}

impl Backend {
    /// Prepares every statement once on a connection of its own, so that
    /// a statement the server refuses (a syntax error, a missing table) is
    /// one line naming its script and line before any load, not an error
    /// of every operation.
    fn check_statements(&self, scripts: &Arc<Scripts>) -> anyhow::Result<()> {
        let checked = match self {
            Backend::Sqlite(path) => sqlite::Runner::new(path, scripts.clone(), 0, 0).map(drop),
            Backend::Pg(target) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let driver = pg::PgScripts {
                    target: (**target).clone(),
                    scripts: scripts.clone(),
                    drive: crate::sut::stream::Drive::Runtime,
                };
                runtime
                    .block_on(crate::util::until_interrupted(
                        "checking the scripts",
                        pg::connect(&driver),
                    ))?
                    .map(drop)
            }
            Backend::My(target) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let driver = my::MyScripts {
                    target: target.clone(),
                    scripts: scripts.clone(),
                    drive: crate::sut::stream::Drive::Runtime,
                };
                runtime
                    .block_on(crate::util::until_interrupted(
                        "checking the scripts",
                        my::connect(&driver),
                    ))?
                    .map(drop)
            }
        };
        checked.map_err(|e| PlanError::new(crate::util::one_line(&format!("{e:#}"))).into())
    }
}

/// A session's turn before its first operation.
fn first_turn(scripts: &Arc<Scripts>, user: u32, seed: u64) -> Turn {
    Turn {
        script: 0,
        state: State::new(scripts.vars_for(user), seed),
        scripts: scripts.clone(),
    }
}

/// The scripts on their database.
struct SqlWorkload {
    backend: Backend,
    scripts: Arc<Scripts>,
    names: Vec<&'static str>,
    max_tries: u32,
}

/// One user: its connection, the stream that draws its next script, and
/// (on PostgreSQL) the state its scripts run with.
struct SqlSession {
    conn: Conn,
    choice: rand::rngs::SmallRng,
    scripts: Arc<Scripts>,
}

enum Conn {
    Pg(Box<(pg::PgConn, Turn)>),
    My(Box<(my::MyConn, Turn)>),
    Sqlite(crate::workload::blocking_conn::BlockingConn<sqlite::Runner>),
}

impl Workload for SqlWorkload {
    type Session = SqlSession;

    fn op_names(&self) -> &[&'static str] {
        &self.names
    }

    fn polls_sockets(&self) -> bool {
        matches!(self.backend, Backend::Pg(_) | Backend::My(_))
    }

    async fn open_session(&self, user: u32, seed: u64, seat: Seat) -> anyhow::Result<SqlSession> {
        let scripts = self.scripts.clone();
        let conn = match &self.backend {
            Backend::Pg(target) => {
                let driver = pg::PgScripts {
                    target: (**target).clone(),
                    scripts: scripts.clone(),
                    drive: seat.drive(),
                };
                let conn =
                    crate::workload::server_conn::ServerConn::open(driver, self.max_tries).await?;
                Conn::Pg(Box::new((conn, first_turn(&scripts, user, seed))))
            }
            Backend::My(target) => {
                let driver = my::MyScripts {
                    target: target.clone(),
                    scripts: scripts.clone(),
                    drive: seat.drive(),
                };
                let conn =
                    crate::workload::server_conn::ServerConn::open(driver, self.max_tries).await?;
                Conn::My(Box::new((conn, first_turn(&scripts, user, seed))))
            }
            Backend::Sqlite(path) => {
                let (path, for_runner) = (path.clone(), scripts.clone());
                Conn::Sqlite(crate::workload::blocking_conn::BlockingConn::open(
                    seat,
                    "perflab-sqlite",
                    move || sqlite::Runner::new(&path, for_runner, user, seed),
                )?)
            }
        };
        Ok(SqlSession {
            conn,
            choice: rand::SeedableRng::seed_from_u64(seed.rotate_left(17)),
            scripts,
        })
    }

    fn check(&self, _run: &[OpCounts]) -> anyhow::Result<Option<CheckReport>> {
        Ok(None)
    }
}

impl Session for SqlSession {
    fn choose(&mut self) -> usize {
        self.scripts.choose(&mut self.choice)
    }

    async fn execute(&mut self, op: usize) -> Outcome {
        match &mut self.conn {
            Conn::Pg(pair) => {
                let (conn, turn) = &mut **pair;
                conn.execute(turn.next(op)).await
            }
            Conn::My(pair) => {
                let (conn, turn) = &mut **pair;
                conn.execute(turn.next(op)).await
            }
            Conn::Sqlite(conn) => conn.execute(op).await,
        }
    }
}
