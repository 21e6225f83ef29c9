#!/usr/bin/env bash
# GPU tests and ingest benchmarks on an NVIDIA machine: the figures in README.md and
# docs/PERFORMANCE.md come from these runs.
#
# Build (on the same machine, or on another one with cargo; stages binaries in .dev/, and a
# static fio named by FIO=... as .dev/fio):
#   bash scripts/gpu-tests.sh prepare
# Run, as root, from the repository root (with .dev/ copied along if built elsewhere):
#   bash scripts/gpu-tests.sh run            # everything below, results under $OUT
#   bash scripts/gpu-tests.sh verify         # verified vs unverified streaming on 16 lanes, exit statuses
#   bash scripts/gpu-tests.sh large          # ~7 GB frames, every attribute, 16 lanes; generator speed
#   bash scripts/gpu-tests.sh onegb          # 1 GB frames on the same 16 lanes: host routes, direct path
#   bash scripts/gpu-tests.sh picture        # the storm's pictures, the path tracer's convergence
#   bash scripts/gpu-tests.sh knobs          # the renderer's speed switches against the defaults
#
# What a run needs besides the NVIDIA driver (CUDA, cuFile for the gds engine) lives in
# scripts/rig/: lanes.sh (RAM-backed lanes), ceiling.sh (fio's ceiling: fio from PATH, else
# .dev/fio), peers.py (raw O_DIRECT reader; KvikIO, from pip or wheels in .dev/whl/), env.sh
# (Vulkan driver paths; Vulkan loader packages from .dev/gl/ where none is installed).
# See scripts/rig/README.md.
#
# `run` sets up 8 RAM-backed lanes (lanes.sh), generates a dataset on them, runs the
# #[ignore]d GPU tests (byte-exact staged and gds engines, fallback from tmpfs, the GPU CRC
# kernel and --verify on the GPU paths; CUDA<->Vulkan zero-copy sharing: interop_gpu), then
# the benchmarks: cpu-only (storage ceiling), staged, gds (cuFile compat mode here), each
# again with --verify, a staged sweep with its plot, the raw O_DIRECT and kvikio peers on
# the same files, and a cold root-disk run against the raw O_DIRECT ceiling, and the player
# headless on both paths (play.json; play-verify.json: the same with --verify;
# play-staging.json: the host path's staging route for comparison; play-parts.json: --verify
# with 256 MiB slot parts) plus a soak: the kiosk
# workload (storm scene, camera path, path flips every 20 s) sampling memory and
# handles (soak.json). Knobs (environment): FRAMES (16), FRAME_SIZE (1G = 1 GiB), LANES (8),
# LANE_GIB (6), THREADS (16), DURATION (10), SKIP_ROOT=1, PLAY_FRAMES (96), SOAK (300s),
# SKIP_PLAY=1, SKIP_RENDER=1, ONLY_RENDER=1 (the renderer benchmark and interop tests alone).
# One call on the GPU machine is limited to 10 minutes: split with the SKIP_* knobs.
set -uo pipefail
cd "$(dirname "$0")/.."

# Before a measurement: write back what the generator left dirty and drop the page cache.
# The lanes are ext4 on loop devices over /dev/shm, so a freshly generated dataset sits in
# memory twice (the lane files and ext4's page cache); a host path that then pins tens of
# GB of slots has to reclaim that cache during its run. Logs the memory figures before and
# after to $1.
settle() {
  local log=$1
  { echo "-- memory before settling:"; grep -E '^(MemAvailable|Cached|Dirty|Writeback|Shmem):' /proc/meminfo; } >>"$log"
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; else echo "-- cannot drop caches (not root)" >>"$log"; fi
  { echo "-- after sync and drop_caches:"; grep -E '^(MemAvailable|Cached|Dirty|Writeback|Shmem):' /proc/meminfo; } >>"$log"
}

# Gathers the JSON files named by the globs (in $OUT) into $OUT/NAME.json, one key per file
# name, and removes them: the result folder takes 8 files at most.
combine_json() {
  local name=$1
  shift
  python3 - "$OUT" "$name" "$@" <<'PY'
import glob, json, os, sys
out, name, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for pattern in patterns:
    for p in sorted(glob.glob(os.path.join(out, pattern))):
        with open(p) as f:
            runs[os.path.basename(p)[:-5]] = json.load(f)
        os.remove(p)
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump(runs, f)
PY
}

