#!/bin/bash
# Write /solution/search_config_fixed.sh: same search as the original (its five patterns
# api_endpoint / API_URL / endpoint: / api.endpoint / apiEndpoint, combined into one
# regex so a line is reported once), but it first classifies every file and greps only text
# files. A file is binary if it has a binary magic number (ELF, PNG, JPEG, gzip, zip,
# SQLite; also a damaged ELF whose 0x7f byte is gone), a binary/object extension (.o .so .a .gz .tgz .zip .png .jpg .jpeg .gif .db
# .sqlite .sqlite3 .bin .exe), is an extension-less executable that is not a script, or is
# data by `file --mime-encoding` / contains NUL bytes. Output is forced through a filter that
# drops control characters (ESC etc.) so nothing can corrupt a terminal. The script writes
# /solution/report.txt with the counts.
set -e
mkdir -p /solution
cat > /solution/search_config_fixed.sh <<'SCRIPT'
#!/bin/bash
# Find API endpoint configurations in the deployment repo, searching text files only.
REPO_PATH="${1:-/workspace/deploy_repo}"
REPORT="${REPORT:-/solution/report.txt}"
PATTERN='api_endpoint|API_URL|endpoint:|api.endpoint|apiEndpoint'
export LC_ALL=C

is_binary() {
  local f="$1" base ext magic enc
  base=$(basename -- "$f")
  ext="${base##*.}"; [ "$ext" = "$base" ] && ext=""
  ext=$(printf '%s' "$ext" | tr 'A-Z' 'a-z')
  case "$base" in *.tar.gz|*.tar.bz2|*.tar.xz) return 0 ;; esac
  case "$ext" in
    o|so|a|ko|gz|tgz|bz2|xz|zip|jar|png|jpg|jpeg|gif|bmp|ico|db|sqlite|sqlite3|bin|exe|dll|class|pyc) return 0 ;;
  esac
  magic=$(head -c 16 -- "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46*|89504e47*|ffd8ff*|1f8b*|504b0304*|53514c69746520666f726d6174203300*) return 0 ;;
  esac
  # SQLite header even when bytes after it were mangled
  head -c 15 -- "$f" | grep -q '^SQLite format 3' && return 0
  head -c 4 -- "$f" | grep -aq '^.\{0,1\}ELF' && return 0   # ELF header even if the 0x7f byte was lost
  if [ -z "$ext" ] && [ -x "$f" ] && ! head -c 2 -- "$f" | grep -q '^#!'; then return 0; fi
  enc=$(file -b --mime-encoding -- "$f" 2>/dev/null || echo unknown)
  [ "$enc" = "binary" ] && return 0
  [ "$(head -c 8192 -- "$f" | tr -dc '\000' | wc -c)" -gt 0 ] && return 0
  return 1
}

sanitize() { tr -d '\000-\010\013-\037\177'; }

binary=0; text=0; matches=0
echo "Searching for API endpoint configurations in $REPO_PATH (text files only)..."
echo "================================================"
while IFS= read -r -d '' f; do
  if is_binary "$f"; then
    binary=$((binary + 1))
    continue
  fi
  text=$((text + 1))
  n=$(grep -a -c -E -- "$PATTERN" "$f" || true)
  if [ "${n:-0}" -gt 0 ]; then
    matches=$((matches + n))
    grep -a -n -H -E --color=never -- "$PATTERN" "$f" | sanitize
  fi
done < <(find "$REPO_PATH" -type f -print0 | sort -z)
echo "================================================"
echo "Search complete: $matches matching lines in $text text files ($binary binary files skipped)"
# The search itself is the job; an unwritable report location is a warning, not a failure.
if ! { mkdir -p "$(dirname "$REPORT")" &&
       printf 'binary_files_found=%s\ntext_files_searched=%s\nmatches_found=%s\n' \
         "$binary" "$text" "$matches" > "$REPORT"; } 2>/dev/null; then
  echo "warning: could not write report to $REPORT" >&2
fi
exit 0
SCRIPT
chmod +x /solution/search_config_fixed.sh
/solution/search_config_fixed.sh /workspace/deploy_repo | tail -n 3
cat /solution/report.txt
