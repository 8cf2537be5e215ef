"""The task model: one self-contained terminal task and its content hash.

A task is a bundle of files in the Harbor layout plus typed metadata. The content hash covers
every file of the bundle as written to disk, so any edit to any file changes it, and lineage
refers to parents by that hash.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from tasks.bundle import task_files
from tasks.pools import Pool


class Category(StrEnum):
    """Closed list of task categories (the paper's eight first, then the others users need)."""

    SCRIPTING_AUTOMATION = "scripting-automation"
    SOFTWARE_DEVELOPMENT = "software-development"
    SYSTEM_ADMINISTRATION = "system-administration"
    ENVIRONMENT_SETUP = "environment-setup"
    VERSION_CONTROL = "version-control"
    DATA_SCIENCE = "data-science"
    DEBUGGING = "debugging"
    PERFORMANCE = "performance"
    DATA_PROCESSING = "data-processing"
    SECURITY = "security"
    NETWORKING = "networking"
    OTHER = "other"


PAPER_CATEGORIES: tuple[Category, ...] = tuple(list(Category)[:8])


class Difficulty(StrEnum):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"
    UNKNOWN = "unknown"


class Limits(BaseModel):
    """Per-trial resource limits; the sandbox enforces every one of them."""

    model_config = ConfigDict(extra="forbid")

    agent_timeout_s: float = Field(600.0, gt=0)
    verifier_timeout_s: float = Field(120.0, gt=0)
    build_timeout_s: float = Field(600.0, gt=0)
    cpus: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, gt=0)
    pids: int = Field(256, gt=0)
    disk_mb: int = Field(1024, gt=0)
    output_bytes: int = Field(1_000_000, gt=0)


class NetworkAccess(StrEnum):
    """Harbor's network modes (schema 1.1): what a phase may reach."""

    PUBLIC = "public"
    NO_NETWORK = "no-network"
    ALLOWLIST = "allowlist"


class PhaseConfig(BaseModel):
    """Harbor 1.1 settings of one phase ([agent], [verifier], [solution]). `user` None means
    the image's USER; `network_mode` None means the environment's."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    network_mode: NetworkAccess | None = None
    allowed_hosts: list[str] = Field(default_factory=list)

    @field_validator("user", mode="before")
    @classmethod
    def _user_str(cls, v: object) -> object:
        return str(v) if isinstance(v, int) else v


class Healthcheck(BaseModel):
    """Harbor 1.1 [environment.healthcheck]: must pass before the agent starts."""

    model_config = ConfigDict(extra="forbid")

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class Author(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    email: str | None = None


class PackageInfo(BaseModel):
    """Harbor 1.1 [task] table: the task as a registry package (`org/name`)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class EnvironmentSpec(BaseModel):
    """What the sandbox must offer before the agent starts.

    `files` are the bundle's `environment/` files (relative paths, raw bytes), including the
    Dockerfile for the docker backend. Files under `environment/app/` are copied to the
    working directory. `setup` steps run once, as root, in `workdir`, into a cached layer keyed
    by `environment_hash`.
    """

    model_config = ConfigDict(extra="forbid")

    requires: list[str] = Field(default_factory=list)
    setup: list[str] = Field(default_factory=list)
    allow_network: bool = False
    workdir: str = "/app"
    files: dict[str, bytes] = Field(default_factory=dict)
    # Harbor 1.1 [environment] fields (defaults: absent from task.toml).
    docker_image: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    network_mode: NetworkAccess | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    healthcheck: Healthcheck | None = None
    gpus: int = Field(0, ge=0)
    # pip requirements of the verifier's own toolchain, installed at build time into a venv
    # (VERIFIER_VENV) that the verifier's PATH finds first (Terminal-Bench's uv boilerplate).
    verifier_packages: list[str] = Field(default_factory=list)


# Under /usr, which the verifier's view takes from the image read-only on every backend
# (docs/sandbox.md, "The verdict is the verifier's own"): an agent that rewrites the venv's
# pytest or interpreter changes only its own layer. Never /opt or /usr/local, which the agent
# can write and (for /usr/local, as a trusted path) the verifier may see.
VERIFIER_VENV = "/usr/lib/t1-verifier"


class Lineage(BaseModel):
    """Where a task came from: parents by content hash, root seed, round and rewrite."""

    model_config = ConfigDict(extra="forbid")

    parents: list[str] = Field(default_factory=list)
    root_seed: str | None = None
    round: int = Field(0, ge=0)
    operator: str | None = None
    family: str | None = None
    source_pool: str = Pool.SEED.value


