#!/bin/bash
# Release tarballs in /app/dist (2.3.1 gets corrupted after its checksum was recorded) and an
# existing 2.2.1 installation under /opt/fmtlint.
set -euo pipefail
W=$(mktemp -d)
mk() {
  local v=$1 d="$W/fmtlint-$1"
  mkdir -p "$d/bin" "$d/share" "$d/lib"
  cat > "$d/bin/fmtlint" <<SH
#!/bin/bash
# fmtlint $v
case "\${1:-}" in
  --version) echo "fmtlint $v" ;;
  rules) : "\${FMTLINT_HOME:?FMTLINT_HOME is not set}"; echo "\$(wc -l < "\$FMTLINT_HOME/share/rules.txt") rules in \$FMTLINT_HOME" ;;
  *) echo "usage: fmtlint --version | rules" >&2; exit 2 ;;
esac
SH
  chmod 755 "$d/bin/fmtlint"
  for i in $(seq 1 $((10 + ${v//./} % 7))); do echo "rule-$i: v$v"; done > "$d/share/rules.txt"
  echo "# helper for $v" > "$d/lib/fmtlint.sh"
  echo "fmtlint $v" > "$d/README"
}
mkdir -p /app/dist
for v in 2.2.1 2.3.0 2.3.1; do
  mk $v
  tar -C "$W" -czf "/app/dist/fmtlint-$v.tar.gz" "fmtlint-$v"
done
(cd /app/dist && sha256sum fmtlint-2.2.1.tar.gz fmtlint-2.3.0.tar.gz fmtlint-2.3.1.tar.gz > SHA256SUMS)
# corrupt 2.3.1 (a truncated download)
head -c 300 /app/dist/fmtlint-2.3.1.tar.gz > "$W/t" && cat "$W/t" > /app/dist/fmtlint-2.3.1.tar.gz
# existing installation of 2.2.1
mkdir -p /opt/fmtlint/2.2.1
tar -C /opt/fmtlint/2.2.1 --strip-components=1 -xzf /app/dist/fmtlint-2.2.1.tar.gz
ln -sfn 2.2.1 /opt/fmtlint/current
mkdir -p /usr/local/bin
ln -sfn /opt/fmtlint/current/bin/fmtlint /usr/local/bin/fmtlint
rm -rf "$W"
