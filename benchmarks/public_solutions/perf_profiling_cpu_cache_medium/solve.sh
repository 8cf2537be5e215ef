#!/bin/bash
# misses / references from the perf counters, and the severity class of that rate.
python3 - <<'PY'
import re
text = open("/workspace/cache_stats.txt").read()
def counter(name):
    return int(re.search(r"^\s*([\d,]+)\s+" + name + r"\b", text, re.M).group(1).replace(",", ""))
rate = 100.0 * counter("cache-misses") / counter("cache-references")
severity = "GOOD" if rate < 5 else "MODERATE" if rate <= 15 else "POOR"
open("/workspace/result.txt", "w").write(f"miss_rate={rate:.2f}\nseverity={severity}\n")
PY
