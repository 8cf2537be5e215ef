#!/bin/bash
# Hops with any packet loss or an average latency over 100 ms.
awk '$1 ~ /^[0-9]+$/ && NF >= 9 { loss = $3; sub(/%/, "", loss); if (loss + 0 > 0 || $7 + 0 > 100) print $1 }' \
    /home/agent/network_trace.txt | sort -n | paste -sd, - > /home/agent/problem_hops.txt
[ -s /home/agent/problem_hops.txt ] || echo none > /home/agent/problem_hops.txt
