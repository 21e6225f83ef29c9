#!/bin/bash
# usage: cmp.sh dirA dirB : compares lane files in lane order
ok=0
for l in 0 1 2 3; do
  fa=$(ls $1/lanes/$l/*.sclane); fb=$(ls $2/lanes/$l/*.sclane)
  cmp "$fa" "$fb" && echo "lane $l identical ($(stat -c %s "$fa") bytes)" || ok=1
done
python3 - "$1" "$2" <<'PY'
import json,sys
a=json.load(open(sys.argv[1]+'/manifest.json')); b=json.load(open(sys.argv[2]+'/manifest.json'))
print('manifest frames identical:', a['frames']==b['frames'], 'attributes identical:', a['attributes']==b['attributes'])
PY
exit $ok
