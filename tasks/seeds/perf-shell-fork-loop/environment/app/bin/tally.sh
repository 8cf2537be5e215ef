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
total=0
bytes=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  ip=$(echo "$line" | cut -d' ' -f1)
  status=$(echo "$line" | awk '{print $9}')
  size=$(echo "$line" | awk '{print $10}')
  [ "$size" = "-" ] && size=0
  total=$((total + 1))
  bytes=$((bytes + size))
  echo "$ip" >> "$tmp/ips"
  echo "$status" >> "$tmp/statuses"
done < "$log"
echo "requests $total"
sort "$tmp/statuses" | uniq -c | awk '{print "status", $2, $1}' | sort -k2,2n
sort "$tmp/ips" | uniq -c | awk '{print "top", $2, $1}' | sort -k3,3nr -k2,2 | head -5
echo "bytes $bytes"
rm -rf "$tmp"
