#!/bin/bash
# extract_records.sh INPUT OUTPUT
# Copies every record line of INPUT to OUTPUT, byte for byte, in order, and prints
# "processed N records". Blank lines and comment lines (first non-blank character '#')
# are skipped.
in=$1
out=$2
count=0
: > "$out"
cat "$in" | while read line; do
  case "$line" in
    ""|\#*) continue ;;
  esac
  echo $line >> "$out"
  count=$((count + 1))
done
echo "processed $count records"
