#!/usr/bin/env bash
# Session run 5 (2026-12-05, 3rd session): the GPU test binaries of e83f3e0 on the NVIDIA
# machine (verify mode's tests, no bench), then the renderer's GPU tests while time is left.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
tar -xJf .dev/bins.tar.xz -C .dev
OUT=$OUT SKIP_BENCH=1 FRAMES=8 timeout 420 bash scripts/gpu-tests.sh verify
source scripts/rig/env.sh
for t in render_gpu render_denoise; do
  left=$(( 560 - ($(date +%s)-T0) ))
  [ $left -gt 20 ] || break
  echo "== $t ($left s left)" >>"$OUT/gpu-tests.txt"
  XDG_RUNTIME_DIR=$(mktemp -d) SUPERCELL_REQUIRE_GPU=1 RUST_BACKTRACE=1 timeout $left .dev/$t --test-threads 1 --include-ignored >>"$OUT/gpu-tests.txt" 2>&1
  echo "$t exit code: $?" | tee -a "$OUT/verify.txt" "$OUT/gpu-tests.txt"
done
grep -E "exit code|^test result" "$OUT/gpu-tests.txt"
