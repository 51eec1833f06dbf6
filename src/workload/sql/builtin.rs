//! The built-in scripts, by name: the TPC-B-like transaction, its simple
//! update and its select-only variant, on pgbench's tables
//! (`pgbench_accounts`, `pgbench_tellers`, `pgbench_branches`,
//! `pgbench_history`, made by `pgbench -i` or `perflab run bank --mix
//! pgbench`). Each transaction ends in COMMIT (pgbench's own say END,
//! which MySQL and MariaDB do not take). Their `:scale` is the tables' own (their branches' count)
//! unless `--scale` says otherwise.

/// The built-in scripts' names, as `--script` takes them.
pub(crate) const NAMES: &[&str] = &["tpcb-like", "simple-update", "select-only"];

const DRAWS: &str = "\\set aid random(1, 100000 * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
";

/// The text of the built-in script `name`.
pub(crate) fn text(name: &str) -> Option<String> {
    let body = match name {
        "tpcb-like" => {
            "BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
COMMIT;
"
        }
        "simple-update" => {
            "BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
COMMIT;
"
        }
        "select-only" => {
            return Some(
                "\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
                    .to_string(),
            )
        }
        _ => return None,
    };
    Some(format!("{DRAWS}{body}"))
}
