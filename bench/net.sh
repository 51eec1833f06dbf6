#!/usr/bin/env bash
# perflab's net workload against iperf3 and sockperf on loopback, number
# for number.
#
# Starts `perflab agent --echo`, an iperf3 server and a sockperf server on
# free loopback ports, then, each pair back to back, SECONDS each, ROUNDS
# times (odd rounds the peer first, even rounds perflab first):
#  1. stream: `iperf3 -c … -l 128K` (one stream) and `perflab run net
#     --test stream --message-size 128KiB --users 1`: the throughput each
#     reports (Gbit/s) and the CPU per megabyte of both ends together —
#     the client's (rusage) and the server's (its /proc/PID/stat over the
#     round: iperf3 -s, or the agent);
#  2. rr: `sockperf ping-pong --tcp -m 14` and `perflab run net --test rr
#     --request-size 14 --response-size 14 --users 1`: transactions per
#     second (sockperf's ReceivedMessages over its valid run time) and the
#     CPU per transaction of both ends, then the median latency of each
#     (sockperf reports half the round trip: it is doubled here, so both
#     columns are round trips).
# Per row, as bench/wrk.sh prints them (see paired_row in common.sh): the
# medians, their ratio, the paired ratio with its 95% interval, and the
# same for the CPU per unit (leaner, heavier or level).
# Installs iperf3 and sockperf (apt-get) when missing.
# Usage: bench/net.sh [SECONDS] [ROUNDS]   (defaults 10, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-10}"
rounds="${2:-3}"

apt_missing iperf3=iperf3 sockperf=sockperf
perflab_binary

work="$(mktemp -d)"
openssl rand -hex 32 > "$work/token"
agent_port="$(free_port)"
iperf_port="$(free_port)"
sockperf_port="$(free_port)"
"$perflab" agent --listen "127.0.0.1:$agent_port" --token-file "$work/token" --echo >"$work/agent.log" 2>&1 &
agent_pid=$!
iperf3 -s -B 127.0.0.1 -p "$iperf_port" >"$work/iperf3.log" 2>&1 &
iperf_pid=$!
sockperf server --tcp -i 127.0.0.1 -p "$sockperf_port" >"$work/sockperf.log" 2>&1 &
sockperf_pid=$!
stop() {
    kill "$agent_pid" "$iperf_pid" "$sockperf_pid" 2>/dev/null || true
    wait "$agent_pid" "$iperf_pid" "$sockperf_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap stop EXIT
for _ in $(seq 100); do
    grep -q "echo role on" "$work/agent.log" 2>/dev/null && break
    sleep 0.1
done
sleep 0.5
target="agent://127.0.0.1:$agent_port"

# CPU seconds (user + system) process $1 has used so far.
process_cpu() {
    python3 -c '
import os, sys
fields = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))' "$1"
}
# The CPU seconds between two readings.
minus() { python3 -c "print($1 - $2)"; }

# perflab's last run: "<tps> <bits/s> <p50 µs> <bytes> <operations>".
net_figures() {
    "$perflab" show last --store "$work/bench.db" --json - | python3 -c '
import json, sys
step = json.load(sys.stdin)["steps"][0]
net, s = step["net"], step["summary"]
ops = sum(i["ok"] for i in step["intervals"])
print(net["transactions_per_s"], net["bits_per_s"], s["response"]["p50"] * 1e6,
      0, ops)'
}

run_iperf() {
    local before cpu out server bits bytes
    before="$(process_cpu "$iperf_pid")"
    read -r cpu out < <(measure iperf3 -c 127.0.0.1 -p "$iperf_port" -t "$seconds" -l 128K -J)
    server="$(minus "$(process_cpu "$iperf_pid")" "$before")"
    read -r bits bytes < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])["end"]["sum_received"]
