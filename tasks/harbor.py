"""Harbor task layout: read a directory into a `Task`, write a `Task` back out.

Layout: task.toml, instruction.md, environment/ (Dockerfile, app/...), solution/solve.sh,
tests/test.sh (+ any other test files). T1-specific metadata lives in a `[t1]` table of
task.toml that other Harbor harnesses ignore. A task read from disk and written back unchanged
reproduces every file byte for byte: task.toml is re-emitted verbatim while its metadata is
unchanged, and rendered canonically once anything in it changes.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tasks.bundle import render_toml, task_files
from tasks.dockerfile import final_workdir
from tasks.errors import TaskFormatError
from tasks.model import (
    Category,
    Difficulty,
    EnvironmentSpec,
    Healthcheck,
    Limits,
    Lineage,
    PackageInfo,
    PhaseConfig,
    Task,
)

# Task directories from other harnesses start where their Dockerfile (or base image) puts
# them; Terminal-Bench's and Harbor's base images use /app.
DEFAULT_WORKDIR = "/app"
# What a verifier runs with stays the image's even where a stock task's tests name it (a test
# that runs /usr/bin/python3 never gets the agent's): the system's programs and libraries,
# the kernel's file systems, the judge's own directories.
IMAGE_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys",
               "/dev", "/run", "/boot", "/tests", "/logs")  # fmt: skip
_QUOTED_PATH = re.compile(r"""["'](/[A-Za-z0-9_.@+~/-]+)["']""")
MAX_NAMED_OUTPUTS = 32


def named_outputs(verifier: dict[str, bytes], workdir: str) -> list[str]:
    """The outputs of a stock task that declares none: its working directory, and every
    absolute path its tests spell in quotes outside it (a stock Harbor task's answer may sit
    under /solution, /tmp or /var/log: the judge carries only what a task's outputs name,
    so without them an honest agent's answer never reaches the verifier). A file the build
    copies in is carried like any other when the tests name it: the agent's task may be to
    fix it (a playbook, a server's configuration) or to consume it (a queue's messages), as
    in the working directory, and a stock verifier sees the state the agent left, as in
    Harbor. Never a top-level directory (`/etc`, `/root`: the agent's whole configuration)
    nor anything below IMAGE_ROOTS. At most MAX_NAMED_OUTPUTS paths besides the working
    directory."""
    wd = workdir.rstrip("/") or "/"
    out: list[str] = []
    for _, data in sorted(verifier.items()):
        if b"\0" in data[:4096]:
            continue
        for m in _QUOTED_PATH.finditer(data.decode("utf-8", "replace")):
            p = m.group(1).rstrip("/")
            parts = p.split("/")
            if (
                len(parts) < 3
                or any(x in ("", ".", "..") for x in parts[1:])
                or p == wd
                or p.startswith(wd + "/")
                or any(p == r or p.startswith(r + "/") for r in IMAGE_ROOTS)
            ):
                continue
            out.append(p)
    return [wd, *list(dict.fromkeys(out))[:MAX_NAMED_OUTPUTS]]


HARBOR_STORAGE_MB = 10240  # Harbor's EnvironmentConfig default when task.toml gives no storage_mb

CATEGORY_ALIASES: dict[str, Category] = {
    "software-engineering": Category.SOFTWARE_DEVELOPMENT,
    "programming": Category.SOFTWARE_DEVELOPMENT,
    "coding": Category.SOFTWARE_DEVELOPMENT,
    "system-admin": Category.SYSTEM_ADMINISTRATION,
    "sysadmin": Category.SYSTEM_ADMINISTRATION,
    "devops": Category.SYSTEM_ADMINISTRATION,
    "scripting": Category.SCRIPTING_AUTOMATION,
    "automation": Category.SCRIPTING_AUTOMATION,
    "file-operations": Category.SCRIPTING_AUTOMATION,
    "environment-and-package-setup": Category.ENVIRONMENT_SETUP,
    "package-setup": Category.ENVIRONMENT_SETUP,
    "git": Category.VERSION_CONTROL,
    "machine-learning": Category.DATA_SCIENCE,
    "data-analysis": Category.DATA_SCIENCE,
    "optimization": Category.PERFORMANCE,
    "security-and-cryptography": Category.SECURITY,
    "cryptography": Category.SECURITY,
    "networks": Category.NETWORKING,
}


def parse_category(raw: object, *, path: Path | str, field: str) -> Category:
    """Map a category string onto the closed list; unknown strings become `other`."""
    if raw is None or raw == "":
        return Category.OTHER
    if not isinstance(raw, str):
        raise TaskFormatError(path, field, f"expected a string, got {raw!r}")
    key = raw.strip().lower().replace("_", "-").replace(" ", "-")
    try:
        return Category(key)
    except ValueError:
        return CATEGORY_ALIASES.get(key, Category.OTHER)


def parse_difficulty(raw: object, *, path: Path | str, field: str) -> Difficulty:
    if raw is None or raw == "":
        return Difficulty.UNKNOWN
    if not isinstance(raw, str):
        raise TaskFormatError(path, field, f"expected a string, got {raw!r}")
    try:
        return Difficulty(raw.strip().lower())
    except ValueError as e:
        allowed = ", ".join(d.value for d in Difficulty)
        raise TaskFormatError(path, field, f"unknown difficulty {raw!r} ({allowed})") from e


LINK_REFUSED = (
    "is a symbolic link: a task's files are read where they are, never through a link "
    "(it could name any file of this host)"
)


def read_file(path: Path) -> bytes:
    """The bytes of the task file `path`, which must be a regular file and not a link (a
    task whose `instruction.md` or `task.toml` links to `/etc/shadow` would hand this host's
    file to the agent). Raises TaskFormatError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path):
            raise TaskFormatError(path, None, LINK_REFUSED) from e
        raise TaskFormatError(path, None, f"cannot be read: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskFormatError(path, None, "is not a regular file")
        return f.read()


def read_tree(root: Path) -> dict[str, bytes]:
    """All regular files below `root` as {posix relative path: bytes}; {} when absent.

    `root` itself must not be a link (a task directory whose `environment` links to `/etc`
    read this host's files into the task, and a `COPY . /app` gave them to the agent:
    TaskFormatError). Below it no link is followed or read: the bundle stores bytes."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return {}
    if stat.S_ISLNK(st.st_mode):
        raise TaskFormatError(root, None, LINK_REFUSED)
    if not stat.S_ISDIR(st.st_mode):
        return {}
    out: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:  # a link (ELOOP), or gone
                continue
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    out[Path(path).relative_to(root).as_posix()] = f.read()
    return dict(sorted(out.items()))


def _table(doc: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise TaskFormatError(path, key, f"expected a table, got {type(value).__name__}")
    return value


def load_harbor(task_dir: Path | str) -> Task:
    """Read one Harbor task directory. Raises TaskFormatError naming the file and field."""
    task_dir = Path(task_dir)
    toml_path = task_dir / "task.toml"
    if not task_dir.is_dir():
        raise TaskFormatError(task_dir, None, "not a directory")
    if not os.path.lexists(toml_path):
        raise TaskFormatError(toml_path, None, "missing (every Harbor task has a task.toml)")
    toml_text = read_file(toml_path).decode("utf-8")
    try:
        doc = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(toml_path, None, f"invalid TOML: {e}") from e
    instruction_path = task_dir / "instruction.md"
    if not os.path.lexists(instruction_path):
        raise TaskFormatError(instruction_path, None, "missing (the agent's instruction)")
    tests = read_tree(task_dir / "tests")
    if "test.sh" not in tests:
        raise TaskFormatError(task_dir / "tests" / "test.sh", None, "missing (verifier entry)")
    solution: dict[str, bytes] | None = read_tree(task_dir / "solution") or None
    if solution is not None and "solve.sh" not in solution:
        raise TaskFormatError(task_dir / "solution" / "solve.sh", None, "missing")
    task = task_from_toml(
        doc,
        path=toml_path,
        task_id=task_dir.name.lower(),
        instruction=read_file(instruction_path).decode("utf-8"),
        environment_files=read_tree(task_dir / "environment"),
        solution=solution,
        verifier=tests,
    )
    task._source_toml = (render_toml(task), toml_text)
    return task


def task_from_toml(
    doc: dict[str, Any],
    *,
    path: Path,
    task_id: str,
    instruction: str,
    environment_files: dict[str, bytes],
    solution: dict[str, bytes] | None,
    verifier: dict[str, bytes],
) -> Task:
    meta = _table(doc, "metadata", path)
    agent = _table(doc, "agent", path)
    ver = _table(doc, "verifier", path)
    env = _table(doc, "environment", path)
    t1 = _table(doc, "t1", path)
    package = _table(doc, "task", path)
    solution_doc = _table(doc, "solution", path)
    lineage_doc = t1.get("lineage", {})
    workdir = t1.get("workdir")
    if workdir is None and "Dockerfile" in environment_files:
        workdir = final_workdir(environment_files["Dockerfile"].decode("utf-8", "replace"))
    healthcheck = env.get("healthcheck")
    try:
        limits = Limits(
            agent_timeout_s=agent.get("timeout_sec", 600.0),
            verifier_timeout_s=ver.get("timeout_sec", 120.0),
            build_timeout_s=env.get("build_timeout_sec", 600.0),
            cpus=env.get("cpus", 1),
            memory_mb=env.get("memory_mb", 2048),
            disk_mb=env.get("storage_mb", HARBOR_STORAGE_MB),
            pids=t1.get("pids", 256),
            output_bytes=t1.get("output_bytes", 1_000_000),
        )
        environment = EnvironmentSpec(
            requires=t1.get("requires", []),
            setup=t1.get("setup", []),
            allow_network=env.get("allow_internet", False),
            workdir=workdir or DEFAULT_WORKDIR,
            files=environment_files,
            docker_image=env.get("docker_image"),
            env=env.get("env", {}),
            network_mode=env.get("network_mode"),
            allowed_hosts=env.get("allowed_hosts", []),
            healthcheck=Healthcheck(**healthcheck) if isinstance(healthcheck, dict) else None,
            gpus=env.get("gpus", 0),
            verifier_packages=t1.get("verifier_packages", []),
        )
        lineage = Lineage(**lineage_doc)
        return Task(
            id=str(t1.get("id", task_id)),
            name=str(meta.get("name", task_id)),
            instruction=instruction,
            category=parse_category(meta.get("category"), path=path, field="metadata.category"),
            difficulty=parse_difficulty(
                meta.get("difficulty"), path=path, field="metadata.difficulty"
            ),
            tags=list(meta.get("tags", [])),
            author=meta.get("author_name"),
            limits=limits,
            environment=environment,
            solution=solution,
            verifier=verifier,
            binary_verifier=bool(t1.get("binary_verifier", False)),
            lineage=lineage,
            package=PackageInfo(**package) if package else None,
            agent_config=_phase(agent),
            verifier_config=_phase(ver),
            solution_env=solution_doc.get("env", {}),
            keep_agent_processes=bool(t1.get("keep_agent_processes", False)),
            trusted_paths=list(t1.get("trusted_paths", [])),
            outputs=list(t1.get("outputs", []))
            if t1
            else named_outputs(verifier, workdir or DEFAULT_WORKDIR),
        )
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise TaskFormatError(path, field, err["msg"]) from e


_PHASE_KEYS = ("user", "env", "network_mode", "allowed_hosts")


def _phase(table: dict[str, Any]) -> PhaseConfig:
    return PhaseConfig(**{k: table[k] for k in _PHASE_KEYS if k in table})


def write_harbor(task: Task, dest: Path | str) -> Path:
    """Write the task's bundle under `dest` (created); scripts keep their executable bit."""
    dest = Path(dest)
    for rel, data in task_files(task).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if rel.endswith(".sh"):
            target.chmod(0o755)
    return dest
