#!/bin/bash
# 1 process vs mpirun -n 2, alternated, cpu-only engine on tmpfs, same dataset.
BIN=${BIN:-/work/main/target/release/supercell}
DS=/dev/shm/ds
OUT=${OUT:-/work/notes/fig/bench}
mkdir -p $OUT
for i in 1 2 3; do
  $BIN bench $DS --engine cpu-only --duration 8 --quiet --json $OUT/one-$i.json > $OUT/one-$i.txt 2>&1
  mpirun --allow-run-as-root --oversubscribe -n 2 $BIN bench $DS --engine cpu-only --duration 8 --quiet --json $OUT/two-$i.json > $OUT/two-$i.txt 2>&1
done
