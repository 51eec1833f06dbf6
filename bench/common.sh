# Helpers the bench scripts share (sourced, not run).

# Runs a command and prints "<child cpu seconds> <stdout>" on one line: the
# CPU (user + system) of the command and all it waited for, from rusage.
# Exit codes above ALLOWED_EXIT (default 0) fail the measurement.
measure() {
    ALLOWED_EXIT="${ALLOWED_EXIT:-0}" python3 -c '
import os, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, env={"CI": "true", **os.environ})
if out.returncode > int(os.environ["ALLOWED_EXIT"]):
    sys.exit(out.stderr)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, out.stdout.replace("\n", " "))' "$@"
}

# The median of the arguments.
median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# perflab's throughput and its operations in all (every interval, every
# outcome) of the first step of the newest run in store $2, read by
# perflab binary $1: "<tps> <operations>".
step_figures() {
    "$1" show last --store "$2" --json - | python3 -c '
import json, sys
run = json.load(sys.stdin)
step = run["steps"][0]
total = sum(i["ok"] + i["refused"] + sum(i["errors"].values()) for i in step["intervals"])
print(step["summary"]["throughput"], total)'
}

# One row of a perflab-against-a-peer table from paired rounds (round i of
# each ran back to back). Arguments: clients, then four comma lists: peer
# tps, perflab tps, peer CPU µs/tx, perflab CPU µs/tx. Prints the medians
# of each client's tps and their ratio; the paired ratio (the geometric
# mean of each round's perflab tps over the peer's beside it, which
# cancels drifts of the machine slower than a round) with its 95%
# interval (Student's t on the logarithms of the per-round ratios); what
# the interval says (ahead: all of it above 1, behind: all of it below,
# level: it holds 1, so no difference can be told from these rounds); and
# the rounds perflab was ahead. Then the same for CPU per transaction:
# the medians, perflab's paired ratio to the peer with its interval and
# what it says (leaner, heavier or level), and the rounds perflab used
# less.
paired_row() {
    python3 -c '
import math, statistics as st, sys
# Two-sided 95% quantiles of Student t, by degrees of freedom (1..30).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
def paired(before, after, above, below):
    """Geometric mean of after/before, its 95% interval, and its reading."""
    logs = [math.log(b / a) for a, b in zip(before, after)]
    gm = math.exp(st.fmean(logs))
    if len(logs) < 2:
        return f"{gm:.2f} (one round)", "-"
    t = T95[len(logs) - 2] if len(logs) <= 31 else 1.96
    half = t * st.stdev(logs) / math.sqrt(len(logs))
    lo, hi = math.exp(st.fmean(logs) - half), math.exp(st.fmean(logs) + half)
    word = above if lo > 1 else below if hi < 1 else "level"
    return f"{gm:.2f} ({lo:.2f}-{hi:.2f})", word
c = int(sys.argv[1])
pg, pl, pgc, plc = ([float(x) for x in a.split(",")] for a in sys.argv[2:6])
n = len(pg)
ahead = sum(b > a for a, b in zip(pg, pl))
leaner = sum(b < a for a, b in zip(pgc, plc))
tps, tps_word = paired(pg, pl, "ahead", "behind")
cpu, cpu_word = paired(pgc, plc, "heavier", "leaner")
print(f"{c:7d} {st.median(pg):9.0f} {st.median(pl):9.0f} {st.median(pl) / st.median(pg):5.2f} {tps:>16} {tps_word:>6} {ahead:>3d}/{n:<3d}"
      f" {st.median(pgc):8.1f} µs {st.median(plc):8.1f} µs {cpu:>16} {cpu_word:>7} {leaner:>3d}/{n}")' "$@"
}

# The header of a paired_row table, the peer named $1.
paired_header() {
    printf '%7s %9s %9s %5s %16s %6s %7s %11s %11s %16s %7s %6s\n' clients "$1" perflab ratio 'paired (95%)' tps ahead \
        "$1 cpu" 'perflab cpu' 'cpu (95%)' cpu leaner
}

# Succeeds when round $1 (from 1) runs the peer first: odd rounds do, even
# rounds run perflab first, so neither always follows the other.
peer_first() { [ $(( $1 % 2 )) -eq 1 ]; }

# Starts a throwaway PostgreSQL on a free loopback port in a new
# directory $work, loaded by `pgbench -i -s $1`, and stops and removes it
# when the script exits. Sets work, bindir (the newest PostgreSQL's
# binaries) and url. The server runs without autovacuum and with timed
# checkpoints an hour apart, so that no clean-up lands inside one
# client's run and not the next.
start_pgbench_server() {
    bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    work="$(mktemp -d)"
    as_pg=()
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres "$work"
        as_pg=(runuser -u postgres --)
    fi
    local port
    port="$(free_port)"
    trap stop_pgbench_server EXIT
    "${as_pg[@]}" "$bindir/initdb" -D "$work/data" -U bench --auth=trust --no-sync >/dev/null
    "${as_pg[@]}" "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w start \
        -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$work -c shared_buffers=512MB -c max_wal_size=4GB -c checkpoint_timeout=1h -c autovacuum=off" >/dev/null
    url="postgres://bench@127.0.0.1:$port/postgres"
    "$bindir/pgbench" -i -q -s "$1" "$url" >/dev/null 2>&1
}

# Stops and removes the server start_pgbench_server started.
stop_pgbench_server() {
    "${as_pg[@]}" "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$work"
}

# Writes to $1 pgbench's tpcb-like transaction at scale $2 between
# \startpipeline and \endpipeline (pgbench 14 and later): the statements
# perflab sends with --pipeline.
write_pipeline_script() {
    cat > "$1" <<EOF
\set aid random(1, 100000 * $2)
\set bid random(1, 1 * $2)
\set tid random(1, 10 * $2)
\set delta random(-5000, 5000)
\startpipeline
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
\endpipeline
EOF
}
