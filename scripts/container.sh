#!/usr/bin/env bash
# Builds the perflab image offline with podman and runs a sweep in it.
#
# The image is FROM scratch: the release binary built here and the shared
# libraries it links (as ldd lists them, at their own paths), nothing
# pulled from a registry. Then `perflab run null --quick` runs in a
# container of it and must exit 0.
#
#   scripts/container.sh                 # image localhost/perflab:dev
#   IMAGE=registry.example/perflab:0.1.0 scripts/container.sh
#
# On a host whose cgroups are hybrid (v1 controllers with a v2 hierarchy
# beside them), crun refuses to start a container ("cgroups in hybrid mode
# not supported"): runc is used there. Where the container runtime may not
# raise a resource limit (no CAP_SYS_RESOURCE, as in a sandboxed VM), the
# container's open files and processes are held to what this shell has
# (podman would ask for more and fail with "setrlimit … Operation not
# permitted").
set -euo pipefail
cd "$(dirname "$0")/.."

image="${IMAGE:-localhost/perflab:dev}"
target_dir="${CARGO_TARGET_DIR:-target}"

need() {
    command -v "$1" >/dev/null && return
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need podman podman

cargo build --release --locked --bin perflab
binary="$target_dir/release/perflab"

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
root="$context/rootfs"
install -D -m 0755 "$binary" "$root/usr/local/bin/perflab"
# Each library the loader resolves, and the loader itself, copied (not
# linked) to the path the binary will look for it at.
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
    while read -r lib; do
        install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
    done
install -d -m 0755 "$root/work"
install -d -m 1777 "$root/tmp"
podman build --quiet -t "$image" -f Containerfile "$context" >/dev/null

global_flags=()
run_flags=()
if [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ] \
    && [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
    need runc runc
    global_flags+=(--runtime runc)
fi
nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
[ "$nofile" = unlimited ] && nofile=1048576
# Above 32768 processes runc's init is refused its limit here even below
# this shell's own; the load's threads need far fewer.
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
run_flags+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

echo "built $image from $binary; running: perflab run null --quick"
podman "${global_flags[@]}" run --rm "${run_flags[@]}" "$image" perflab run null --quick
echo "container check passed: $image ran perflab run null --quick"
