# shellcheck shell=bash
# Helpers the bench scripts share (sourced, not run).

# A bench that stops on a failed command says which: many of their
# commands send their output to /dev/null, and all.sh shows this line.
bench_stopped() { echo "bench/${0##*/}: stopped at line $2, exit $1: $3" >&2; }
trap 'bench_stopped "$?" "$LINENO" "$BASH_COMMAND"' ERR

# Runs a command and prints "<child cpu seconds> <stdout>" on one line: the
# CPU (user + system) of the command and all it waited for, from rusage.
# Exit codes above ALLOWED_EXIT (default 0) fail the measurement; an
# allowed one above 0 passes the command's stderr on (perflab exits 1 when
# a step broke its error bound: its figures stand, and that says why).
measure() {
    ALLOWED_EXIT="${ALLOWED_EXIT:-0}" python3 -c '
import os, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, env={"CI": "true", **os.environ})
if out.returncode > int(os.environ["ALLOWED_EXIT"]):
    sys.exit(out.stderr)
if out.returncode > 0:
    sys.stderr.write(out.stderr)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, out.stdout.replace("\n", " "))' "$@"
}

# The median of the arguments.
median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# A free TCP port on loopback.
# apt_missing PROGRAM=PACKAGE...: installs, in one apt-get, the packages
# whose program is not found (on PATH or in /usr/sbin).
apt_missing() {
    local want=() pair
    for pair in "$@"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%=*}" ] || want+=("${pair#*=}")
    done
    if ((${#want[@]})); then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"
    fi
}

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

# The paired statistics every bench table and result row uses, one copy:
# run as `python3 -c "$paired_py" MODE ...`. paired() is the geometric
# mean of each round's perflab figure over the peer's beside it (round i
# of each ran back to back, which cancels drifts of the machine slower
# than a round) with its 95% interval (Student's t on the logarithms of
# the per-round ratios) and what the interval says: the first word when
# all of it is above 1, the second when all of it is below, level when it
# holds 1 (no difference can be told from these rounds).
# MODE row: WIDTH KEY and the four comma lists of paired_row, prints the
# table row. MODE fields: the same lists (the CPU ones may be empty),
# prints the statistics as result_row's key=value arguments, one a line.
paired_py='
import math, statistics as st, sys
# Two-sided 95% quantiles of Student t, by degrees of freedom (1..30).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
def paired(before, after, above, below):
    """Geometric mean of after/before, its 95% interval (None, None with
    one round) and its reading ("-" with one round)."""
    logs = [math.log(b / a) for a, b in zip(before, after)]
    gm = math.exp(st.fmean(logs))
    if len(logs) < 2:
        return gm, None, None, "-"
    t = T95[len(logs) - 2] if len(logs) <= 31 else 1.96
    half = t * st.stdev(logs) / math.sqrt(len(logs))
    lo, hi = math.exp(st.fmean(logs) - half), math.exp(st.fmean(logs) + half)
    return gm, lo, hi, above if lo > 1 else below if hi < 1 else "level"
def text(gm, lo, hi):
    return f"{gm:.2f} (one round)" if lo is None else f"{gm:.2f} ({lo:.2f}-{hi:.2f})"
def floats(arg):
    return [float(x) for x in arg.split(",") if x]
mode = sys.argv[1]
if mode == "row":
    width, key = int(sys.argv[2]), sys.argv[3]
    pg, pl, pgc, plc = (floats(a) for a in sys.argv[4:8])
    n = len(pg)
    ahead = sum(b > a for a, b in zip(pg, pl))
    leaner = sum(b < a for a, b in zip(pgc, plc))
    gm, lo, hi, tps_word = paired(pg, pl, "ahead", "behind")
    cgm, clo, chi, cpu_word = paired(pgc, plc, "heavier", "leaner")
    print(f"{key:>{width}} {st.median(pg):9.0f} {st.median(pl):9.0f} {st.median(pl) / st.median(pg):5.2f}"
          f" {text(gm, lo, hi):>16} {tps_word:>6} {ahead:>3d}/{n:<3d}"
          f" {st.median(pgc):8.1f} µs {st.median(plc):8.1f} µs {text(cgm, clo, chi):>16} {cpu_word:>7} {leaner:>3d}/{n}")
elif mode == "fields":
    pg, pl, pgc, plc = (floats(a) for a in sys.argv[2:6])
    gm, lo, hi, word = paired(pg, pl, "ahead", "behind")
    out = {"rounds": len(pg), "perflab": st.median(pl), "peer_value": st.median(pg),
           "ratio": gm, "ratio_lo": lo, "ratio_hi": hi, "word": word}
    if pgc and plc:
        cgm, clo, chi, cword = paired(pgc, plc, "heavier", "leaner")
        out.update({"perflab_cpu": st.median(plc), "peer_cpu": st.median(pgc),
                    "cpu_ratio": cgm, "cpu_lo": clo, "cpu_hi": chi, "cpu_word": cword})
    for k, v in out.items():
        print(f"{k}=" + ("" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)))
'

# One row of a perflab-against-a-peer table from paired rounds (round i of
# each ran back to back). Arguments: the row's key (clients, a load and
# its depth, connections: printed right-aligned under paired_header's
# first column), then four comma lists: peer figures (tps, IOPS,
# requests/s), perflab's, peer CPU µs per operation, perflab's; and, when
# a sixth argument names the cell, the same figures go to the results file
# too (see bench_result). Prints the medians of each and their ratio; the
# paired ratio with its 95% interval (see paired_py) and what it says
# (ahead, behind or level); and the rounds perflab was ahead. Then the
# same for CPU per operation: the medians, perflab's paired ratio to the
# peer with its interval and what it says (leaner, heavier or level), and
# the rounds perflab used less.
paired_row() {
    python3 -c "$paired_py" row "${paired_key_width:-7}" "$1" "$2" "$3" "$4" "$5"
    if [ "$#" -ge 6 ]; then
        bench_result "$6" "$paired_peer" "$paired_unit" "$2" "$3" "$paired_cpu_unit" "$4" "$5"
    fi
}

# The header of a paired_row table: the peer named $1; the first column's
# header $2 (default "clients"; it may hold several columns, printed as
# given, and sets the width of paired_row's key); what is counted $3
# (default tps: the word column's header and the results' unit); CPU's
# unit per operation $4 (default µs/tx, for the results); $5, more
# columns' headers to append (the caller appends their values to each row).
paired_header() {
    paired_peer="$1"
    local key="${2:-clients}"
    paired_unit="${3:-tps}"
    paired_cpu_unit="${4:-µs/tx}"
    paired_key_width=$(( ${#key} > 7 ? ${#key} : 7 ))
    printf "%${paired_key_width}s %9s %9s %5s %16s %6s %7s %11s %11s %16s %7s %6s%s\n" "$key" "$1" perflab ratio \
        'paired (95%)' "$paired_unit" ahead "$1 cpu" 'perflab cpu' 'cpu (95%)' cpu leaner "${5:+ $5}"
}

# The results file: when BENCH_RESULTS names a file, every script appends
# one tab-separated row per cell to it, for bench/all.sh to gather (the
# scripts' own tables stay as they are). Its columns, in this order:
result_columns=(bench cell status peer unit perflab peer_value ratio ratio_lo ratio_hi word
    cpu_unit perflab_cpu peer_cpu cpu_ratio cpu_lo cpu_hi cpu_word rounds note)
# status is ok, failed or left out; ratio is perflab's figure over the
# peer's (the paired ratio, with its 95% interval in ratio_lo and
# ratio_hi when there were rounds to pair); cpu_* likewise for CPU per
# operation; an empty field is a figure the bench does not give.

# Appends one row to BENCH_RESULTS (nothing when it is unset), from
# key=value arguments named as in result_columns; bench defaults to the
# script's name (BENCH_NAME overrides it), status to ok. Tabs and line
# breaks in a value become spaces.
result_row() {
    [ -n "${BENCH_RESULTS:-}" ] || return 0
    local -A field=([bench]="${BENCH_NAME:-$(basename "$0" .sh)}" [status]=ok)
    local arg column line=""
    for arg in "$@"; do
        field[${arg%%=*}]="${arg#*=}"
    done
    for column in "${result_columns[@]}"; do
        local value="${field[$column]:-}"
        value="${value//$'\t'/ }"
        value="${value//$'\n'/ }"
        line+="${line:+$'\t'}$value"
    done
    printf '%s\n' "$line" >> "$BENCH_RESULTS"
}

# One results row from paired rounds: cell $1, peer $2, unit $3, comma
# lists of the peer's figures $4 and perflab's $5 (round i of each back to
# back); optionally CPU's unit $6 and comma lists of the peer's CPU per
# operation $7 and perflab's $8. Extra key=value arguments (a note) follow.
bench_result() {
    local cell="$1" peer="$2" unit="$3" peer_runs="$4" perflab_runs="$5"
    local cpu_unit="${6:-}" peer_cpu="${7:-}" perflab_cpu="${8:-}"
    shift $(( $# < 8 ? $# : 8 ))
    [ -n "${BENCH_RESULTS:-}" ] || return 0
    local fields=()
    mapfile -t fields < <(python3 -c "$paired_py" fields "$peer_runs" "$perflab_runs" "$peer_cpu" "$perflab_cpu")
    if [ -z "$peer_cpu" ]; then
        cpu_unit=""
    fi
    result_row cell="$cell" peer="$peer" unit="$unit" cpu_unit="$cpu_unit" "${fields[@]}" "$@"
}

# The perflab binary the bench runs, in $perflab: PERFLAB when it names
# one (an older build, for a before/after: then nothing is built), else
# this checkout's release build, built first.
perflab_binary() {
    if [ -n "${PERFLAB:-}" ]; then
        case $PERFLAB in
        /*) perflab="$PERFLAB" ;;
        *) perflab="$PWD/$PERFLAB" ;;
        esac
        if [ ! -x "$perflab" ]; then
            echo "PERFLAB=$PERFLAB is not an executable file: name a perflab binary, or unset PERFLAB to build this checkout's" >&2
            exit 2
        fi
    else
        cargo build --release --quiet
        perflab="${CARGO_TARGET_DIR:-$PWD/target}/release/perflab"
    fi
}

# Succeeds when round $1 (from 1) runs the peer first: odd rounds do, even
# rounds run perflab first, so neither always follows the other.
peer_first() { [ $(( $1 % 2 )) -eq 1 ]; }

# Starts a server perflab manages with `perflab up ARGS…` (the target and
# its settings): a free loopback port, a fresh directory, stopped and
# removed by stop_managed. Needs $perflab (perflab_binary) and $work (a
# scratch directory); sets url (with its password, when it has one) and
# up_pid.
start_managed() {
    "$perflab" up "$@" --url-file "$work/url" >"$work/up.log" 2>&1 &
    up_pid=$!
    local waited=0
    until [ -s "$work/url" ]; do
        if ! kill -0 "$up_pid" 2>/dev/null || [ "$waited" -ge 1200 ]; then
            echo "perflab up did not start the server: $(tail -n 2 "$work/up.log")" >&2
            exit 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    url="$(cat "$work/url")"
}

# Stops the server start_managed started (perflab up removes its
# directory) and removes the scratch directory.
stop_managed() {
    if [ -n "${up_pid:-}" ]; then
        kill -TERM "$up_pid" 2>/dev/null || true
        wait "$up_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}

# Starts a throwaway PostgreSQL (start_managed) loaded by `pgbench -i -s
# $1`. Sets work, bindir (the PostgreSQL binaries, for pgbench and psql)
# and url. The server runs without autovacuum and with timed checkpoints
# an hour apart, so that no clean-up lands inside one client's run and not
# the next.
start_pgbench_server() {
    bindir="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    work="$(mktemp -d)"
    trap stop_managed EXIT
    start_managed --target postgres:managed \
        --pg-set shared_buffers=512MB --pg-set max_wal_size=4GB \
        --pg-set checkpoint_timeout=1h --pg-set autovacuum=off
    "$bindir/pgbench" -i -q -s "$1" "$url" >/dev/null 2>&1
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
