//! A script run made ready on its database, before any load: `--init`
//! run once (as one batch on SQLite and PostgreSQL, a statement at a time
//! on MySQL/MariaDB, whose session sends one per query), and `:scale`
//! read from pgbench's branches when a built-in script needs it. Each
//! ends at the first signal.

use super::{builtin, script, sqlite, SqlSpec};
use crate::error::PlanError;

/// How to make pgbench's tables on a server pgbench does not load.
const MAKE_TABLES_ELSEWHERE: &str =
    "make pgbench's four tables (pgbench_branches, _tellers, _accounts, _history) with --init FILE, or give --scale";

/// Whether `:scale` comes from pgbench's tables: no `--scale`, and a
/// built-in script among the scripts.
fn scale_from_tables(spec: &SqlSpec) -> bool {
    spec.scale.is_none()
        && spec
            .scripts
            .iter()
            .any(|s| builtin::NAMES.contains(&s.name.as_str()))
}

/// The scale read from pgbench's branches, or why not (`make` says how
/// to make the tables on this server).
fn branches_scale(branches: Result<i64, String>, at: &str, make: &str) -> Result<u32, PlanError> {
    let branches = branches.map_err(|e| {
        PlanError::flag(
            "--script",
            format!(
                "the built-in scripts run on pgbench's tables, and {at} has none ({})",
                crate::util::one_line(&e)
            ),
            make,
        )
    })?;
    u32::try_from(branches)
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| {
            PlanError::flag(
                "--scale",
                "pgbench_branches is empty",
                "load pgbench's tables, or give --scale",
            )
        })
}

/// On SQLite: runs `--init`, reads `:scale`; the scale to run with. A
/// signal interrupts the statement running.
pub(super) fn sqlite(spec: &SqlSpec, path: &std::path::Path) -> anyhow::Result<u32> {
    let conn = sqlite::open(path)?;
    let handle = conn.get_interrupt_handle();
    let watch = crate::util::InterruptWatch::start(move || handle.interrupt());
    let done = (|| -> anyhow::Result<u32> {
        if let Some(init) = &spec.init {
            crate::util::out(format_args!("running {} once\n", init.name));
            conn.execute_batch(&init.text).map_err(|e| {
                PlanError::flag(
                    "--init",
                    format!("{} failed: {e}", init.name),
                    "fix the statement it names",
                )
            })?;
        }
        if !scale_from_tables(spec) {
            return Ok(spec.scale.unwrap_or(1));
        }
        let branches = conn
            .query_row("SELECT count(*) FROM pgbench_branches", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|e| e.to_string());
        Ok(branches_scale(
            branches,
            &path.display().to_string(),
            MAKE_TABLES_ELSEWHERE,
        )?)
    })();
    if done.is_err() {
        watch.cut("preparing the scripts")?;
    }
    done
}

/// On PostgreSQL: runs `--init` and reads `:scale` where it comes from
/// the tables; the scale to run with.
pub(super) fn pg(spec: &SqlSpec, target: &crate::sut::postgres::PgTarget) -> anyhow::Result<u32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(crate::util::until_interrupted(
        "preparing the scripts",
        crate::sut::postgres::with_admin(target, async |client| {
            if let Some(init) = &spec.init {
                crate::util::out(format_args!("running {} once\n", init.name));
                client.batch_execute(&init.text).await.map_err(|e| {
                    PlanError::flag(
                        "--init",
                        format!(
                            "{} failed: {}",
                            init.name,
                            crate::util::one_line(&e.to_string())
                        ),
                        "fix the statement it names",
                    )
                })?;
            }
            if !scale_from_tables(spec) {
                return Ok(spec.scale.unwrap_or(1));
            }
            let row = tokio::time::timeout(
                crate::sut::LOOK_QUERY,
                client.query_one("SELECT count(*) FROM pgbench_branches", &[]),
            )
            .await
            .map_err(|_| {
                PlanError::new(format!(
                    "{} did not answer a count of pgbench_branches in time",
                    target.display
                ))
            })?;
            let branches = row
                .map_err(|e| e.to_string())
                .and_then(|row| row.try_get::<_, i64>(0).map_err(|e| e.to_string()));
            Ok(branches_scale(
                branches,
                &target.display,
                "make them with pgbench -i, or perflab run bank --mix pgbench",
            )?)
        }),
    ))?
}

/// On MySQL/MariaDB: runs `--init` a statement at a time (the session
/// sends one per query) and reads `:scale` where it comes from the
/// tables; the scale to run with.
pub(super) fn my(spec: &SqlSpec, target: &crate::sut::mysql::MyTarget) -> anyhow::Result<u32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(crate::util::until_interrupted(
        "preparing the scripts",
        async {
            let mut wire =
                crate::sut::mysql::connect(target, crate::sut::mysql::BANK_QUERY).await?;
            if let Some(init) = &spec.init {
                crate::util::out(format_args!("running {} once\n", init.name));
                let statements = script::plain_statements(&init.text).map_err(|e| {
                    PlanError::flag(
                        "--init",
                        format!("{}{e}", init.name),
                        "fix the line it names",
                    )
                })?;
                for (line, sql) in statements {
                    wire.query_drop(&sql).await.map_err(|e| {
                        PlanError::flag(
                            "--init",
                            format!(
                                "{}:{line} failed: {}",
                                init.name,
                                crate::util::one_line(&e.to_string())
                            ),
                            "fix the statement it names",
                        )
                    })?;
                }
            }
            if !scale_from_tables(spec) {
                return Ok(spec.scale.unwrap_or(1));
            }
            wire.set_query_timeout(crate::sut::LOOK_QUERY);
            let branches = match wire
                .query_first("SELECT count(*) FROM pgbench_branches")
                .await
            {
                Ok(row) => row
                    .and_then(|r| r.get::<i64>(0))
                    .ok_or_else(|| "no count".to_string()),
                Err(e) => Err(e.to_string()),
            };
            Ok(branches_scale(
                branches,
                &target.display,
                MAKE_TABLES_ELSEWHERE,
            )?)
        },
    ))?
}
