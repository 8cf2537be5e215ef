"""Small in-memory tasks for tests (real tasks, built in code instead of read from disk)."""

from __future__ import annotations

from pathlib import Path

from tasks.model import Category, EnvironmentSpec, Limits, Task

CTRF_ECHO_VERIFIER = b"""#!/bin/bash
# Trivial verifier: one assertion per line of /tests/expect (path must exist).
mkdir -p /logs/verifier
out=/logs/verifier/ctrf.json; sep=""
printf '{"results":{"tool":{"name":"sh"},"tests":[' > $out
while read -r path; do
  [ -z "$path" ] && continue
  if [ -e "$path" ]; then s=passed; else s=failed; fi
  printf '%s{"name":"exists %s","status":"%s","duration":0}' "$sep" "$path" "$s" >> $out
  sep=","
done < /tests/expect
printf ']}}' >> $out
"""


def make_task(
    task_id: str = "tiny",
    *,
    expect: tuple[str, ...] = ("/app/done",),
    solve: str = "touch /app/done\n",
    limits: Limits | None = None,
    environment: EnvironmentSpec | None = None,
    extra_tests: dict[str, bytes] | None = None,
) -> Task:
    """A task whose verifier checks that each path in `expect` exists."""
    verifier = {"test.sh": CTRF_ECHO_VERIFIER, "expect": ("\n".join(expect) + "\n").encode()}
    verifier |= extra_tests or {}
    return Task(
        id=task_id,
        name=task_id,
        instruction="Create the files listed.\n",
        category=Category.SCRIPTING_AUTOMATION,
        limits=limits
        or Limits(
            agent_timeout_s=20,
            verifier_timeout_s=20,
            memory_mb=256,
            pids=128,
            disk_mb=64,
            output_bytes=200_000,
        ),
        environment=environment or EnvironmentSpec(),
        solution={"solve.sh": ("#!/bin/bash\n" + solve).encode()},
        verifier=verifier,
    )


STOCK_BASE = Path(__file__).resolve().parent / "fixtures/audit-independent/clean--word-frequency"


def stock_task(tmp_path: Path, name: str, tests: str, solve: str, instruction: str) -> Task:
    """A stock Harbor task (pytest run by test.sh, the word-frequency fixture's image and
    poem) with its own tests, solution and instruction, read back as any directory is."""
    import shutil

    from tasks.corpus import import_dir

    d = tmp_path / name
    shutil.copytree(STOCK_BASE, d)
    (d / "tests" / "test_outputs.py").write_text(tests)
    (d / "solution" / "solve.sh").write_text(solve)
    (d / "instruction.md").write_text(instruction)
    tasks, rejects = import_dir(tmp_path)
    assert not rejects, rejects
    return tasks[0]
