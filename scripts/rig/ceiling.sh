#!/usr/bin/env bash
# The storage ceiling of a set of files, measured by fio: all files read at once with
# io_uring and O_DIRECT into host memory. Report supercell's figures as ratios of this
# (a program's own fastest path is not a ceiling).
#
#   bash scripts/rig/ceiling.sh [--bs 4M] [--jobs-per-file 2] [--iodepth 16] [--runtime 6] FILE...
#
# Prints one line: 'peer=fio bs=4M jobs_per_file=2 GBps=24.31' (GB = 10^9 bytes).
#
# fio: the one named by $FIO, else `fio` on PATH (Debian/Ubuntu: apt install fio), else
# .dev/fio (a static build carried to a machine without packages: in a checkout of
# https://github.com/axboe/fio, `./configure --build-static && make`, then copy `fio` to
# .dev/). fio 3.x built with io_uring support is needed.
set -euo pipefail
bs=4M jobs=2 depth=16 runtime=6
while [ $# -gt 0 ]; do
  case "$1" in
    --bs) bs=$2; shift 2 ;;
    --jobs-per-file) jobs=$2; shift 2 ;;
    --iodepth) depth=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "ceiling.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: ceiling.sh [--bs 4M] [--jobs-per-file 2] [--iodepth 16] [--runtime 6] FILE..." >&2; exit 2; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
fio=${FIO:-}
if [ -z "$fio" ]; then
  if command -v fio >/dev/null; then
    fio=$(command -v fio)
  elif [ -x "$repo/.dev/fio" ]; then
    fio=$repo/.dev/fio
  else
    echo "peer=fio unavailable: install fio (apt install fio) or put a static build at .dev/fio (see scripts/rig/ceiling.sh)" >&2
    exit 3
  fi
fi

[ -x "$fio" ] || { echo "peer=fio unavailable: $fio is not an executable" >&2; exit 3; }

jobfile=()
i=0
for f in "$@"; do
  jobfile+=("--name=lane$i" "--filename=$f")
  i=$((i + 1))
done
"$fio" --output-format=json --ioengine=io_uring --direct=1 --rw=read --bs="$bs" \
  --iodepth="$depth" --numjobs="$jobs" --time_based --runtime="$runtime" --group_reporting \
  "${jobfile[@]}" |
  BS="$bs" JOBS="$jobs" python3 -c '
import json, os, sys
text = sys.stdin.read()
# fio may print notes before the JSON document.
if "{" not in text:
    sys.exit("peer=fio failed: no results (see its messages above)")
doc = json.loads(text[text.index("{"):])
bw = sum(j["read"]["bw_bytes"] for j in doc["jobs"])
bs, jobs = os.environ["BS"], os.environ["JOBS"]
print(f"peer=fio bs={bs} jobs_per_file={jobs} GBps={bw / 1e9:.2f}")
'
