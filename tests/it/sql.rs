//! A user's own SQL scripts (`perflab run sql`) on a real PostgreSQL
//! started by each test: a shop's scripts with random draws, a branch, a
//! `\gset` whose values the next statement uses, weights and `-D`, the
//! same scripts unchanged on SQLite and on a real MariaDB; the
//! built-in scripts on pgbench's tables, money conserved, on PostgreSQL
//! and on MariaDB; a value that tries to end its string stays a value;
//! and bad scripts refused in one line naming their file and line.

use crate::support::{contains, last_export, perflab_expect, perflab_ok, tempdir};
use perflab::sut::managed::postgres::ManagedPostgres;
use std::process::Command;

const SHORT: &str = "--warmup 0s --duration 2s";

fn server() -> ManagedPostgres {
    ManagedPostgres::start(&Default::default())
        .expect("a PostgreSQL server starts (are the server binaries installed?)")
}

/// One value from the server's perflab database, by psql.
fn psql_value(server: &ManagedPostgres, sql: &str) -> String {
    crate::support::psql(server, sql)
}

const INIT: &str = "CREATE TABLE shop_items (id bigint PRIMARY KEY, stock bigint NOT NULL, price numeric NOT NULL);
INSERT INTO shop_items SELECT g, 100000, g * 0.5 FROM generate_series(1, 50) g;
-- item 7 is sold out: buying it takes the other branch
UPDATE shop_items SET stock = 0 WHERE id = 7;
CREATE TABLE shop_orders (id bigserial PRIMARY KEY, item bigint, qty bigint, total numeric);
CREATE TABLE shop_misses (item bigint);
";

const BUY: &str = "-- buy one to three of an item, if it is in stock
\\set item random(1, :items)
\\set qty random(1, 3)
BEGIN;
SELECT stock, price AS unit_price
  FROM shop_items WHERE id = :item \\gset
\\if :stock >= :qty
UPDATE shop_items SET stock = stock - :qty WHERE id = :item;
INSERT INTO shop_orders (item, qty, total) VALUES (:item, :qty, :unit_price * :qty);
\\else
INSERT INTO shop_misses VALUES (:item);
\\endif
COMMIT;
";

const LOOK: &str = "\\set item random(1, :items)
SELECT price FROM shop_items WHERE id = :item;
";

/// The same scripts on SQLite: its own init (no bigserial, no
/// generate_series), the scripts unchanged.
const INIT_SQLITE: &str = "CREATE TABLE shop_items (id INTEGER PRIMARY KEY, stock INTEGER NOT NULL, price NUMERIC NOT NULL);
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 50)
INSERT INTO shop_items SELECT n, 100000, n * 0.5 FROM g;
UPDATE shop_items SET stock = 0 WHERE id = 7;
CREATE TABLE shop_orders (id INTEGER PRIMARY KEY, item INTEGER, qty INTEGER, total NUMERIC);
CREATE TABLE shop_misses (item INTEGER);
";

/// The same scripts on MariaDB: its own init (AUTO_INCREMENT, the
/// sequence engine), the scripts unchanged.
const INIT_MARIADB: &str = "CREATE TABLE shop_items (id bigint PRIMARY KEY, stock bigint NOT NULL, price decimal(12,2) NOT NULL);
INSERT INTO shop_items SELECT seq, 100000, seq * 0.5 FROM seq_1_to_50;
UPDATE shop_items SET stock = 0 WHERE id = 7;
CREATE TABLE shop_orders (id bigint AUTO_INCREMENT PRIMARY KEY, item bigint, qty bigint, total decimal(12,2));
CREATE TABLE shop_misses (item bigint);
";

