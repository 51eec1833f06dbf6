# Helpers the bench scripts share (sourced, not run).

# Runs a command and prints "<child cpu seconds> <stdout>" on one line: the
# CPU (user + system) of the command and all it waited for, from rusage.
# Exit codes above ALLOWED_EXIT (default 0) fail the measurement.
measure() {
    ALLOWED_EXIT="${ALLOWED_EXIT:-0}" python3 -c '
import os, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, env={"CI": "true", **os.environ})
if out.returncode > int(os.environ["ALLOWED_EXIT"]):
    sys.exit(out.stderr)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, out.stdout.replace("\n", " "))' "$@"
}

# The median of the arguments.
median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# perflab's throughput and its operations in all (every interval, every
# outcome) of the first step of the newest run in store $2, read by
# perflab binary $1: "<tps> <operations>".
step_figures() {
    "$1" show last --store "$2" --json - | python3 -c '
import json, sys
run = json.load(sys.stdin)
step = run["steps"][0]
total = sum(i["ok"] + i["refused"] + sum(i["errors"].values()) for i in step["intervals"])
print(step["summary"]["throughput"], total)'
}
