"""Environment conventions shared by every backend.

Inside a sandbox: `environment/app/**` is copied to the working directory (default /app);
other `environment/` files (except the Dockerfile) are placed under /setup while the setup
steps run and removed afterwards, so setup scripts never reach the agent. The Dockerfile for
the docker backend is rendered from the same spec.
"""

from __future__ import annotations

import shlex

from tasks.model import Task

BASE_IMAGE = "debian:bookworm-slim"
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


def render_dockerfile(task: Task) -> str:
    """The Dockerfile equivalent of the task's environment spec (docker backend)."""
    env = task.environment
    lines = [f"FROM {BASE_IMAGE}"]
    pkgs = debian_packages(env.requires)
    if pkgs:
        lines.append(
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            + " ".join(pkgs)
            + " && rm -rf /var/lib/apt/lists/*"
        )
    lines.append(f"WORKDIR {env.workdir}")
    if app_files(task):
        lines.append(f"COPY app/ {env.workdir}/")
    if setup_files(task):
        lines.append(f"COPY . {SETUP_DIR}/")
        lines.append(f"RUN rm -rf {SETUP_DIR}/app {SETUP_DIR}/Dockerfile")
    for step in env.setup:
        lines.append("RUN " + " ".join(["bash", "-c", shlex.quote(step)]))
    if setup_files(task):
        lines.append(f"RUN rm -rf {SETUP_DIR}")
    lines.append("RUN mkdir -p /logs/verifier /logs/agent")
    return "\n".join(lines) + "\n"
