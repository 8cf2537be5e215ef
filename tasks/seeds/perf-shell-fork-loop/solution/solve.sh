#!/bin/bash
set -euo pipefail
cat > /app/bin/tally.sh <<'SH'
#!/bin/bash
# tally.sh LOG - summarise an access log in common log format:
#   IP - - [date] "METHOD PATH PROTO" STATUS SIZE
# Output:
#   requests <number of non-empty lines>
#   status <code> <count>       one line per status code, ascending by code
#   top <ip> <count>            the 5 most frequent IPs, by count desc, then IP ascending
#   bytes <sum of SIZE, where "-" counts as 0>
export LC_ALL=C
log=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v dir="$tmp" '
  $0 == "" { next }
  { n++; st[$9]++; ip[$1]++; if ($10 != "-") b += $10 }
  END {
    print "requests " n + 0
    for (s in st) print "status", s, st[s] > (dir "/st")
    for (i in ip) print "top", i, ip[i] > (dir "/ip")
    printf "%.0f\n", b > (dir "/bytes")
  }' "$log" > "$tmp/head"
cat "$tmp/head"
[ -f "$tmp/st" ] && sort -k2,2n "$tmp/st"
[ -f "$tmp/ip" ] && sort -k3,3nr -k2,2 "$tmp/ip" | head -5
echo "bytes $(cat "$tmp/bytes")"
SH
chmod +x /app/bin/tally.sh
