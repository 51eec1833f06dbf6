#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need,
# then runs format, lint and every test. This is the README's test command
# and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

# The embedded SQLite is compiled from source (rusqlite's bundled build), so
# it needs a C compiler. The PostgreSQL tests start their own servers in
# temporary directories (as the 'postgres' user when run as root) and need
# the server binaries, psql and pgbench (Debian's postgresql package); the
# MariaDB tests likewise start mariadbd from Debian's mariadb-server.
need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 \
    || ! command -v psql >/dev/null 2>&1 || ! command -v pgbench >/dev/null 2>&1; then
    need_apt+=(postgresql postgresql-client)
fi
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ] \
    || ! command -v mariadb-install-db >/dev/null 2>&1; then
    need_apt+=(mariadb-server mariadb-client)
fi
# The verdict suite puts a pgbouncer of its own in front of a PostgreSQL
# (a connection pool's size as the admission limit).
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || need_apt+=(pgbouncer)
# The web workload's tests start their own nginx (nginx-light is enough:
# it has stub_status).
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_apt+=(nginx-light)
# The accelerator's tests start their own Varnish (varnishd and
# varnishncsa; never the packaged service).
{ [ -x /usr/sbin/varnishd ] && command -v varnishncsa; } >/dev/null 2>&1 || need_apt+=(varnish)
# The node_exporter probe is tested against a real exporter on loopback.
command -v prometheus-node-exporter >/dev/null 2>&1 || need_apt+=(prometheus-node-exporter)
# The live view's /metrics is scraped by a real Prometheus the test starts
# on loopback (never the packaged service).
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# The disk workload's device tests make a loop device (losetup) with an
# ext4 file system on it (mkfs.ext4) and mount it.
command -v losetup >/dev/null 2>&1 || need_apt+=(mount)
command -v mkfs.ext4 >/dev/null 2>&1 || need_apt+=(e2fsprogs)
# Shaped links put a managed server in a network namespace behind a veth
# pair (ip), with tbf (tc) and packet-drop rules (nft); the labs pin
# perflab with taskset and test a non-root user with setpriv.
PATH=$PATH:/usr/sbin:/sbin
{ command -v ip && command -v tc; } >/dev/null 2>&1 || need_apt+=(iproute2)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
{ command -v taskset && command -v setpriv; } >/dev/null 2>&1 || need_apt+=(util-linux)
# A device is judged by util-linux's blkid; the disk tests put minix and
# cramfs file systems on loop devices and mount ext4 in another mount
# namespace (unshare).
{ command -v blkid && command -v mkfs.minix && command -v mkfs.cramfs && command -v unshare; } \
    >/dev/null 2>&1 || need_apt+=(util-linux)
