#!/bin/bash
set -euo pipefail
cat > /app/rotate.sh <<'SH'
#!/bin/bash
set -euo pipefail
dir=$1 max=$2 keep=$3
shopt -s nullglob
for f in "$dir"/*.log; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  size=$(stat -c %s -- "$f")
  [ "$size" -gt "$max" ] || continue
  for old in "$f".*.gz; do
    n=${old#"$f".}; n=${n%.gz}
    case $n in ''|*[!0-9]*) continue ;; esac
    [ "$n" -ge "$keep" ] && rm -f -- "$old"
  done
  for ((n = keep - 1; n >= 2; n--)); do
    [ -e "$f.$n.gz" ] && mv -- "$f.$n.gz" "$f.$((n + 1)).gz"
  done
  if [ -e "$f.1" ]; then
    gzip -c -- "$f.1" > "$f.2.gz"
    rm -f -- "$f.1"
  fi
  mode=$(stat -c %a -- "$f")
  mv -- "$f" "$f.1"
  : > "$f"
  chmod "$mode" -- "$f"
  echo "rotated ${f##*/}"
done
exit 0
SH
chmod +x /app/rotate.sh
