#!/usr/bin/env bash
# The same generator on the 16-core GPU machine (built with --no-default-features: no
# libnetcdf there), to /dev/shm on 4 lanes: 1 GB frames one and two at a time, 4.6 GB frames.
# Usage: h200.sh BINARY OUTDIR
set -u
bin=$1 out=$2
nproc; free -g | head -2
run() {
    local label=$1; shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -v "$bin" generate /dev/shm/$label --lanes 4 --json "$out/$label.json" \
            "$@" > "$out/$label.stdout" 2> "$out/$label.time"
        echo "$label: exit $? $(tail -1 "$out/$label.stdout")"
        grep -E "Maximum resident|Elapsed|User time|System time" "$out/$label.time"
    else
        # No GNU time: the peak from /proc while it runs (VmHWM, sampled every 0.2 s).
        "$bin" generate /dev/shm/$label --lanes 4 --json "$out/$label.json" "$@" \
            > "$out/$label.stdout" 2> "$out/$label.stderr" &
        local pid=$! hwm=0
        while kill -0 $pid 2>/dev/null; do
            h=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
            [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
            sleep 0.2
        done
        wait $pid
        echo "$label: exit $? $(tail -1 "$out/$label.stdout"); VmHWM ${hwm} kB" | tee "$out/$label.time"
    fi
    rm -rf /dev/shm/$label
}
run h200-1424-16frames-w1 --resolution 1424 --frames 16
run h200-1424-16frames-w2 --resolution 1424 --frames 16 --frames-in-flight 2
run h200-2368-4frames --resolution 2368 --frames 4
