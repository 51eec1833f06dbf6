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
