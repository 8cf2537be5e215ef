#!/bin/bash
set -euo pipefail
cat > /app/bin/snapshot.sh <<'SH'
#!/bin/bash
# snapshot.sh SRC DEST - copy config/text files into a snapshot directory with a manifest.
set -euo pipefail
export LC_ALL=C
SRC=$1
DEST=$2

mkdir -p -- "$DEST"
DEST=$(cd -- "$DEST" && pwd)
cd -- "$SRC"

while IFS= read -r -d '' f; do
    rel=${f#./}
    mkdir -p -- "$DEST/$(dirname -- "$rel")"
    cp -- "$rel" "$DEST/$rel"
done < <(find . -type f \( -name '*.txt' -o -name '*.conf' \) -print0)

cd -- "$DEST"
find . -type f \( -name '*.txt' -o -name '*.conf' \) -print0 | sort -z |
while IFS= read -r -d '' f; do
    sha256sum -- "${f#./}"
done > MANIFEST
SH
chmod +x /app/bin/snapshot.sh
