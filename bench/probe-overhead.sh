#!/usr/bin/env bash
# The host probe's own cost: the CPU time `perflab watch` spends per second
# of sampling this host at 1 Hz and at 10 Hz, writing every sample as JSON
# to /dev/null. The goal is at most 0.10% of one core at 1 Hz.
#
# The CPU is read from the running process itself, between two moments
# after its start-up: the sum of its threads' time on a CPU (user and
# system) from /proc/PID/task/*/schedstat, in nanoseconds. Two runs' rusage
# (the old way) differ by start-up's own noise, ±20 ms, as much as 30 s of
# sampling at 1 Hz costs.
#
# Then the thread-state probe's cost: the same at 1 Hz following a
# process of 201 threads, 200 of them asleep (--server-pid), against
# following one of a single thread; the difference is the CPU each sample
# spends on the 200 threads (one pread of each one's kept schedstat file;
# stat, wchan and syscall only of a thread that ran). The goal is at most
# 0.10% of one core at 1 Hz (measured: 576 µs per sample, 0.058%).
# Usage: bench/probe-overhead.sh [SECONDS] [ROUNDS]   (defaults 30, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-30}"
rounds="${2:-3}"
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

# Nanoseconds on a CPU of every thread of process $1 so far.
# (schedstat's first field; the process's ticks in /proc/PID/stat where
# the kernel keeps no schedstat.)
cpu_ns() {
    python3 - "$1" <<'PY'
import glob, os, sys
pid = sys.argv[1]
try:
    print(sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat")))
except (OSError, ValueError, IndexError):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    print((int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK"))
PY
}

# One round at interval $1: the CPU share of one core between 3 s after
# start and 3 s + SECONDS.
round() {
    local interval="$1" pid before after
    # shellcheck disable=SC2086
    "$perflab" watch --json --interval "$interval" --duration "$((seconds + 6))s" ${FOLLOW:-} >/dev/null &
    pid=$!
    sleep 3
    before="$(cpu_ns "$pid")"
    sleep "$seconds"
    after="$(cpu_ns "$pid")"
    wait "$pid"
    python3 -c "print(($after - $before) / ($seconds * 1e9))"
}

# ROUNDS rounds at interval $1: the median share and each round's; a
# results row against the goal $2 (percent of one core) when there is one.
measure_interval() {
    local interval="$1" goal="${2:-}" runs=() share
    for _ in $(seq "$rounds"); do runs+=("$(round "$interval")"); done
    python3 - "$interval" "${runs[@]}" <<'PY'
import statistics, sys
interval, shares = sys.argv[1], [float(x) for x in sys.argv[2:]]
m = statistics.median(shares)
each = " ".join(f"{s * 100:.3f}" for s in shares)
print(f"  every {interval:>5}: {m * 100:.3f}% of one core ({m * 1000:.2f} ms CPU per second; rounds {each} %)")
PY
    share="$(python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]) * 100)' "${runs[@]}")"
    if [ -n "$goal" ]; then
        result_row cell="watch every $interval" peer=goal unit="% core" perflab="$share" peer_value="$goal" \
            ratio="$(python3 -c "print($share / $goal)")" rounds="$rounds" note="goal at most $goal% of one core"
    else
        result_row cell="watch every $interval" unit="% core" perflab="$share" rounds="$rounds"
    fi
}

# The median share of one core of ROUNDS rounds at 1 Hz (FOLLOW set or not).
median_1s() {
    local runs=()
    for _ in $(seq "$rounds"); do runs+=("$(round 1s)"); done
    python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "${runs[@]}"
}

# A process of 200 threads asleep on an event (a server's idle pool)
# against one of a single thread, each followed at 1 Hz (--server-pid):
# the difference is what a sample spends on 199 more threads, with the
# cost of following a process (finding it and its children among every
# process) the same on both sides.
sleeper() {
    python3 -c '
import sys, threading, time
stop = threading.Event()
for _ in range(int(sys.argv[1])):
    threading.Thread(target=stop.wait, daemon=True).start()
time.sleep(3600)' "$1" &
}

threads_cost() {
    local one many base followed
    sleeper 0
    one=$!
    sleeper 200
    many=$!
    trap 'kill "$one" "$many" 2>/dev/null || true' RETURN
    sleep 1
    base="$(FOLLOW="--server-pid $one" median_1s)"
    followed="$(FOLLOW="--server-pid $many" median_1s)"
    python3 - "$base" "$followed" "$(find "/proc/$many/task" -mindepth 1 -maxdepth 1 | wc -l)" <<'PY'
import sys
base, followed, threads = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
extra = max(followed - base, 0.0)
print(f"  thread states at 1 Hz: a {threads}-thread server followed {followed * 100:.3f}% of one core, a 1-thread one {base * 100:.3f}%;"
      f" the {threads - 1} more threads cost {extra * 1e6:.0f} µs CPU per sample ({extra * 100:.3f}% of one core)")
PY
    local extra
    extra="$(python3 -c "print(max($followed - $base, 0.0) * 100)")"
    result_row cell="thread states, 200 more threads, 1 Hz" peer=goal unit="% core" perflab="$extra" peer_value=0.10 \
        ratio="$(python3 -c "print($extra / 0.10)")" rounds="$rounds" note="goal at most 0.10% of one core"
}

echo "host probe overhead (perflab watch --json > /dev/null, $(nproc) CPUs, ${seconds} s x ${rounds} after 3 s of start-up)"
measure_interval 1s 0.10
measure_interval 100ms
threads_cost
