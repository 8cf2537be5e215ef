#!/bin/bash
set -euo pipefail
V=$(cat /app/logsum/VERSION)
B=$(mktemp -d)/logsum
mkdir -p "$B/DEBIAN" "$B/usr/bin" "$B/usr/share/man/man1" "$B/usr/share/doc/logsum" "$B/etc"
install -m 0755 /app/logsum/logsum "$B/usr/bin/logsum"
gzip -9n -c /app/logsum/logsum.1 > "$B/usr/share/man/man1/logsum.1.gz"
chmod 0644 "$B/usr/share/man/man1/logsum.1.gz"
install -m 0644 /app/logsum/copyright "$B/usr/share/doc/logsum/copyright"
install -m 0644 /app/logsum/logsum.conf "$B/etc/logsum.conf"
cat > "$B/DEBIAN/control" <<CTL
Package: logsum
Version: $V-1
Architecture: all
Maintainer: Ops Team <ops@example.com>
Depends: python3 (>= 3.9)
Section: utils
Priority: optional
Description: count log lines per severity
 logsum counts the lines of log files per severity level.
CTL
echo /etc/logsum.conf > "$B/DEBIAN/conffiles"
(cd "$B" && find usr -type f | sort | xargs md5sum > DEBIAN/md5sums)
mkdir -p /app/dist
dpkg-deb --root-owner-group --build "$B" "/app/dist/logsum_${V}-1_all.deb"
