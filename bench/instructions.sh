#!/usr/bin/env bash
# The client's own work per transaction, counted rather than timed:
# perflab against pgbench on one PostgreSQL server, in user-space
# instructions per TPC-B transaction.
#
# CPU time on a shared or virtual machine moves by several percent from
# one run to the next, more than two clients of the same design differ
# by. Instructions do not. Each client runs under valgrind's callgrind
# (which counts the instructions a process executes in user space, not
# the kernel's) twice, for SHORT and for LONG seconds, against the same
# throwaway server bench/pgbench.sh uses. The difference in instructions
# over the difference in transactions is the client's own work per
# transaction: start-up, connecting, preparing and shutting down are in
# both runs and cancel. Prints per client count and mode (one round trip
# per statement; pipelined) each client's instructions per transaction,
# the transactions each pair of runs made, and perflab's over pgbench's.
# Both clients run 2 threads (1 at 1 client); callgrind runs one thread
# at a time, for either.
# Kernel time (about 90% of either client's CPU on loopback) is not in
# these figures; bench/pgbench.sh measures CPU, kernel included.
# Usage: bench/instructions.sh [SHORT] [LONG] [SCALE]   (defaults 2, 6, 16)
# CLIENTS="1 4" runs those client counts only (default "1 4 16").
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
short="${1:-2}"
long="${2:-6}"
scale="${3:-16}"
for value in "$short" "$long" "$scale" ${CLIENTS:-}; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "instructions.sh: '$value' is not a whole number above 0; e.g. CLIENTS=\"1 4\" bench/instructions.sh 2 6 16" >&2
        exit 2
    fi
done
if [ "$long" -le "$short" ]; then
    echo "instructions.sh: LONG ($long s) must be longer than SHORT ($short s); e.g. bench/instructions.sh 2 6" >&2
    exit 2
fi
if ! command -v valgrind >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
fi
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

start_pgbench_server "$scale"
write_pipeline_script "$work/pipeline.sql" "$scale"
# Warm the server's caches, as bench/pgbench.sh does.
"$bindir/pgbench" -n -M prepared -b tpcb-like -c 2 -j 2 -T 5 "$url" >/dev/null 2>&1

# The user-space instructions of the callgrind profile $1.
instructions() { awk '/^(summary|totals):/ {print $2; exit}' "$1"; }

# Runs pgbench for $1 seconds under callgrind: "<instructions> <transactions>".
pgbench_run() {
    local out="$work/pgbench.cg"
    local log
    log="$(valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bindir/pgbench" -n -M prepared "${pg_args[@]}" -c "$clients" -j "$threads" -T "$1" "$url" 2>/dev/null)"
    echo "$(instructions "$out") $(grep -o 'actually processed: [0-9]*' <<<"$log" | cut -d' ' -f3)"
}

# Runs perflab for $1 seconds under callgrind: "<instructions> <transactions>".
perflab_run() {
    local out="$work/perflab.cg"
    rm -f "$work/bench.db"
    CI=true valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$perflab" run bank --target "$url" --mix pgbench --scale "$scale" "${pl_args[@]}" \
        --users "$clients" --threads "$threads" --warmup 0s --duration "$1s" --store "$work/bench.db" >/dev/null 2>&1
    local tx
    read -r _ tx < <(step_figures "$perflab" "$work/bench.db")
    echo "$(instructions "$out") $tx"
}

# Instructions per transaction from two runs "<i> <t>" (short, long).
per_tx() {
    python3 -c '
import sys
i1, t1 = map(float, sys.argv[1].split()); i2, t2 = map(float, sys.argv[2].split())
if t2 <= t1:
    sys.exit(f"instructions.sh: the long run made {t2:.0f} transactions, the short one {t1:.0f}; give LONG more seconds")
print(f"{(i2 - i1) / (t2 - t1):.0f} {t2 - t1:.0f}")' "$1" "$2"
}

# One table: $1 names it; pgbench's extra arguments follow up to "--",
# perflab's extra arguments after it.
table() {
    local title="$1"; shift
    pg_args=(); pl_args=()
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do pg_args+=("$1"); shift; done
    [ "$#" -gt 0 ] && shift
    pl_args=("$@")
    echo "$title"
    printf '%8s %16s %12s %16s %12s %8s\n' clients 'pgbench instr/tx' '(tx)' 'perflab instr/tx' '(tx)' ratio
    for clients in ${CLIENTS:-1 4 16}; do
        threads=$(( clients < 2 ? clients : 2 ))
        local pg_runs pl_runs
        pg_runs="$(per_tx "$(pgbench_run "$short")" "$(pgbench_run "$long")")"
        pl_runs="$(per_tx "$(perflab_run "$short")" "$(perflab_run "$long")")"
        read -r pg pg_tx <<<"$pg_runs"
        read -r pl pl_tx <<<"$pl_runs"
        printf '%8d %16d %12d %16d %12d %8s\n' "$clients" "$pg" "$pg_tx" "$pl" "$pl_tx" \
            "$(python3 -c "print(f'{$pl / $pg:.2f}')")"
    done
}

table "one round trip per statement (pgbench -b tpcb-like, perflab --mix pgbench)" -b tpcb-like --
echo
table "pipelined (pgbench \\startpipeline ... \\endpipeline, perflab --pipeline)" -f "$work/pipeline.sql" -- --pipeline
