#!/usr/bin/env bash
# The load generator's memory over a long run: 150 users with exponential
# think time (mean 1 s) on the bank in a PostgreSQL perflab starts, one
# step of DURATION. perflab's resident memory (VmRSS) is sampled every
# 10 s; at the end the script prints the curve (one sample a minute), the
# maximum, the least-squares slope in MB per hour with its 95% interval
# after the first minute and after the first two, and the verdict against
# the goal (flat after two minutes: the interval holds 0 or the slope is
# under 1 MB/h; at most 50 MB).
# Usage: bench/soak.sh [DURATION]   (default 15m; e.g. 30m, 2h)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
duration="${1:-15m}"
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary
work="$(mktemp -d)"
pid=""
stop() {
    # Only the perflab this script started; it removes its managed server.
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -INT "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop EXIT

cd "$work"
CI=true "$perflab" run bank --target postgres:managed --pg-set max_connections=200 --users 150 --think exp:1s \
    --warmup 0s --duration "$duration" --store soak.db >run.log 2>&1 &
pid=$!
echo "soak: 150 users, think exp:1s, ${duration}; perflab pid $pid; RSS every 10 s"
: >rss.txt
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
    rss_kb="$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)"
    if [ -n "$rss_kb" ]; then
        echo "$(( $(date +%s) - start )) $rss_kb" >>rss.txt
    fi
    sleep 10
done
wait "$pid" || { echo "perflab failed:"; tail -5 run.log; exit 1; }
pid=""
grep -E "check:|tps|stored as" run.log | head -5 || true
python3 - rss.txt <<'PY'
import math, sys
rows = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
peak = max(kb for _, kb in rows) / 1024
# The curve itself, one sample a minute.
by_minute = {}
for t, kb in rows:
    by_minute.setdefault(int(t // 60), kb / 1024)
print("RSS by minute (MB):", " ".join(f"{m}:{mb:.1f}" for m, mb in sorted(by_minute.items())))
print(f"samples {len(rows)}; RSS first {rows[0][1] / 1024:.1f} MB, last {rows[-1][1] / 1024:.1f} MB, max {peak:.1f} MB")

def slope_after(skip):
    """Least-squares slope of RSS after `skip` seconds, MB/h, and its 95% half-interval."""
    steady = [(t, kb / 1024) for t, kb in rows if t >= skip]
    n = len(steady)
    if n < 3:
        sys.exit("too few samples after start-up; give a longer DURATION")
    mt = sum(t for t, _ in steady) / n
    mm = sum(m for _, m in steady) / n
    sxx = sum((t - mt) ** 2 for t, _ in steady)
    slope = sum((t - mt) * (m - mm) for t, m in steady) / sxx  # MB per second
    resid = sum((m - (mm + slope * (t - mt))) ** 2 for t, m in steady)
    se = math.sqrt(resid / (n - 2) / sxx)
    # The 95% two-sided t quantile for n - 2 degrees of freedom (a
    # conservative 2.2 from 11 to 30, 2.0 beyond).
    df = n - 2
    t95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}.get(df, 2.2 if df <= 30 else 2.0)
    return slope * 3600, t95 * se * 3600, n

# Start-up (the managed server, loading, 150 sessions opening, the
# allocator's arenas and the binary's pages first touched) is left out:
# the first minute, and again the first two, to show how much of a slope
# is start-up's tail.
flat = True
for skip in (60, 120):
    per_h, half, n = slope_after(skip)
    print(f"slope after {skip} s ({n} samples): {per_h:+.2f} MB/h (95% interval {per_h - half:+.2f} .. {per_h + half:+.2f})")
    flat = (per_h - half) <= 0 <= (per_h + half) or abs(per_h) < 1
print(f"goal flat (after two minutes) and <= 50 MB: {'met' if flat and peak <= 50 else 'NOT met'}")
PY
