#!/bin/bash
# Trace the failing start and take the first file access that failed with ENOENT outside the
# interpreter's own lookups.
cd /home/agent
strace -f -e trace=open,openat,stat,newfstatat,access -o /tmp/analyzer.trace python3 /opt/loganalyzer/analyzer.py >/dev/null 2>&1
line=$(grep 'ENOENT' /tmp/analyzer.trace | grep -v '/usr/\|/lib\|python3\|\.pyc\|__pycache__\|/proc/\|site-packages\|pyvenv.cfg' | head -1)
syscall=$(echo "$line" | sed -E 's/^[0-9]+ +//; s/\(.*//')
path=$(echo "$line" | grep -o '"/[^"]*"' | head -1 | tr -d '"')
printf 'MISSING_FILE=%s\nSYSCALL=%s\n' "$path" "$syscall" > /home/agent/diagnosis.txt
