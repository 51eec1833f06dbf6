#!/usr/bin/env bash
# perflab's net workload against iperf3 and sockperf, number for number,
# on loopback and across a veth pair into a network namespace.
#
# For each path it starts `perflab agent --echo`, an iperf3 server and a
# sockperf server, then, each pair back to back, SECONDS each, ROUNDS
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
# The paths: loopback (servers on 127.0.0.1), and veth (servers inside a
# network namespace of the script's own, plbench-PID, reached through a
# veth pair whose two ends hold a private /30 of 10.217.0.0/16 that exists
# only inside the pair; the clients stay in the root namespace). The veth
# path adds what a packet costs crossing a virtual link and a second
# network stack (the namespace's) to loopback's one; a server's CPU is
# still read from /proc/PID/stat in the root namespace. The agent beyond
# loopback listens in TLS (--tls-self-signed, its fingerprint pinned);
# the echo's bytes cross in plain TCP either way. The namespace and its
# pair are removed when the script ends, also on a failure or Ctrl-C. The
# veth path needs root (iproute2's `ip netns`).
# Per row, as bench/wrk.sh prints them (see paired_row in common.sh): the
# path, the medians, their ratio, the paired ratio with its 95% interval,
# and the same for the CPU per unit (leaner, heavier or level).
# Installs iperf3 and sockperf (apt-get) when missing.
# Usage: bench/net.sh [--path loopback|veth|both] [SECONDS] [ROUNDS]   (defaults both, 10, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
paths=(loopback veth)
args=()
while [ "$#" -gt 0 ]; do
    case $1 in
    --path=*) set -- --path "${1#--path=}" "${@:2}" ;;
    --path)
        case ${2:-} in
        loopback | veth) paths=("$2") ;;
        both) paths=(loopback veth) ;;
        *)
            echo "bench/net.sh: --path takes loopback, veth or both, not '${2:-}'" >&2
            exit 2
            ;;
        esac
        shift 2
        ;;
    *)
        args+=("$1")
        shift
        ;;
    esac
done
seconds="${args[0]:-10}"
rounds="${args[1]:-3}"
if [[ " ${paths[*]} " == *" veth "* ]] && [ "$(id -u)" -ne 0 ]; then
    echo "bench/net.sh: the veth path makes a network namespace and needs root: run it as root, or give --path loopback" >&2
    exit 2
fi

apt_missing iperf3=iperf3 sockperf=sockperf ip=iproute2
perflab_binary

