#!/bin/bash
# LRU cache of capacity 100 over /tmp/position_requests.txt; hits refresh recency.
python3 - <<'PY'
from collections import OrderedDict
cap, cache, hits, misses = 100, OrderedDict(), 0, 0
with open("/tmp/position_requests.txt") as f:
    for line in f:
        parts = line.split()
        if len(parts) < 2:
            continue
        pos, score = parts[0], int(parts[1])
        if pos in cache:
            hits += 1
            cache.move_to_end(pos)
        else:
            misses += 1
            cache[pos] = score
            if len(cache) > cap:
                cache.popitem(last=False)
with open("/tmp/cache_stats.txt", "w") as f:
    f.write(f"HITS={hits}\nMISSES={misses}\nFINAL_SIZE={len(cache)}\n")
PY
cat /tmp/cache_stats.txt
