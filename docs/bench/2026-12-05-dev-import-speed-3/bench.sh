#!/bin/bash
# usage: bench.sh OUTFILE binA binB [runs]
out=$1; a=$2; b=$3; n=${4:-5}
cd "${BENCH_DIR:-/tmp/s25}"
for i in $(seq $n); do
  for bin in $a $b; do
    rm -rf /tmp/s25/o-$bin
    la=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -v ./$bin import cm1like/cm1out_00000*.nc --out /tmp/s25/o-$bin --wind-speed > /tmp/s25/run.log 2> /tmp/s25/time.log
    rc=$?
    wall=$(grep "Elapsed (wall" /tmp/s25/time.log | awk '{print $NF}')
    u=$(grep "User time" /tmp/s25/time.log | awk '{print $NF}')
    s=$(grep "System time" /tmp/s25/time.log | awk '{print $NF}')
    rss=$(grep "Maximum resident" /tmp/s25/time.log | awk '{print $NF}')
    echo "$(date -u +%H:%M:%S) $bin rc=$rc wall=$wall user=$u sys=$s rssKB=$rss load=$la" | tee -a $out
  done
done
