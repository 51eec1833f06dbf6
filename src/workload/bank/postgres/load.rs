//! Creating, loading, reusing and reading the bank's tables on PostgreSQL.
//! Rows go in with COPY over several connections at once; primary keys are
//! added after the data (one connection per table), then VACUUM ANALYZE.
//! The pgbench layout is the one `pgbench -i` builds (int balances starting
//! at 0), so either tool can run on what the other loaded.

use super::super::check::BankFigures;
use super::super::ops::{ACCOUNTS_PER_BRANCH, INITIAL_BALANCE, TELLERS_PER_BRANCH};
use super::super::owned::{Catalog, LEDGER, MADE_BY};
use super::super::sqlite::LoadReport;
use super::super::Tables;
use crate::error::PlanError;
use crate::sut::postgres::PgTarget;
use crate::sut::{silent_look, LOOK_QUERY};
use anyhow::Context;
use bytes::Bytes;
use futures_util::SinkExt;
use std::fmt::Write;
use std::time::Instant;
use tokio_postgres::Client;

/// COPY streams run at once while loading accounts.
const COPY_STREAMS: i64 = 4;
/// Version of the perflab layout's schema.
const SCHEMA_VERSION: i64 = 1;

/// Reuses a loaded bank of the same scale (after checking it) or loads
/// one, replacing only tables perflab made.
pub(crate) async fn prepare(
    client: &Client,
    target: &PgTarget,
    tables: Tables,
    scale: u32,
    reload: bool,
    started: Instant,
) -> anyhow::Result<LoadReport> {
    let found = catalog(client, target, tables).await?;
    let loaded = loaded_scale_in(client, tables, &found).await?;
    if !reload && loaded == Some(i64::from(scale)) {
        super::super::ensure_reusable(&figures(client, target, tables).await?, &target.display)?;
        return Ok(LoadReport {
            reused: true,
            rows: 0,
            elapsed: started.elapsed(),
        });
    }
    let ours = match (found.replaceable(&tables, &target.display), loaded) {
        (Ok(ours), _) => ours,
        (Err(_), Some(held)) if tables.pgbench && !found.owns_all(&tables) => {
            anyhow::bail!(PlanError::new(format!(
                "pgbench's tables in {} hold scale {held}{}, and perflab did not make them; \
                 give --scale {held} to run on them as they are, or rebuild them with \
                 `pgbench -i -s {scale}`",
                target.display,
                if reload { " (--reload asked for)" } else { "" },
            )))
        }
        (Err(e), _) => return Err(e.into()),
    };
    let rows = load(client, target, tables, i64::from(scale), &ours)
        .await
        .with_context(|| format!("cannot load the bank into {}", target.display))?;
    Ok(LoadReport {
        reused: false,
        rows,
        elapsed: started.elapsed(),
    })
}

/// What the catalog says of the bank's tables and perflab's ledger, as
/// the connection's search path resolves their names; within a look's
/// deadline, as the first statement a server that went silent gets.
async fn catalog(client: &Client, target: &PgTarget, tables: Tables) -> anyhow::Result<Catalog> {
    tokio::time::timeout(LOOK_QUERY, catalog_now(client, tables))
        .await
        .map_err(|_| silent_look("PostgreSQL", &target.display, "its catalog"))?
}

