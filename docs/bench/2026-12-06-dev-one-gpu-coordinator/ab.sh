#!/usr/bin/env bash
# One GPU headless, the built-in storm (software defaults on lavapipe), 48 frames, host path,
# alternated: the Player (1bc62c9) against the coordinator of one (final head).
set -u
OLD=/tmp/sc-old-1bc62c9 NEW=/tmp/sc-final OUTD=$1
mkdir -p $OUTD
for i in 1 2 3 4 5 6; do
  for b in old new; do
    [ $b = old ] && BIN=$OLD || BIN=$NEW
    /usr/bin/time -f "%U %S %e" -o $OUTD/$b-$i.time $BIN play --headless --frames 48 --path host --scrub-jumps 0 --json $OUTD/$b-$i.json > /dev/null 2> $OUTD/$b-$i.err
    python3 - "$OUTD/$b-$i.json" "$b" "$i" "$(cat /proc/loadavg | cut -d' ' -f1)" <<'PY'
import json,sys
v=json.load(open(sys.argv[1])); p=[x for x in v['paths'] if x.get('ran')][0]
f=p.get('figures') or {}
n=f.get('frames_rendered') or 0
print(sys.argv[2], sys.argv[3], 'load', sys.argv[4], 'frames', n, 'frames/s', round(n/p['wall_s'],2), 'rendered_fps', round(f.get('rendered_fps') or 0,2), 'CPU-s/frame', round(p['cpu_s']/max(n,1),3))
PY
  done
done
