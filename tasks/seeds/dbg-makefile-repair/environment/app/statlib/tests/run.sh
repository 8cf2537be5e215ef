#!/bin/bash
# Runs bin/stats on tests/data.txt and compares with tests/expected.txt.
cd "$(dirname "$0")/.." || exit 1
diff <(bin/stats < tests/data.txt) tests/expected.txt && echo "tests passed"
