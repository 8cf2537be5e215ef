"""What a built environment is, for the runtime: read-only layers plus Docker's image config.

The builder (`sandbox.build`) turns a task's Dockerfile into an `Image`; the local runtime
stacks `layers` under each sandbox's writable layer and starts commands with `config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageConfig:
    """The parts of a Docker image config a sandbox honours."""

    env: dict[str, str] = field(default_factory=lambda: {"PATH": DEFAULT_PATH})
    workdir: str = "/"
    user: str = ""  # "" = root
    shell: tuple[str, ...] = ("/bin/sh", "-c")
    cmd: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Image:
    """Read-only layer directories, bottom (the base root filesystem) first, and the config.

    `key` identifies the top layer (its instruction's content and its parent's key).
    """

    layers: tuple[Path, ...]
    config: ImageConfig
    key: str