print(r["bits_per_second"], r["bytes"])' "$out")
    peer_x+=("$(python3 -c "print($bits / 1e9)")")
    peer_cpu+=("$(python3 -c "print(($cpu + $server) / $bytes * 1e12)")")
}
run_perflab_stream() {
    local before cpu server bits
    before="$(process_cpu "$agent_pid")"
    read -r cpu _ < <(measure "$perflab" run net --target "$target" --token-file "$work/token" --test stream \
        --message-size 128KiB --users 1 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    server="$(minus "$(process_cpu "$agent_pid")" "$before")"
    read -r _ bits _ _ _ < <(net_figures)
    pl_x+=("$(python3 -c "print($bits / 1e9)")")
    # Bytes over the whole run (every interval, warm-up and drain
    # included), as iperf3's CPU covers its whole run.
    pl_cpu+=("$(python3 -c "print(($cpu + $server) / ($bits / 8 * $seconds) * 1e12)")")
}

run_sockperf() {
    local before cpu out server rate p50 n
    before="$(process_cpu "$sockperf_pid")"
    read -r cpu out < <(measure sockperf ping-pong --tcp -i 127.0.0.1 -p "$sockperf_port" -t "$seconds" -m 14)
    server="$(minus "$(process_cpu "$sockperf_pid")" "$before")"
    read -r rate p50 n < <(python3 -c '
import re, sys
out = sys.argv[1]
run = re.search(r"\[Total Run\] RunTime=([0-9.]+) sec.*?ReceivedMessages=([0-9]+)", out)
valid = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec.*?ReceivedMessages=([0-9]+)", out)
p50 = re.search(r"percentile 50\.000 = *([0-9.]+)", out)
print(int(valid.group(2)) / float(valid.group(1)), 2 * float(p50.group(1)), run.group(2))' "$out")
    peer_x+=("$rate")
    peer_cpu+=("$(python3 -c "print(($cpu + $server) / $n * 1e6)")")
    peer_p50+=("$p50")
}
run_perflab_rr() {
    local before cpu server tps p50 ops
    before="$(process_cpu "$agent_pid")"
    read -r cpu _ < <(measure "$perflab" run net --target "$target" --token-file "$work/token" --test rr \
        --request-size 14 --response-size 14 --users 1 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    server="$(minus "$(process_cpu "$agent_pid")" "$before")"
    read -r tps _ p50 _ ops < <(net_figures)
    pl_x+=("$tps")
    pl_cpu+=("$(python3 -c "print(($cpu + $server) / $ops * 1e6)")")
    pl_p50+=("$p50")
}
list() { (IFS=,; echo "$*"); }

echo "stream, one connection, 128 KiB writes, loopback (medians of $rounds rounds of ${seconds} s, odd rounds iperf3 first; cpu: both ends, µs per MB)"
paired_header iperf3 test Gbit/s µs/MB
peer_x=(); peer_cpu=(); pl_x=(); pl_cpu=()
for round in $(seq "$rounds"); do
    if peer_first "$round"; then run_iperf; run_perflab_stream; else run_perflab_stream; run_iperf; fi
done
paired_row stream "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")" stream

echo
echo "rr, one connection, 14-byte request and reply, loopback (medians of $rounds rounds of ${seconds} s, odd rounds sockperf first; cpu: both ends, µs per transaction)"
paired_header sockperf test tps µs/tx 'round trip p50 sockperf/perflab'
peer_x=(); peer_cpu=(); pl_x=(); pl_cpu=(); peer_p50=(); pl_p50=()
for round in $(seq "$rounds"); do
    if peer_first "$round"; then run_sockperf; run_perflab_rr; else run_perflab_rr; run_sockperf; fi
done
latency="$(python3 -c '
import statistics as st, sys
a, b = (st.median(float(x) for x in v.split(",")) for v in sys.argv[1:3])
print(f"{a:.1f}/{b:.1f} µs")' "$(list "${peer_p50[@]}")" "$(list "${pl_p50[@]}")")"
printf '%s  %s\n' "$(paired_row rr "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")")" "$latency"
bench_result rr sockperf tps "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" µs/tx "$(list "${peer_cpu[@]}")" \
    "$(list "${pl_cpu[@]}")" note="round trip p50 sockperf/perflab $latency"
