#!/usr/bin/env bash
# perflab against wrk (and oha, paced) on one nginx, number for number.
#
# Starts a throwaway nginx (2 workers, access log off) on a free loopback
# port serving a 1 KiB file and SPECweb's file set (2 directories, written
# by perflab), then:
#  1. closed loop, keep-alive: wrk -t2 -cN and `perflab run web --users N
#     --threads 2` on the 1 KiB file, N = 8, 32, 128, alternating, SECONDS
#     each, ROUNDS times: median requests/s of each, their ratio, and each
#     tool's median CPU µs per request (user + system, from rusage);
#  2. open loop: `oha -q RATE` (latency correction on) and `perflab run web
#     --rate RATE` at 3,000/s and 20,000/s on 32 connections: CPU per
#     request and the p50/p99 each reports;
# Installs wrk and nginx (apt-get) and oha (cargo install) when missing.
# Usage: bench/wrk.sh [SECONDS] [ROUNDS]   (defaults 10, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
rounds="${2:-3}"

need_apt=()
command -v wrk >/dev/null 2>&1 || need_apt+=(wrk)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_apt+=(nginx-light)
if ((${#need_apt[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
export PATH="$PATH:/usr/sbin:$HOME/.cargo/bin"
# --locked: oha's own lock file; its newest dependencies may ask for a newer rustc.
command -v oha >/dev/null 2>&1 || cargo install oha --version 1.16.0 --locked --quiet
cargo build --release --quiet
# PERFLAB names another binary (an older build, for a before/after).
perflab="${PERFLAB:-$PWD/target/release/perflab}"

work="$(mktemp -d)"
chmod 755 "$work"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
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

# Runs a command and prints "<child cpu seconds> <stdout>" on one line.
measure() {
    python3 -c '
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, env={"CI": "true", **__import__("os").environ})
if out.returncode not in (0, 1):
    sys.exit(out.stderr)
if out.returncode == 1:
    # perflab exits 1 when a step failed its error bound: its figures stand.
    sys.stderr.write(out.stderr)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, out.stdout.replace("\n", " "))' "$@"
}
median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
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

echo "closed loop, keep-alive, 1 KiB file, 2 threads each (medians of $rounds rounds of ${seconds} s)"
printf '%12s %12s %12s %7s %14s %14s\n' connections wrk perflab ratio 'wrk cpu/req' 'perflab cpu/req'
for conns in 8 32 128; do
    wrk_rps=(); wrk_cpu=(); pl_rps=(); pl_cpu=()
    for _ in $(seq "$rounds"); do
        read -r cpu out < <(measure wrk -t2 -c"$conns" -d"${seconds}s" "${base}1k.bin")
        requests="$(grep -o '[0-9]* requests in' <<<"$out" | cut -d' ' -f1)"
        wrk_rps+=("$(grep -o 'Requests/sec: *[0-9.]*' <<<"$out" | grep -o '[0-9.]*$')")
        wrk_cpu+=("$(python3 -c "print($cpu / $requests * 1e6)")")
        read -r cpu _ < <(measure "$perflab" run web --target "$base" --urls "$work/urls.txt" \
            --users "$conns" --threads 2 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
        read -r rps total _ _ < <(perflab_figures)
        pl_rps+=("$rps")
        pl_cpu+=("$(python3 -c "print($cpu / $total * 1e6)")")
    done
    python3 -c "
c, w, p, wc, pc = $conns, $(median "${wrk_rps[@]}"), $(median "${pl_rps[@]}"), $(median "${wrk_cpu[@]}"), $(median "${pl_cpu[@]}")
print(f'{c:12d} {w:12.0f} {p:12.0f} {p / w:7.2f} {wc:11.2f} µs {pc:11.2f} µs')"
done

echo
echo "open loop, 32 connections, 1 KiB file (one round of ${seconds} s each)"
printf '%8s %14s %14s %7s %20s %20s\n' rate 'oha cpu/req' 'perflab cpu/req' ratio 'oha p50/p99' 'perflab p50/p99'
for rate in 3000 20000; do
    read -r cpu out < <(measure oha --no-tui --output-format json -q "$rate" -c 32 -z "${seconds}s" --latency-correction "${base}1k.bin")
    read -r oha_n oha_p50 oha_p99 < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
n = sum(r["statusCodeDistribution"].values())
p = r["latencyPercentiles"]
print(n, p["p50"] * 1e6, p["p99"] * 1e6)' "$out")
    oha_cpu="$(python3 -c "print($cpu / $oha_n * 1e6)")"
    read -r cpu _ < <(measure "$perflab" run web --target "$base" --urls "$work/urls.txt" \
        --rate "$rate" --connections 32 --threads 2 --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    read -r _ total p50 p99 < <(perflab_figures)
    pl_cpu="$(python3 -c "print($cpu / $total * 1e6)")"
    python3 -c "
r, oc, pc = $rate, $oha_cpu, $pl_cpu
print(f'{r:8d} {oc:11.2f} µs {pc:11.2f} µs {pc / oc:7.2f} {$oha_p50:8.0f}/{$oha_p99:.0f} µs {$p50:8.0f}/{$p99:.0f} µs')"
done
