//! Creating, loading, reusing and reading the bank's tables on PostgreSQL.
//! Rows go in with COPY over several connections at once; primary keys are
//! added after the data (one connection per table), then VACUUM ANALYZE.
//! The pgbench layout is the one `pgbench -i` builds (int balances starting
//! at 0), so either tool can run on what the other loaded.

use super::super::check::BankFigures;
use super::super::ops::{ACCOUNTS_PER_BRANCH, INITIAL_BALANCE, TELLERS_PER_BRANCH};
use super::super::sqlite::LoadReport;
use super::super::Tables;
use crate::target::postgres::PgTarget;
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

/// Reuses a loaded bank of the same scale (after checking it) or loads one.
pub async fn prepare(
    client: &Client,
    target: &PgTarget,
    tables: Tables,
    scale: u32,
    reload: bool,
    started: Instant,
) -> anyhow::Result<LoadReport> {
    if !reload && loaded_scale(client, tables).await? == Some(i64::from(scale)) {
        super::super::ensure_reusable(&figures(client, tables).await?, &target.display)?;
        return Ok(LoadReport {
            reused: true,
            rows: 0,
            elapsed: started.elapsed(),
        });
    }
    let rows = load(client, target, tables, i64::from(scale))
        .await
        .with_context(|| format!("cannot load the bank into {}", target.display))?;
    Ok(LoadReport {
        reused: false,
        rows,
        elapsed: started.elapsed(),
    })
}

/// The scale of the bank in the database, if one is loaded.
pub async fn loaded_scale(client: &Client, tables: Tables) -> anyhow::Result<Option<i64>> {
    let meta = if tables.pgbench {
        tables.branches
    } else {
        "perflab_bank"
    };
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&meta])
        .await?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let sql = if tables.pgbench {
        format!("SELECT count(*) FROM {}", tables.branches)
    } else {
        format!(
            "SELECT max(scale)::bigint FROM perflab_bank WHERE schema_version = {SCHEMA_VERSION}"
        )
    };
    Ok(client.query_one(&sql, &[]).await?.get(0))
}

async fn load(client: &Client, target: &PgTarget, t: Tables, scale: i64) -> anyhow::Result<u64> {
    // pgbench's layout: int balances from 0; perflab's: bigint balances
    // opening at INITIAL_BALANCE per account (1,000.00).
    let (money, account, teller, branch) = if t.pgbench {
        ("integer", 0, 0, 0)
    } else {
        (
            "bigint",
            INITIAL_BALANCE,
            INITIAL_BALANCE * ACCOUNTS_PER_BRANCH / TELLERS_PER_BRANCH,
            INITIAL_BALANCE * ACCOUNTS_PER_BRANCH,
        )
    };
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS perflab_bank, {h}, {a}, {te}, {b};
             CREATE TABLE {b} (bid integer NOT NULL, bbalance {money}, filler char(88)) WITH (fillfactor = 100);
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
        ))
        .await?;

    let accounts = scale * ACCOUNTS_PER_BRANCH;
    let per_stream = (accounts + COPY_STREAMS - 1) / COPY_STREAMS;
    let streams = (0..COPY_STREAMS).map(|i| {
        let from = i * per_stream + 1;
        let to = ((i + 1) * per_stream).min(accounts);
        copy_accounts(target, t.accounts, from, to, account)
    });
    futures_util::future::try_join_all(streams).await?;

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
    if !t.pgbench {
        client
            .batch_execute(&format!(
                "CREATE TABLE perflab_bank (scale bigint NOT NULL, initial_total bigint NOT NULL,
                     loaded_at timestamptz NOT NULL DEFAULT now(), schema_version bigint NOT NULL);
                 INSERT INTO perflab_bank (scale, initial_total, schema_version)
                     VALUES ({scale}, {total}, {SCHEMA_VERSION});",
                total = accounts * account
            ))
            .await?;
    }
    client
        .batch_execute(&format!("VACUUM ANALYZE {}", t.history))
        .await?;
    Ok(u64::try_from(scale + scale * TELLERS_PER_BRANCH + accounts).unwrap_or(0))
}

async fn connect(target: &PgTarget) -> anyhow::Result<Client> {
    crate::target::postgres::connect(target, &target.config).await
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
pub async fn figures(client: &Client, t: Tables) -> anyhow::Result<BankFigures> {
    let initial = if t.pgbench {
        "0::bigint".to_string()
    } else {
        "(SELECT initial_total FROM perflab_bank LIMIT 1)".to_string()
    };
    let sql = format!(
        "SELECT (SELECT count(*) FROM {b}),
                {initial},
                (SELECT count(*) FROM {te}),
                (SELECT count(*) FROM {a}),
                (SELECT coalesce(sum(abalance), 0)::bigint FROM {a}),
                (SELECT coalesce(sum(tbalance), 0)::bigint FROM {te}),
                (SELECT coalesce(sum(bbalance), 0)::bigint FROM {b}),
                (SELECT count(*) FROM {h}),
                (SELECT coalesce(sum(delta), 0)::bigint FROM {h}),
                (SELECT count(*) FROM {a} WHERE abalance < 0),
                (SELECT coalesce(min(abalance), 0)::bigint FROM {a})",
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
            loaded_scale(client, t).await?.unwrap_or(0)
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