prepare() {
  set -e
  cargo build --release --workspace
  # The GPU machine has no netCDF-C library: its supercell-data is built without netCDF import.
  cargo build --release -p supercell-data --no-default-features
  mkdir -p .dev
  cp target/release/supercell target/release/supercell-data .dev/
  local t bin
  for t in ingest_gpu ingest_faults alloc_limits interop_gpu play bench_gpus play_gpus render_path render_denoise render_gpu; do
    bin=$(cargo test --release --test "$t" --no-run --message-format=json 2>/dev/null |
      T="$t" python3 -c 'import json,os,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]==os.environ["T"]: print(m["executable"])')
    cp "$bin" ".dev/$t"
  done
  strip .dev/supercell .dev/supercell-data .dev/ingest_gpu .dev/ingest_faults .dev/alloc_limits .dev/interop_gpu \
    .dev/play .dev/bench_gpus .dev/play_gpus .dev/render_path .dev/render_denoise .dev/render_gpu || true
  cp scripts/gpu-tests.sh .dev/gpu-tests.sh  # `bash .dev/gpu-tests.sh run` works too
  # Offline extras fetched beside the checkout: Vulkan loader packages, kvikio wheels.
  if [ -d .gl ] && [ ! -d .dev/gl ]; then cp -r .gl .dev/gl; fi
  if [ -d .whl ] && [ ! -d .dev/whl ]; then cp -r .whl .dev/whl; fi
  # FIO=/path/to/a/static/fio: carried along in .dev/ for a machine without packages.
  if [ -n "${FIO:-}" ]; then cp "$FIO" .dev/fio; fi
  if ! command -v fio >/dev/null && [ ! -x .dev/fio ]; then
    echo "note: no fio here; the GPU machine needs one on PATH (apt install fio) or at .dev/fio" \
      "(a static build: see scripts/rig/ceiling.sh), else the ceiling is not measured" >&2
  fi
  du -sh .dev
}

