#!/bin/bash
# The newest GLIBC_ symbol version the binary needs is the oldest glibc it runs on.
mkdir -p /solution
min=$(objdump -T /workspace/app/legacy_service | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' \
      | sort -t. -k1,1n -k2,2n -k3,3n | tail -1 | cut -d. -f1,2)
min=${min:-2.0}
if [ "$(printf '%s\n2.17\n' "$min" | sort -t. -k1,1n -k2,2n | tail -1)" = "2.17" ]; then works=YES; else works=NO; fi
printf 'MIN_GLIBC=%s\nWORKS_ON_2_17=%s\n' "$min" "$works" > /solution/compatibility.txt
