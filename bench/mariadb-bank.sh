#!/usr/bin/env bash
# perflab against sysbench on one MariaDB server, number for number.
#
# Starts a throwaway MariaDB through perflab's own lifecycle (`perflab
# up`), loads perflab's bank
# at SCALE branches (a short perflab run), then for 1, 2, 4, 8 and 16
# clients runs the TPC-B transaction of `perflab run bank --mix tpcb` from
# both: perflab itself, and sysbench (C, libmariadb, prepared statements)
# running a Lua script that issues the same seven statements on the same
# tables with the same draws (BEGIN; credit; balance; teller; branch;
# history; COMMIT). Alternating, SECONDS each, ROUNDS times (odd rounds
# sysbench first, even rounds perflab first); per client count the median
# tps of each, the ratio of the medians, the paired ratio with its 95%
# interval and what it says (ahead, behind or level), and the same for
# each one's CPU per transaction (user + system, from rusage), with the
# rounds perflab was ahead and leaner (see paired_row in common.sh).
# MODE=script runs the same transaction as a user's script instead:
# `perflab run sql --script` (each statement one text query, its values
# written in) against sysbench sending the same text queries
# (con:query), so that both make the server parse every statement.
# sysbench runs a thread per client; perflab its default threads, as a
# user would run it (one per CPU, and each user its own in a step of up
# to one user per CPU: docs/running.md); PERFLAB_THREADS gives it that
# many instead.
# Usage: bench/mariadb-bank.sh [SECONDS] [SCALE] [ROUNDS]   (defaults 20, 4, 3)
# CLIENTS="1 2" runs those client counts only.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-20}"
scale="${2:-4}"
rounds="${3:-3}"
if ! command -v sysbench >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q sysbench >/dev/null
fi
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

work="$(mktemp -d)"
trap stop_managed EXIT
start_managed --target mariadb:managed \
    --mariadb-set innodb_buffer_pool_size=1G --mariadb-set max_connections=200
