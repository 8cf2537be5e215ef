#!/bin/bash
# A sample source tree with awkward names for the agent to try the script on.
set -euo pipefail
mkdir -p "/app/sample/etc files/app" /app/sample/docs
cd /app/sample
echo "port = 8080" > "etc files/app/server.conf"
echo "debug = false" > "etc files/app/-override.conf"
echo "read me" > docs/README.txt
echo "notes with spaces" > "docs/meeting notes.txt"
echo "star" > "docs/*.txt"
echo "ignore" > docs/image.png
