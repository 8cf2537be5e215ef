"""Environment conventions for tasks written with a `[t1]` spec (the seeds).

A seed's `requires`, `setup` and `environment/app/**` compile to an ordinary Dockerfile
(`render_dockerfile`, kept in environment/Dockerfile by `t1 task fmt`), which every backend
builds like any other task's: FROM the seed base image (Debian with every tool TOOL_PACKAGES
names), the app files copied to the working directory, other environment files under /setup
while the setup steps run (then removed, so setup scripts never reach the agent).
"""

from __future__ import annotations

import shlex

from tasks.model import Task

BASE_IMAGE = "t1-forge/base:bookworm"  # sandbox/bases.toml: every TOOL_PACKAGES package
SETUP_DIR = "/setup"

# Tool name -> Debian package providing it (tools not listed map to a package of that name).
TOOL_PACKAGES: dict[str, str] = {
    "python3": "python3",
    "pip3": "python3-pip",
    "git": "git",
    "make": "make",
    "gcc": "gcc",
    "cc": "gcc",
    "g++": "g++",
    "jq": "jq",
    "sqlite3": "sqlite3",
    "curl": "curl",
    "awk": "gawk",
    "gawk": "gawk",
    "sed": "sed",
    "tar": "tar",
    "gzip": "gzip",
    "xz": "xz-utils",
    "zip": "zip",
    "unzip": "unzip",
    "bc": "bc",
    "file": "file",
    "patch": "patch",
    "diff": "diffutils",
    "cmp": "diffutils",
    "openssl": "openssl",
    "sha256sum": "coreutils",
    "crontab": "cron",
    "ps": "procps",
    "ip": "iproute2",
    "ssh-keygen": "openssh-client",
    "perl": "perl",
    "dpkg-deb": "dpkg",
    "shellcheck": "shellcheck",
}
# Tools present on every Debian base image.
BASE_TOOLS = frozenset(
    {
        "bash",
        "sh",
        "cat",
        "ls",
        "cp",
        "mv",
        "rm",
        "mkdir",
        "grep",
        "sed",
        "tar",
        "gzip",
        "sha256sum",
        "sort",
        "uniq",
        "wc",
        "head",
        "tail",
        "find",
        "xargs",
        "chmod",
        "chown",
        "diff",
        "cmp",
        "date",
        "env",
        "tr",
        "cut",
        "tee",
        "touch",
        "ln",
        "stat",
        "dpkg-deb",
    }
)


def app_files(task: Task) -> dict[str, bytes]:
    """Files copied into the working directory: environment/app/** without the prefix."""
    return {
        p.removeprefix("app/"): b for p, b in task.environment.files.items() if p.startswith("app/")
    }


def setup_files(task: Task) -> dict[str, bytes]:
    """Files available under /setup during setup only (not app/, not the Dockerfile)."""
    return {
        p: b
        for p, b in task.environment.files.items()
        if not p.startswith("app/") and p != "Dockerfile"
    }


def debian_packages(requires: list[str]) -> list[str]:
    pkgs = {TOOL_PACKAGES.get(t, t) for t in requires if t not in BASE_TOOLS}
    return sorted(pkgs)


# First line of a Dockerfile rendered from a [t1] spec: such a file is output, not source.
RENDERED_MARK = "# rendered from task.toml [t1] by `t1 task fmt`: edit the spec, not this file"


def is_rendered(dockerfile: str) -> bool:
    return dockerfile.startswith(RENDERED_MARK + "\n")


def render_dockerfile(task: Task) -> str:
    """The Dockerfile of a `[t1]` spec: the one build path for seeds and synthesized tasks."""
    env = task.environment
    lines = [RENDERED_MARK, f"FROM {BASE_IMAGE}"]
    extra = [p for p in debian_packages(env.requires) if p not in set(TOOL_PACKAGES.values())]
    if extra:
        lines.append(
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            + " ".join(extra)
            + " && rm -rf /var/lib/apt/lists/*"
        )
    lines.append(f"WORKDIR {env.workdir}")
    if app_files(task):
        lines.append(f"COPY app/ {env.workdir.rstrip('/')}/")
    setup = sorted(setup_files(task))
    for rel in setup:
        lines.append(f"COPY {_docker_path(rel)} {SETUP_DIR}/{_docker_path(rel)}")
    for step in env.setup:
        lines.append("RUN " + " ".join(["bash", "-c", shlex.quote(step)]))
    if setup:
        lines.append(f"RUN rm -rf {SETUP_DIR}")
    return "\n".join(lines) + "\n"


def _docker_path(rel: str) -> str:
    if any(c in rel for c in " \t\"'$\\*?["):
        raise ValueError(f"environment file name {rel!r} cannot be written in a Dockerfile")
    return rel