/// Runs the shop's scripts on `target` after `init`, then checks what
/// they did through `value` (one value of a query).
fn run_the_shop(target: &str, init: &str, value: &dyn Fn(&str) -> String) {
    let dir = tempdir();
    for (name, text) in [("init.sql", init), ("buy.sql", BUY), ("look.sql", LOOK)] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run sql --target {target} --init init.sql --script buy.sql@3 --script look.sql -D items=50 --users 1,2 {SHORT}"
        ),
    );
    contains(&out, "running init.sql once");
    contains(&out, "buy.sql");
    contains(&out, "look.sql");
    // Every order's total is its item's price times its quantity: the
    // price came back through \gset and went into the INSERT.
    let wrong = value(
        "SELECT count(*) FROM shop_orders o JOIN shop_items i ON i.id = o.item WHERE o.total <> i.price * o.qty",
    );
    assert_eq!(wrong, "0");
    // The stock fell by exactly what was ordered, and the sold-out item
    // took the other branch every time it was drawn.
    let sold: i64 = value("SELECT coalesce(sum(qty), 0) FROM shop_orders")
        .parse()
        .unwrap();
    let orders: i64 = value("SELECT count(*) FROM shop_orders").parse().unwrap();
    let stock: i64 = value("SELECT sum(stock) FROM shop_items").parse().unwrap();
    assert_eq!(stock, 49 * 100_000 - sold);
    assert!(orders > 0, "no orders");
    assert_eq!(
        value("SELECT count(*) FROM shop_orders WHERE item = 7"),
        "0"
    );
    let misses: i64 = value("SELECT count(*) FROM shop_misses WHERE item = 7")
        .parse()
        .unwrap();
    assert!(misses > 0, "item 7 was never drawn");
    assert_eq!(
        value("SELECT count(*) FROM shop_misses WHERE item <> 7"),
        "0"
    );
    // Each script is an operation of its own, drawn 3 to 1.
    let export = last_export(dir.path());
    let ops = export["steps"][1]["ops"].as_array().unwrap();
    let count = |name: &str| {
        ops.iter()
            .find(|o| o["name"] == name)
            .map(|o| o["ok"].as_f64().unwrap())
            .unwrap_or(0.0)
    };
    // Each draw is a buy with probability 3/4: the share of buys lies
    // within 4.5 standard deviations of it (a chance of 7 in a million of
    // failing when the weights are right). Enough draws that 1 to 1 would
    // lie outside that band.
    let (buy, look) = (count("buy.sql"), count("look.sql"));
    let draws = buy + look;
    assert!(
        draws >= 80.0,
        "{buy} buys and {look} looks: too few to judge"
    );
    let band = 4.5 * (0.75 * 0.25 / draws).sqrt();
    assert!(
        (buy / draws - 0.75).abs() <= band,
        "{buy} buys against {look} looks: a share of {:.3}, not 0.75 ± {band:.3}",
        buy / draws
    );
    let errors: f64 = ops
        .iter()
        .map(|o| {
            o["errors"]
                .as_object()
                .map_or(0.0, |e| e.values().filter_map(|v| v.as_f64()).sum())
        })
        .sum();
    assert_eq!(errors, 0.0, "{ops:?}");
    every_statement_is_timed(&out, &export["steps"][1], ops);
    assert_eq!(
        crate::support::schema_problems(&export),
        Vec::<String>::new()
    );
}

/// The time per statement: a table in the run's output, and in the
/// export each statement's runs and mean. A run of a script runs its
/// BEGIN and its COMMIT once each (a retried try runs its BEGIN again),
/// and each branch of the `\if` once per SELECT; a look runs its one
/// statement once. Counts differ by the runs in flight at the window's
/// two ends (at most the users, 2, at each) and, for looks, by the few
/// that ended between the engine's interval end and the statistics'.
fn every_statement_is_timed(out: &str, step: &serde_json::Value, ops: &[serde_json::Value]) {
    contains(out, "time per statement");
    contains(out, "buy.sql:13  COMMIT");
    let statements = &step["statements"];
    let runs = |place: &str| statements[place]["runs"].as_f64().unwrap_or(-1.0);
    let op = |name: &str, field: &str| {
        ops.iter()
            .find(|o| o["name"] == name)
            .and_then(|o| o[field].as_f64())
            .unwrap_or(0.0)
    };
    let (begin, select, commit) = (runs("buy.sql:4"), runs("buy.sql:5"), runs("buy.sql:13"));
    let (update, missed) = (runs("buy.sql:8"), runs("buy.sql:11"));
    let retries = op("buy.sql", "retries");
    assert!(commit > 0.0 && begin > 0.0, "{statements}");
    assert!(
        (-4.0..=4.0 + retries).contains(&(begin - commit)),
        "BEGIN {begin} against COMMIT {commit} ({retries} retries): {statements}"
    );
    assert!(
        (-4.0..=4.0 + retries).contains(&(select - update - missed)),
        "SELECT {select} against its branches {update} + {missed}: {statements}"
    );
    let looks = op("look.sql", "ok");
    assert!(
        (runs("look.sql:2") - looks).abs() <= 10.0 + 0.1 * looks,
        "look.sql:2 ran {} times in the step's statistics, look.sql {looks} in its tally",
        runs("look.sql:2")
    );
    for (place, figures) in statements.as_object().unwrap() {
        let mean = figures["mean_s"].as_f64().unwrap_or(0.0);
        assert!(mean > 0.0 && mean < 1.0, "{place}: {figures}");
    }
}

