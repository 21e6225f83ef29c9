#!/usr/bin/env bash
# Session run 7: run 6's reader comparison, longer (every file 6 times: ~77 GB a run).
set -u
cd "$(dirname "$0")/.."
tar -xJf .dev/bins.tar.xz -C .dev supercell supercell-data
DATA=.dev/supercell-data DS=/var/tmp/sc-lanes-ds LOG=$OUT/run7.txt
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
{ nvidia-smi -L; lscpu | grep -E "Model name|L3|NUMA node\(s\)|Socket"; } >>"$LOG" 2>&1
bash scripts/rig/lanes.sh up 16 3 >>"$LOG" 2>&1
$DATA generate "$DS" --frames 12 --frame-size 1G --lanes /mnt/lanes >>"$LOG" 2>&1
files=$(find /mnt/lanes -name '*.sclane' | sort)
all="$files $files $files $files $files $files"
for r in 1 2 3; do
  for span in 1 256; do
    for th in 16 32; do
      say "raw O_DIRECT reader, $th threads, 1 MiB reads, destination ${span} MiB per thread"
      timeout 60 python3 scripts/rig/peers.py raw --direct --threads $th --chunk-mib 1 --span-mib $span $all >>"$LOG" 2>&1
    done
  done
done
grep -E "^(peer=|Model|L3)" "$LOG"
