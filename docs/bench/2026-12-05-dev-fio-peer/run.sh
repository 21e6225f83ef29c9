#!/usr/bin/env bash
# bench --peer fio on the built-in storm dataset (storm-default-v4, 4 lanes, 1.4 GB), on the
# 2-core dev VM (virtio disk /dev/vda). Each step records the disk's counters
# (/sys/block/vda/stat) around it: reads completed, reads merged, sectors read.
# Usage: run.sh SUPERCELL_BINARY OUT_DIR
set -euo pipefail
bin=$1; out=$2; ds=${DS:-$HOME/.cache/supercell/storm-default-v4}
mkdir -p "$out"
stat() { awk '{print $1, $2, $3}' /sys/block/vda/stat; }
step() { # name, then the command
  local name=$1; shift
  local a; a=$(stat)
  "$@" > "$out/$name.txt" 2>&1 || echo "FAILED: $name" >> "$out/$name.txt"
  local b; b=$(stat)
  echo "$name vda: before [$a] after [$b]" >> "$out/vda.txt"
}
step io_uring-1 "$bin" bench "$ds" --engine cpu-only --quiet --peer fio --json "$out/io_uring-1.json"
step pread-1 "$bin" bench "$ds" --engine cpu-only --quiet --backend pread --peer fio --json "$out/pread-1.json"
step io_uring-2 "$bin" bench "$ds" --engine cpu-only --quiet --peer fio --json "$out/io_uring-2.json"
# fio with its buffers in 2 MiB huge pages (hugetlbfs), as supercell's are (transparent
# huge pages): 64 pages reserved for the run, given back after.
mnt=$(mktemp -d); old=$(cat /proc/sys/vm/nr_hugepages)
echo 64 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs none "$mnt"
trap 'umount "$mnt"; rmdir "$mnt"; echo "$old" > /proc/sys/vm/nr_hugepages' EXIT
step io_uring-fio-hugepages "$bin" bench "$ds" --engine cpu-only --quiet --peer fio \
  --peer-fio-option "iomem=mmaphuge:$mnt/fio-buf" --json "$out/io_uring-fio-hugepages.json"
