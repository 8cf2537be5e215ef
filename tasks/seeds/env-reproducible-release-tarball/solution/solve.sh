#!/bin/bash
set -euo pipefail
V=$(cat /app/mytool/VERSION)
E=$(cat /app/mytool/RELEASE_EPOCH)
mkdir -p /app/release
tar --create --directory=/app --sort=name \
    --exclude='__pycache__' --exclude='./mytool/build' --exclude='mytool/build' \
    --exclude='*.pyc' --exclude='*.swp' --exclude='.DS_Store' \
    --owner=0 --group=0 --numeric-owner --mtime="@$E" \
    --transform="s,^mytool,mytool-$V," \
    mytool | gzip -9n > "/app/release/mytool-$V.tar.gz"
cd /app/release
sha256sum "mytool-$V.tar.gz" > SHA256SUMS
sha256sum -c SHA256SUMS
