#!/usr/bin/env bash
# perflab against wrk (and oha, paced) on one nginx, number for number.
#
# Starts a throwaway nginx (2 workers, access log off) on a free loopback
# port serving a 1 KiB file, then, each pair back to back, SECONDS each,
# ROUNDS times (odd rounds the peer first, even rounds perflab first):
#  1. closed loop, keep-alive: wrk -t2 -cN and `perflab run web --users N
#     --threads 2` on the 1 KiB file, N = 8, 32, 128: per N the median
#     requests/s of each, their ratio, the paired ratio with its 95%
#     interval and what it says (ahead, behind or level), and the same for
#     each tool's CPU µs per request (user + system, from rusage; leaner,
#     heavier or level): see paired_row in common.sh;
#  2. open loop: `oha -q RATE` (latency correction on) and `perflab run web
#     --rate RATE --arrivals uniform` at 3,000/s, 20,000/s and 50,000/s
#     (RATES) on 32 connections, each with its default pacing (evenly
#     spaced arrivals, as oha's: a Poisson draw's count
#     in SECONDS varies by about 1/sqrt(RATE × SECONDS), 0.8% at 3,000/s
#     for 5 s, and the rate column would compare the draws, not the
#     tools); the same
#     columns (the rate each achieved; CPU per request ÷ oha's is the
#     figure that matters here), and the median p50/p99 each reports;
#     perflab once per slack in SLACKS (default "auto", perflab's default,
#     given as no flag; "0 auto 1ms" adds exact pacing, a wake-up per
#     arrival, and a 1 ms window, the granularity oha's own timer paces
#     at), each against its own oha rounds.
#  3. a user journey, closed loop at 32 connections: two requests in turn,
#     the second carrying the ETag header the first's reply gave, as a wrk
#     Lua script (request/response callbacks, one state per thread) and
#     as `perflab run web --flow` (capture etag header ETag, then
#     `X-Prev: ${etag}`, a state per user): the cost of capturing a value
#     and writing it into the next request.
# SECTIONS picks among "closed open flow" (all by default).
# Installs wrk and nginx (apt-get) and oha (cargo install) when missing.
# The nginx is started here rather than by `perflab up`, which starts
# databases: a managed nginx serves the file set a web run writes into its
# own directory, and wrk needs one fixed file that both tools request.
# Usage: bench/wrk.sh [SECONDS] [ROUNDS]   (defaults 10, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-10}"
rounds="${2:-3}"

apt_missing wrk=wrk nginx=nginx-light
export PATH="$PATH:/usr/sbin:$HOME/.cargo/bin"
# --locked: oha's own lock file; its newest dependencies may ask for a newer rustc.
command -v oha >/dev/null 2>&1 || cargo install oha --version 1.16.0 --locked --quiet
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

