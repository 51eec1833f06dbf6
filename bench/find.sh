#!/usr/bin/env bash
# The search for the load held within an objective (--find) against a
# linear sweep to the same answer at the same resolution: the steps and
# seconds each took, and where each landed.
#
# Two targets:
#   - the null queue of four exp:1ms servers (M/M/4) from 2000/s, for
#     p95<5ms, p99<10ms and p50<2ms: the answer is known (Erlang C), so
#     the search's bracket is checked against it;
#   - a managed nginx (the web workload's default target) from 1000/s for
#     p99<5ms: its answer is what the search finds; the linear sweep then
#     walks to 105% of it in steps of 5% of it.
# A linear sweep at 5% resolution walks from 5% of the answer to 105%:
# 21 steps. Every step: warm-up 0.3 s, 3 s measured in 250 ms intervals,
# or DURATION measured in INTERVAL (perflab's own defaults are 10s and 1s).
# Usage: bench/find.sh [REPEATS] [LINEAR] [DURATION INTERVAL]   (defaults 5
# searches per objective, and 1: one linear sweep per target beside them;
# 0 for none)
# PERFLAB= a binary to use instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
repeats="${1:-5}"
linear="${2:-1}"
duration="${3:-3s}"
interval="${4:-250ms}"
for value in "$repeats" "$linear"; do
    if ! [[ "$value" =~ ^[0-9]+$ ]]; then
        echo "bench/find.sh: '$value' is not a whole number: give REPEATS and LINEAR, e.g. bench/find.sh 5 1" >&2
        exit 2
    fi
done
for value in "$duration" "$interval"; do
    if ! [[ "$value" =~ ^[0-9]+(\.[0-9]+)?(ms|s|m)$ ]]; then
        echo "bench/find.sh: '$value' is not a length of time: give DURATION and INTERVAL as perflab takes them, e.g. bench/find.sh 5 0 10s 1s" >&2
        exit 2
    fi
done
if [ -z "${PERFLAB:-}" ]; then
    cargo build --release -q
    PERFLAB=target/release/perflab
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timing=(--warmup 0.3s --duration "$duration" --interval "$interval")

# One run; prints "<seconds> <steps> <held> <limit> <capacity> <probes>"
# from its export: the highest load that met, the lowest that did not, the
# load where the objective is expected to be just met between them, and
# each step's load in the order run with its judgement's first letter
# (m meets, b breaks, u undecided).
run_one() {
    local store="$dir/$1.db"
    shift
    local start end
    start=$(date +%s.%N)
    CI=true "$PERFLAB" "$@" "${timing[@]}" --store "$store" >/dev/null
    end=$(date +%s.%N)
    "$PERFLAB" show last --store "$store" --json - | python3 -c '
import json, sys
run = json.load(sys.stdin)
slo = run["verdict"]["slo"] or {}
cap = slo.get("capacity")
order = sorted((step, level["load"], level["decision"][0]) for level in slo.get("levels", []) for step in level["steps"])
probes = ",".join(f"{load:g}{said}" for _, load, said in order)
print(round(float(sys.argv[2]) - float(sys.argv[1]), 1), len(run["steps"]), slo.get("max_load"), slo.get("limit_load"), None if cap is None else round(cap), probes or "-")' "$start" "$end"
}

# The analytic answer of the null queue for quantile $1 under $2 seconds.
truth() {
    python3 - "$1" "$2" <<'EOF'
import math, sys
q, limit = float(sys.argv[1]), float(sys.argv[2])
c, mu = 4, 1000.0
def erlang_c(a):
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b / (1 - a / c * (1 - b))
def survival(lam, t):
    C, th = erlang_c(lam / mu), c * mu - lam
    hyp = (1 + mu * t) * math.exp(-mu * t) if abs(th - mu) < 1e-9 else (th * math.exp(-mu * t) - mu * math.exp(-th * t)) / (th - mu)
    return (1 - C) * math.exp(-mu * t) + C * hyp
lo, hi = 0.0, c * mu * (1 - 1e-9)
for _ in range(200):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if survival(mid, limit) <= 1 - q else (lo, mid)
print(round(lo, 1))
EOF
}

printf '%-26s %-8s %4s %7s %8s %8s %8s %8s %s\n' target how runs steps seconds held limit capacity "truth (within 5%?) probes"
for objective in 'p95<5ms 0.95 0.005' 'p99<10ms 0.99 0.010' 'p50<2ms 0.5 0.002'; do
    read -r slo q limit <<<"$objective"
    answer=$(truth "$q" "$limit")
    for i in $(seq 1 "$repeats"); do
        read -r secs steps held top cap probes < <(run_one "null-$slo-$i" run null --servers 4 --service exp:1ms \
            --rate 2000 --slo "$slo" --find --seed "$i")
        verdict=$(python3 -c 'import sys; h, t = sys.argv[1], float(sys.argv[2]); print("yes" if h != "None" and 0.95 * t <= float(h) <= 1.05 * t else "NO")' "$cap" "$answer")
        printf '%-26s %-8s %4s %7s %8s %8s %8s %8s %s (%s) %s\n' "null M/M/4 $slo" search "$i" "$steps" "$secs" "$held" "$top" "$cap" "$answer" "$verdict" "$probes"
    done
    if [ "$linear" -gt 0 ]; then
        step=$(python3 -c "print(round($answer * 0.05, 1))")
        read -r secs steps held top cap _ < <(run_one "null-$slo-linear" run null --servers 4 --service exp:1ms \
            --rate "$step..$(python3 -c "print(round($answer * 1.05, 1))")/$step" --slo "$slo" --seed 1)
        printf '%-26s %-8s %4s %7s %8s %8s %8s %8s %s\n' "null M/M/4 $slo" linear 1 "$steps" "$secs" "$held" "$top" "$cap" "$answer"
    fi
done

apt_missing nginx=nginx
read -r secs steps held top cap probes < <(run_one web-search run web --rate 1000 --slo 'p99<5ms' --find --seed 1)
printf '%-26s %-8s %4s %7s %8s %8s %8s %8s %s %s\n' "nginx (managed) p99<5ms" search 1 "$steps" "$secs" "$held" "$top" "$cap" - "$probes"
if [ "$linear" -gt 0 ] && [ "$held" != None ]; then
    step=$(python3 -c "print(round($held * 0.05, 1))")
    read -r secs steps held2 top cap _ < <(run_one web-linear run web --rate "$step..$(python3 -c "print(round($held * 1.05, 1))")/$step" --slo 'p99<5ms' --seed 1)
    printf '%-26s %-8s %4s %7s %8s %8s %8s %8s %s\n' "nginx (managed) p99<5ms" linear 1 "$steps" "$secs" "$held2" "$top" "$cap" -
fi
