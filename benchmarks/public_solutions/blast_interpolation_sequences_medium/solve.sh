#!/bin/bash
# Count the logs that report a violation, sum the interpolant totals, take the longest trace.
cd /workspace
python3 - <<'PY'
import glob, re
violations = interpolants = longest = 0
for path in sorted(glob.glob("/workspace/blast_logs/verification_*.log")):
    text = open(path).read()
    if re.search(r"Property violation (found|detected)|Analysis Result: UNSAFE", text):
        violations += 1
    m = re.search(r"Total interpolants computed:\s*(\d+)", text)
    interpolants += int(m.group(1)) if m else len(re.findall(r"Interpolant at location", text))
    for n in re.findall(r"Trace length:\s*(\d+)", text):
        longest = max(longest, int(n))
with open("/workspace/summary.txt", "w") as f:
    f.write(f"violations={violations}\ntotal_interpolants={interpolants}\nmax_trace_length={longest}\n")
PY
