"""Terminal-Bench v1 layout (read only): task.yaml, Dockerfile, docker-compose.yaml,
run-tests.sh, solution.sh or solution.yaml, tests/.

The conversion keeps every environment file under `environment/`, turns run-tests.sh into the
Harbor verifier entry tests/test.sh (with TEST_DIR pointing at /tests, as Terminal-Bench sets
it), and renders solution.yaml's command list into solution/solve.sh.

Terminal-Bench's standard run-tests.sh downloads uv from the internet and installs pytest with
it when the verifier starts. `offline_run_tests` turns that boilerplate into its offline
equivalent: the packages it installs become `verifier_packages` (installed at build time into
VERIFIER_VENV) and the script runs them from there. A verifier that needs the network for
anything else is marked as such (verifier network_mode = public) instead of failing later.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tasks.dockerfile import final_workdir
from tasks.errors import TaskFormatError
from tasks.harbor import DEFAULT_WORKDIR, parse_category, parse_difficulty, read_tree
from tasks.model import VERIFIER_VENV, EnvironmentSpec, Limits, NetworkAccess, PhaseConfig, Task

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


# Lines of the uv boilerplate that only exist to fetch uv (dropped in the offline version).
_FETCH_UV = re.compile(
    r"^\s*(apt-get update|apt-get install -y curl|apt install -y curl|curl .*astral\.sh/uv.*"
    r"|source \$HOME/\.local/bin/env|\. \$HOME/\.local/bin/env|uv init.*|uv venv.*"
    r"|source \S*/bin/activate)\s*$"
)
_UV_INSTALL = re.compile(r"^\s*uv (?:pip install|add)\s+(.*)$")
_UV_RUN = re.compile(r"^(\s*)uv run\s+")
_NETWORK = re.compile(
    r"\b(curl|wget|pip3? install|uv (?:pip|add|sync|tool)|apt(?:-get)? install|git clone|"
    r"npm (?:install|i)|npx|go get|cargo install)\b"
)


def offline_run_tests(body: str) -> tuple[str, list[str]] | None:
    """(offline script, pip packages) for the uv boilerplate; None when `body` still needs
    the network after the conversion (or is not the boilerplate and needs it)."""
    packages: list[str] = []
    out: list[str] = []
    uses_uv = "astral.sh/uv" in body
    for line in body.splitlines():
        if uses_uv and _FETCH_UV.match(line):
            continue
        m = _UV_INSTALL.match(line)
        if uses_uv and m:
            packages += [w for w in m.group(1).split() if not w.startswith("-")]
            continue
        if uses_uv:
            line = _UV_RUN.sub(r"\1", line)
        if _NETWORK.search(line.split("#", 1)[0]):
            return None
        out.append(line)
    if uses_uv:
        out.insert(0, f'export PATH="{VERIFIER_VENV}/bin:$PATH"')
    return "\n".join(out) + "\n", packages


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
    dockerfile = (task_dir / "Dockerfile").read_bytes().decode("utf-8", "replace")
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
    offline = offline_run_tests(body)
    verifier_config = PhaseConfig()
    verifier_packages: list[str] = []
    if offline is None:
        verifier_config = PhaseConfig(network_mode=NetworkAccess.PUBLIC)
    else:
        body, verifier_packages = offline
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
        environment=EnvironmentSpec(
            files=env_files,
            workdir=final_workdir(dockerfile) or DEFAULT_WORKDIR,
            verifier_packages=verifier_packages,
        ),
        verifier_config=verifier_config,
        solution=solution,
        verifier=verifier,
        binary_verifier=parser not in ("pytest",),
    )
