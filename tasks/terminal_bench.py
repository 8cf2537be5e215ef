"""Terminal-Bench v1 layout (read only): task.yaml, Dockerfile, docker-compose.yaml,
run-tests.sh, solution.sh or solution.yaml, tests/.

The conversion keeps every environment file under `environment/`, turns run-tests.sh into the
Harbor verifier entry tests/test.sh (with TEST_DIR pointing at /tests, as Terminal-Bench sets
it), and renders solution.yaml's command list into solution/solve.sh.

Terminal-Bench's standard run-tests.sh downloads uv from the internet and installs pytest with
it when the verifier starts. `offline_run_tests` turns that boilerplate into its offline
equivalent: the packages it installs become `verifier_packages` (installed at build time into
VERIFIER_VENV) and the script runs them from there. A verifier that needs the network for
anything else (downloads, apt and PPAs, pip, npm, Go modules, crates, git remotes) is marked
as such (verifier network_mode = public) instead of failing later, with the reason
(`NetworkNeed`: what the first such line fetches) as a comment at the top of tests/test.sh.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from tasks.dockerfile import final_workdir
from tasks.errors import TaskFormatError
from tasks.harbor import (
    DEFAULT_WORKDIR,
    named_outputs,
    parse_category,
    parse_difficulty,
    read_file,
    read_tree,
)
from tasks.model import VERIFIER_VENV, EnvironmentSpec, Limits, NetworkAccess, PhaseConfig, Task

TB_OWN = {"task.yaml", "run-tests.sh", "solution.sh", "solution.yaml"}


def _solution_from_yaml(path: Path) -> bytes:
    try:
        doc = yaml.safe_load(read_file(path).decode("utf-8", "replace"))
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


class NetworkKind(StrEnum):
    """What a verifier line fetches from the internet when it runs."""

    DOWNLOAD = "download"  # curl, wget
    PPA = "ppa"  # add-apt-repository, a ppa: source
    APT = "apt"  # apt-get install/update
    PYTHON_PACKAGES = "python packages"  # pip, uv, pipx, poetry, conda
    NODE_PACKAGES = "node packages"  # npm, npx, yarn, pnpm, bun
    GO_MODULES = "go modules"  # go get/install/mod download, GOPROXY/GOFLAGS=-mod=mod
    CRATES = "rust crates"  # cargo install/fetch/add
    GIT = "git remote"  # git clone/fetch/pull, submodules
    OTHER_PACKAGES = "packages"  # gem, bundle, cpan, R's install.packages, docker pull


_NETWORK: tuple[tuple[NetworkKind, re.Pattern[str]], ...] = (
    (NetworkKind.PPA, re.compile(r"\b(add-apt-repository|apt-add-repository)\b|\bppa:")),
    (NetworkKind.DOWNLOAD, re.compile(r"\b(curl|wget)\b")),
    (
        NetworkKind.APT,
        re.compile(r"\bapt(-get)?\b[^|;&]*?\s(install|update|upgrade|dist-upgrade|build-dep)\b"),
    ),
    (
        NetworkKind.PYTHON_PACKAGES,
        re.compile(
            r"\bpip3?(\.\d+)? (install|download)\b|-m pip (install|download)\b"
            r"|\buv (pip|add|sync|tool)\b|\buvx\b|\bpipx (install|run)\b|\bpoetry install\b"
            r"|\b(conda|mamba|micromamba) (install|create)\b"
        ),
    ),
    (
        NetworkKind.NODE_PACKAGES,
        re.compile(
            r"\bnpm (install|i|ci|add)\b|\bnpx\b|\byarn( (add|install)\b|\s*$)"
            r"|\bpnpm (install|i|add|dlx)\b|\bbunx?\b (install|add|x)\b"
        ),
    ),
    (
        NetworkKind.GO_MODULES,
        re.compile(
            r"\bgo (get|install \S+@|mod (download|tidy))\b|GOFLAGS=\S*-mod=mod|GOPROXY=https?:"
        ),
    ),
    (NetworkKind.CRATES, re.compile(r"\bcargo (install|fetch|add)\b")),
    (NetworkKind.GIT, re.compile(r"\bgit (clone|fetch|pull|submodule update|ls-remote)\b")),
    (
        NetworkKind.OTHER_PACKAGES,
        re.compile(
            r"\bgem install\b|\bbundle install\b|\bcpanm?\b|install\.packages\("
            r"|\bdocker pull\b|\b(huggingface-cli|hf) download\b"
        ),
    ),
)


@dataclass(frozen=True)
class NetworkNeed:
    """The first line of a verifier script that needs the internet when it runs."""

    kind: NetworkKind
    line: int  # 1-based, in run-tests.sh as read (after its shebang)
    command: str

    @property
    def reason(self) -> str:
        return f"run-tests.sh line {self.line} fetches {self.kind.value}: {self.command[:120]}"


_URL_HOST = re.compile(r"\b(?:https?|ftp)://(\[[^\]]*\]|[^/:\s'\"]+)")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "0.0.0.0", "[::1]"})


_GO_SYNC = re.compile(r"\bgo mod (download|tidy)\b")
_GO_REQUIRE = re.compile(rb"^\s*require\b", re.M)


def go_modules_required(files: dict[str, bytes]) -> bool:
    """Whether any go.mod among `files` requires a module (a go.mod without `require` has
    nothing to download); True when there is no go.mod to judge by."""
    mods = [data for rel, data in files.items() if rel.rsplit("/", 1)[-1] == "go.mod"]
    return not mods or any(_GO_REQUIRE.search(data) for data in mods)


def network_need(line: str, number: int = 0, *, go_requires: bool = True) -> NetworkNeed | None:
    """What `line` (one shell line, comment dropped) fetches from the internet (pure). A
    download whose every URL is this machine's (a test of the agent's server) needs none;
    nor does `go mod download`/`tidy` when the task's go.mod files require nothing
    (`go_requires` False)."""
    code = line.split("#", 1)[0]
    if re.match(r"\s*(echo|printf)\s", code) and not re.search(r"[|;&`]|\$\(", code):
        return None  # text printed, not run
    for kind, pattern in _NETWORK:
        if not pattern.search(code):
            continue
        if kind == NetworkKind.GO_MODULES and not go_requires and _GO_SYNC.search(code):
            if not re.search(r"\bgo (get|install \S+@)|GOFLAGS=|GOPROXY=", code):
                continue
        if kind == NetworkKind.DOWNLOAD:
            hosts = {h.lower() for h in _URL_HOST.findall(code)}
            bare_local = re.search(r"\b(curl|wget)\b.*\s(localhost|127\.0\.0\.1)[:/\s]", code)
            if (hosts and hosts <= _LOCAL_HOSTS) or (not hosts and bare_local):
                continue
        return NetworkNeed(kind, number, code.strip())
    return None


def verifier_network_need(body: str, files: dict[str, bytes] | None = None) -> NetworkNeed | None:
    """The reason `body` (a run-tests.sh without its shebang) needs the internet when the
    verifier runs, after the offline rewrite of the uv boilerplate; None when it does not
    (pure; a converted tests/test.sh keeps such lines, so it gives the same kind). `files`
    are the task's files (environment and tests), for the go.mod files they hold."""
    converted = convert_run_tests(body, files)
    return converted if isinstance(converted, NetworkNeed) else None


