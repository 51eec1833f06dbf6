#!/usr/bin/env bash
# perflab's disk workload against fio, number for number.
#
# perflab makes and preconditions its file (SIZE, default 1 GiB: one
# sequential write pass of 1 MiB direct writes), and fio gets a file of
# its own: a copy of perflab's, written by dd in 1 MiB direct writes
# before fio ever runs. Each tool writes only its own file — perflab
# refuses a file whose stamps and ledger someone else's writes broke, and
# rightly — yet the two compare like with like: the same size, the same
# kind of device and file system, both written end to end the same way
# before the first round (no holes, no unwritten extents), with the same
# bytes. On the virtual disk the two files are side by side. On the
# RAM-backed device each tool has a device of its own, made the same way,
# its file the first one written on it, and the two devices' memory is
# taken from the kernel in turns, 2 MiB for one and 2 MiB for the other,
# after the kernel has compacted its free memory: there the pages under a
# file count. fio's job-file mix (below) made 112-126k IOPS on a device
# whose memory was taken first after other benches had run and 141-153k
# on one made next, the same file on each (two files perflab made, runs
# alternating, in either order, on either loop device); with memory
# compacted, or taken in turns, the two made the same. The memory taken
# first was the most scattered, and the device's copies slower for it.
# On the virtual disk the two files made the same IOPS (36-37k). Then fio (ioengine=io_uring direct=1 fixedbufs,
# one job) and `perflab run disk --threads 1` run the same load, each on
# its file, back to back, SECONDS each, ROUNDS times (odd rounds fio
# first, even rounds perflab first):
#   4k random read at depth 1 and 32, 4k random write at depth 32, and
#   Intel's file-server spec at depth 32 (fio: rw=randrw rwmixread=80 and
#   its bssplit; perflab: the same lines aligned to 512 bytes as fio's
#   bssplit is);
#   4k random read on two threads, at depth 2 and 32 in all (fio: two
#   jobs, numjobs=2 with group_reporting, each at iodepth 1 and 16;
#   perflab: --threads 2 --depth 2 and 32, a depth its threads share);
#   and a user's own job file, the same file given to both (fio: `fio
#   JOB` with a [global] filename= line put first; perflab: `perflab run
#   disk --fio-job JOB --target file:...`): a 70/30 random read/write mix
#   of 4k/50:64k/50 at iodepth 32, direct, io_uring, time_based,
#   norandommap (so that fio keeps the shares, as perflab does);
# per load the median IOPS of each, their ratio, the paired ratio with its
# 95% interval and what it says (ahead, behind or level), and the same for
# each one's CPU µs per I/O (user + system, from rusage; leaner, heavier
# or level): see paired_row in common.sh. Twice: on the file system of the
# current directory (the virtual disk here) and on ext4 over a RAM-backed
# block device — a loop device over a file in /dev/shm (tmpfs), so that
# the generators, not the disk, are compared. Not zram: it compresses, and
# perflab's stamped sectors compress differently from fio's random
# buffers. Installs fio when missing; removes what it made.
# Usage: bench/fio.sh [SECONDS] [ROUNDS] [SIZE]   (defaults 10, 3, 1GiB)
# LOADS="job-file 4k-randread:1:1" runs those loads only (NAME:DEPTH:THREADS
# as listed in bench below, and job-file for the job file cell).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
seconds="${1:-10}"
rounds="${2:-3}"
size="${3:-1GiB}"

apt_missing fio=fio
# PERFLAB names another binary (an older build, for a before/after).
perflab_binary

work="$(mktemp -d -p "$PWD" .fio-bench.XXXXXX)"
ram_mounts=() ram_loops=() ram_files=()
stop() {
    local m l f
    for m in "${ram_mounts[@]}"; do umount "$m" 2>/dev/null || true; done
    for l in "${ram_loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    for f in "${ram_files[@]}"; do rm -f "$f"; done
    rm -rf "$work"
}
trap stop EXIT

fs_bssplit="512/10:1k/5:2k/5:4k/60:8k/2:16k/4:32k/4:64k/10"
fs_spec="size=512 share=10 read=80 align=512; size=1k share=5 read=80 align=512; size=2k share=5 read=80 align=512; size=4k share=60 read=80 align=512; size=8k share=2 read=80 align=512; size=16k share=4 read=80 align=512; size=32k share=4 read=80 align=512; size=64k share=10 read=80 align=512"

