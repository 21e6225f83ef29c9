#!/usr/bin/env bash
# Peak resident memory and speed of `supercell-data generate` for one resolution.
# Usage: run.sh BINARY LABEL RESOLUTION FRAMES [extra generate flags...]
# Writes LABEL.time (GNU time -v) and LABEL.json (the generator's report) here; the
# dataset goes to $OUT_DIR (default /tmp/memgen, on disk: a tmpfs would hold it in RAM)
# and is removed afterwards.
set -euo pipefail
bin=$1 label=$2 res=$3 frames=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-/tmp/memgen}/$label
rm -rf "$out"
/usr/bin/time -v "$bin" generate "$out" --resolution "$res" --frames "$frames" --lanes 2 \
    --json "$here/$label.json" "$@" 2> "$here/$label.time" >/dev/null || {
    tail -5 "$here/$label.time"; exit 1; }
rm -rf "$out"
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$here/$label.time")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$here/$label.time")
python3 - "$here/$label.json" "$rss_kb" "$wall" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rss = int(sys.argv[2]) * 1024
fmax = r["frame_bytes_max"]
ceiling = 1.5 * fmax + 2**30
print(f'{sys.argv[4]}: res {r["resolution"]}, {r["frames"]} frames, largest frame {fmax/1e9:.3f} GB, '
      f'largest grid {r["largest_grid"]/1e9:.3f} GB, window {r["frames_in_flight"]}, '
      f'peak RSS {rss/2**30:.2f} GiB = {rss/fmax:.2f} x frame (ceiling {ceiling/2**30:.2f} GiB), '
      f'generation {r["elapsed_s"]:.1f} s, {r["gb_per_s"]:.3f} GB/s, wall {sys.argv[3]}')
PY
