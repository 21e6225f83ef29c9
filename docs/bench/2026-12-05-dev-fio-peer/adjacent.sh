#!/usr/bin/env bash
# Like for like (both with huge-page buffers), supercell reads about 0.78 x fio's 8 x 8
# layout. Does the access pattern explain it? fio with one thread 64 deep (one sequential
# stream: adjacent reads in flight together, as supercell's frames are read) against 8
# threads 8 deep from spread offsets; 5 s each, the disk's counters around each.
# Usage: adjacent.sh OUT_DIR   (root: hugetlbfs)
set -euo pipefail
out=$1; ds=${DS:-$HOME/.cache/supercell/storm-default-v4}
mkdir -p "$out"
files=$(ls "$ds"/lanes/*/*.sclane | paste -sd:)
mnt=$(mktemp -d); old=$(cat /proc/sys/vm/nr_hugepages)
echo 64 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs none "$mnt"
trap 'umount "$mnt"; rmdir "$mnt"; echo "$old" > /proc/sys/vm/nr_hugepages' EXIT
run() { # name, fio options
  local name=$1; shift
  local r0 m0 s0 r1 m1 s1
  read -r r0 m0 s0 <<<"$(awk '{print $1, $2, $3}' /sys/block/vda/stat)"
  fio --name="$name" --readonly --rw=read --bs=1M --ioengine=io_uring --direct=1 \
    --time_based --runtime=5 --group_reporting --output-format=json "--filename=$files" \
    --iomem=mmaphuge:"$mnt/buf" --hugepage-size=2m "$@" > "$out/$name.json"
  read -r r1 m1 s1 <<<"$(awk '{print $1, $2, $3}' /sys/block/vda/stat)"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['jobs'][0]['read']; print('%-22s %6.3f GB/s  clat mean %7.1f ms  disk requests %d (%d merged), %.1f KiB each' % (sys.argv[2], r['bw_bytes']/1e9, r['clat_ns']['mean']/1e6, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])*512/1024/max(int(sys.argv[3]),1)))" \
    "$out/$name.json" "$name" $((r1 - r0)) $((m1 - m0)) $((s1 - s0))
}
run spread-8x8 --numjobs=8 --iodepth=8 --offset_increment=42991616
run one-stream-1x64 --numjobs=1 --iodepth=64
run spread-8x8-again --numjobs=8 --iodepth=8 --offset_increment=42991616
