#!/usr/bin/env bash
# Why fio reads the storm dataset's lane files at about half supercell's rate with the same
# 64 reads in flight: fio variants on the same files, 5 s each, with the disk's counters
# (reads completed, sectors) around each. Usage: why.sh OUT_DIR
set -euo pipefail
out=$1; ds=${DS:-$HOME/.cache/supercell/storm-default-v4}
mkdir -p "$out"
files=$(ls "$ds"/lanes/*/*.sclane | paste -sd:)
common=(--readonly --rw=read --bs=1M --ioengine=io_uring --direct=1 --thread --time_based
        --runtime=5 --group_reporting --output-format=json "--filename=$files")
v() { # name, then fio options
  local name=$1; shift
  local a b; a=$(awk '{print $1, $3}' /sys/block/vda/stat)
  fio --name="$name" "${common[@]}" "$@" > "$out/$name.json"
  b=$(awk '{print $1, $3}' /sys/block/vda/stat)
  python3 - "$out/$name.json" "$a" "$b" "$name" "$*" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
a = list(map(int, sys.argv[2].split())); b = list(map(int, sys.argv[3].split()))
reqs = b[0] - a[0]; kb = (b[1] - a[1]) * 512 / 1024
print(f"{sys.argv[4]:<28} {r['bw_bytes']/1e9:6.3f} GB/s  clat mean {r['clat_ns']['mean']/1e3:8.1f} us"
      f"  disk requests {reqs:6d}, {kb/max(reqs,1):7.1f} KiB each   [{sys.argv[5]}]")
PY
}
# As `bench --peer fio` runs it: 8 threads x 8 deep, each thread from its own offset.
v peer-8x8-offsets --numjobs=8 --iodepth=8 --offset_increment=42991616
# The same 64 reads in flight from one thread: one sequential stream over the 4 files.
v one-thread-64 --numjobs=1 --iodepth=64
# 8 threads all from offset 0: the same blocks at nearly the same time.
v 8x8-same-start --numjobs=8 --iodepth=8
# 8 threads x 8 deep with each thread on one file (no round robin between files).
v 8x8-offsets-sequential-files --numjobs=8 --iodepth=8 --offset_increment=42991616 --file_service_type=sequential
