#!/bin/bash
# Run the benchmark for 0, 2, 4 and 8 workers, parse "Total time: X seconds" from
# each run, and record the fastest configuration.
cd /workspace
set -e
best_w=""; best_t=""
for w in 0 2 4 8; do
    out=$(python /workspace/benchmark.py --workers "$w")
    echo "$out"
    t=$(printf '%s\n' "$out" | sed -n 's/^Total time: \([0-9.]*\) seconds.*/\1/p' | tail -1)
    [ -n "$t" ] || { echo "no timing for workers=$w" >&2; exit 1; }
    echo "workers=$w -> ${t}s"
    if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN{exit !(a < b)}'; then
        best_w=$w; best_t=$t
    fi
done
printf 'workers=%s\ntime=%.2f\n' "$best_w" "$best_t" > /workspace/optimal_config.txt
cat /workspace/optimal_config.txt
