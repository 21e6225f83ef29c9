#!/usr/bin/env bash
# Session run 9: the staged/bounce copy stages (coordinator refactor) and the renderer split
# on the GPU: ingest_gpu, ingest_faults, play (GPU), render_gpu, of b08333b's binaries.
set -u
cd "$(dirname "$0")/.."
tar -xJf .dev/bins.tar.xz -C .dev
mkdir -p /work/main/target/release && ln -sf "$PWD/.dev/supercell" /work/main/target/release/supercell
source scripts/rig/env.sh
LOG=$OUT/gpu-tests.txt
{ nvidia-smi -L; } >>"$LOG" 2>&1
bash scripts/rig/lanes.sh up 8 2 >>"$LOG" 2>&1
DS=/var/tmp/sc-lanes-ds
.dev/supercell-data generate "$DS" --frames 8 --frame-size 256M --lanes /mnt/lanes >>"$LOG" 2>&1
run() { local t=$1; shift; echo "== $t" >>"$LOG"; "$@" >>"$LOG" 2>&1; echo "$t exit code: $?" | tee -a "$LOG"; }
run ingest_gpu env SUPERCELL_TEST_DATASET="$DS" SUPERCELL_BIN="$PWD/.dev/supercell" timeout 120 .dev/ingest_gpu --ignored --test-threads 1
run ingest_faults env SUPERCELL_TEST_DIR=/mnt/lanes/0 timeout 60 .dev/ingest_faults --ignored --test-threads 1
run play env SUPERCELL_TEST_DATASET="$DS" timeout 90 .dev/play --ignored --test-threads 1
run render_gpu env XDG_RUNTIME_DIR=$(mktemp -d) SUPERCELL_REQUIRE_GPU=1 timeout 60 .dev/render_gpu --test-threads 1
run bench_gpus env SUPERCELL_BIN="$PWD/.dev/supercell" timeout 60 .dev/bench_gpus --ignored --test-threads 1
grep -E "exit code|^test result" "$LOG"
