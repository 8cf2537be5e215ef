"""A tiny parent task (one output file, one assertion) for synthesis tests."""

from __future__ import annotations

from pathlib import Path

import tasks.checkrunner
from synthesis.operators import Parent
from synthesis.profile import OutputFile, TaskProfile
from tasks.model import Category, Limits, Task

RUNNER = b"#!/bin/bash\npython3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier\n"


def tiny_parent(task_id: str, *, verifier_timeout_s: float = 20) -> Parent:
    """A real task writing /app/out.txt, with the profile its oracle would record."""
    task = Task(
        id=task_id,
        name="tiny",
        instruction="Write `hello` and a newline to /app/out.txt.\n",
        category=Category.SCRIPTING_AUTOMATION,
        limits=Limits(
            agent_timeout_s=30, verifier_timeout_s=verifier_timeout_s, memory_mb=256, disk_mb=64
        ),
        solution={"solve.sh": b"#!/bin/bash\nset -euo pipefail\necho hello > /app/out.txt\n"},
        verifier={
            "test.sh": RUNNER,
            "run_checks.py": Path(tasks.checkrunner.__file__).read_bytes(),
            "test_outputs.py": b"def test_out():\n"
            b"    assert open('/app/out.txt').read() == 'hello\\n'\n",
        },
    )
    out = OutputFile(path="/app/out.txt", rel="out.txt", size=6, mode=0o644, sha256="0" * 64,
                     created=True, kind="text", lines=1, header="hello")  # fmt: skip
    return Parent(task, TaskProfile(task_hash=task.content_hash, workdir="/app", ok=True,
                                    outputs=[out]))  # fmt: skip


SALES = "region,item,units,amount\n" + "".join(
    f"{r},{i},{u},{a:.2f}\n"
    for r, i, u, a in [
        ("north", "bolt", 12, 30.5), ("south", "nut", 7, 12.25), ("east", "bolt", 3, 9.0),
        ("north", "gear", 5, 88.0), ("south", "bolt", 9, 21.75), ("east", "gear", 2, 40.0),
        ("north", "nut", 15, 18.0), ("west", "gear", 4, 66.5), ("south", "gear", 6, 97.25),
        ("east", "nut", 11, 14.5), ("west", "bolt", 8, 19.0), ("north", "bolt", 1, 2.5),
    ]
)  # fmt: skip
CONFIG = (
    '{\n  "name": "relay",\n  "server": {"host": "0.0.0.0", "port": 8080, "workers": 4},\n'
    '  "limits": {"burst": 50, "rate": 300, "window": "30s"},\n'
    '  "features": {"cache": true, "beta": false, "zones": ["eu", "us"]}\n}\n'
)
NOTES = (
    "cache warmed for zone eu\n"
    "relay started on port 8080\n"
    "cache miss for key users\n"
    "worker pool resized to 4\n"
    "cache warmed for zone us\n"
    "relay drained before restart\n"
)
TABLE_TESTS = b"""import csv
import json


def test_sales():
    with open('/app/sales.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and rows[0]['region'] == 'north'


def test_config():
    with open('/app/config.json') as f:
        assert json.load(f)['server']['port'] == 8080


def test_notes():
    with open('/app/notes.txt') as f:
        assert f.read().count('cache') == 3
"""


def table_parent(task_id: str = "tiny-tables") -> Parent:
    """A real task writing a CSV, a JSON document and a text file (each checked by one
    test), with the profile its oracle would record (the samples the derived operators
    read)."""
    files = {"/app/sales.csv": SALES, "/app/config.json": CONFIG, "/app/notes.txt": NOTES}
    solve = "#!/bin/bash\nset -euo pipefail\n" + "".join(
        f"cat > {p} <<'T1_EOF'\n{text}T1_EOF\n" for p, text in files.items()
    )
    task = Task(
        id=task_id,
        name="tables",
        instruction="Write `/app/sales.csv`, `/app/config.json` and `/app/notes.txt` as given.\n",
        category=Category.DATA_PROCESSING,
        limits=Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=256, disk_mb=64),
        solution={"solve.sh": solve.encode()},
        verifier={
            "test.sh": RUNNER,
            "run_checks.py": Path(tasks.checkrunner.__file__).read_bytes(),
            "test_outputs.py": TABLE_TESTS,
        },
    )
    kinds = {"/app/sales.csv": "csv", "/app/config.json": "json", "/app/notes.txt": "text"}
    outputs = [
        OutputFile(
            path=p,
            rel=p.removeprefix("/app/"),
            size=len(t),
            mode=0o644,
            sha256="0" * 64,
            created=True,
            kind=kinds[p],
            lines=t.count("\n"),
            header=t.split("\n", 1)[0],
            sample=t,
            complete=True,
        )  # fmt: skip
        for p, t in files.items()
    ]
    return Parent(task, TaskProfile(task_hash=task.content_hash, workdir="/app", ok=True,
                                    outputs=outputs))  # fmt: skip