# sysbench takes the server's parts apart.
if ! [[ "$url" =~ ^mysql://([^:@]+):([^@]*)@([^:/]+):([0-9]+)/([^?]*)$ ]]; then
    echo "bench/mariadb-bank.sh: perflab up gave a URL this script cannot take apart" >&2
    exit 1
fi
my_user="${BASH_REMATCH[1]}" my_password="${BASH_REMATCH[2]}" my_host="${BASH_REMATCH[3]}"
port="${BASH_REMATCH[4]}" my_db="${BASH_REMATCH[5]}"
CI=true "$perflab" run bank --target "$url" --scale "$scale" --users 1 --warmup 0s --duration 2s \
    --store "$work/load.db" >/dev/null

# perflab's TPC-B transaction (bank/txn.rs, --mix tpcb), prepared once per
# connection, uniform draws as perflab makes them.
cat > "$work/tpcb.lua" <<'LUA'
sysbench.cmdline.options = { scale = { "branches loaded", 4 } }

local function prepare(sql, count)
    local stmt = con:prepare(sql)
    local params = {}
    for i = 1, count do
        params[i] = stmt:bind_create(sysbench.sql.type.BIGINT)
    end
    stmt:bind_param(unpack(params))
    return stmt, params
end

function thread_init()
    drv = sysbench.sql.driver()
    con = drv:connect()
    credit, credit_p = prepare("UPDATE perflab_accounts SET abalance = abalance + ? WHERE aid = ?", 2)
    balance, balance_p = prepare("SELECT abalance FROM perflab_accounts WHERE aid = ?", 1)
    teller, teller_p = prepare("UPDATE perflab_tellers SET tbalance = tbalance + ? WHERE tid = ?", 2)
    branch, branch_p = prepare("UPDATE perflab_branches SET bbalance = bbalance + ? WHERE bid = ?", 2)
    history, history_p = prepare(
        "INSERT INTO perflab_history (tid, bid, aid, delta, mtime, filler) VALUES (?, ?, ?, ?, NOW(6), '')", 4)
end

function thread_done()
    con:disconnect()
end

function event()
    local s = sysbench.opt.scale
    local aid = sysbench.rand.uniform(1, s * 100000)
    local bid = sysbench.rand.uniform(1, s)
    local tid = sysbench.rand.uniform(1, s * 10)
    local delta = sysbench.rand.uniform(-5000, 5000)
    con:query("BEGIN")
    credit_p[1]:set(delta); credit_p[2]:set(aid); credit:execute()
    balance_p[1]:set(aid); balance:execute()
    teller_p[1]:set(delta); teller_p[2]:set(tid); teller:execute()
    branch_p[1]:set(delta); branch_p[2]:set(bid); branch:execute()
    history_p[1]:set(tid); history_p[2]:set(bid); history_p[3]:set(aid); history_p[4]:set(delta)
    history:execute()
    con:query("COMMIT")
end
LUA

# The same transaction as text queries, for MODE=script: sysbench's Lua
# and perflab's script in pgbench's format.
cat > "$work/tpcb-text.lua" <<'LUA'
sysbench.cmdline.options = { scale = { "branches loaded", 4 } }

function thread_init()
    drv = sysbench.sql.driver()
    con = drv:connect()
end

function thread_done()
    con:disconnect()
end

function event()
    local s = sysbench.opt.scale
    local aid = sysbench.rand.uniform(1, s * 100000)
    local bid = sysbench.rand.uniform(1, s)
    local tid = sysbench.rand.uniform(1, s * 10)
    local delta = sysbench.rand.uniform(-5000, 5000)
    con:query("BEGIN")
    con:query(string.format("UPDATE perflab_accounts SET abalance = abalance + %d WHERE aid = %d", delta, aid))
    con:query(string.format("SELECT abalance FROM perflab_accounts WHERE aid = %d", aid))
    con:query(string.format("UPDATE perflab_tellers SET tbalance = tbalance + %d WHERE tid = %d", delta, tid))
    con:query(string.format("UPDATE perflab_branches SET bbalance = bbalance + %d WHERE bid = %d", delta, bid))
    con:query(string.format(
        "INSERT INTO perflab_history (tid, bid, aid, delta, mtime, filler) VALUES (%d, %d, %d, %d, NOW(6), '')",
        tid, bid, aid, delta))
    con:query("COMMIT")
end
LUA
cat > "$work/tpcb.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
\set bid random(1, :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE perflab_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM perflab_accounts WHERE aid = :aid;
UPDATE perflab_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE perflab_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO perflab_history (tid, bid, aid, delta, mtime, filler) VALUES (:tid, :bid, :aid, :delta, NOW(6), '');
COMMIT;
SQL
mode="${MODE:-bank}"
lua="$work/tpcb.lua"
if [ "$mode" = script ]; then
    lua="$work/tpcb-text.lua"
fi

echo "TPC-B ($mode) on MariaDB $(mariadbd --version | grep -o '[0-9.]*-MariaDB' | sed -n 1p), scale $scale (medians of $rounds rounds of ${seconds} s)"
run_sysbench() {
    read -r sb_cpu sb_out < <(measure sysbench "$lua" --db-driver=mysql \
        --mysql-host="$my_host" --mysql-port="$port" --mysql-user="$my_user" --mysql-password="$my_password" \
        --mysql-db="$my_db" --scale="$scale" --threads="$clients" --time="$seconds" \
        --rand-type=uniform --report-interval=0 run)
    sb_tx="$(grep -o 'transactions: *[0-9]*' <<<"$sb_out" | grep -o '[0-9]*$')"
    sb_tps_runs+=("$(python3 -c "print($sb_tx / $seconds)")")
    sb_cpu_runs+=("$(python3 -c "print($sb_cpu / $sb_tx * 1e6)")")
}

run_perflab() {
    local workload=(bank --mix tpcb)
    if [ "$mode" = script ]; then
        workload=(sql --script "$work/tpcb.sql")
    fi
    read -r pl_cpu _ < <(measure "$perflab" run "${workload[@]}" --target "$url" --scale "$scale" \
        --users "$clients" ${PERFLAB_THREADS:+--threads "$PERFLAB_THREADS"} --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    read -r pl_tps pl_tx < <(step_figures "$perflab" "$work/bench.db")
    pl_tps_runs+=("$pl_tps")
    pl_cpu_runs+=("$(python3 -c "print($pl_cpu / $pl_tx * 1e6)")")
}

# One unmeasured run first, as in pgbench.sh: the first run after the
# load reads pages into the buffer pool that every later run finds
# there, and whichever client ran first would pay for them.
clients=2
sb_tps_runs=(); sb_cpu_runs=()
run_sysbench

paired_header sysbench
for clients in ${CLIENTS:-1 2 4 8 16}; do
    sb_tps_runs=(); sb_cpu_runs=(); pl_tps_runs=(); pl_cpu_runs=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then
            run_sysbench; run_perflab
        else
            run_perflab; run_sysbench
        fi
    done
    paired_row "$clients" "$(IFS=,; echo "${sb_tps_runs[*]}")" "$(IFS=,; echo "${pl_tps_runs[*]}")" \
        "$(IFS=,; echo "${sb_cpu_runs[*]}")" "$(IFS=,; echo "${pl_cpu_runs[*]}")" "tpcb c$clients"
done
