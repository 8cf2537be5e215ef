#!/bin/bash
set -e
WS=${WORKSPACE_DIR:-/workspace}
mkdir -p "$WS/solution"

cat > "$WS/solution/fix.sh" <<'FIX'
#!/bin/bash
# Rewrites the three components so that each one takes an input JSON file
# path (plus an optional output path), writes its result to a JSON file and
# returns that file's path - the Kubeflow-style file-based data passing.
set -e
WS=${WORKSPACE_DIR:-/workspace}
COMP="$WS/components"
mkdir -p "$COMP"

cat > "$COMP/component_io.py" <<'EOF'
"""Shared helpers for file-based data passing between components."""
import json
import os
import tempfile


def default_output_path(stage):
    fd, path = tempfile.mkstemp(prefix=f"{stage}_", suffix=".json")
    os.close(fd)
    return path


def load_json(path):
    with open(path, "r") as f:
        return json.load(f)


def write_json(data, path):
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    return path


def as_readings(data):
    """Accept either {"readings": [...]} or a bare list of readings."""
    if isinstance(data, dict):
        return list(data.get("readings", []))
    if isinstance(data, list):
        return list(data)
    raise ValueError(f"Unsupported sensor data format: {type(data).__name__}")
EOF

cat > "$COMP/reader.py" <<'EOF'
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from component_io import as_readings, default_output_path, load_json, write_json


def read_sensor_data(input_file: str, output_path: str = None) -> str:
    """Read sensor data and save it as {"readings": [...]} to output_path.

    Returns the path of the written JSON file for the next component.
    """
    data = load_json(input_file)
    readings = as_readings(data)
    if output_path is None:
        output_path = default_output_path("reader")
    write_json({"readings": readings}, output_path)
    print(f"Data loaded: {len(readings)} readings -> {output_path}")
    return output_path


# Backwards-compatible name
reader_component = read_sensor_data

if __name__ == "__main__":
    print(read_sensor_data(*sys.argv[1:3]))
EOF

cat > "$COMP/processor.py" <<'EOF'
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from component_io import as_readings, default_output_path, load_json, write_json

MIN_TEMPERATURE = 20
MAX_TEMPERATURE = 30


def process_sensor_data(input_path: str, output_path: str = None) -> str:
    """Keep readings with 20 <= temperature <= 30 and save them.

    Reads the reader's JSON file, writes {"readings": [...]} to output_path
    and returns that path.
    """
    data = load_json(input_path)
    readings = [r for r in as_readings(data)
                if MIN_TEMPERATURE <= r['temperature'] <= MAX_TEMPERATURE]
    filtered_data = {"readings": readings}
    if output_path is None:
        output_path = default_output_path("processor")
    write_json(filtered_data, output_path)
    print(f"Filtered to {len(readings)} readings -> {output_path}")
    return output_path


# Backwards-compatible name
processor_component = process_sensor_data

if __name__ == "__main__":
    print(process_sensor_data(*sys.argv[1:3]))
EOF

cat > "$COMP/summarizer.py" <<'EOF'
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from component_io import as_readings, default_output_path, load_json, write_json


def summarize_data(input_data_path: str, output_path: str = None) -> str:
    """
    Calculate statistics from filtered sensor readings.

    Args:
        input_data_path: Path to JSON file containing filtered readings
        output_path: Where to write the summary JSON (temp file if omitted)

    Returns:
        Path of the JSON file containing the statistics
    """
    readings = as_readings(load_json(input_data_path))

    if not readings:
        result = {
            'average_temperature': 0.0,
            'count': 0,
            'message': 'No readings to process'
        }
    else:
        temps = [r['temperature'] for r in readings]
        avg_temp = sum(temps) / len(temps)
        result = {
            'average_temperature': round(avg_temp, 2),
            'count': len(temps),
            'min_temperature': min(temps),
            'max_temperature': max(temps)
        }

    if output_path is None:
        output_path = default_output_path("summary")
    write_json(result, output_path)
    print(f"Summary calculated: {result} -> {output_path}")
    return output_path


# Backwards-compatible name
summarizer_component = summarize_data

if __name__ == "__main__":
    print(summarize_data(*sys.argv[1:3]))
EOF
echo "Components fixed in $COMP"
FIX
chmod +x "$WS/solution/fix.sh"

WORKSPACE_DIR="$WS" bash "$WS/solution/fix.sh"

# Run the full workflow and record which components work.
WORKSPACE_DIR="$WS" python3 - <<'EOF'
import json, os, sys, tempfile
ws = os.environ["WORKSPACE_DIR"]
sys.path.insert(0, os.path.join(ws, "components"))
from reader import read_sensor_data
from processor import process_sensor_data
from summarizer import summarize_data

status = {"READER_FIXED": "no", "PROCESSOR_FIXED": "no", "SUMMARIZER_FIXED": "no"}
src = os.path.join(ws, "data", "sensor_readings.json")
raw = json.load(open(src))
raw = raw["readings"] if isinstance(raw, dict) else raw
with tempfile.TemporaryDirectory() as tmp:
    p1 = read_sensor_data(src, os.path.join(tmp, "s1.json"))
    d1 = json.load(open(p1))
    if len(d1["readings"]) == len(raw):
        status["READER_FIXED"] = "yes"
    p2 = process_sensor_data(p1, os.path.join(tmp, "s2.json"))
    d2 = json.load(open(p2))["readings"]
    exp2 = [r for r in raw if 20 <= r["temperature"] <= 30]
    if d2 == exp2:
        status["PROCESSOR_FIXED"] = "yes"
    p3 = summarize_data(p2, os.path.join(tmp, "s3.json"))
    d3 = json.load(open(p3))
    exp_avg = sum(r["temperature"] for r in exp2) / len(exp2) if exp2 else 0.0
    if abs(d3["average_temperature"] - exp_avg) < 0.01:
        status["SUMMARIZER_FIXED"] = "yes"
    print("Workflow summary:", d3)

with open(os.path.join(ws, "solution", "result.txt"), "w") as f:
    for k in ("READER_FIXED", "PROCESSOR_FIXED", "SUMMARIZER_FIXED"):
        f.write(f"{k}={status[k]}\n")
print(open(os.path.join(ws, "solution", "result.txt")).read())
EOF
