#!/usr/bin/env bash
# Every bench, briefly, and one table of what they found, so that a
# regression in any path shows in one place.
#
# Runs, one after another, SECONDS per run and ROUNDS rounds each (their
# own arguments besides, small, in brackets):
#   pgbench.sh SECONDS 4 ROUNDS        (pgbench's tables at scale 4)
#   mariadb-bank.sh SECONDS 2 ROUNDS   (perflab's bank at 2 branches)
#   sqlite-bank.sh SECONDS ROUNDS
#   wrk.sh SECONDS ROUNDS
#   fio.sh SECONDS ROUNDS 256MiB       (a 256 MiB file for each tool)
#   probe-overhead.sh SECONDS ROUNDS
#   generators.sh SECONDS ROUNDS
# Each installs its own peer as it does when run alone, and prints its
# own tables as it goes. Each also appends its results, one tab-separated
# row per cell, to the file BENCH_RESULTS names (see result_row in
# common.sh); at the end this script prints them as one table: per bench
# and cell the peer, perflab's figure and the peer's, perflab's ratio to
# the peer (the paired ratio with its 95% interval and what it says,
# where the bench pairs its rounds), each one's CPU per operation and
# their paired ratio; then the time each bench took. A bench that fails
# (a peer that cannot be installed, a server that does not start) is a
# row saying so, with the last line it printed, and the others still
# run. Left out: instructions.sh (callgrind, minutes per client count)
# and soak.sh (a long run by design).
# Exit code: 0 when every bench ran to its end, 1 when any failed, 2 on
# bad arguments.
# Usage: bench/all.sh [SECONDS] [ROUNDS]   (defaults 3, 1)
# BENCHES="wrk fio" runs those only; PERFLAB= as for every bench.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-3}"
rounds="${2:-1}"
for value in "$seconds" "$rounds"; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "bench/all.sh: '$value' is not a whole number above 0: give SECONDS and ROUNDS, e.g. bench/all.sh 3 1" >&2
        exit 2
    fi
done
all_benches=(pgbench mariadb-bank sqlite-bank wrk fio probe-overhead generators)
read -r -a benches <<<"${BENCHES:-${all_benches[*]}}"
for bench in "${benches[@]}"; do
    if [ ! -f "bench/$bench.sh" ] || [ "$bench" = all ]; then
        echo "bench/all.sh: BENCHES names '$bench', which is not a bench: give some of ${all_benches[*]}" >&2
        exit 2
    fi
done

# Built once here; every bench then runs this binary without building.
perflab_binary
export PERFLAB="$perflab"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export BENCH_RESULTS="$work/results.tsv"
: > "$BENCH_RESULTS"

# The arguments bench $1 gets.
arguments() {
    case $1 in
    pgbench) echo "$seconds 4 $rounds" ;;
    mariadb-bank) echo "$seconds 2 $rounds" ;;
    fio) echo "$seconds $rounds 256MiB" ;;
    *) echo "$seconds $rounds" ;;
    esac
}

failed=0
took=()
for bench in "${benches[@]}"; do
    read -r -a args <<<"$(arguments "$bench")"
    echo "=== bench/$bench.sh ${args[*]}"
    start="$(date +%s)"
    set +e
    bash "bench/$bench.sh" "${args[@]}" 2>&1 | tee "$work/$bench.log"
    status="${PIPESTATUS[0]}"
    set -e
    took+=("$bench $(( $(date +%s) - start )) s")
    if [ "$status" -ne 0 ]; then
        failed=1
        last="$(grep -v '^[[:space:]]*$' "$work/$bench.log" | tail -1 || true)"
        BENCH_NAME="$bench" result_row cell=- status=failed note="exit $status: ${last:-no output}"
    fi
    echo
done

echo "all benches: ${seconds} s per run, ${rounds} round(s)"
python3 - "$BENCH_RESULTS" "${result_columns[@]}" <<'PY'
import sys

path, columns = sys.argv[1], sys.argv[2:]
rows = []
for line in open(path, encoding="utf-8"):
    values = line.rstrip("\n").split("\t")
    rows.append(dict(zip(columns, values + [""] * (len(columns) - len(values)))))

def number(text):
    """A figure as the table shows it: whole above 100, else 3 digits."""
    if not text:
        return "-"
    x = float(text)
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"

def ratio(r, lo, hi):
    if not r:
        return "-"
    return f"{float(r):.2f}" + (f" ({float(lo):.2f}-{float(hi):.2f})" if lo and hi else "")

head = ["bench", "cell", "peer", "unit", "perflab", "peer's", "ratio (95%)", "", "cpu/op", "perflab cpu", "peer cpu",
        "cpu ratio (95%)", ""]
table = []
for r in rows:
    if r["status"] != "ok":
        table.append([r["bench"], r["cell"], r["peer"] or "-", f"{r['status']}: {r['note']}"])
        continue
    table.append([r["bench"], r["cell"], r["peer"] or "-", r["unit"], number(r["perflab"]), number(r["peer_value"]),
                  ratio(r["ratio"], r["ratio_lo"], r["ratio_hi"]), r["word"] if r["word"] not in ("", "-") else "",
                  r["cpu_unit"] or "-", number(r["perflab_cpu"]), number(r["peer_cpu"]),
                  ratio(r["cpu_ratio"], r["cpu_lo"], r["cpu_hi"]), r["cpu_word"] if r["cpu_word"] not in ("", "-") else ""])
# A failed row's last cell (its reason) runs on past the columns.
widths = [max([len(head[i])] + [len(t[i]) for t in table if i < len(t) - 1 or len(t) == len(head)])
          for i in range(len(head))]
numeric = {4, 5, 9, 10}
def show(cells):
    out = []
    for i, c in enumerate(cells):
        if len(cells) < len(head) and i == len(cells) - 1:
            out.append(c)
        else:
            out.append(c.rjust(widths[i]) if i in numeric else c.ljust(widths[i]))
    print("  ".join(out).rstrip())
show(head)
for t in table:
    show(t)
if not rows:
    print("(no results)")
PY
echo
took_list="$(IFS=,; echo "${took[*]}")"
echo "took: ${took_list//,/, }"
if [ "$failed" -ne 0 ]; then
    echo "some benches failed: their rows say why; the others' results stand"
fi
exit "$failed"