work="$(mktemp -d)"
chmod 755 "$work"
port="$(free_port)"
mkdir -p "$work/html" "$work/tmp"
head -c 1024 /dev/urandom > "$work/html/1k.bin"
printf '/1k.bin\n' > "$work/urls.txt"
cat > "$work/nginx.conf" <<EOF
daemon off;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    client_body_temp_path $work/tmp/body;
    proxy_temp_path $work/tmp/proxy;
    fastcgi_temp_path $work/tmp/fastcgi;
    uwsgi_temp_path $work/tmp/uwsgi;
    scgi_temp_path $work/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        root $work/html;
    }
}
EOF
nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log" &
nginx_pid=$!
stop() {
    kill "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap stop EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/1k.bin" >/dev/null 2>&1 && break
    sleep 0.1
done
base="http://127.0.0.1:$port/"

# perflab's last run in the bench store: "<requests/s> <requests> <p50 µs> <p99 µs>".
perflab_figures() {
    "$perflab" show last --store "$work/bench.db" --json - | python3 -c '
import json, sys
run = json.load(sys.stdin)
step = run["steps"][0]
total = sum(i["ok"] + i["refused"] + sum(i["errors"].values()) for i in step["intervals"])
s = step["summary"]
print(s["throughput"], total, s["response"]["p50"] * 1e6, s["response"]["p99"] * 1e6)'
}

# One closed-loop run of each at $conns connections, their figures added
# to the round lists.
# Extra arguments (a Lua script) go to wrk.
run_wrk() {
    local cpu out requests
    read -r cpu out < <(measure wrk -t2 -c"$conns" -d"${seconds}s" "$@" "${base}1k.bin")
    requests="$(grep -o '[0-9]* requests in' <<<"$out" | cut -d' ' -f1)"
    peer_rps+=("$(grep -o 'Requests/sec: *[0-9.]*' <<<"$out" | grep -o '[0-9.]*$')")
    peer_cpu+=("$(python3 -c "print($cpu / $requests * 1e6)")")
}
run_perflab_closed() {
    local cpu rps total
    read -r cpu _ < <(ALLOWED_EXIT=1 measure "$perflab" run web --target "$base" --urls "$work/urls.txt" \
        --users "$conns" --threads 2 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    read -r rps total _ _ < <(perflab_figures)
    pl_rps+=("$rps")
    pl_cpu+=("$(python3 -c "print($cpu / $total * 1e6)")")
}

# One open-loop run of each at $rate per second, their figures (and
# latencies, µs) added to the round lists.
run_oha() {
    local cpu out n rps p50 p99
    read -r cpu out < <(measure oha --no-tui --output-format json -q "$rate" -c 32 -z "${seconds}s" \
        --latency-correction "${base}1k.bin")
    read -r n rps p50 p99 < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
n = sum(r["statusCodeDistribution"].values())
p = r["latencyPercentiles"]
print(n, r["summary"]["requestsPerSec"], p["p50"] * 1e6, p["p99"] * 1e6)' "$out")
    peer_rps+=("$rps")
    peer_cpu+=("$(python3 -c "print($cpu / $n * 1e6)")")
    peer_p50+=("$p50")
    peer_p99+=("$p99")
}
run_perflab_open() {
    local cpu rps total p50 p99
    read -r cpu _ < <(ALLOWED_EXIT=1 measure "$perflab" run web --target "$base" --urls "$work/urls.txt" \
        --rate "$rate" --arrivals uniform ${slack_flag[@]+"${slack_flag[@]}"} --connections 32 --threads 2 --warmup 0s \
        --duration "${seconds}s" --store "$work/bench.db")
    read -r rps total p50 p99 < <(perflab_figures)
    pl_rps+=("$rps")
    pl_cpu+=("$(python3 -c "print($cpu / $total * 1e6)")")
    pl_p50+=("$p50")
    pl_p99+=("$p99")
}
# A comma list of the arguments.
list() { (IFS=,; echo "$*"); }

sections=" ${SECTIONS:-closed open flow} "
[[ "$sections" != *" closed "* ]] || {
echo "closed loop, keep-alive, 1 KiB file, 2 threads each (medians of $rounds rounds of ${seconds} s, odd rounds wrk first)"
paired_header wrk connections req/s µs/req
for conns in 8 32 128; do
    peer_rps=(); peer_cpu=(); pl_rps=(); pl_cpu=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then
            run_wrk; run_perflab_closed
        else
            run_perflab_closed; run_wrk
        fi
    done
    paired_row "$conns" "$(list "${peer_rps[@]}")" "$(list "${pl_rps[@]}")" \
        "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")" "closed c$conns"
done
}

[[ "$sections" != *" open "* ]] || {
echo
echo "open loop, 32 connections, 1 KiB file, latency correction on (medians of $rounds rounds of ${seconds} s, odd rounds oha first)"
paired_header oha 'rate, slack' req/s µs/req "$(printf '%20s %20s' 'oha p50/p99' 'perflab p50/p99')"
for rate_slack in $(for r in ${RATES:-3000 20000 50000}; do for s in ${SLACKS:-auto}; do echo "$r:$s"; done; done); do
    rate=${rate_slack%%:*} slack=${rate_slack##*:}
    # No flag for auto, perflab's default: an older binary runs with its own.
    slack_flag=()
    [ "$slack" = auto ] || slack_flag=(--slack "$slack")
    peer_rps=(); peer_cpu=(); pl_rps=(); pl_cpu=(); peer_p50=(); peer_p99=(); pl_p50=(); pl_p99=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then
            run_oha; run_perflab_open
        else
            run_perflab_open; run_oha
        fi
    done
    latencies="$(python3 -c '
import statistics as st, sys
op50, op99, pp50, pp99 = (st.median(float(x) for x in a.split(",")) for a in sys.argv[1:5])
print(f"{op50:.0f}/{op99:.0f} µs\t{pp50:.0f}/{pp99:.0f} µs")' "$(list "${peer_p50[@]}")" "$(list "${peer_p99[@]}")" \
        "$(list "${pl_p50[@]}")" "$(list "${pl_p99[@]}")")"
    printf '%s %20s %20s\n' "$(paired_row "$rate $slack" "$(list "${peer_rps[@]}")" "$(list "${pl_rps[@]}")" \
        "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")")" "${latencies%%$'\t'*}" "${latencies#*$'\t'}"
    bench_result "open ${rate}/s slack $slack" oha req/s "$(list "${peer_rps[@]}")" "$(list "${pl_rps[@]}")" \
        µs/req "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")" \
        note="p50/p99 oha ${latencies%%$'\t'*}, perflab ${latencies#*$'\t'}"
done
}

# The journey: wrk's Lua keeps one ETag per thread, perflab one per user.
cat > "$work/flow.lua" <<'EOF'
local etag = nil
local second = false
request = function()
    second = not second
    if second and etag then
        return wrk.format("GET", "/1k.bin", { ["X-Prev"] = etag })
    end
    return wrk.format("GET", "/1k.bin")
end
response = function(status, headers, body)
    etag = headers["ETag"] or etag
end
EOF
printf 'GET /1k.bin\ncapture etag header ETag\n\nGET /1k.bin\nX-Prev: ${etag}\n' > "$work/etag.flow"
run_perflab_flow() {
    local cpu rps total
    read -r cpu _ < <(ALLOWED_EXIT=1 measure "$perflab" run web --target "$base" --flow "$work/etag.flow" \
        --users "$conns" --threads 2 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    read -r rps total _ _ < <(perflab_figures)
    pl_rps+=("$rps")
    pl_cpu+=("$(python3 -c "print($cpu / $total * 1e6)")")
}
[[ "$sections" != *" flow "* ]] || {
echo
echo "a journey, closed loop, 32 connections: a value captured from one reply and sent in the next request (medians of $rounds rounds of ${seconds} s, odd rounds wrk first)"
paired_header 'wrk + Lua' connections req/s µs/req
conns=32
peer_rps=(); peer_cpu=(); pl_rps=(); pl_cpu=()
for round in $(seq "$rounds"); do
    if peer_first "$round"; then
        run_wrk -s "$work/flow.lua"; run_perflab_flow
    else
        run_perflab_flow; run_wrk -s "$work/flow.lua"
    fi
done
paired_row "$conns" "$(list "${peer_rps[@]}")" "$(list "${pl_rps[@]}")" \
    "$(list "${peer_cpu[@]}")" "$(list "${pl_cpu[@]}")" "flow c$conns"
}
