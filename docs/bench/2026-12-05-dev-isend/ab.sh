#!/bin/bash
# BEFORE: supercell (debug, --features mpi) at 69570ed (blocking image send); AFTER: at e98c30e (immediate send).
# DS: supercell-data generate mid --frames 12 --resolution 96 --lanes 2 --chunk-size 1M (12 frames of 2.4-2.7 MB, /tmp on disk).
export XDG_RUNTIME_DIR=/tmp/xdg-$USER
DS=/tmp/soakx/mid; N=48; SZ=640x360; OUT=${OUT:-.}; mkdir -p $OUT
A="--headless --path host --frames $N --scrub-jumps 0 --size $SZ --threads 2"
for i in 1 2 3; do
  date -u +%T > $OUT/t-$i
  $AFTER play $DS $A --json $OUT/one-$i.json > $OUT/one-$i.txt 2>&1
  mpirun --allow-run-as-root --oversubscribe -n 2 $BEFORE play $DS $A --json $OUT/before-two-$i.json > $OUT/before-two-$i.txt 2>&1
  mpirun --allow-run-as-root --oversubscribe -n 2 $AFTER play $DS $A --json $OUT/after-two-$i.json > $OUT/after-two-$i.txt 2>&1
done
date -u +%T > $OUT/t-end