# bench DIR FIO_DIR LABEL NAME: the loads, perflab on DIR/perflab.bin and
# fio on FIO_DIR/fio.bin (the same directory, or one of the same kind of
# device), the results' cells named "NAME LOAD dDEPTH" (file-server's
# 512-byte transfers only where direct I/O takes them).
bench() {
    local dir=$1 label=$3 device=$4 file="$1/perflab.bin" fio_file="$2/fio.bin"
    local dev block
    dev="$(stat -c '%Hd:%Ld' "$dir")"
    block="$(cat "/sys/dev/block/$dev/queue/logical_block_size" 2>/dev/null || echo 512)"
    "$perflab" run disk --target "file:$file" --size "$size" --spec 4k-randread --depth 1 \
        --warmup 0s --duration 1s --store "$work/bench.db" | grep -E '^precondition' || true
    # fio's own file, the same bytes written the same way, before fio runs.
    dd if="$file" of="$fio_file" bs=1M oflag=direct conv=fsync status=none
    echo "fio's file: $fio_file, a copy of perflab's (dd, 1 MiB direct writes) made before fio ran"
    echo
    echo "$label: $size each, fio io_uring direct=1 fixedbufs vs perflab (one thread and job, or two; medians of $rounds rounds of ${seconds} s, odd rounds fio first)"
    paired_header fio "$(printf '%-22s %6s' load depth)" IOPS µs/io
    # NAME:DEPTH:THREADS, the depth in all (fio's jobs share it out).
    for load in 4k-randread:1:1 4k-randread:32:1 4k-randwrite:32:1 file-server:32:1 \
        4k-randread:2:2 4k-randread:32:2; do
        selected "$load" || continue
        local name=${load%%:*} rest=${load#*:}
        local depth=${rest%%:*} threads=${rest##*:} row=${load%%:*} cell
        ((threads == 1)) || row="$name x$threads threads"
        cell="$device $name d$depth"
        ((threads == 1)) || cell="$cell t$threads"
        if [ "$name" = file-server ] && ((block > 512)); then
            printf '%-22s %6s %s\n' "$row" "$depth" "left out: direct I/O here needs ${block}-byte blocks, the spec has 512-byte transfers"
            result_row cell="$cell" status="left out" peer=fio \
                note="direct I/O here needs ${block}-byte blocks, the spec has 512-byte transfers"
            continue
        fi
        case $name in
        4k-randread) fio_args=(--rw=randread --bs=4k); pl_spec=4k-randread ;;
        4k-randwrite) fio_args=(--rw=randwrite --bs=4k); pl_spec=4k-randwrite ;;
        file-server) fio_args=(--rw=randrw --rwmixread=80 --bssplit="$fs_bssplit"); pl_spec=$fs_spec ;;
        esac
        fio_iops=() fio_cpu=() pl_iops=() pl_cpu=()
        for round in $(seq "$rounds"); do
            if peer_first "$round"; then
                run_fio; run_perflab
            else
                run_perflab; run_fio
            fi
        done
        paired_row "$(printf '%-22s %6d' "$row" "$depth")" "$(IFS=,; echo "${fio_iops[*]}")" "$(IFS=,; echo "${pl_iops[*]}")" \
            "$(IFS=,; echo "${fio_cpu[*]}")" "$(IFS=,; echo "${pl_cpu[*]}")" "$cell"
    done
    if selected job-file; then job_cell; fi
}

