#!/usr/bin/env bash
# Session run 4 (2026-12-05, 3rd session). PART=measure: fio's ceiling, `bench --peer fio`
# (cpu-only, staged) and the gds engine (cuFile compatibility mode) on 16 RAM lanes.
# PART=soak: the booth's soak, storm scene headless 1920x1080, path toggled every 20 s.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
BIN=${BIN:-.dev}
[ -x $BIN/supercell ] || tar -xJf .dev/bins.tar.xz -C .dev
cp .dev/device/fio .dev/fio 2>/dev/null; chmod +x .dev/fio
source scripts/rig/env.sh
export SUPERCELL_CACHE=/var/tmp/sc-cache
SC=$BIN/supercell DATA=$BIN/supercell-data DS=/var/tmp/sc-lanes-ds LOG=$OUT/run4-${PART}.txt
say() { echo "== $(date -u +%H:%M:%S) +$(( $(date +%s)-T0 ))s $*" | tee -a "$LOG"; }
say "machine"; { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; free -g; uname -r; $SC --version; } >>"$LOG" 2>&1
if [ "$PART" = measure ]; then
bash scripts/rig/lanes.sh up 16 3 >>"$LOG" 2>&1
say "generate 12 frames of 1G over 16 lanes"
( time $DATA generate "$DS" --frames 12 --frame-size 1G --lanes /mnt/lanes ) >>"$LOG" 2>&1
files=$(find /mnt/lanes -name '*.sclane' | sort)
say "ceiling (fio, scripts/rig/ceiling.sh)"
bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
for p in cpu-only staged; do
  say "bench --engine $p --peer fio (8s, 16 threads)"
  timeout 150 $SC bench "$DS" --engine "$p" --threads 16 --queue-depth 8 --io-size 1M \
    --slots 4 --duration 8 --peer "fio=$PWD/.dev/fio" --json "$OUT/b-peer-$p.json" >>"$LOG" 2>&1
  echo "exit code: $?" >>"$LOG"
done
say "bench --engine gds (cuFile compatibility mode, no nvidia-fs) 8s"
timeout 60 $SC bench "$DS" --engine gds --threads 16 --queue-depth 8 --io-size 1M --slots 4 \
  --duration 8 --quiet --json "$OUT/b-gds.json" >>"$LOG" 2>&1
echo "exit code: $?" >>"$LOG"
bash scripts/rig/lanes.sh down >/dev/null 2>&1
fi
if [ "$PART" = soak ]; then
say "soak: storm scene headless 1920x1080, toggle every 20s, ${SOAK}"
timeout 590 $SC play scenes/storm.toml --headless --soak "$SOAK" --toggle-every 20s \
  --sample-every 5s --size 1920x1080 --json "$OUT/soak.json" >>"$LOG" 2>&1
echo "soak exit code: $?" | tee -a "$LOG"
fi
say "done"
