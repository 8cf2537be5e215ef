#!/bin/bash
set -euo pipefail
cat > /app/bin/extract_records.sh <<'SH'
#!/bin/bash
# extract_records.sh INPUT OUTPUT
# Copies every record line of INPUT to OUTPUT, byte for byte, in order, and prints
# "processed N records". Blank lines and comment lines (first non-blank character '#')
# are skipped.
in=$1
out=$2
count=0
: > "$out"
while IFS= read -r line || [ -n "$line" ]; do
  trimmed=${line#"${line%%[![:blank:]]*}"}
  case "$trimmed" in
    ""|\#*) continue ;;
  esac
  printf '%s\n' "$line" >> "$out"
  count=$((count + 1))
done < "$in"
echo "processed $count records"
SH
chmod +x /app/bin/extract_records.sh
