#!/bin/bash
# p99 latency of each endpoint's wrk2 output (converted to ms); the worst one.
python3 - <<'PY'
import glob, json, os, re
UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
p99 = {}
for path in sorted(glob.glob("/workspace/benchmarks/endpoint_*_benchmark.txt")):
    name = os.path.basename(path)[len("endpoint_"):-len("_benchmark.txt")]
    m = re.search(r"^\s*99\.0+%\s+([\d.]+)(us|ms|s|m)\b", open(path).read(), re.M)
    if m:
        p99[name] = float(m.group(1)) * UNIT[m.group(2)]
worst = max(p99, key=p99.get)
json.dump({"worst_endpoint": worst, "worst_p99_latency_ms": round(p99[worst], 2),
           "total_endpoints_analyzed": len(p99)}, open("/tmp/benchmark_analysis.json", "w"), indent=2)
PY
