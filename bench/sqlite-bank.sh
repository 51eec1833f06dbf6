#!/usr/bin/env bash
# perflab's bank against an independent TPC-B client on the same SQLite file.
#
# The peer is a bare loop in Python's sqlite3 module (the C SQLite library
# behind a thin driver) running the same transaction with the same settings
# (WAL, synchronous=NORMAL, BEGIN IMMEDIATE) and the same TPC-B draws, one
# connection, no think time. Both run for the same time on the same
# freshly reloaded database, back to back, ROUNDS times (odd rounds the
# peer first, even rounds perflab first); every run, the median of each
# and the ratio of the medians are printed.
# Usage: bench/sqlite-bank.sh [SECONDS] [ROUNDS]   (defaults 10 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-10}"
rounds="${2:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

cd "$work"
# Load the bank (and warm the page cache) with a short perflab run.
CI=true "$perflab" run bank --users 1 --warmup 0s --duration 1s --store bench.db >/dev/null

cat > peer.py <<'PY'
import random, sqlite3, sys, time
seconds = float(sys.argv[1])
db = sqlite3.connect("perflab-bank.db", isolation_level=None, check_same_thread=False)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=NORMAL")
branches = db.execute("SELECT scale FROM perflab_bank_meta").fetchone()[0]
rng = random.Random(7)
def tx():
    tid = rng.randint(1, branches * 10)
    bid = (tid - 1) // 10 + 1
    home = bid
    if branches > 1 and rng.randrange(100) >= 85:
        home = rng.randint(1, branches - 1)
        home += home >= bid
    aid = (home - 1) * 100000 + rng.randint(1, 100000)
    delta = rng.randint(-999999, 999999)
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE perflab_accounts SET abalance = abalance + ? WHERE aid = ?", (delta, aid))
    db.execute("SELECT abalance FROM perflab_accounts WHERE aid = ?", (aid,)).fetchone()
    db.execute("UPDATE perflab_tellers SET tbalance = tbalance + ? WHERE tid = ?", (delta, tid))
    db.execute("UPDATE perflab_branches SET bbalance = bbalance + ? WHERE bid = ?", (delta, bid))
    db.execute("INSERT INTO perflab_history (tid, bid, aid, delta, mtime, filler) VALUES (?, ?, ?, ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), '          ')", (tid, bid, aid, delta))
    db.execute("COMMIT")
# warm-up 2 s, then measure
end = time.monotonic() + 2
while time.monotonic() < end:
    tx()
n = 0
start = time.monotonic()
end = start + seconds
while time.monotonic() < end:
    tx()
    n += 1
print(f"{n / (time.monotonic() - start):.0f} {sqlite3.sqlite_version}")
PY

# Alternate peer and perflab, each on a freshly reloaded bank, ROUNDS
# times (odd rounds the peer first, even rounds perflab first).
peer_runs=()
perflab_runs=()
run_peer() {
    CI=true "$perflab" run bank --reload --users 1 --warmup 0s --duration 200ms --store load.db >/dev/null
    read -r tps peer_version < <(python3 peer.py "$seconds")
    peer_runs+=("$tps")
}
run_perflab() {
    CI=true "$perflab" run bank --reload --users 1 --warmup 0s --duration 200ms --store load.db >/dev/null
    CI=true "$perflab" run bank --users 1 --warmup 2s --duration "${seconds}s" --store bench.db >/dev/null
    "$perflab" show last --store bench.db --json run.json >/dev/null
    perflab_runs+=("$(python3 -c 'import json; t = json.load(open("run.json"))["steps"][0]["summary"]["throughput"]; print(round(t))')")
    "$perflab" check bank >/dev/null
}
for round in $(seq "$rounds"); do
    if peer_first "$round"; then
        run_peer; run_perflab
    else
        run_perflab; run_peer
    fi
done
median() { python3 -c 'import statistics, sys; print(round(statistics.median(float(x) for x in sys.argv[1:])))' "$@"; }
peer_tps="$(median "${peer_runs[@]}")"
perflab_tps="$(median "${perflab_runs[@]}")"

echo "SQLite TPC-B, 1 user, ${seconds}s measured, same database file"
echo "  python sqlite3 loop: ${peer_tps} tps (runs: ${peer_runs[*]}; SQLite ${peer_version})"
echo "  perflab run bank:    ${perflab_tps} tps (runs: ${perflab_runs[*]}; SQLite bundled with rusqlite)"
python3 -c "print(f'  ratio perflab/peer: {$perflab_tps / $peer_tps:.2f}')"
bench_result "tpcb 1 user" "python sqlite3" tps "$(IFS=,; echo "${peer_runs[*]}")" "$(IFS=,; echo "${perflab_runs[*]}")"
