#!/usr/bin/env bash
# Session run 6 (2026-12-05, 3rd session): why `bench` cpu-only reads 0.74 x fio on the RAM
# lanes. The same simple O_DIRECT reader into a reused 1 MiB buffer per thread (as fio's
# iodepth x bs buffers) and into 256 MiB per thread (as frames land in slots), alternated;
# then bench cpu-only and staged with --peer fio again.
set -u
cd "$(dirname "$0")/.."
tar -xJf .dev/bins.tar.xz -C .dev supercell supercell-data
cp .dev/device/fio .dev/fio; chmod +x .dev/fio
SC=.dev/supercell DATA=.dev/supercell-data DS=/var/tmp/sc-lanes-ds LOG=$OUT/run6.txt
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
{ nvidia-smi -L; lscpu | grep -E "Model name|L3|NUMA node\(s\)|Socket"; } >>"$LOG" 2>&1
bash scripts/rig/lanes.sh up 16 3 >>"$LOG" 2>&1
$DATA generate "$DS" --frames 12 --frame-size 1G --lanes /mnt/lanes >>"$LOG" 2>&1
files=$(find /mnt/lanes -name '*.sclane' | sort)
for r in 1 2; do
  for span in 1 256; do
    say "raw O_DIRECT reader, 32 threads, 1 MiB reads, destination ${span} MiB per thread"
    timeout 60 python3 scripts/rig/peers.py raw --direct --threads 32 --chunk-mib 1 --span-mib $span $files >>"$LOG" 2>&1
  done
done
say "ceiling.sh"; bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
for p in cpu-only staged; do
  say "bench --engine $p --peer fio (8s, 16 threads)"
  timeout 150 $SC bench "$DS" --engine "$p" --threads 16 --queue-depth 8 --io-size 1M \
    --slots 4 --duration 8 --peer "fio=$PWD/.dev/fio" --quiet --json "$OUT/b-peer-$p.json" >>"$LOG" 2>&1
done
say "done"
grep -E "^(==|peer=|fio before|fio after|supercell: |ratio)" "$LOG"
