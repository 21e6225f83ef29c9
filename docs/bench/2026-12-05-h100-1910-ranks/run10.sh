#!/usr/bin/env bash
# Session run 10 (2026-12-05, 4th session): scale-out on one GPU with Open MPI carried along
# (scripts/rig/ompi-bundle.sh; the GPU machine has no MPI). PART=bench: fio's ceiling on 16
# RAM lanes, then bench one process against mpirun -n 2 (both ranks on GPU 0: 8 lanes each),
# cpu-only and staged, alternated. PART=split: render --split space over 2 ranks at
# 1920x1080 against one process's render of the unbricked frames (transmittance_cutoff 0).
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
[ -x .dev/supercell ] || tar -xJf .dev/bins.tar.xz -C .dev
tar -xJf .dev/ompi.tar.xz -C .dev && B=$PWD/.dev/ompi && source .dev/ompi/env.sh
cp .dev/device/fio .dev/fio 2>/dev/null; chmod +x .dev/fio
source scripts/rig/env.sh
SC=$PWD/.dev/supercell DATA=$PWD/.dev/supercell-data DS=/var/tmp/sc-lanes-ds LOG=$OUT/run10-${PART}.txt
MPI="orterun --allow-run-as-root --oversubscribe -n 2"
say() { echo "== $(date -u +%H:%M:%S) +$(( $(date +%s)-T0 ))s $*" | tee -a "$LOG"; }
say "machine"; { nvidia-smi -L; nproc; free -g; $SC --version; orterun --version | head -1; } >>"$LOG" 2>&1
if [ "$PART" = bench ]; then
mountpoint -q /mnt/lanes/15 || bash scripts/rig/lanes.sh up 16 3 >>"$LOG" 2>&1
say "generate 12 frames of 1G over 16 lanes"
[ -f "$DS/manifest.json" ] || ( time $DATA generate "$DS" --frames 12 --frame-size 1G --lanes /mnt/lanes ) >>"$LOG" 2>&1
files=$(find /mnt/lanes -name '*.sclane' | sort)
say "ceiling (fio)"; bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
cp "$DS/manifest.json" "$OUT/manifest-bench.json" 2>/dev/null
for i in ${BENCH_RUNS:-1 2}; do for e in cpu-only staged; do
  say "one process $e (16 threads) run $i"
  timeout 60 $SC bench "$DS" --engine $e --threads 16 --queue-depth 8 --io-size 1M --slots 4 \
    --duration 8 --quiet --json "$OUT/one-$e-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  say "two ranks $e (8 threads each) run $i"
  timeout 90 $MPI $SC bench "$DS" --engine $e --threads 8 --queue-depth 8 --io-size 1M --slots 4 \
    --duration 8 --quiet --json "$OUT/two-$e-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
done; done
fi
if [ "$PART" = split ]; then
W=/dev/shm/sl; mkdir -p $W
say "generate 2 frames of 1G, whole and in 2 bricks"
[ -f $W/whole/manifest.json ] || $DATA generate $W/whole --frames 2 --frame-size 1G --lanes 4 >>"$LOG" 2>&1
[ -f $W/b2/manifest.json ] || $DATA generate $W/b2 --frames 2 --frame-size 1G --lanes 4 --bricks 2 >>"$LOG" 2>&1
rm -rf $W/one $W/two
$SC info $W/b2 --no-verify >>"$LOG" 2>&1
printf 'dataset = "%s"\n\n[settings]\ntransmittance_cutoff = 0.0\n' $W/whole > $W/whole.toml
say "one process, 1920x1080, frames 0..2"
timeout 120 $SC render $W/whole.toml --frames 0..2 --size 1920x1080 --out $W/one >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
say "two ranks --split space, 1920x1080, frames 0..2"
timeout 120 $MPI $SC render $W/b2 --split space --frames 0..2 --size 1920x1080 --out $W/two >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
python3 - "$W" >>"$LOG" 2>&1 <<'PY'
import sys
import numpy as np
from PIL import Image
w=sys.argv[1]
for f in (0,1):
    a=np.asarray(Image.open(f"{w}/one/frame_{f:05}.png")).astype(int)
    b=np.asarray(Image.open(f"{w}/two/frame_{f:05}.png")).astype(int); d=np.abs(a-b)
    print(f"frame {f}: max |diff| {d.max()} (8-bit), channels differing {(d>0).sum()} of {d.size}")
PY
cp $W/two/frame_00001.png $OUT/split-2ranks-1080p.png 2>/dev/null
fi
if [ "$PART" = play ]; then
for i in ${PLAY_RUNS:-1 2}; do
  say "play one process, 1920x1080, 48 frames, host path, run $i"
  timeout 120 $SC play "$DS" --headless --frames ${PLAY_FRAMES:-48} --size 1920x1080 --path host --scrub-jumps 0 \
    --json "$OUT/play-one-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  say "play two ranks, 1920x1080, 48 frames, host path, run $i"
  timeout 120 $MPI $SC play "$DS" --headless --frames ${PLAY_FRAMES:-48} --size 1920x1080 --path host --scrub-jumps 0 \
    --json "$OUT/play-two-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
done
fi
say "done"
