#!/usr/bin/env bash
# Session run 12 (2026-12-05, 5th session). PART=tests: the GPU tests of the merged tree
# (render_gpu, render_regions, ingest_gpu, play, play_gpus). PART=measure: fio's ceiling on
# 16 RAM lanes; play 1920x1080 host path: one process (Player) vs --gpus 1 (the coordinator
# over one GPU) vs 2 ranks (immediate image sends), alternated; render --split space of 4
# bricks over 2 ranks (2 each) and in one process against the unbricked frame.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
[ -x .dev/supercell ] || tar -xJf .dev/bins.tar.xz -C .dev
[ -d .dev/ompi ] || tar -xJf .dev/ompi.tar.xz -C .dev
B=$PWD/.dev/ompi && source .dev/ompi/env.sh
# The test binaries run the binary they were built beside.
mkdir -p /work/main/target/release && ln -sf "$PWD/.dev/supercell" /work/main/target/release/supercell
cp .dev/device/fio .dev/fio 2>/dev/null; chmod +x .dev/fio
source scripts/rig/env.sh
SC=$PWD/.dev/supercell DATA=$PWD/.dev/supercell-data LOG=$OUT/run12-${PART}.txt
MPI="orterun --allow-run-as-root --oversubscribe -n 2"
export XDG_RUNTIME_DIR=$(mktemp -d)
say() { echo "== $(date -u +%H:%M:%S) +$(( $(date +%s)-T0 ))s $*" | tee -a "$LOG"; }
say "machine"; { nvidia-smi -L; nproc; free -g; $SC --version; } >>"$LOG" 2>&1
if [ "$PART" = tests ]; then
  bash scripts/rig/lanes.sh up 8 2 >>"$LOG" 2>&1
  DS=/var/tmp/sc-lanes-ds8
  [ -f $DS/manifest.json ] || $DATA generate "$DS" --frames 8 --frame-size 256M --lanes /mnt/lanes >>"$LOG" 2>&1
  run() { local t=$1; shift; say "$t"; "$@" >>"$LOG" 2>&1; echo "$t exit code: $?" | tee -a "$LOG"; }
  run render_gpu env SUPERCELL_REQUIRE_GPU=1 timeout 100 .dev/render_gpu --test-threads 1
  run render_regions timeout 80 .dev/render_regions --test-threads 1
  run ingest_gpu env SUPERCELL_TEST_DATASET="$DS" SUPERCELL_BIN="$SC" timeout 100 .dev/ingest_gpu --ignored --test-threads 1
  run play env SUPERCELL_TEST_DATASET="$DS" timeout 100 .dev/play --ignored --test-threads 1
  run play_gpus env SUPERCELL_TEST_DATASET="$DS" timeout 100 .dev/play_gpus --include-ignored --test-threads 1
  bash scripts/rig/lanes.sh down >>"$LOG" 2>&1
  grep -E "exit code|^test result|FAILED|panicked" "$LOG"
fi
if [ "$PART" = measure ]; then
  DS=/var/tmp/sc-lanes-ds
  mountpoint -q /mnt/lanes/15 || bash scripts/rig/lanes.sh up 16 3 >>"$LOG" 2>&1
  say "generate 12 frames of 1G over 16 lanes"
  [ -f "$DS/manifest.json" ] || $DATA generate "$DS" --frames 12 --frame-size 1G --lanes /mnt/lanes >>"$LOG" 2>&1
  files=$(find /mnt/lanes -name '*.sclane' | sort)
  say "ceiling (fio)"; timeout 120 bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
  P="--headless --frames 144 --size 1920x1080 --path host --scrub-jumps 0"
  for i in 1 2; do
    say "play one process (Player), run $i"; timeout 60 $SC play "$DS" $P --json "$OUT/play-one-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
    say "play --gpus 1 (coordinator), run $i"; timeout 60 $SC play "$DS" $P --gpus 1 --json "$OUT/play-gpus1-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
    say "play 2 ranks, run $i"; timeout 60 $MPI $SC play "$DS" $P --json "$OUT/play-two-$i.json" >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  done
  W=/dev/shm/sl4; mkdir -p $W
  say "generate 2 frames of 1G, whole and in 4 bricks"
  [ -f $W/whole/manifest.json ] || $DATA generate $W/whole --frames 2 --frame-size 1G --lanes 4 >>"$LOG" 2>&1
  [ -f $W/b4/manifest.json ] || $DATA generate $W/b4 --frames 2 --frame-size 1G --lanes 4 --bricks 4 >>"$LOG" 2>&1
  printf 'dataset = "%s"\n\n[settings]\ntransmittance_cutoff = 0.0\n' $W/whole > $W/whole.toml
  rm -rf $W/one $W/two $W/solo
  say "render one process, unbricked"; timeout 90 $SC render $W/whole.toml --frames 0..2 --size 1920x1080 --out $W/one >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  say "render --split space, 4 bricks over 2 ranks"; timeout 120 $MPI $SC render $W/b4 --split space --frames 0..2 --size 1920x1080 --out $W/two >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  say "render --split space, 4 bricks in one process"; timeout 120 $SC render $W/b4 --split space --frames 0..2 --size 1920x1080 --out $W/solo >>"$LOG" 2>&1; echo "exit $?" >>"$LOG"
  python3 - "$W" >>"$LOG" 2>&1 <<'PY'
import sys
import numpy as np
from PIL import Image
w=sys.argv[1]
for d in ("two","solo"):
    for f in (0,1):
        a=np.asarray(Image.open(f"{w}/one/frame_{f:05}.png")).astype(int)
        b=np.asarray(Image.open(f"{w}/{d}/frame_{f:05}.png")).astype(int); x=np.abs(a-b)
        print(f"{d} frame {f}: max |diff| {x.max()} (8-bit), channels differing {(x>0).sum()} of {x.size}")
PY
  cp $W/two/frame_00001.png $OUT/split-4bricks-2ranks-1080p.png 2>/dev/null
  for f in "$OUT"/play-*.json; do python3 -c "
import json,sys
v=json.load(open('$f'))
for p in v.get('paths',[]):
    fig=p.get('figures') or {}
    g=p.get('gpus') or {}
    print('$f'.split('/')[-1], p.get('path'), 'presented fps', (g.get('total') or {}).get('frames_per_s_presented'), 'player fps', fig.get('frames_per_s') or fig.get('shown_fps'))
" >>"$LOG" 2>&1; done
fi
say "done"
cd $OUT && tar -czf all.tgz --remove-files $(ls | grep -v all.tgz)
