#!/usr/bin/env bash
# A/B: two builds of supercell on one rig and one dataset, in alternating rounds, beside
# fio's ceiling: did a change move the figures? Run on the GPU machine from the repository
# root after `bash scripts/gpu-tests.sh prepare` (the new build in .dev/) and with the old
# build's binary at .dev/supercell-old (any commit: `cargo build --release --bin supercell`
# there, then copy target/release/supercell).
#
#   bash scripts/gpu-ab.sh            # results under $OUT (default /tmp/supercell-ab)
#
# Knobs: LANES (16), LANE_GIB (3), FRAMES (12), FRAME_SIZE (1G), THREADS (16), DURATION (8),
# ROUNDS (2), PLAY_FRAMES (96). Each round runs bench (cpu-only, staged, gds) and a headless
# play of both paths with the old build, then with the new one.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/supercell-ab}
mkdir -p "$OUT"
LANES=${LANES:-16} LANE_GIB=${LANE_GIB:-3} FRAMES=${FRAMES:-12} FRAME_SIZE=${FRAME_SIZE:-1G}
THREADS=${THREADS:-16} DURATION=${DURATION:-8} ROUNDS=${ROUNDS:-2}
DS=/var/tmp/sc-ab-ds
LOG="$OUT/ab.txt"
: >"$LOG"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
[ -x .dev/supercell-old ] || { echo "no .dev/supercell-old (see the header)" >&2; exit 2; }
# shellcheck source=scripts/rig/env.sh
source scripts/rig/env.sh
bash scripts/rig/lanes.sh up "$LANES" "$LANE_GIB" >>"$LOG" 2>&1
say "generate $FRAMES frames of $FRAME_SIZE over $LANES lanes"
.dev/supercell-data generate "$DS" --frames "$FRAMES" --frame-size "$FRAME_SIZE" --lanes /mnt/lanes >>"$LOG" 2>&1
files=$(find /mnt/lanes -name '*.sclane' | sort)
say "ceiling (fio)"
# shellcheck disable=SC2086
bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
for round in $(seq 1 "$ROUNDS"); do
  for build in old new; do
    bin=.dev/supercell
    [ "$build" = old ] && bin=.dev/supercell-old
    for e in cpu-only staged gds; do
      say "round $round $build bench $e"
      # `--path` names the engine in both builds (the new one keeps it as an alias).
      timeout 120 "$bin" bench "$DS" --path "$e" --threads "$THREADS" --queue-depth 8 --io-size 1M \
        --slots 4 --duration "$DURATION" --quiet >>"$LOG" 2>&1
      echo "exit code: $?" >>"$LOG"
    done
    say "round $round $build play both"
    timeout 200 "$bin" play "$DS" --headless --path both --frames "${PLAY_FRAMES:-96}" \
      --threads "$THREADS" --size 1920x1080 >>"$LOG" 2>&1
    echo "exit code: $?" >>"$LOG"
  done
done
say "ceiling (fio) again"
# shellcheck disable=SC2086
bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
bash scripts/rig/lanes.sh down >/dev/null 2>&1 || true
grep -E "^==|^throughput|GBps|^  (host|direct)" "$LOG" >"$OUT/summary.txt"