# Whether load $1 is among LOADS (every load when LOADS is not given).
selected() {
    case " ${LOADS:-$1} " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

# The user's job file: one job file, run by fio and by perflab's --fio-job.
user_job() {
    cat <<JOB
; a 70/30 random read/write mix of two sizes, as a user writes it
[global]
ioengine=io_uring
direct=1
iodepth=32
time_based
runtime=$seconds

[mix]
rw=randrw
rwmixread=70
bssplit=4k/50:64k/50
; fio's random map would shorten I/Os to a pass's untouched blocks (73 %
; 4k I/Os by count here, not 50 %); perflab draws each offset on its own
norandommap
JOB
}

# The job file cell: fio runs it with a filename= line put first (its
# own file), perflab with --fio-job and --target (perflab's file).
job_cell() {
    local job="$work/mix.fio" fio_job="$work/mix-fio.fio" depth=32
    user_job >"$job"
    { printf '[global]\nfilename=%s\n' "$fio_file"; cat "$job"; } >"$fio_job"
    fio_iops=() fio_cpu=() pl_iops=() pl_cpu=()
    for round in $(seq "$rounds"); do
        if peer_first "$round"; then
            run_fio_job; run_perflab_job
        else
            run_perflab_job; run_fio_job
        fi
    done
    paired_row "$(printf '%-22s %6d' "job file mix.fio" "$depth")" "$(IFS=,; echo "${fio_iops[*]}")" "$(IFS=,; echo "${pl_iops[*]}")" \
        "$(IFS=,; echo "${fio_cpu[*]}")" "$(IFS=,; echo "${pl_cpu[*]}")" "$device job-file d$depth"
}

# fio on the job file (its filename= first), its IOPS and CPU µs per I/O.
run_fio_job() {
    local cpu out
    read -r cpu out < <(ALLOWED_EXIT=1 measure fio --output-format=json "$fio_job")
    add_fio "$cpu" "$out"
}

# perflab on the same job file, on its own file, one worker thread.
run_perflab_job() {
    local cpu
    read -r cpu _ < <(ALLOWED_EXIT=1 measure "$perflab" run disk --fio-job "$job" --target "file:$file" \
        --threads 1 --warmup 0s --store "$work/bench.db")
    add_perflab "$cpu"
}

# One fio run of the load in fio_args at $depth in all over $threads jobs
# on $fio_file, its IOPS and CPU µs per I/O added to the round lists.
run_fio() {
    local cpu out
    read -r cpu out < <(ALLOWED_EXIT=1 measure fio --name=b --filename="$fio_file" --ioengine=io_uring --direct=1 \
        --fixedbufs --iodepth="$((depth / threads))" --numjobs="$threads" --group_reporting --time_based \
        --runtime="$seconds" --norandommap --randrepeat=0 --output-format=json "${fio_args[@]}")
    add_fio "$cpu" "$out"
}

# Adds fio's IOPS and CPU µs per I/O, from CPU seconds $1 and its JSON $2,
# to the round lists.
add_fio() {
    local cpu=$1 out=$2 iops ios
    read -r iops ios < <(python3 -c '
import json, sys
j = json.loads(sys.argv[1])["jobs"][0]
print(j["read"]["iops"] + j["write"]["iops"], j["read"]["total_ios"] + j["write"]["total_ios"])' "$out")
    fio_iops+=("$iops")
    fio_cpu+=("$(python3 -c "print($cpu / max($ios, 1) * 1e6)")")
}

# One perflab run of the load in pl_spec at $depth on $threads threads on
# $file, likewise.
run_perflab() {
    local cpu
    read -r cpu _ < <(ALLOWED_EXIT=1 measure "$perflab" run disk --target "file:$file" --spec "$pl_spec" \
        --depth "$depth" --threads "$threads" --warmup 0s --duration "${seconds}s" --store "$work/bench.db")
    add_perflab "$cpu"
}

# Adds perflab's IOPS and CPU µs per I/O of its newest run, from CPU
# seconds $1, to the round lists.
add_perflab() {
    local cpu=$1 iops ios
    read -r iops ios < <("$perflab" show last --store "$work/bench.db" --json - | python3 -c '
import json, sys
step = json.load(sys.stdin)["steps"][0]
ios = sum(i["ok"] + i["refused"] + sum(i["errors"].values()) for i in step["intervals"])
print(step["summary"]["throughput"], ios)')
    pl_iops+=("$iops")
    pl_cpu+=("$(python3 -c "print($cpu / max($ios, 1) * 1e6)")")
}

# The block device under directory $1, by its kernel name (vda, nvme0n1),
# for the results' cells; "disk" where it has none.
device_name() {
    local name
    name="$(sed -n 's/^DEVNAME=//p' "/sys/dev/block/$(stat -c '%Hd:%Ld' "$1")/uevent" 2>/dev/null || true)"
    echo "${name:-disk}"
}

# ram_images: two tmpfs files of 256 MiB more than one tool's file, their
# memory taken in turns 2 MiB at a time (so that neither gets the more
# scattered pages), after asking the kernel to compact its free memory.
ram_images() {
    local image
    for image in perflab fio; do
        ram_files+=("$(mktemp -p /dev/shm "perflab-fio-bench-$image.XXXXXX")")
    done
    if ! echo 1 2>/dev/null >/proc/sys/vm/compact_memory; then
        echo "(free memory not compacted: /proc/sys/vm/compact_memory is not writable here)"
    fi
    python3 -c '
import os, sys
size, step = int(sys.argv[1]), 2 << 20
fds = [os.open(path, os.O_RDWR) for path in sys.argv[2:]]
for offset in range(0, size, step):
    for fd in fds:
        os.posix_fallocate(fd, offset, min(step, size - offset))' \
        $((size_bytes + (256 << 20))) "${ram_files[@]}"
}

# ram_device IMAGE NAME: ext4 on a loop device over IMAGE (not discarded:
# its memory stays the memory taken), mounted at $work/ram-NAME (in
# ram_made, its loop device in ram_made_loop), removed on exit.
ram_device() {
    local loop
    loop="$(losetup --find --show "$1")"
    ram_loops+=("$loop")
    mkfs.ext4 -q -E nodiscard -b 4096 "$loop"
    ram_made="$work/ram-$2"
    mkdir -p "$ram_made"
    mount "$loop" "$ram_made"
    ram_mounts+=("$ram_made")
    ram_made_loop=$loop
}

bench "$work" "$work" "this file system ($(device_name "$work"))" "$(device_name "$work")"

# The RAM-backed devices, one for each tool's file.
shm_free_kib="$(df -k --output=avail /dev/shm 2>/dev/null | tail -1 || echo 0)"
size_bytes="$(python3 -c "
import re, sys
m = re.fullmatch(r'(\d+)([KMG]?)(i?B)?', sys.argv[1])
print(int(m.group(1)) * {'': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[m.group(2)])" "$size")"
if command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null \
    && ((shm_free_kib * 1024 > 2 * size_bytes + (768 << 20))); then
    ram_images
    ram_device "${ram_files[0]}" perflab
    pl_dir=$ram_made pl_loop=$ram_made_loop
    ram_device "${ram_files[1]}" fio
    echo
    bench "$pl_dir" "$ram_made" "RAM-backed (perflab's file on $pl_loop, fio's on $ram_made_loop, over tmpfs)" ram
else
    echo
    echo "no loop device or too little room in /dev/shm: the RAM-backed comparison is left out"
fi
