#!/bin/bash
# sort(1) spills its merge runs to $TMPDIR (default /tmp, only ~100MB free); a 500MB
# input needs about as much temp space, hence ENOSPC.  Point sort at /data/workspace
# (2GB free) with -T / TMPDIR, keep the CSV header on top, and sort by the timestamp
# column only.
set -e
cat > /opt/data_pipeline/process_transactions.sh <<'SH'
#!/bin/bash

# Data processing pipeline for transaction sorting
# This script processes transaction records from CSV files

set -e
set -o pipefail

# Define input and output paths
INPUT_FILE="/data/input/transactions.csv"
OUTPUT_FILE="/data/output/transactions_sorted.csv"

# sort writes its temporary merge files to TMPDIR (default /tmp, ~100MB free), which
# is too small for a ~500MB input.  Use /data/workspace (2GB free) instead.
SORT_TMP_DIR="/data/workspace/sort_tmp"
mkdir -p "$SORT_TMP_DIR" "$(dirname "$OUTPUT_FILE")"
export TMPDIR="$SORT_TMP_DIR"
trap 'rm -rf "$SORT_TMP_DIR"/sort* 2>/dev/null || true' EXIT

echo "Starting transaction processing pipeline..."
echo "Input file: $INPUT_FILE"
echo "Output file: $OUTPUT_FILE"
echo "Sort temp directory: $SORT_TMP_DIR"

# Sorting transaction records by timestamp (column 2), header kept first
{
    head -n 1 "$INPUT_FILE"
    tail -n +2 "$INPUT_FILE" | LC_ALL=C sort -t',' -k2,2 -s -T "$SORT_TMP_DIR" -S 50M
} > "$OUTPUT_FILE.tmp"
mv "$OUTPUT_FILE.tmp" "$OUTPUT_FILE"

echo "Transaction processing completed successfully"
SH
chmod +x /opt/data_pipeline/process_transactions.sh

/opt/data_pipeline/process_transactions.sh

cat > /data/output/pipeline_fix.json <<'JSON'
{
  "problem_identified": "sort spilled its temporary merge files to the default TMPDIR (/tmp), which has only ~100MB free while sorting the ~500MB transactions.csv needs roughly the input size in temp space, so it failed with 'No space left on device'",
  "solution_applied": "Changed /opt/data_pipeline/process_transactions.sh to run sort with -T /data/workspace/sort_tmp (and TMPDIR exported to it) so temporary files go to /data/workspace (2GB free); also kept the CSV header first and sort on the timestamp column only (-k2,2)",
  "temp_directory_used": "/data/workspace/sort_tmp"
}
JSON
head -3 /data/output/transactions_sorted.csv
