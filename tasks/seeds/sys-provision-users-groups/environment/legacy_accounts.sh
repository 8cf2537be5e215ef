#!/bin/bash
# Pre-existing state: a retired account and an 'ops' group with the wrong GID.
set -euo pipefail
groupadd -g 3050 ops
useradd -m -u 1500 -s /bin/bash olduser
echo "old files" > /home/olduser/notes.txt
mkdir -p /srv
