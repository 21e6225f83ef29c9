#!/usr/bin/env bash
# The cause, tested from both sides (5 s each, the disk's counters around each run):
# supercell without huge pages for its buffers, and fio with its buffers in 2 MiB huge
# pages (hugetlbfs: 64 pages are reserved for the run and given back after).
# Usage: hugepages.sh SUPERCELL_BINARY OUT_DIR   (root, for the hugetlbfs mount)
set -euo pipefail
bin=$1; out=$2; ds=${DS:-$HOME/.cache/supercell/storm-default-v4}
mkdir -p "$out"
files=$(ls "$ds"/lanes/*/*.sclane | paste -sd:)
disk() { awk '{print $1, $3}' /sys/block/vda/stat; }
report() { # name, counters before, after, GB/s
  read -r r0 s0 <<<"$2"; read -r r1 s1 <<<"$3"
  awk -v n="$1" -v g="$4" -v r=$((r1 - r0)) -v s=$((s1 - s0)) \
    'BEGIN { printf "%-34s %6.3f GB/s  disk requests %6d, %7.1f KiB each\n", n, g, r, s * 512 / 1024 / (r ? r : 1) }'
}
sc() { # name, env
  local a b; a=$(disk)
  env "$2" "$bin" bench "$ds" --engine cpu-only --quiet --duration 5 --json "$out/$1.json" > "$out/$1.txt"
  b=$(disk)
  report "$1" "$a" "$b" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['bw_bytes']/1e9)" "$out/$1.json")"
}
fio_run() { # name, extra fio options
  local name=$1; shift
  local a b; a=$(disk)
  fio --name="$name" --readonly --rw=read --bs=1M --ioengine=io_uring --direct=1 \
    --time_based --runtime=5 --group_reporting --output-format=json "--filename=$files" \
    --numjobs=8 --iodepth=8 --offset_increment=42991616 "$@" > "$out/$name.json"
  b=$(disk)
  report "$name" "$a" "$b" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['bw_bytes']/1e9)" "$out/$name.json")"
}
# fio as processes (no --thread): fio 3.33 aborts with --thread and iomem=mmaphuge.
sc supercell-hugepages SUPERCELL_HOST_HUGEPAGES=1
sc supercell-no-hugepages SUPERCELL_HOST_HUGEPAGES=0
fio_run fio-4k-pages
mnt=$(mktemp -d)
old=$(cat /proc/sys/vm/nr_hugepages)
echo 64 > /proc/sys/vm/nr_hugepages
mount -t hugetlbfs none "$mnt"
trap 'umount "$mnt"; rmdir "$mnt"; echo "$old" > /proc/sys/vm/nr_hugepages' EXIT
fio_run fio-hugepages --iomem=mmaphuge:"$mnt"/fio-buf --hugepage-size=2m