work="$(mktemp -d)"
openssl rand -hex 32 > "$work/token"
# What stop() ends and removes: the servers' PIDs, and the namespace
# with its veth pair once made.
server_pids=()
netns=""
veth_host=""
stop() {
    if ((${#server_pids[@]})); then
        kill "${server_pids[@]}" 2>/dev/null || true
        wait "${server_pids[@]}" 2>/dev/null || true
    fi
    # The namespace goes once no process is left in it; its end of the
    # pair goes with it, and the host's end with its peer (deleted here
    # too in case the namespace could not be).
    if [ -n "$netns" ]; then
        ip netns del "$netns" 2>/dev/null || true
    fi
    if [ -n "$veth_host" ] && ip link show "$veth_host" >/dev/null 2>&1; then
        ip link del "$veth_host" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop EXIT
# Ctrl-C or a kill ends the script through its EXIT trap too.
trap 'exit 130' INT
trap 'exit 143' TERM

# Makes the namespace and its veth pair: the host's end at $veth_host_ip,
# the namespace's (eth0) at $veth_ip, a /30 of 10.217.0.0/16 chosen by
# this script's PID.
make_island() {
    netns="plbench-$$"
    veth_host="plb$(($$ % 1000000))h"
    local third=$(($$ % 250)) fourth=$(($$ / 250 % 64 * 4))
    veth_host_ip="10.217.$third.$((fourth + 1))"
    veth_ip="10.217.$third.$((fourth + 2))"
    ip netns add "$netns"
    ip link add "$veth_host" type veth peer name eth0 netns "$netns"
    ip addr add "$veth_host_ip/30" dev "$veth_host"
    ip link set "$veth_host" up
    ip -n "$netns" addr add "$veth_ip/30" dev eth0
    ip -n "$netns" link set eth0 up
    ip -n "$netns" link set lo up
}

# Starts a path's three servers ($1: loopback or veth) and sets, for that
# path, host, agent_pid, iperf_pid, sockperf_pid, the ports, target and
# agent_args (what a perflab run adds to reach the agent).
declare -A at
start_servers() {
    local path="$1" run=() host listen=() port
    if [ "$path" = veth ]; then
        make_island
        run=(ip netns exec "$netns")
        host="$veth_ip"
        # Beyond loopback the agent listens in TLS only.
        listen=(--tls-self-signed)
    else
        host=127.0.0.1
    fi
    at[$path.host]="$host"
    for port in agent iperf sockperf; do
        at[$path.$port.port]="$(free_port)"
    done
    # `ip netns exec` execs the server in place: $! is the server's PID.
    "${run[@]}" "$perflab" agent --listen "$host:${at[$path.agent.port]}" --token-file "$work/token" --echo \
        "${listen[@]}" >"$work/agent.$path.log" 2>&1 &
    at[$path.agent.pid]=$!
    server_pids+=($!)
    "${run[@]}" iperf3 -s -B "$host" -p "${at[$path.iperf.port]}" >"$work/iperf3.$path.log" 2>&1 &
    at[$path.iperf.pid]=$!
    server_pids+=($!)
    "${run[@]}" sockperf server --tcp -i "$host" -p "${at[$path.sockperf.port]}" >"$work/sockperf.$path.log" 2>&1 &
    at[$path.sockperf.pid]=$!
    server_pids+=($!)
    for _ in $(seq 100); do
        grep -q "echo role on" "$work/agent.$path.log" 2>/dev/null && break
        sleep 0.1
    done
    if ! grep -q "echo role on" "$work/agent.$path.log"; then
        echo "bench/net.sh: the echo agent on the $path path did not start within 10 s: $(tail -1 "$work/agent.$path.log")" >&2
        exit 1
    fi
    at[$path.agent_args]=""
    if [ "$path" = veth ]; then
        local fingerprint
        fingerprint="$(sed -n 's/.*fingerprint: *//p' "$work/agent.$path.log" | sed -n 1p)"
        at[$path.agent_args]="--agent-fingerprint $fingerprint"
    fi
}

# Makes path $1 the one the runs below use.
use_path() {
    host="${at[$1.host]}"
    agent_pid="${at[$1.agent.pid]}"
    iperf_pid="${at[$1.iperf.pid]}"
    sockperf_pid="${at[$1.sockperf.pid]}"
    iperf_port="${at[$1.iperf.port]}"
    sockperf_port="${at[$1.sockperf.port]}"
    target="agent://$host:${at[$1.agent.port]}"
    read -r -a agent_args <<<"${at[$1.agent_args]}"
}

for path in "${paths[@]}"; do
    start_servers "$path"
done
sleep 0.5

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
    read -r cpu out < <(measure iperf3 -c "$host" -p "$iperf_port" -t "$seconds" -l 128K -J)
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
    read -r cpu _ < <(measure "$perflab" run net --target "$target" --token-file "$work/token" "${agent_args[@]}" \
        --test stream --message-size 128KiB --users 1 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
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
    read -r cpu out < <(measure sockperf ping-pong --tcp -i "$host" -p "$sockperf_port" -t "$seconds" -m 14)
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
    read -r cpu _ < <(measure "$perflab" run net --target "$target" --token-file "$work/token" "${agent_args[@]}" \
        --test rr --request-size 14 --response-size 14 --users 1 --warmup 0s --duration "${seconds}s" \
        --store "$work/bench.db")
    server="$(minus "$(process_cpu "$agent_pid")" "$before")"
    read -r tps _ p50 _ ops < <(net_figures)
    pl_x+=("$tps")
    pl_cpu+=("$(python3 -c "print(($cpu + $server) / $ops * 1e6)")")
    pl_p50+=("$p50")
}
list() { (IFS=,; echo "$*"); }

echo "stream, one connection, 128 KiB writes (medians of $rounds rounds of ${seconds} s, odd rounds iperf3 first; cpu: both ends, µs per MB)"
paired_header iperf3 path Gbit/s µs/MB
for path in "${paths[@]}"; do
    use_path "$path"
    peer_x=(); peer_cpu=(); pl_x=(); pl_cpu=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then run_iperf; run_perflab_stream; else run_perflab_stream; run_iperf; fi
    done
    paired_row "$path" "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")" \
        "stream $path"
done

echo
echo "rr, one connection, 14-byte request and reply (medians of $rounds rounds of ${seconds} s, odd rounds sockperf first; cpu: both ends, µs per transaction)"
paired_header sockperf path tps µs/tx 'round trip p50 sockperf/perflab'
for path in "${paths[@]}"; do
    use_path "$path"
    peer_x=(); peer_cpu=(); pl_x=(); pl_cpu=(); peer_p50=(); pl_p50=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then run_sockperf; run_perflab_rr; else run_perflab_rr; run_sockperf; fi
    done
    latency="$(python3 -c '
import statistics as st, sys
a, b = (st.median(float(x) for x in v.split(",")) for v in sys.argv[1:3])
print(f"{a:.1f}/{b:.1f} µs")' "$(list "${peer_p50[@]}")" "$(list "${pl_p50[@]}")")"
    printf '%s  %s\n' "$(paired_row "$path" "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" "$(list "${peer_cpu[@]}")" \
        "$(list "${pl_cpu[@]}")")" "$latency"
    bench_result "rr $path" sockperf tps "$(list "${peer_x[@]}")" "$(list "${pl_x[@]}")" µs/tx "$(list "${peer_cpu[@]}")" \
        "$(list "${pl_cpu[@]}")" note="round trip p50 sockperf/perflab $latency"
done
