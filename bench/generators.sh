#!/usr/bin/env bash
# perflab on 1, 2 and 3 generators against a target that is not the
# limit: the null workload (every operation takes --service, 2 ms), 48
# users in all, so the offered load is 24,000/s however it is dealt out.
# For each count, and for a local run (no generators) as the baseline,
# alternating, SECONDS each, ROUNDS times: the merged throughput, its
# ratio to one generator's, the coordinating `perflab run`'s CPU per
# interval (user + system from rusage, over the intervals of the step:
# its probes, store, start-up and verdict included), and what each added
# generator costs it per interval ((C_n − C_1) / ((n − 1) · intervals):
# reading, checking and merging one generator's tallies).
# Generators are `perflab agent --generate` processes on loopback.
# Usage: bench/generators.sh [SECONDS] [ROUNDS]   (defaults 10, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
rounds="${2:-3}"
source bench/common.sh
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

work="$(mktemp -d)"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
pids=()
ports=()
cleanup() {
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for k in 1 2 3; do
    port="$(free_port)"
    "$perflab" agent --listen "127.0.0.1:$port" --token-file "$work/token" --generate --interval 10s \
        > "$work/agent$k.out" 2>&1 &
    pids+=("$!")
    ports+=("$port")
done
# Each agent listening within 10 s, or the bench stops with what it said.
for k in 0 1 2; do
    for try in $(seq 101); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', ${ports[$k]}), 1)" 2>/dev/null && break
        if [ "$try" -eq 101 ] || ! kill -0 "${pids[$k]}" 2>/dev/null; then
            echo "generators.sh: agent $((k + 1)) did not listen on 127.0.0.1:${ports[$k]}: $(tail -1 "$work/agent$((k + 1)).out")" >&2
            exit 1
        fi
        sleep 0.1
    done
done

# "<throughput> <intervals>" of the newest run in store $1.
figures() {
    "$perflab" show last --store "$1" --json - | python3 -c '
import json, sys
step = json.load(sys.stdin)["steps"][0]
print(step["summary"]["throughput"], len(step["intervals"]))'
}

declare -A tps cpu
for round in $(seq "$rounds"); do
    for n in 0 1 2 3; do
        store="$work/run-$n-$round.db"
        gens=""
        if [ "$n" -gt 0 ]; then
            list="$(for p in "${ports[@]:0:$n}"; do printf 'agent://127.0.0.1:%s,' "$p"; done)"
            gens="--generators ${list%,} --token-file $work/token"
        fi
        # shellcheck disable=SC2086
        read -r seconds_cpu _ < <(measure "$perflab" run null --service 2ms --users 48 \
            --warmup 1s --duration "${seconds}s" --store "$store" $gens)
        read -r x intervals < <(figures "$store")
        tps[$n]+="$x "
        cpu[$n]+="$(python3 -c "print($seconds_cpu / $intervals * 1e3)") "
    done
done

# The median of the figures in the blank-separated list $1.
median_of() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1].split()))' "$1"; }
one="$(median_of "${tps[1]}")"
c1="$(median_of "${cpu[1]}")"
printf '%-14s %10s %16s %24s %30s\n' "generators" "ops/s" "vs 1 generator" "coordinator ms/interval" "per added generator, µs/interval"
for n in 0 1 2 3; do
    x="$(median_of "${tps[$n]}")"
    c="$(median_of "${cpu[$n]}")"
    label="$n"
    [ "$n" -eq 0 ] && label="local (none)"
    ratio="$(python3 -c "print(f'{$x / $one:.3f}')")"
    added="-"
    [ "$n" -ge 2 ] && added="$(python3 -c "print(f'{($c - $c1) / ($n - 1) * 1e3:.0f}')")"
    c="$(python3 -c "print(f'{$c:.2f}')")"
    [ "$n" -eq 0 ] && c="$c (load too)"
    printf '%-14s %10.0f %16s %24s %30s\n' "$label" "$x" "$ratio" "$c" "$added"
done

# The results (see result_row in common.sh): one generator against the
# local run (its coordinator's CPU alone: the local run's holds the load
# too), and two and three against one, CPU per interval paired too.
# Round r of every count ran in the same pass, so they pair.
commas() { tr -s ' ' ',' <<<"${1% }"; }
bench_result "1 generator" "local run" ops/s "$(commas "${tps[0]}")" "$(commas "${tps[1]}")" "" "" "" \
    cpu_unit=ms/interval perflab_cpu="$c1" note="coordinator's CPU per interval"
for n in 2 3; do
    bench_result "$n generators" "1 generator" ops/s "$(commas "${tps[1]}")" "$(commas "${tps[$n]}")" \
        ms/interval "$(commas "${cpu[1]}")" "$(commas "${cpu[$n]}")" note="coordinator's CPU per interval"
done
