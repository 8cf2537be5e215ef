#!/bin/bash
# Tail the JSONL stream (from its start, like a TRIM_HORIZON shard iterator) for at
# least 30 seconds, parsing each complete line as it appears.
cat > /tmp/stream_reader.py <<'PY'
import json
import os
import time

STREAM = "/var/log/events/stream.jsonl"
OUT = "/tmp/stream_report.json"
DURATION = 31.0

total = 0
types = set()
buf = ""
pos = 0
inode = None


def handle(line):
    global total
    line = line.strip()
    if not line:
        return
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return
    if not isinstance(rec, dict):
        return
    total += 1
    et = rec.get("event_type")
    if et is not None:
        types.add(str(et))


start = time.monotonic()
while True:
    try:
        st = os.stat(STREAM)
        if inode is not None and (st.st_ino != inode or st.st_size < pos):
            pos, buf = 0, ""  # rotated or truncated: start over on the new file
        inode = st.st_ino
        with open(STREAM, "r", encoding="utf-8", errors="replace") as f:
            f.seek(pos)
            chunk = f.read()
            pos = f.tell()
        buf += chunk
        *lines, buf = buf.split("\n")  # keep a trailing partial line for next time
        for line in lines:
            handle(line)
    except FileNotFoundError:
        pass
    if time.monotonic() - start >= DURATION:
        break
    time.sleep(0.5)

# a final unterminated line that is complete JSON still counts
if buf.strip():
    handle(buf)

report = {"total_records": total, "event_types": sorted(types)}
with open(OUT, "w") as f:
    json.dump(report, f, indent=2)
print(report)
PY
python3 /tmp/stream_reader.py
