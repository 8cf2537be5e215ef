"""Terminal-Bench v1 layout (read only): task.yaml, Dockerfile, docker-compose.yaml,
run-tests.sh, solution.sh or solution.yaml, tests/.

The conversion keeps every environment file under `environment/`, turns run-tests.sh into the
Harbor verifier entry tests/test.sh (with TEST_DIR pointing at /tests, as Terminal-Bench sets
it), and renders solution.yaml's command list into solution/solve.sh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tasks.errors import TaskFormatError
from tasks.harbor import parse_category, parse_difficulty, read_tree
from tasks.model import EnvironmentSpec, Limits, Task

TB_OWN = {"task.yaml", "run-tests.sh", "solution.sh", "solution.yaml"}


def _solution_from_yaml(path: Path) -> bytes:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(path, None, f"invalid YAML: {e}") from e
    if not isinstance(doc, list):
        raise TaskFormatError(path, None, "expected a list of {command: ...} steps")
    lines = ["#!/bin/bash", "set -e"]
    for i, step in enumerate(doc):
        cmd = step.get("command") if isinstance(step, dict) else None
        if not isinstance(cmd, str):
            raise TaskFormatError(path, f"[{i}].command", "missing or not a string")
        lines.append(cmd)
    return ("\n".join(lines) + "\n").encode()


def load_terminal_bench(task_dir: Path | str) -> Task:
    task_dir = Path(task_dir)
    yaml_path = task_dir / "task.yaml"
    if not yaml_path.is_file():
        raise TaskFormatError(yaml_path, None, "missing (every Terminal-Bench task has one)")
    try:
        doc: Any = yaml.safe_load(yaml_path.read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(yaml_path, None, f"invalid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise TaskFormatError(yaml_path, None, "expected a mapping at the top level")
    instruction = doc.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskFormatError(yaml_path, "instruction", "missing or empty")
    if not (task_dir / "Dockerfile").is_file():
        raise TaskFormatError(task_dir / "Dockerfile", None, "missing")
    run_tests = task_dir / "run-tests.sh"
    if not run_tests.is_file():
        raise TaskFormatError(run_tests, None, "missing (the verifier entry)")
    solution: dict[str, bytes] | None = None
    if (task_dir / "solution.sh").is_file():
        solution = {"solve.sh": (task_dir / "solution.sh").read_bytes()}
    elif (task_dir / "solution.yaml").is_file():
        solution = {"solve.sh": _solution_from_yaml(task_dir / "solution.yaml")}
    env_files = {
        rel: data
        for rel, data in read_tree(task_dir).items()
        if rel not in TB_OWN and not rel.startswith("tests/")
    }
    verifier = {f"{rel}": data for rel, data in read_tree(task_dir / "tests").items()}
    body = run_tests.read_bytes().decode("utf-8")
    if body.startswith("#!"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
    verifier["test.sh"] = ("#!/bin/bash\nexport TEST_DIR=/tests\n" + body).encode()

    def num(key: str, default: float) -> float:
        value = doc.get(key, default)
        if not isinstance(value, int | float) or value <= 0:
            raise TaskFormatError(yaml_path, key, f"expected a positive number, got {value!r}")
        return float(value)

    tags = doc.get("tags", [])
    if not isinstance(tags, list):
        raise TaskFormatError(yaml_path, "tags", f"expected a list, got {tags!r}")
    parser = doc.get("parser_name", "pytest")
    return Task(
        id=task_dir.name.lower(),
        name=task_dir.name,
        instruction=instruction,
        category=parse_category(doc.get("category"), path=yaml_path, field="category"),
        difficulty=parse_difficulty(doc.get("difficulty"), path=yaml_path, field="difficulty"),
        tags=[str(t) for t in tags],
        author=doc.get("author_email") or doc.get("author_name"),
        limits=Limits(
            agent_timeout_s=num("max_agent_timeout_sec", 360.0),
            verifier_timeout_s=num("max_test_timeout_sec", 60.0),
        ),
        environment=EnvironmentSpec(files=env_files),
        solution=solution,
        verifier=verifier,
        binary_verifier=parser not in ("pytest",),
    )