run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local FRAMES=${FRAMES:-16} FRAME_SIZE=${FRAME_SIZE:-1G} LANES=${LANES:-8} LANE_GIB=${LANE_GIB:-6}
  local THREADS=${THREADS:-16} DURATION=${DURATION:-10}
  local SC=.dev/supercell DATA=.dev/supercell-data DS=/var/tmp/sc-lanes-ds
  local LOG="$OUT/bench.txt"
  : >"$LOG"
  say() { echo "== $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  local json_parts=()
  if [ -z "${ONLY_RENDER:-}" ]; then
  bash scripts/rig/lanes.sh up "$LANES" "$LANE_GIB" >>"$LOG" 2>&1
  nvidia-smi -L >>"$LOG" 2>&1 || true

  $SC doctor /mnt/lanes/* / >"$OUT/doctor.txt" 2>&1

  say "generate $FRAMES frames of $FRAME_SIZE over $LANES lanes"
  ( time $DATA generate "$DS" --frames "$FRAMES" --frame-size "$FRAME_SIZE" --lanes /mnt/lanes \
      --json "$OUT/generate.json" ) >>"$LOG" 2>&1
  $SC doctor --dataset "$DS" >>"$OUT/doctor.txt" 2>&1

  say "GPU tests"
  SUPERCELL_TEST_DATASET="$DS" SUPERCELL_BIN="$PWD/.dev/supercell" RUST_BACKTRACE=1 timeout 240 .dev/ingest_gpu --ignored --test-threads 1 --nocapture \
    >"$OUT/gpu-tests.txt" 2>&1
  echo "gpu tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
  # An injected cuFile error fails its frame only.
  echo "== ingest_faults (cuFile)" >>"$OUT/gpu-tests.txt"
  SUPERCELL_TEST_DIR=/mnt/lanes/0 RUST_BACKTRACE=1 timeout 120 .dev/ingest_faults --ignored --test-threads 1 --nocapture \
    >>"$OUT/gpu-tests.txt" 2>&1
  echo "fault tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
  # CUDA<->Vulkan sharing (appended to the same file: the result folder takes 8 files).
  say "interop GPU tests"
  echo "== interop_gpu" >>"$OUT/gpu-tests.txt"
  RUST_BACKTRACE=1 timeout 300 .dev/interop_gpu --ignored --test-threads 1 --nocapture \
    >>"$OUT/gpu-tests.txt" 2>&1
  echo "interop tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
  say "player GPU tests (toggle during playback, both paths)"
  SUPERCELL_TEST_DATASET="$DS" RUST_BACKTRACE=1 timeout 240 .dev/play --ignored \
    --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
  echo "player gpu tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"

  if [ -z "${SKIP_PLAY:-}" ]; then
    # The player headless: both paths on the lane dataset (host, then direct toggled at run
    # time), with scrub latency; the host path's staging route for comparison; then the
    # kiosk workload for $SOAK, sampling memory and handles.
    say "play --headless --path both --frames ${PLAY_FRAMES:-96}"
    timeout 300 $SC play "$DS" --headless --path both --frames "${PLAY_FRAMES:-96}" --threads "$THREADS" \
      --size 1920x1080 --json "$OUT/play.json" --screenshot "$OUT/player.png" >>"$LOG" 2>&1
    echo "play exit code: $?" | tee -a "$LOG"
    say "play --headless --path both --verify --frames ${PLAY_FRAMES:-96}"
    timeout 300 $SC play "$DS" --headless --path both --frames "${PLAY_FRAMES:-96}" --threads "$THREADS" \
      --size 1920x1080 --verify --json "$OUT/play-verify.json" >>"$LOG" 2>&1
    echo "play --verify exit code: $?" | tee -a "$LOG"
    # Slots of several parts (256 MiB each: a 1 GiB frame is four shared allocations on the
    # direct path, four imported host parts on the host path), every extent checked.
    say "play --headless --path both --verify, 256 MiB slot parts"
    SUPERCELL_PART_BYTES=268435456 timeout 300 $SC play "$DS" --headless --path both --frames 32 \
      --threads "$THREADS" --size 1920x1080 --verify --json "$OUT/play-parts.json" >>"$LOG" 2>&1
    echo "play --verify (slot parts) exit code: $?" | tee -a "$LOG"
    timeout 200 $SC play "$DS" --headless --path host --host-copy staging --frames 64 \
      --threads "$THREADS" --size 1920x1080 --json "$OUT/play-staging.json" >>"$LOG" 2>&1
    echo "play (staging route) exit code: $?" | tee -a "$LOG"
    say "play --headless --soak ${SOAK:-300s} (storm scene, flips every 20 s)"
    { printf 'dataset = "%s"\n' "$DS"; cat scenes/storm.toml; } >/var/tmp/soak.toml
    timeout 590 $SC play /var/tmp/soak.toml --headless --soak "${SOAK:-300s}" --toggle-every 20s \
      --sample-every 2s --threads "$THREADS" --size 1920x1080 --json "$OUT/soak.json" >>"$LOG" 2>&1
    echo "soak exit code: $?" | tee -a "$LOG"
  fi

  local files
  files=$(find /mnt/lanes -name '*.sclane' | sort)
  [ -n "${SKIP_PLAY:-}" ] || json_parts+=("$OUT/play.json" "$OUT/play-verify.json" "$OUT/play-parts.json" "$OUT/play-staging.json" "$OUT/soak.json")
  for p in cpu-only staged gds; do
    say "bench --engine $p (O_DIRECT, $THREADS threads, ${DURATION}s)"
    timeout 120 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
      --slots 4 --duration "$DURATION" --quiet --json "$OUT/b-$p.json" >>"$LOG" 2>&1
    json_parts+=("$OUT/b-$p.json")
  done
  # The same runs with every extent's CRC-32 checked (on the GPU for staged and gds).
  for p in cpu-only staged gds; do
    say "bench --engine $p --verify (O_DIRECT, $THREADS threads, ${DURATION}s)"
    timeout 120 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
      --slots 4 --duration "$DURATION" --verify --quiet --json "$OUT/b-$p-verify.json" >>"$LOG" 2>&1
    json_parts+=("$OUT/b-$p-verify.json")
  done

  # fio on the same lane files, before and after supercell, in the same command (where the
  # machine has fio; `--peer-fio-option iomem=mmaphuge:...` would give fio huge pages too).
  if command -v fio >/dev/null; then
    say "bench --peer fio (cpu-only, $THREADS threads, ${DURATION}s)"
    timeout 200 $SC bench "$DS" --engine cpu-only --threads "$THREADS" --queue-depth 8 --io-size 1M \
      --slots 4 --duration "$DURATION" --peer fio --quiet --json "$OUT/b-peer-fio.json" >>"$LOG" 2>&1
    json_parts+=("$OUT/b-peer-fio.json")
  fi

  say "peers on the same files"
  # shellcheck disable=SC2086
  timeout 60 bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/rig/peers.py raw --direct --threads "$THREADS" $files >>"$LOG" 2>&1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/rig/peers.py kvikio --threads 8 $files >>"$LOG" 2>&1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/rig/peers.py kvikio --threads 16 --task-mib 4 $files >>"$LOG" 2>&1

  say "staged sweep"
  timeout 200 $SC bench "$DS" --engine staged --sweep --threads 32 --sweep-io-sizes 256K,1M,4M \
    --duration 2 --quiet --plot "$OUT/sweep.png" --json "$OUT/b-sweep.json" >>"$LOG" 2>&1
  json_parts+=("$OUT/b-sweep.json")

  if [ -z "${SKIP_ROOT:-}" ]; then
    local RDS=/var/tmp/sc-root-ds
    say "cold root disk: dataset of 4 frames x 512 MiB in $RDS"
    $DATA generate "$RDS" --frames 4 --frame-size 512M --lanes 1 >>"$LOG" 2>&1
    local rfiles
    rfiles=$(find "$RDS" -name '*.sclane' | sort)
    # shellcheck disable=SC2086
    timeout 120 python3 scripts/rig/peers.py raw --direct --cold --threads 16 $rfiles >>"$LOG" 2>&1
    for p in cpu-only staged gds; do
      say "cold root disk --engine $p"
      timeout 120 $SC bench "$RDS" --engine "$p" --cold --frames-once --threads 16 --quiet --json "$OUT/b-root-$p.json" >>"$LOG" 2>&1
      json_parts+=("$OUT/b-root-$p.json")
    done
  fi

  fi

  if [ -z "${SKIP_RENDER:-}" ]; then
    # Renderer timings on a ~1 GB Float storm frame and its Fp8 version (same resolution),
    # then the lane dataset's frame at 1920x1080 as a picture.
    local RF=/var/tmp/sc-render-float R8=/var/tmp/sc-render-fp8 res
    say "renderer: 1 GB Float frame and its Fp8 version"
    $DATA generate "$RF" --frames 2 --frame-size 1G --grid-type float --lanes 1 >>"$LOG" 2>&1
    res=$(grep -o 'resolution [0-9]*' "$LOG" | tail -1 | awk '{print $2}')
    $DATA generate "$R8" --frames 2 --resolution "$res" --grid-type fp8 --lanes 1 >>"$LOG" 2>&1
    for d in "$RF" "$R8"; do
      say "render --bench $(basename "$d") (1 and 3 attributes)"
      timeout 150 $SC render "$d" --frame 1 --bench --bench-sizes 1280x720,1920x1080,3840x2160 \
        --bench-frames 10 --attributes cloud --bench-json "$OUT/r-$(basename "$d")-1.json" >>"$LOG" 2>&1
      timeout 150 $SC render "$d" --frame 1 --bench --bench-sizes 1920x1080,3840x2160 \
        --bench-frames 10 --attributes cloud,rain,wind_speed --bench-json "$OUT/r-$(basename "$d")-3.json" >>"$LOG" 2>&1
      json_parts+=("$OUT/r-$(basename "$d")-1.json" "$OUT/r-$(basename "$d")-3.json")
    done
    # What the march's knobs cost: half-voxel base steps, no shadows (1080p, three attributes).
    say "render --bench knobs: --step 0.5; --no-shadows"
    timeout 100 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 10 \
      --attributes cloud,rain,wind_speed --step 0.5 >>"$LOG" 2>&1
    timeout 100 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 10 \
      --attributes cloud,rain,wind_speed --no-shadows >>"$LOG" 2>&1
    timeout 100 $SC render "$RF" --frame 1 --size 1920x1080 --out "$OUT/render" >>"$LOG" 2>&1
    # Reference for the picture: quarter-voxel fixed steps, no skipping.
    timeout 200 $SC render "$RF" --frame 1 --size 1920x1080 --step 0.25 --no-hdda --out "$OUT/render-ref" >>"$LOG" 2>&1
    rm -rf "$RF" "$R8"
  fi
  if [ -n "${ONLY_RENDER:-}" ]; then
    say "interop GPU tests"
    RUST_BACKTRACE=1 timeout 300 .dev/interop_gpu --ignored --test-threads 1 --nocapture \
      >"$OUT/gpu-tests.txt" 2>&1
    echo "interop tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
  fi

  # One JSON file with every run (the result folder takes 8 files at most).
  python3 - "$OUT/bench.json" "${json_parts[@]}" <<'PY'
import json, os, sys
out, parts = sys.argv[1], sys.argv[2:]
runs = {}
for p in parts + [os.path.join(os.path.dirname(out), "generate.json")]:
    if os.path.exists(p):
        with open(p) as f:
            runs[os.path.basename(p)[:-5]] = json.load(f)
        os.remove(p)
with open(out, "w") as f:
    json.dump(runs, f)
PY
  grep -E "^(==|IoType|engine:|slots:|play: slots:|read latency|[0-9]+ runs:|fallback|cuFile live|throughput|verify|peer=|fio before|fio after|supercell: |ratio supercell|all jobs|note|/var/tmp|resolution|real|  *[0-9]+x[0-9]+)" "$LOG" >"$OUT/summary.txt"
  bash scripts/rig/lanes.sh down >/dev/null 2>&1 || true
  ls -la "$OUT"
}

# Verified against unverified streaming on the 16-lane rig, beside fio's ceiling, and the
# GPU test binaries' exit status (every binary must exit 0, not die in cuFile's teardown).
# Knobs: LANES (16), LANE_GIB (3), FRAMES (12), FRAME_SIZE (1G = 1 GiB), THREADS (16), DURATION (8),
# PLAY_FRAMES (96), SKIP_TESTS=1, SKIP_BENCH=1 (one call is limited to 10 minutes).
verify_run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local FRAMES=${FRAMES:-12} FRAME_SIZE=${FRAME_SIZE:-1G} LANES=${LANES:-16} LANE_GIB=${LANE_GIB:-3}
  local THREADS=${THREADS:-16} DURATION=${DURATION:-8}
  local SC=.dev/supercell DATA=.dev/supercell-data DS=/var/tmp/sc-lanes-ds
  local LOG="$OUT/verify.txt"
  : >"$LOG"
  say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  bash scripts/rig/lanes.sh up "$LANES" "$LANE_GIB" >>"$LOG" 2>&1
  nvidia-smi -L >>"$LOG" 2>&1 || true
  say "generate $FRAMES frames of $FRAME_SIZE over $LANES lanes"
  ( time $DATA generate "$DS" --frames "$FRAMES" --frame-size "$FRAME_SIZE" --lanes /mnt/lanes ) >>"$LOG" 2>&1
  local files
  files=$(find /mnt/lanes -name '*.sclane' | sort)
  say "ceiling (fio)"
  # shellcheck disable=SC2086
  bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
  if [ -z "${SKIP_TESTS:-}" ]; then
    say "ingest GPU tests (with the exit-status test)"
    SUPERCELL_TEST_DATASET="$DS" SUPERCELL_BIN="$PWD/.dev/supercell" RUST_BACKTRACE=1 timeout 300 \
      .dev/ingest_gpu --ignored --test-threads 1 --nocapture >"$OUT/gpu-tests.txt" 2>&1
    echo "ingest_gpu exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    SUPERCELL_TEST_DIR=/mnt/lanes/0 RUST_BACKTRACE=1 timeout 120 .dev/ingest_faults --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "ingest_faults exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    SUPERCELL_BIN="$PWD/.dev/supercell" RUST_BACKTRACE=1 timeout 120 .dev/alloc_limits --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "alloc_limits exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    RUST_BACKTRACE=1 timeout 300 .dev/interop_gpu --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "interop_gpu exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    SUPERCELL_TEST_DATASET="$DS" RUST_BACKTRACE=1 timeout 240 .dev/play --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "play gpu tests exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    # One bench job per GPU: two staged engines on GPU 0 at once, and one per GPU present.
    SUPERCELL_BIN="$PWD/.dev/supercell" RUST_BACKTRACE=1 timeout 120 .dev/bench_gpus --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "bench_gpus exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    # The player on two GPUs (two players of GPU 0 where there is one; SUPERCELL_TEST_GPUS=0,1
    # names others): the direct and host paths presented in order, jumps exact.
    SUPERCELL_BIN="$PWD/.dev/supercell" SUPERCELL_TEST_DATASET="$DS" RUST_BACKTRACE=1 timeout 240 .dev/play_gpus --ignored --test-threads 1 --nocapture >>"$OUT/gpu-tests.txt" 2>&1
    echo "play_gpus exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
    # The path tracer's and the part binding's tests (lavapipe in CI) on the NVIDIA driver.
    XDG_RUNTIME_DIR=$(mktemp -d) RUST_BACKTRACE=1 timeout 200 .dev/render_path --test-threads 1 >>"$OUT/gpu-tests.txt" 2>&1
    echo "render_path exit code: $?" | tee -a "$LOG" "$OUT/gpu-tests.txt"
  fi
  [ -n "${SKIP_BENCH:-}" ] || for p in cpu-only staged gds; do
    for v in "" --verify; do
      say "bench --engine $p $v (${DURATION}s, $THREADS threads)"
      timeout 120 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
        --slots 4 --duration "$DURATION" $v --quiet --json "$OUT/b-$p${v:+-verify}.json" >>"$LOG" 2>&1
      echo "exit code: $?" >>"$LOG"
    done
  done
  # fio on the same lane files, before and after supercell, in the same command (issue 26):
  # the ratio a storage engineer checks first. fio from $FIO, PATH or .dev/fio.
  local fio=${FIO:-$(command -v fio || true)}
  [ -n "$fio" ] || { [ -x .dev/fio ] && fio=$PWD/.dev/fio; }
  if [ -z "${SKIP_BENCH:-}" ] && [ -n "$fio" ]; then
    for p in cpu-only staged; do
      say "bench --engine $p --peer fio (${DURATION}s, $THREADS threads)"
      timeout 150 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
        --slots 4 --duration "$DURATION" --peer "fio=$fio" --json "$OUT/b-peer-$p.json" >>"$LOG" 2>&1
      echo "exit code: $?" >>"$LOG"
    done
  fi
  if [ -z "${SKIP_BENCH:-}" ]; then
    for v in "" --verify; do
      say "play --headless --path both --frames ${PLAY_FRAMES:-96} $v"
      timeout 200 $SC play "$DS" --headless --path both --frames "${PLAY_FRAMES:-96}" --threads "$THREADS" \
        --size 1920x1080 $v --json "$OUT/play${v:+-verify}.json" \
        --screenshot "$OUT/player${v:+-verify}.png" >>"$LOG" 2>&1
      echo "exit code: $?" >>"$LOG"
    done
  fi
  combine_json verify "b-*.json" "play*.json"
  bash scripts/rig/lanes.sh down >/dev/null 2>&1 || true
  ls -la "$OUT"
}

# Seed-scale frames: ~7 GB frames with every attribute on the 16-lane rig, beside fio's
# ceiling: bench on each engine, the player headless on both paths (the direct path's
# default engine, then cuFile forced), scrub jumps, memory over the run; then the generator's
# speed on 1 GB Fp16 frames. Knobs: LANES (16), LANE_GIB (3), FRAMES (6), FRAME_SIZE (7GB),
# GEN_ARGS (--attributes all), RESOLUTION (unset: picked from FRAME_SIZE; 1952 gives ~7 GB
# frames with every attribute and skips the picker's census), THREADS (16), DURATION (10),
# PLAY_FRAMES (24), HOST_VARIANTS=1 (the host path's routes and host memory pages compared:
# play-host-{auto,ring}-hp{1,0}.json, and the first again as play-host-auto-hp1-again.json).
large_run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local FRAMES=${FRAMES:-6} FRAME_SIZE=${FRAME_SIZE:-7GB} LANES=${LANES:-16} LANE_GIB=${LANE_GIB:-3}
  local THREADS=${THREADS:-16} DURATION=${DURATION:-10} GEN_ARGS=${GEN_ARGS:---attributes all}
  local SC=.dev/supercell DATA=.dev/supercell-data DS=/var/tmp/sc-large-ds
  local LOG="$OUT/large.txt"
  : >"$LOG"
  say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  bash scripts/rig/lanes.sh up "$LANES" "$LANE_GIB" >>"$LOG" 2>&1
  # Peak memory too, where GNU time is installed.
  timev() { if [ -x /usr/bin/time ]; then /usr/bin/time -v "$@"; else time "$@"; fi; }
  say "generate $FRAMES frames of $FRAME_SIZE over $LANES lanes ($GEN_ARGS)"
  # shellcheck disable=SC2086
  local size_args=(--frame-size "$FRAME_SIZE")
  [ -z "${RESOLUTION:-}" ] || size_args=(--resolution "$RESOLUTION")
  ( timev $DATA generate "$DS" --frames "$FRAMES" "${size_args[@]}" --lanes /mnt/lanes \
      $GEN_ARGS --json "$OUT/generate.json" ) >>"$LOG" 2>&1
  echo "generate exit code: $?" | tee -a "$LOG"
  $SC info "$DS" >>"$LOG" 2>&1
  [ "${SETTLE:-1}" = 0 ] || settle "$LOG"
  local files
  files=$(find /mnt/lanes -name '*.sclane' | sort)
  say "ceiling (fio)"
  # shellcheck disable=SC2086
  bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
  for p in cpu-only staged gds; do
    say "bench --engine $p (${DURATION}s, $THREADS threads)"
    timeout 150 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
      --duration "$DURATION" --quiet --json "$OUT/b-$p.json" >>"$LOG" 2>&1
    echo "exit code: $?" >>"$LOG"
  done
  say "play --headless --path both --frames ${PLAY_FRAMES:-24} (direct engine: auto)"
  timeout 240 $SC play "$DS" --headless --path both --frames "${PLAY_FRAMES:-24}" --threads "$THREADS" \
    --size 1920x1080 --json "$OUT/play.json" --screenshot "$OUT/player-7gb.png" >>"$LOG" 2>&1
  echo "exit code: $?" >>"$LOG"
  say "play --headless --path direct --direct-engine gds --frames ${PLAY_FRAMES:-24}"
  timeout 200 $SC play "$DS" --headless --path direct --direct-engine gds --frames "${PLAY_FRAMES:-24}" \
    --threads "$THREADS" --size 1920x1080 --json "$OUT/play-gds.json" >>"$LOG" 2>&1
  echo "exit code: $?" >>"$LOG"
  if [ "${HOST_VARIANTS:-0}" = 1 ]; then
    # The host path alone, each run a fresh process: host slots imported into Vulkan (the
    # default route) against a small ring of imported host buffers (--host-copy ring), each
    # on huge pages and on 4 KiB pages (SUPERCELL_HOST_HUGEPAGES). The first variant runs
    # again last, so an order effect (memory left dirty by the generator) shows.
    local variant copy hp name
    for variant in auto:1 ring:1 auto:0 ring:0 auto:1; do
      copy=${variant%:*} hp=${variant#*:} name="play-host-$copy-hp$hp"
      [ -e "$OUT/$name.json" ] && name="$name-again"
      say "play --headless --path host --host-copy $copy, SUPERCELL_HOST_HUGEPAGES=$hp, --frames ${PLAY_FRAMES:-24}"
      SUPERCELL_HOST_HUGEPAGES=$hp timeout 200 $SC play "$DS" --headless --path host \
        --host-copy "$copy" --frames "${PLAY_FRAMES:-24}" --threads "$THREADS" --size 1920x1080 \
        --json "$OUT/$name.json" >>"$LOG" 2>&1
      echo "exit code: $?" >>"$LOG"
    done
  fi
  bash scripts/rig/lanes.sh down >/dev/null 2>&1 || true
  rm -rf "$DS"
  say "generator speed: 4 frames of 1 GB, Fp16, default attributes, $(nproc) threads, /dev/shm"
  ( timev $DATA generate /dev/shm/sc-gen --frames 4 --frame-size 1G --lanes 1 ) >>"$LOG" 2>&1
  rm -rf /dev/shm/sc-gen
  say "generator speed: 1 frame of 7 GB, Fp16, $GEN_ARGS"
  # shellcheck disable=SC2086
  ( timev $DATA generate /dev/shm/sc-gen --frames 1 "${size_args[@]}" --lanes 1 $GEN_ARGS ) >>"$LOG" 2>&1
  rm -rf /dev/shm/sc-gen
  combine_json large "b-*.json" "play*.json" generate.json
  ls -la "$OUT"
}

# 1 GB frames on the same 16-lane rig as `large`, against the same kind of ceiling: the host
# path's two routes (host slots imported into Vulkan, the default; --host-copy ring) and the
# direct path, each its own process, beside fio and the raw O_DIRECT peer; scrub jumps and
# memory come in each play JSON. Knobs: LANES (16), LANE_GIB (3), FRAMES (32), THREADS (16),
# DURATION (10), PLAY_FRAMES (96).
onegb_run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local FRAMES=${FRAMES:-32} LANES=${LANES:-16} LANE_GIB=${LANE_GIB:-3}
  local THREADS=${THREADS:-16} DURATION=${DURATION:-10}
  local SC=.dev/supercell DATA=.dev/supercell-data DS=/var/tmp/sc-1g-ds
  local LOG="$OUT/onegb.txt"
  : >"$LOG"
  say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  bash scripts/rig/lanes.sh up "$LANES" "$LANE_GIB" >>"$LOG" 2>&1
  say "generate $FRAMES frames of 1 GB over $LANES lanes (default attributes)"
  ( time $DATA generate "$DS" --frames "$FRAMES" --frame-size 1G --lanes /mnt/lanes \
      --json "$OUT/generate-1g.json" ) >>"$LOG" 2>&1
  echo "generate exit code: $?" | tee -a "$LOG"
  settle "$LOG"
  local files
  files=$(find /mnt/lanes -name '*.sclane' | sort)
  say "ceiling (fio)"
  # shellcheck disable=SC2086
  bash scripts/rig/ceiling.sh $files >>"$LOG" 2>&1
  say "peer: raw O_DIRECT reads"
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/rig/peers.py raw --direct --threads "$THREADS" $files >>"$LOG" 2>&1
  for p in cpu-only staged; do
    say "bench --engine $p (${DURATION}s, $THREADS threads)"
    timeout 120 $SC bench "$DS" --engine "$p" --threads "$THREADS" --queue-depth 8 --io-size 1M \
      --duration "$DURATION" --quiet --json "$OUT/b1g-$p.json" >>"$LOG" 2>&1
    echo "exit code: $?" >>"$LOG"
  done
  local variant path copy name
  for variant in host:auto host:ring direct:auto; do
    path=${variant%:*} copy=${variant#*:} name="play1g-$path-$copy"
    say "play --headless --path $path --host-copy $copy --frames ${PLAY_FRAMES:-96} (1 GB frames)"
    timeout 150 $SC play "$DS" --headless --path "$path" --host-copy "$copy" --frames "${PLAY_FRAMES:-96}" \
      --threads "$THREADS" --size 1920x1080 --json "$OUT/$name.json" >>"$LOG" 2>&1
    echo "exit code: $?" >>"$LOG"
  done
  bash scripts/rig/lanes.sh down >/dev/null 2>&1 || true
  rm -rf "$DS"
  combine_json onegb "b1g-*.json" "play1g-*.json" generate-1g.json
  ls -la "$OUT"
}

# The picture: the built-in storm's story frames (scenes/storm.toml's camera path) and the
# tornado close-up at 1920x1080, the path tracer's convergence at 1080p against a 1024-sample
# reference of itself, a path-traced storm frame (cloud only, Mitsuba's comparison scene) as
# linear radiance for scripts/mitsuba_compare.py, and the march's cost with the lighting on a
# ~1 GB frame (1 and 3 attributes). Knobs: CONVERGE_SPP (1024) and CONVERGE_TIMEOUT (170 s: raise it
# for a 4096-sample reference), MITSUBA_RES (192: the
# comparison frame's resolution), PATH_SPP (4096), CLOSEUP_SPP (128).
picture_run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local SC=.dev/supercell DATA=.dev/supercell-data LOG="$OUT/picture.txt"
  local P=/var/tmp/sc-pictures MD=/var/tmp/sc-mitsuba RF=/var/tmp/sc-render-1g
  : >"$LOG"
  say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  export SUPERCELL_CACHE=/var/tmp/sc-cache
  rm -rf "$P" && mkdir -p "$P/story" "$P/path"
  say "built-in storm (generated on first use) and its story frames at 1920x1080"
  ( time $SC render scenes/storm.toml --frame 8 --path-time 0 --size 1920x1080 --out "$P/story" ) >>"$LOG" 2>&1
  local ft
  for ft in "17 5.5" "28 9.5" "40 13"; do
    set -- $ft
    $SC render scenes/storm.toml --frame "$1" --path-time "$2" --size 1920x1080 --out "$P/story" >>"$LOG" 2>&1
  done
  $SC render scenes/tornado-closeup.toml --frame 28 --size 1920x1080 --out "$P/story/closeup" >>"$LOG" 2>&1
  say "path tracer: convergence at 1920x1080 (touchdown frame) against ${CONVERGE_SPP:-1024} samples"
  timeout "${CONVERGE_TIMEOUT:-170}" $SC render scenes/storm.toml --frame 17 --path-time 5.5 --mode path --size 1920x1080 \
    --converge "${CONVERGE_SPP:-1024}" --out "$P/converge" >>"$LOG" 2>&1
  echo "converge exit code: $?" | tee -a "$LOG"
  cp "$P/converge/converge.json" "$OUT/converge.json" 2>/dev/null
  say "path tracer: close-up, 1920x1080, ${CLOSEUP_SPP:-128} samples"
  timeout 90 $SC render scenes/tornado-closeup.toml --frame 28 --mode path --spp "${CLOSEUP_SPP:-128}" --size 1920x1080 \
    --out "$P/path/closeup" >>"$LOG" 2>&1
  say "path tracer: Mitsuba's comparison scene (storm cloud, resolution ${MITSUBA_RES:-192}), 960x540, ${PATH_SPP:-4096} samples"
  rm -rf "$MD" && mkdir -p "$MD"
  $DATA generate "$MD/ds" --frames 1 --resolution "${MITSUBA_RES:-192}" --attributes cloud --grid-type float \
    --lanes 1 --seed 7 >>"$LOG" 2>&1
  cp "$MD/ds/manifest.json" "$P/path/mitsuba-manifest.json" 2>/dev/null
  cp scripts/mitsuba-storm.toml "$MD/scene.toml"
  timeout 120 $SC render "$MD/scene.toml" --mode path --spp "${PATH_SPP:-4096}" --max-bounces 16 --denoise off --linear \
    --size 960x540 --out "$P/path/mitsuba" >>"$LOG" 2>&1
  echo "mitsuba scene exit code: $?" | tee -a "$LOG"
  say "march cost with the lighting: 1 GB storm frame, 1920x1080, 1 and 3 attributes"
  $DATA generate "$RF" --frames 2 --frame-size 1G --lanes 1 >>"$LOG" 2>&1
  timeout 120 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 20 --attributes cloud \
    --bench-json "$OUT/r-1.json" >>"$LOG" 2>&1
  timeout 120 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 20 \
    --attributes cloud,rain,wind_speed --bench-json "$OUT/r-3.json" >>"$LOG" 2>&1
  rm -rf "$RF"
  # One JSON (the result folder takes 8 files at most).
  combine_json picture converge.json r-1.json r-3.json
  tar -C "$P" -czf "$OUT/story.tgz" story
  tar -C "$P" -czf "$OUT/path.tgz" path
  ls -la "$OUT"
}

# The renderer's speed switches, each against the defaults in its own process: the path
# tracer's kernel knobs (src/render/path_tracer.rs, `TracerKnobs`; docs/SETTINGS.md) on the storm at
# touchdown, 1080p, 128 samples per pixel (M samples/s from the "path traced" line), and the
# march with its defaults (1 GB frame, 1080p, three attributes and one; its switches lost
# their measurements and were deleted, docs/PERFORMANCE.md). Also the
# denoiser's and the renderer's GPU == CPU tests on this GPU.
knobs_run() {
  OUT=${OUT:-/tmp/supercell-out}; mkdir -p "$OUT"
  local SC=.dev/supercell DATA=.dev/supercell-data LOG="$OUT/knobs.txt" RF=/var/tmp/sc-render-1g
  : >"$LOG"
  say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
  # shellcheck source=scripts/rig/env.sh
  source scripts/rig/env.sh
  export SUPERCELL_CACHE=/var/tmp/sc-cache
  local k
  local path_variants=(X=defaults SUPERCELL_PATH_SKIP_LEVELS=0
    SUPERCELL_PATH_CARRY_DEPTH=0 SUPERCELL_PATH_COUNTERS=always SUPERCELL_PATH_CELL_CACHE=1
    SUPERCELL_PATH_SAMPLES_PER_DISPATCH=4 SUPERCELL_PATH_SAMPLES_PER_DISPATCH=16
    "SUPERCELL_PATH_SKIP_LEVELS=0 SUPERCELL_PATH_CARRY_DEPTH=0 SUPERCELL_PATH_COUNTERS=always")
  # PATH_VARIANTS / MARCH_VARIANTS: a ;-separated list replacing the lists below.
  if [ -n "${PATH_VARIANTS:-}" ]; then IFS=';' read -r -a path_variants <<<"$PATH_VARIANTS"; fi
  local march_variants=(X=defaults)
  if [ -n "${MARCH_VARIANTS:-}" ]; then IFS=';' read -r -a march_variants <<<"$MARCH_VARIANTS"; fi
  for k in "${path_variants[@]}"; do
    say "path knobs: $k"
    # shellcheck disable=SC2086
    env $k timeout 60 $SC render scenes/storm.toml --frame 17 --path-time 5.5 --mode path --size 1920x1080 \
      --spp "${KNOB_SPP:-128}" --out /var/tmp/sc-knobs >>"$LOG" 2>&1
  done
  say "march: 1 GB frame, 1920x1080, three attributes and one"
  $DATA generate "$RF" --frames 2 --frame-size 1G --lanes 1 >>"$LOG" 2>&1
  for k in "${march_variants[@]}"; do
    say "march knobs: $k"
    # shellcheck disable=SC2086
    env $k timeout 100 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 20 \
      --attributes cloud,rain,wind_speed >>"$LOG" 2>&1
    # shellcheck disable=SC2086
    env $k timeout 100 $SC render "$RF" --frame 1 --bench --bench-sizes 1920x1080 --bench-frames 20 \
      --attributes cloud >>"$LOG" 2>&1
  done
  rm -rf "$RF"
  say "denoiser test on this GPU"
  RUST_BACKTRACE=1 timeout 200 .dev/render_denoise --test-threads 1 >>"$LOG" 2>&1
  echo "render_denoise exit code: $?" | tee -a "$LOG"
  say "renderer tests (GPU == CPU reference) on this GPU"
  SUPERCELL_BIN="$PWD/.dev/supercell" RUST_BACKTRACE=1 timeout 200 .dev/render_gpu --test-threads 1 >>"$LOG" 2>&1
  echo "render_gpu exit code: $?" | tee -a "$LOG"
}

case "${1:-run}" in
  prepare) prepare ;;
  run) run ;;
  verify) verify_run ;;
  large) large_run ;;
  picture) picture_run ;;
  onegb) onegb_run ;;
  knobs) knobs_run ;;
  *) echo "usage: gpu-tests.sh prepare | run | verify | large | onegb | picture | knobs" >&2; exit 2 ;;
esac