_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")


def trusted_path_problem(path: object) -> str | None:
    """Why `path` cannot be one of a task's `trusted_paths`, or None when it can.

    A trusted path names a directory of the sandbox whose contents are carried into the
    judge's fresh sandbox (sandbox.judge); a path that is not absolute and normalized
    (`/../../../tmp/victim`, `usr/local`, `/usr/./local/`) could name something else once
    joined to a host path, so it is refused here. That no component is a link is checked
    when it is read (sandbox.carry: lstat and O_NOFOLLOW), where the agent's tree is.
    """
    if not isinstance(path, str):
        return f"must be a string, got {type(path).__name__}"
    if not path.startswith("/"):
        return "must be an absolute path (e.g. /usr/local)"
    if any(ord(c) < 32 for c in path):
        return "must not contain control characters"
    if path == "/":
        return "cannot be the whole root"
    if path.startswith("//") or posixpath.normpath(path) != path:
        return "must be normalized: no '.', '..', '//' or trailing '/' component"
    return None


class Task(BaseModel):
    """A self-contained terminal task.

    `solution` and `verifier` hold the files of `solution/` and `tests/` (relative paths, raw
    bytes). `solution is None` marks a solution-less task. `binary_verifier` marks a verifier
    known to report only pass/fail (no per-assertion record).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    instruction: str
    category: Category = Category.OTHER
    difficulty: Difficulty = Difficulty.UNKNOWN
    tags: list[str] = Field(default_factory=list)
    author: str | None = None
    limits: Limits = Field(default_factory=Limits)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    solution: dict[str, bytes] | None = None
    verifier: dict[str, bytes] = Field(default_factory=dict)
    binary_verifier: bool = False
    lineage: Lineage = Field(default_factory=Lineage)
    # Harbor 1.1: [task] package info, per-phase users/env/network, [solution] env.
    package: PackageInfo | None = None
    agent_config: PhaseConfig = Field(default_factory=PhaseConfig)
    verifier_config: PhaseConfig = Field(default_factory=PhaseConfig)
    solution_env: dict[str, str] = Field(default_factory=dict)
    # The verifier's view (docs/sandbox.md): keep the agent's processes running through the
    # verifier (e.g. tests that talk to a server the agent started), and system paths whose
    # agent-made content the tests may see (e.g. /usr/local for packages the agent installs).
    keep_agent_processes: bool = False
    trusted_paths: list[str] = Field(default_factory=list)
    # What the agent produced that the verifier sees (docs/sandbox.md, "The judge"): these
    # paths of the agent's sandbox are copied into the verifier's, a fresh one from the image,
    # as data. Empty: the working directory. A task whose tests inspect system state the agent
    # configured (a user, /etc/nginx) lists those paths.
    outputs: list[str] = Field(default_factory=list)
    # task.toml text as read, reused verbatim when the metadata is unchanged (round-trip).
    _source_toml: tuple[str, str] | None = PrivateAttr(default=None)

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError(f"id must be a lowercase slug ([a-z0-9._-], <=128 chars), got {v!r}")
        return v

    @field_validator("outputs")
    @classmethod
    def _check_outputs(cls, v: list[str]) -> list[str]:
        for path in v:
            parts = path.split("/")
            if not path.startswith("/") or path == "/" or {"..", ".", ""} & set(parts[1:]):
                raise ValueError(f"outputs are normalized absolute paths below /, got {path!r}")
        return v

    @field_validator("trusted_paths")
    @classmethod
    def _check_trusted_paths(cls, v: list[str]) -> list[str]:
        for path in v:
            problem = trusted_path_problem(path)
            if problem is not None:
                raise ValueError(f"{path!r} {problem}")
        return v

    @property
    def solution_less(self) -> bool:
        return self.solution is None

    @property
    def content_hash(self) -> str:
        """sha256 over every file of the bundle in Harbor layout (paths and bytes)."""

        return bundle_hash(task_files(self))

    @property
    def environment_hash(self) -> str:
        """Key of the cached environment layer: requires, setup steps and files."""
        h = hashlib.sha256()
        h.update(repr((sorted(self.environment.requires), self.environment.setup)).encode())
        h.update(repr(self.environment.workdir).encode())
        h.update(bundle_hash(self.environment.files).encode())
        return h.hexdigest()


def bundle_hash(files: dict[str, bytes]) -> str:
    """Order-independent sha256 of a {relative path: bytes} bundle."""
    h = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        h.update(path.encode())
        h.update(b"\0")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()