#[test]
fn a_users_scripts_run_with_their_draws_branches_gset_and_weights() {
    let _heavy = crate::support::heavy();
    let pg = server();
    run_the_shop(&pg.url(), INIT, &|sql| psql_value(&pg, sql));
}

#[test]
fn the_same_scripts_run_unchanged_on_sqlite() {
    // On a tmpfs: what this test checks is the scripts, not how fast the
    // disk the other tests keep busy syncs each purchase.
    let db = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = db.path().join("shop.db");
    run_the_shop(&format!("sqlite:{}", path.display()), INIT_SQLITE, &|sql| {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Real(d) => d.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .unwrap()
    });
}

#[test]
fn the_built_in_scripts_run_on_pgbenchs_tables_and_conserve_the_money() {
    let _heavy = crate::support::heavy();
    let pg = server();
    let dir = tempdir();
    let init = Command::new("pgbench")
        .args(["-i", "-q", "-s", "1", &pg.url()])
        .output()
        .expect("pgbench runs");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run sql --target {} --script tpcb-like --script select-only@2 --users 2 {SHORT}",
            pg.url()
        ),
    );
    contains(&out, "tpcb-like");
    contains(&out, "select-only");
    let sums = psql_value(
        &pg,
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || (SELECT sum(bbalance) FROM pgbench_branches) || ' ' || (SELECT sum(delta) FROM pgbench_history)",
    );
    let sums: Vec<&str> = sums.split(' ').collect();
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
    let history: i64 = psql_value(&pg, "SELECT count(*) FROM pgbench_history")
        .parse()
        .unwrap();
    assert!(history > 100, "{history} transactions");
}

#[test]
fn a_bad_script_is_one_line_naming_its_file_and_line() {
    let pg = server();
    let dir = tempdir();
    let url = pg.url();
    for (text, says) in [
        (
            "SELECT 1;\n\\shell rm -rf /tmp/x\n",
            "bad.sql:2: perflab runs no shell command",
        ),
        ("\\set x random(1,\nSELECT :x;\n", "bad.sql:1: "),
        (
            "\\set x nosuch(1)\nSELECT :x;\n",
            "bad.sql:1: `nosuch` is no function",
        ),
        ("\\nope\nSELECT 1;\n", "bad.sql:1: unknown command \\nope"),
        ("SELECT :never_set;\n", "bad.sql:1: :never_set is never set"),
        ("\\set x 1\nSELEC :x;\n", "bad.sql:2: `SELEC :x`"),
        (
            "SELECT * FROM no_such_table;\n",
            "bad.sql:1: `SELECT * FROM no_such_table`",
        ),
        (
            "\\set z random_zipfian(1, 10, 0.2)\nSELECT :z;\n",
            "bad.sql:1: random_zipfian",
        ),
    ] {
        std::fs::write(dir.path().join("bad.sql"), text).unwrap();
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run sql --target {url} --script bad.sql --users 1 {SHORT}"),
            2,
        );
        contains(&err, says);
        assert_eq!(err.trim().lines().count(), 1, "{text:?}: {err}");
    }
    for (args, says) in [
        ("--script missing.sql", "--script: cannot read missing.sql"),
        ("--script bad.sql@0", "--script: `0` is no weight"),
        ("--script tpcb-like -D 1x=3", "-D: `1x=3` is not NAME=VALUE"),
        ("--script tpcb-like --max-tries 0", "--max-tries"),
    ] {
        let (_, err) = perflab_expect(
            dir.path(),
            &format!("run sql --target {url} {args} --users 1 {SHORT}"),
            2,
        );
        contains(&err, says);
    }
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run sql --target file:/tmp/x.bin --script tpcb-like --users 1 {SHORT}"),
        2,
    );
    contains(&err, "--target: file:/tmp/x.bin is no SQL database");
    // Nothing of perflab's was made in the user's database.
    assert_eq!(
        psql_value(
            &pg,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ),
        "0"
    );
}

