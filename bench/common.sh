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
# each ran back to back): "clients peer_tps perflab_tps ratio paired
# ahead peer_cpu perflab_cpu leaner". The first three figures are medians
# over rounds and their ratio; "paired" is the median and range of the
# per-round ratios (each round's perflab tps over the peer's beside it),
# which cancels drifts of the machine slower than a round; "ahead" and
# "leaner" count the rounds where perflab had more tps, and less CPU per
# transaction, than the peer. Arguments: clients, then four comma lists:
# peer tps, perflab tps, peer CPU µs/tx, perflab CPU µs/tx.
paired_row() {
    python3 -c '
import statistics as st, sys
c = int(sys.argv[1])
pg, pl, pgc, plc = ([float(x) for x in a.split(",")] for a in sys.argv[2:6])
r = [b / a for a, b in zip(pg, pl)]
ahead = sum(b > a for a, b in zip(pg, pl))
leaner = sum(b < a for a, b in zip(pgc, plc))
n = len(r)
paired = f"{st.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"
print(f"{c:8d} {st.median(pg):10.0f} {st.median(pl):10.0f} {st.median(pl) / st.median(pg):6.2f} {paired:>17} {ahead:>3d}/{n:<3d}"
      f" {st.median(pgc):9.1f} µs {st.median(plc):9.1f} µs {leaner:>4d}/{n}")' "$@"
}

# The header of a paired_row table, the peer named $1.
paired_header() {
    printf '%8s %10s %10s %6s %17s %7s %12s %12s %6s\n' clients "$1" perflab ratio 'paired (range)' ahead "$1 cpu" 'perflab cpu' leaner
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