async fn catalog_now(client: &Client, tables: Tables) -> anyhow::Result<Catalog> {
    let mut present = Vec::new();
    for table in tables.all() {
        let exists: bool = client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await?
            .get(0);
        if exists {
            present.push(table);
        }
    }
    let columns: Vec<String> = client
        .query(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($1) \
             AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&LEDGER],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut found = Catalog::found(present, columns);
    if found.ledger_is_ours() {
        found.listed = client
            .query(
                &format!("SELECT table_name::text FROM {LEDGER} WHERE made_by = $1"),
                &[&MADE_BY],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
    }
    Ok(found)
}

/// The scale of the bank in the database, if one is loaded: perflab's
/// layout only when every table is perflab's; pgbench's when its four
/// tables are there, whoever made them.
pub(crate) async fn loaded_scale(
    client: &Client,
    target: &PgTarget,
    tables: Tables,
) -> anyhow::Result<Option<i64>> {
    let found = catalog(client, target, tables).await?;
    loaded_scale_in(client, tables, &found).await
}

async fn loaded_scale_in(
    client: &Client,
    tables: Tables,
    found: &Catalog,
) -> anyhow::Result<Option<i64>> {
    let sql = match tables.meta {
        None if found.present.len() == tables.all().len() => {
            format!("SELECT count(*) FROM {}", tables.branches)
        }
        Some(meta) if found.owns_all(&tables) => {
            format!("SELECT max(scale)::bigint FROM {meta} WHERE schema_version = {SCHEMA_VERSION}")
        }
        _ => return Ok(None),
    };
    Ok(client.query_one(&sql, &[]).await?.get(0))
}

/// Makes the layout's tables afresh and fills them. In one transaction,
/// each table goes into perflab's ledger before it is made, and only
/// `ours` (tables the ledger lists) are dropped.
async fn load(
    client: &Client,
    target: &PgTarget,
    t: Tables,
    scale: i64,
    ours: &[&str],
) -> anyhow::Result<u64> {
    let opening = Opening::of(t);
    client
        .batch_execute(&make_tables_sql(t, scale, ours, &opening))
        .await?;
    let accounts = scale * ACCOUNTS_PER_BRANCH;
    let per_stream = (accounts + COPY_STREAMS - 1) / COPY_STREAMS;
    let streams = (0..COPY_STREAMS).map(|i| {
        let from = i * per_stream + 1;
        let to = ((i + 1) * per_stream).min(accounts);
        copy_accounts(target, t.accounts, from, to, opening.account)
    });
    futures_util::future::try_join_all(streams).await?;
    add_keys(target, t).await?;
    if let Some(meta) = t.meta {
        client
            .batch_execute(&format!(
                "INSERT INTO {meta} (scale, initial_total, schema_version)
                     VALUES ({scale}, {total}, {SCHEMA_VERSION});",
                total = accounts * opening.account
            ))
            .await?;
    }
    client
        .batch_execute(&format!("VACUUM ANALYZE {}", t.history))
        .await?;
    Ok(u64::try_from(scale + scale * TELLERS_PER_BRANCH + accounts).unwrap_or(0))
}

/// The money column's type and the balances each row opens with.
/// pgbench's layout: int balances from 0; perflab's: bigint balances
/// opening at INITIAL_BALANCE per account (1,000.00).
struct Opening {
    money: &'static str,
    account: i64,
    teller: i64,
    branch: i64,
}

impl Opening {
    fn of(t: Tables) -> Opening {
        if t.pgbench {
            Opening {
                money: "integer",
                account: 0,
                teller: 0,
                branch: 0,
            }
        } else {
            Opening {
                money: "bigint",
                account: INITIAL_BALANCE,
                teller: INITIAL_BALANCE * ACCOUNTS_PER_BRANCH / TELLERS_PER_BRANCH,
                branch: INITIAL_BALANCE * ACCOUNTS_PER_BRANCH,
            }
        }
    }
}

/// The one transaction that records the tables in perflab's ledger, drops
/// `ours`, makes the tables and fills the branches and tellers.
fn make_tables_sql(t: Tables, scale: i64, ours: &[&str], opening: &Opening) -> String {
    let mut ddl = format!(
        "CREATE TABLE IF NOT EXISTS {LEDGER} (table_name text PRIMARY KEY, \
         made_at timestamptz NOT NULL DEFAULT now(), made_by text NOT NULL);\n"
    );
    for table in t.all() {
        let _ = writeln!(
            ddl,
            "INSERT INTO {LEDGER} VALUES ('{table}', now(), '{MADE_BY}') ON CONFLICT DO NOTHING;"
        );
    }
    if !ours.is_empty() {
        let _ = writeln!(ddl, "DROP TABLE {};", ours.join(", "));
    }
    if let Some(meta) = t.meta {
        let _ = writeln!(
            ddl,
            "CREATE TABLE {meta} (scale bigint NOT NULL, initial_total bigint NOT NULL, \
             loaded_at timestamptz NOT NULL DEFAULT now(), schema_version bigint NOT NULL);"
        );
    }
    let Opening {
        money,
        teller,
        branch,
        ..
    } = opening;
    let _ = write!(
        ddl,
        "CREATE TABLE {b} (bid integer NOT NULL, bbalance {money}, filler char(88)) WITH (fillfactor = 100);
         CREATE TABLE {te} (tid integer NOT NULL, bid integer, tbalance {money}, filler char(84)) WITH (fillfactor = 100);
         CREATE TABLE {a} (aid integer NOT NULL, bid integer, abalance {money}, filler char(84)) WITH (fillfactor = 100);
         CREATE TABLE {h} (tid integer, bid integer, aid integer, delta {money}, mtime timestamp, filler char(22));
         INSERT INTO {b} SELECT g, {branch}, '' FROM generate_series(1, {scale}) g;
         INSERT INTO {te} SELECT g, (g - 1) / {TELLERS_PER_BRANCH} + 1, {teller}, '' FROM generate_series(1, {tellers}) g;",
        h = t.history,
        a = t.accounts,
        te = t.tellers,
        b = t.branches,
        tellers = scale * TELLERS_PER_BRANCH,
    );
    ddl
}

/// Adds the primary keys after the data, a connection per table, each
/// table vacuumed and analysed after.
async fn add_keys(target: &PgTarget, t: Tables) -> anyhow::Result<()> {
    let keys =
        [(t.branches, "bid"), (t.tellers, "tid"), (t.accounts, "aid")].map(|(table, key)| {
            let target = target.clone();
            async move {
                let client = connect(&target).await?;
                client
                    .batch_execute(&format!("ALTER TABLE {table} ADD PRIMARY KEY ({key})"))
                    .await?;
                // VACUUM cannot share a transaction with anything else.
                client
                    .batch_execute(&format!("VACUUM ANALYZE {table}"))
                    .await?;
                anyhow::Ok(())
            }
        });
    futures_util::future::try_join_all(keys).await?;
    Ok(())
}

/// A loading connection: an administrative session, never counted
/// among the benchmark's.
async fn connect(target: &PgTarget) -> anyhow::Result<Client> {
    crate::sut::postgres::connect(target, &crate::sut::postgres::admin_config(target)).await
}

/// Streams accounts `from..=to` into the table with COPY on a connection of its own.
async fn copy_accounts(
    target: &PgTarget,
    table: &str,
    from: i64,
    to: i64,
    balance: i64,
) -> anyhow::Result<()> {
    if from > to {
        return Ok(());
    }
    let client = connect(target).await?;
    let sink = client
        .copy_in(&format!(
            "COPY {table} (aid, bid, abalance, filler) FROM STDIN"
        ))
        .await?;
    futures_util::pin_mut!(sink);
    let mut chunk = String::with_capacity(1 << 20);
    for aid in from..=to {
        let bid = (aid - 1) / ACCOUNTS_PER_BRANCH + 1;
        let _ = writeln!(chunk, "{aid}\t{bid}\t{balance}\t");
        if chunk.len() > (1 << 20) - 64 {
            crate::util::check_interrupt("loading the bank")?;
            sink.send(Bytes::from(std::mem::take(&mut chunk))).await?;
            chunk.reserve(1 << 20);
        }
    }
    if !chunk.is_empty() {
        sink.send(Bytes::from(chunk)).await?;
    }
    sink.finish().await?;
    Ok(())
}

/// The check's figures, read in one repeatable-read snapshot.
pub(crate) async fn figures(
    client: &Client,
    target: &PgTarget,
    t: Tables,
) -> anyhow::Result<BankFigures> {
    let initial = match t.meta {
        None => "0::bigint".to_string(),
        Some(meta) => format!("(SELECT initial_total FROM {meta} LIMIT 1)"),
    };
    // One scan of each table: a bank larger than the server's memory is
    // read from its disk once per scan.
    let sql = format!(
        "SELECT b.n, {initial}, te.n, a.n, a.total, te.total, b.total, h.n, h.total,
                a.negative, a.lowest
         FROM (SELECT count(*) AS n, coalesce(sum(bbalance), 0)::bigint AS total FROM {b}) AS b,
              (SELECT count(*) AS n, coalesce(sum(tbalance), 0)::bigint AS total FROM {te}) AS te,
              (SELECT count(*) AS n, coalesce(sum(abalance), 0)::bigint AS total,
                      count(*) FILTER (WHERE abalance < 0) AS negative,
                      coalesce(min(abalance), 0)::bigint AS lowest FROM {a}) AS a,
              (SELECT count(*) AS n, coalesce(sum(delta), 0)::bigint AS total FROM {h}) AS h",
        b = t.branches,
        te = t.tellers,
        a = t.accounts,
        h = t.history
    );
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let row = client.query_one(&sql, &[]).await;
    client.batch_execute("COMMIT").await?;
    let row = row?;
    let branches: i64 = row.get(0);
    Ok(BankFigures {
        scale: if t.pgbench {
            branches
        } else {
            loaded_scale(client, target, t).await?.unwrap_or(0)
        },
        initial_total: row.get(1),
        branches,
        tellers: row.get(2),
        accounts: row.get(3),
        accounts_sum: row.get(4),
        tellers_sum: row.get(5),
        branches_sum: row.get(6),
        history_rows: row.get(7),
        history_sum: row.get(8),
        negative_accounts: row.get(9),
        min_balance: row.get(10),
    })
}