# The HTML report is opened in a real headless browser.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# The gate's JUnit XML is validated against the JUnit schema by xmllint,
# and its Markdown rendered by GitHub's own renderer, cmark-gfm.
command -v xmllint >/dev/null 2>&1 || need_apt+=(libxml2-utils)
command -v cmark-gfm >/dev/null 2>&1 || need_apt+=(cmark-gfm)
# The Kubernetes manifests (YAML) are read back by PyYAML.
python3 -c 'import yaml' >/dev/null 2>&1 || need_apt+=(python3-yaml)
if ((${#need_apt[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: missing ${need_apt[*]}; run this script as root or install them" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
# The Kubernetes manifests are checked offline against the API's schemas
# by kubernetes-validate (PyPI, which bundles them), in a venv of its own.
command -v python3 >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv; }
kube_validate_venv="$(pwd)/target/tools/kube-validate"
if [ ! -x "$kube_validate_venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$kube_validate_venv" \
        || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv && python3 -m venv "$kube_validate_venv"; }
    "$kube_validate_venv/bin/pip" install --quiet kubernetes-validate
fi
export PERFLAB_KUBE_VALIDATE="$kube_validate_venv/bin/kubernetes-validate"
# The common JUnit schema (Jenkins' junit-4.xsd), as the junit-report
# crate ships it among its tests: cargo fetches the crate, and the schema
# is taken out of its archive.
junit_schema="$(pwd)/target/tools/junit-schema"
if [ ! -s "$junit_schema/JUnit.xsd" ]; then
    mkdir -p "$junit_schema/fetch/src"
    printf '[package]\nname = "junit-schema-fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\njunit-report = "=0.9.1"\n' \
        >"$junit_schema/fetch/Cargo.toml"
    : >"$junit_schema/fetch/src/lib.rs"
    cargo fetch --quiet --manifest-path "$junit_schema/fetch/Cargo.toml"
    crates=("${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/junit-report-0.9.1.crate)
    crate=${crates[0]}
    tar -xzf "$crate" -O junit-report-0.9.1/tests/JUnit.xsd >"$junit_schema/JUnit.xsd.part"
    mv "$junit_schema/JUnit.xsd.part" "$junit_schema/JUnit.xsd"
fi
export PERFLAB_JUNIT_XSD="$junit_schema/JUnit.xsd"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy

# Each group in turn, timed; a failing group does not hide the others'
# results: every group runs, and the script fails if any did. The verdict
# suite prints what each scenario's runs concluded even when they pass.
failed=()
timings=()
# Each group's output is also kept in target/test-logs/, so that the
# failing tests' own messages can be repeated at the end: a long run's
# excerpt shows its head and its tail, and a failure's cause sits in the
# middle.
logs="$(pwd)/target/test-logs"
mkdir -p "$logs"
group() {
    local name=$1 start=$SECONDS rc=0
    shift
    echo "== $name: $*"
    "$@" 2>&1 | tee "$logs/$name.log" || rc=$?
    timings+=("$(printf '%-8s %5d s  %s' "$name" $((SECONDS - start)) "$( ((rc == 0)) && echo ok || echo "FAILED (status $rc)")")")
    ((rc == 0)) || failed+=("$name")
}
group fmt cargo fmt --check
# The lint and the optimised build one after the other: side by side (the
# lint in its own target directory) they took 714 s against 741 s, the
# build keeping both CPUs busy on its own, for a second copy of the
# dependencies' lint build.
# The lint in the release profile: the build scripts' and procedural
# macros' outputs (SQLite compiled from C, ring's assembly) are then the
# build's too, not made twice. On a clean clone: 84 s and 224 s, where
# the lint in the dev profile took 68 s and the build 260 s. The code has
# no cfg(debug_assertions): the lint reads the same code either way.
group clippy cargo clippy --release --all-targets -- -D warnings
group build cargo test --release --bins --test it --test verdict --no-run
# The library's unit tests are built unoptimised in the bench profile,
# on the release build's dependencies (Cargo.toml says why); the binary's
# own tests are in the release build above.
# Four threads: a few of the tests wait on servers they start (a
# PostgreSQL's and a MariaDB's transactions counted for allocations,
# 8-10 s each); at four, the waits overlap the others' CPU (39 s where
# two threads took 47 s here).
unit_tests() {
    cargo test --profile bench --lib -- --test-threads 4 && cargo test --release --bins
}
group unit unit_tests
# Eight threads: the tests that load the machine or its disk take one of
# four slots (`support::heavy` in tests/it/slots.rs; each uses half a
# CPU on average), the long tests that mostly wait (deadlines, signals,
# a browser; each measured at under a quarter of a CPU) take one of two
# slots of their own beside them (`support::waits`), and the short ones
# run in the threads left. A test that needs a quiet machine is in the
# verdict suite below, which holds the whole machine for each.
# Each test that takes a slot writes how long it held it (and waited
# for it) to this file; the longest holds are printed after the group:
# they, not the harness's times (which count the wait), are what the
# group's time is made of.
export PERFLAB_TEST_TIMES="$(pwd)/target/it-heavy-times.txt"
rm -f "$PERFLAB_TEST_TIMES"
group it cargo test --release --test it -- --test-threads 8
if [ -s "$PERFLAB_TEST_TIMES" ]; then
    echo "the integration tests' longest holds of a slot (seconds held, waited, slot, test):"
    # sed reads all of sort's output: a `head` that stops reading would
    # end sort with SIGPIPE, which pipefail makes the script's exit (141).
    sort -rn "$PERFLAB_TEST_TIMES" | sed -n '1,12s/^/  /p'
    awk '{ held[$3] += $1 } END { printf "  in all: %.0f s held by heavy tests (four at a time), %.0f s by tests that mostly wait (two at a time)\n", held["heavy"], held["waits"] }' "$PERFLAB_TEST_TIMES"
fi
group verdict cargo test --release --test verdict -- --show-output
# Each verdict test holds the whole machine; the longest holds first.
if grep -q '^held the machine ' "$logs/verdict.log"; then
    echo "the verdict tests' longest holds of the machine:"
    grep '^held the machine ' "$logs/verdict.log" | sort -k4 -rn | sed -n '1,10s/^/  /p'
fi
echo
echo "time per group"
printf '  %s\n' "${timings[@]}"
printf '  %-8s %5d s\n' total "$SECONDS"
if ((${#failed[@]})); then
    # What each failing test printed, its first lines, folded to a width
    # an excerpt keeps.
    for name in "${failed[@]}"; do
        awk '/^---- .* stdout ----$/ { print; keep = 1; shown = 0; next }
             /^(failures:|test result:)/ || /^ *stack backtrace:/ { keep = 0 }
             keep && /panicked at/ { shown = 1 }
             keep && shown && shown <= 12 && NF && !/^note: run with/ {
                 print "  " substr($0, 1, 400); shown++ }' \
            "$logs/$name.log"
    done
    echo "error: failed: ${failed[*]}" >&2
    exit 1
fi
