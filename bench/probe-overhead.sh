#!/usr/bin/env bash
# The host probe's own cost: CPU time (user + system, from rusage) that
# `perflab watch` spends per second of sampling this host at 1 Hz and at
# 10 Hz, writing every sample as JSON to /dev/null. The goal is at most 0.2%
# of one core at 1 Hz.
# Usage: bench/probe-overhead.sh [SECONDS]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
cargo build --release --quiet
# PERFLAB names another binary (an older build, for a before/after).
perflab="${PERFLAB:-$PWD/target/release/perflab}"

# CPU of a whole `perflab watch` run (process start included).
cpu_of() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys
interval, seconds, perflab = sys.argv[1], sys.argv[2], sys.argv[3]
subprocess.run([perflab, "watch", "--json", "--interval", interval, "--duration", f"{seconds}s"],
               stdout=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)
PY
}

# Runs of SECONDS and 2×SECONDS: the difference is the sampling's own cost,
# free of process start-up.
measure() {
    local interval="$1" short long
    short="$(cpu_of "$interval" "$seconds" "$perflab")"
    long="$(cpu_of "$interval" "$((seconds * 2))" "$perflab")"
    python3 -c "
short, long, s, interval = $short, $long, $seconds, '$interval'
per_s = (long - short) / s
print(f'  every {interval:>5}: {per_s * 100:.3f}% of one core ({per_s * 1000:.2f} ms CPU per second; start-up {max(short - per_s * s, 0) * 1000:.0f} ms)')"
}

echo "host probe overhead (perflab watch --json > /dev/null, $(nproc) CPUs)"
measure 1s
measure 100ms
