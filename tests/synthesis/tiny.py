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
