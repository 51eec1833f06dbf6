#!/usr/bin/env bash
# perflab against pgbench on one PostgreSQL server, number for number.
#
# Starts a throwaway PostgreSQL on a free loopback port, loads pgbench's
# tables with `pgbench -i -s SCALE`, then for 1, 2, 4, 8 and 16 clients runs
# pgbench's built-in tpcb-like script (-M prepared) and `perflab run bank
# --mix pgbench` (the same transaction on the same tables), alternating,
# SECONDS each, ROUNDS times (odd rounds pgbench first, even rounds
# perflab first). Prints per client count the median tps of each, the
# ratio of the medians, the paired ratio with its 95% interval and what
# it says (ahead, behind or level: see paired_row in common.sh) and the
# rounds perflab was ahead; then the same for each client's CPU per
# transaction (user + system, from the process's rusage), with the
# rounds perflab used less. A second table does the same in pipeline mode:
# pgbench running the tpcb-like statements between \startpipeline and
# \endpipeline, perflab with --pipeline. Three more run a script through
# both in pgbench's default (simple) protocol, against `perflab run sql
# --script` (which sends its statements the same way): a custom script
# with random draws and a multi-statement transaction, then the built-in
# select-only and simple-update.
# The server runs without autovacuum and with a checkpoint before each run
# (none during one), so that neither client meets the other's clean-up:
# a vacuum or checkpoint that lands in one run and not the next moves a
# round by more than the clients differ.
# Usage: bench/pgbench.sh [SECONDS] [SCALE] [ROUNDS]   (defaults 30, 16, 3)
# CLIENTS="1 2" runs those client counts only; TABLES="script select-only"
# runs those tables only (of tpcb-like pipelined script select-only
# simple-update). pgbench runs with -j 2 (1 at one client); perflab with
# its default threads, as a user would run it: one per CPU, and each user
# a thread of its own in a step of up to one user per CPU (its socket
# read with blocking calls; see docs/running.md). PERFLAB_THREADS gives
# perflab that many threads instead (PERFLAB_THREADS=2: pgbench's).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-30}"
scale="${2:-16}"
rounds="${3:-3}"
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

start_pgbench_server "$scale"
# One unmeasured run first: the first runs after a load touch pages
# and fill caches that every later run finds ready, and the first round
# would pay for them.
"$bindir/pgbench" -n -M prepared -b tpcb-like -c 2 -j 2 -T "$seconds" "$url" >/dev/null 2>&1

write_pipeline_script "$work/pipeline.sql" "$scale"
# A user's own transaction: draws skewed towards the first accounts, a
# debit, its balance read back and the teller's total, in one transaction.
cat > "$work/custom.sql" <<'SQL'
\set aid random_exponential(1, 100000 * :scale, 5)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
END;
SQL

# One table: $1 names it and $2 its cells in the results (see result_row
# in common.sh); pgbench's extra arguments follow up to "--", perflab's
# command and arguments after it.
table() {
    local title="$1" mode="$2"; shift 2
    case " ${TABLES:-$mode} " in *" $mode "*) ;; *) return 0 ;; esac
    local pg_args=() pl_args=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do pg_args+=("$1"); shift; done
    [ "$#" -gt 0 ] && shift
    pl_args=("$@")
    echo "$title"
    paired_header pgbench
    for clients in ${CLIENTS:-1 2 4 8 16}; do
        threads=$(( clients < 2 ? clients : 2 ))
        pg_tps_runs=(); pg_cpu_runs=(); pl_tps_runs=(); pl_cpu_runs=()
        for round in $(seq "$rounds"); do
            if peer_first "$round"; then
                run_pgbench; run_perflab
            else
                run_perflab; run_pgbench
            fi
        done
        paired_row "$clients" "$(IFS=,; echo "${pg_tps_runs[*]}")" "$(IFS=,; echo "${pl_tps_runs[*]}")" \
            "$(IFS=,; echo "${pg_cpu_runs[*]}")" "$(IFS=,; echo "${pl_cpu_runs[*]}")" "$mode c$clients"
    done
}

# A checkpoint before every run, so that none falls inside one (the
# server's own are an hour apart).
checkpoint() { "$bindir/psql" -q "$url" -c checkpoint; }

run_pgbench() {
    checkpoint
    read -r pg_cpu pg_out < <(measure "$bindir/pgbench" -n "${pg_args[@]}" -c "$clients" -j "$threads" -T "$seconds" "$url")
    pg_tps_runs+=("$(grep -o 'tps = [0-9.]*' <<<"$pg_out" | sed -n '1s/tps = //p')")
    pg_tx="$(grep -o 'actually processed: [0-9]*' <<<"$pg_out" | cut -d' ' -f3)"
    pg_cpu_runs+=("$(python3 -c "print($pg_cpu / $pg_tx * 1e6)")")
}

run_perflab() {
    checkpoint
    read -r pl_cpu _ < <(measure "$perflab" "${pl_args[@]}" --target "$url" \
        --users "$clients" ${PERFLAB_THREADS:+--threads "$PERFLAB_THREADS"} --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    read -r pl_tps pl_tx < <(step_figures "$perflab" "$work/bench.db")
    pl_tps_runs+=("$pl_tps")
    pl_cpu_runs+=("$(python3 -c "print($pl_cpu / $pl_tx * 1e6)")")
}

bank=(run bank --mix pgbench --scale "$scale")
table "one round trip per statement (pgbench -b tpcb-like, perflab --mix pgbench)" tpcb-like -M prepared -b tpcb-like -- "${bank[@]}"
echo
table "pipelined (pgbench \\startpipeline ... \\endpipeline, perflab --pipeline)" pipelined -M prepared -f "$work/pipeline.sql" -- "${bank[@]}" --pipeline
echo
table "a custom script (pgbench -f, perflab run sql --script; both simple protocol)" script -s "$scale" -f "$work/custom.sql" -- run sql --script "$work/custom.sql" --scale "$scale"
echo
table "built-in select-only (pgbench -b, perflab run sql --script; both simple protocol)" select-only -b select-only -- run sql --script select-only
echo
table "built-in simple-update (pgbench -b, perflab run sql --script; both simple protocol)" simple-update -b simple-update -- run sql --script simple-update