def convert_run_tests(
    body: str, files: dict[str, bytes] | None = None
) -> tuple[str, list[str]] | NetworkNeed:
    """(offline script, pip packages) for the uv boilerplate, or why `body` still needs the
    network after the conversion (or is not the boilerplate and needs it). `files`: as for
    `verifier_network_need`."""
    go_requires = go_modules_required(files or {})
    packages: list[str] = []
    out: list[str] = []
    uses_uv = "astral.sh/uv" in body
    for number, line in enumerate(body.splitlines(), 1):
        if uses_uv and _FETCH_UV.match(line):
            continue
        m = _UV_INSTALL.match(line)
        if uses_uv and m:
            packages += [w for w in m.group(1).split() if not w.startswith("-")]
            continue
        if uses_uv:
            line = _UV_RUN.sub(r"\1", line)
        need = network_need(line, number, go_requires=go_requires)
        if need is not None:
            return need
        out.append(line)
    if uses_uv:
        out.insert(0, f'export PATH="{VERIFIER_VENV}/bin:$PATH"')
    return "\n".join(out) + "\n", packages


def offline_run_tests(body: str) -> tuple[str, list[str]] | None:
    """(offline script, pip packages) for the uv boilerplate; None when `body` still needs
    the network after the conversion (`convert_run_tests` says why)."""
    converted = convert_run_tests(body)
    return None if isinstance(converted, NetworkNeed) else converted


def load_terminal_bench(task_dir: Path | str) -> Task:
    task_dir = Path(task_dir)
    yaml_path = task_dir / "task.yaml"
    if not os.path.lexists(yaml_path):
        raise TaskFormatError(yaml_path, None, "missing (every Terminal-Bench task has one)")
    try:
        doc: Any = yaml.safe_load(read_file(yaml_path).decode("utf-8", "replace"))
    except yaml.YAMLError as e:
        raise TaskFormatError(yaml_path, None, f"invalid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise TaskFormatError(yaml_path, None, "expected a mapping at the top level")
    instruction = doc.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskFormatError(yaml_path, "instruction", "missing or empty")
    if not os.path.lexists(task_dir / "Dockerfile"):
        raise TaskFormatError(task_dir / "Dockerfile", None, "missing")
    dockerfile = read_file(task_dir / "Dockerfile").decode("utf-8", "replace")
    run_tests = task_dir / "run-tests.sh"
    if not os.path.lexists(run_tests):
        raise TaskFormatError(run_tests, None, "missing (the verifier entry)")
    solution: dict[str, bytes] | None = None
    if os.path.lexists(task_dir / "solution.sh"):
        solution = {"solve.sh": read_file(task_dir / "solution.sh")}
    elif os.path.lexists(task_dir / "solution.yaml"):
        solution = {"solve.sh": _solution_from_yaml(task_dir / "solution.yaml")}
    env_files = {
        rel: data
        for rel, data in read_tree(task_dir).items()
        if rel not in TB_OWN and not rel.startswith("tests/")
    }
    verifier = {f"{rel}": data for rel, data in read_tree(task_dir / "tests").items()}
    body = read_file(run_tests).decode("utf-8")
    if body.startswith("#!"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
    converted = convert_run_tests(body, {**env_files, **verifier})
    verifier_config = PhaseConfig()
    verifier_packages: list[str] = []
    header = "#!/bin/bash\nexport TEST_DIR=/tests\n"
    if isinstance(converted, NetworkNeed):
        # Recorded where a reader of the bundle looks; verifier_network_need(body) gives it
        # back typed from the script itself.
        verifier_config = PhaseConfig(network_mode=NetworkAccess.PUBLIC)
        header += "# t1: needs the internet at verify time (network_mode = public): "
        header += converted.reason.replace("\n", " ") + "\n"
    else:
        body, verifier_packages = converted
    verifier["test.sh"] = (header + body).encode()

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
        outputs=named_outputs(verifier, final_workdir(dockerfile) or DEFAULT_WORKDIR),
        verifier_config=verifier_config,
        solution=solution,
        verifier=verifier,
        binary_verifier=parser not in ("pytest",),
    )