#[test]
fn the_same_scripts_run_unchanged_on_mariadb_and_a_value_stays_a_value() {
    let _heavy = crate::support::heavy();
    let db = crate::mariadb::MariaDb::start();
    let url = db.url("bank-pw");
    run_the_shop(&url, INIT_MARIADB, &|sql| db.value(sql));
    // A value that would end its string under MariaDB's default sql_mode
    // (a backslash before the quote) and then drop the table is stored
    // as the text it is.
    let dir = tempdir();
    assert!(db.sql("CREATE TABLE perflab.notes (body text)"));
    std::fs::write(
        dir.path().join("note.sql"),
        "INSERT INTO notes (body) VALUES (:body);\n",
    )
    .unwrap();
    let hostile = r"x\' ; DROP TABLE notes; #";
    let out = crate::support::perflab_process(dir.path())
        .args(["run", "sql", "--target", &url, "--script", "note.sql"])
        .args(["-D", &format!("body={hostile}")])
        .args(["--users", "1", "--warmup", "0s", "--duration", "1s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bodies = db.value("SELECT count(*), count(DISTINCT body), min(body) FROM notes");
    let fields: Vec<&str> = bodies.split('\t').collect();
    assert!(fields[0].parse::<u64>().unwrap() > 10, "{bodies}");
    assert_eq!(fields[1], "1", "{bodies}");
    // mariadb -B writes a backslash as two.
    assert_eq!(fields[2].replace(r"\\", r"\"), hostile, "{bodies}");
    // A statement MariaDB refuses is one line naming the script's line.
    std::fs::write(dir.path().join("bad.sql"), "\\set x 1\nSELEC :x;\n").unwrap();
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run sql --target {url} --script bad.sql --users 1 {SHORT}"),
        2,
    );
    contains(
        &err,
        "bad.sql:2: `SELEC :x`: the server cannot prepare it (1064:",
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn the_same_scripts_run_unchanged_on_a_managed_mariadb() {
    let _heavy = crate::support::heavy();
    let dir = tempdir();
    for (name, text) in [
        ("init.sql", INIT_MARIADB),
        ("buy.sql", BUY),
        ("look.sql", LOOK),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let out = perflab_ok(
        dir.path(),
        &format!(
            "run sql --target mariadb:managed --init init.sql --script buy.sql@3 --script look.sql -D items=50 --users 2 {SHORT}"
        ),
    );
    contains(&out, "running init.sql once");
    crate::support::managed_files_removed(&out);
    // Every buy kept its row through \gset (a miss is an error of its
    // own) and nothing failed.
    let export = last_export(dir.path());
    let ops = export["steps"][0]["ops"].as_array().unwrap();
    for name in ["buy.sql", "look.sql"] {
        let op = ops.iter().find(|o| o["name"] == name).unwrap();
        assert!(op["ok"].as_f64().unwrap() > 10.0, "{op}");
        let errors: f64 = op["errors"]
            .as_object()
            .map_or(0.0, |e| e.values().filter_map(|v| v.as_f64()).sum());
        assert_eq!(errors, 0.0, "{op}");
    }
}

/// pgbench's four tables at scale 1, in MariaDB's SQL.
const PGBENCH_MARIADB: &str = "CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
INSERT INTO pgbench_branches SELECT seq, 0, '' FROM seq_1_to_1;
INSERT INTO pgbench_tellers SELECT seq, 1, 0, '' FROM seq_1_to_10;
INSERT INTO pgbench_accounts SELECT seq, 1, 0, '' FROM seq_1_to_100000;
";

#[test]
fn the_built_in_scripts_run_on_mariadb_and_conserve_the_money() {
    let _heavy = crate::support::heavy();
    let db = crate::mariadb::MariaDb::start();
    let url = db.url("bank-pw");
    let dir = tempdir();
    // Without pgbench's tables, one line says how to make them here.
    let (_, err) = perflab_expect(
        dir.path(),
        &format!("run sql --target {url} --script select-only --users 1 {SHORT}"),
        2,
    );
    contains(&err, "has none");
    contains(&err, "--init");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    std::fs::write(dir.path().join("pgbench.sql"), PGBENCH_MARIADB).unwrap();
    let out = perflab_ok(
        dir.path(),
        &format!("run sql --target {url} --init pgbench.sql --script tpcb-like --script select-only@2 --users 2 {SHORT}"),
    );
    contains(&out, "tpcb-like");
    contains(&out, "select-only");
    let sums = db.value(
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT sum(bbalance) FROM pgbench_branches), (SELECT sum(delta) FROM pgbench_history)",
    );
    let sums: Vec<&str> = sums.split('\t').collect();
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
    let history: i64 = db
        .value("SELECT count(*) FROM pgbench_history")
        .parse()
        .unwrap();
    assert!(history > 50, "{history} transactions");
}
