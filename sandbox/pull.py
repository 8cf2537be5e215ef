"""Real base images, where a machine has them: the FROM image itself instead of its offline
recipe (docs/images.md).

With `T1_PULL_IMAGES=auto` (the default) and a Docker-API engine answering (DOCKER_HOST or
the default socket), a FROM name the engine has, or can pull, is exported once into
`$T1_SANDBOX_STATE/pulled/<image id>/` and used as the base layer with the image's own config.
Images this project imported into the engine from its offline recipes (labelled
`sandbox.podman.BASE_LABEL`) do not count. Anything else — no engine, no such image, no
registry (this project's CI machine reaches none) — falls back to the recipe table.
`T1_PULL_IMAGES=never` always uses the recipes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from sandbox.docker_api import force_remove
from sandbox.idmap import STORAGE_TAG, shift_tree
from sandbox.image import DEFAULT_PATH, ImageConfig

PULL_ENV = "T1_PULL_IMAGES"


def pull_mode() -> str:
    mode = os.environ.get(PULL_ENV, "auto").strip().lower() or "auto"
    if mode not in ("auto", "never"):
        raise ValueError(f"{PULL_ENV} must be 'auto' or 'never', got {mode!r}")
    return mode


def config_of(attrs: dict[str, Any]) -> ImageConfig:
    """The image config a sandbox honours, from an engine's image attributes (pure)."""
    cfg = attrs.get("Config") or {}
    env = dict(e.split("=", 1) for e in (cfg.get("Env") or []) if "=" in e)
    env.setdefault("PATH", DEFAULT_PATH)
    shell = tuple(cfg.get("Shell") or ("/bin/sh", "-c"))
    cmd, entry = cfg.get("Cmd"), cfg.get("Entrypoint")
    return ImageConfig(
        env=env,
        workdir=cfg.get("WorkingDir") or "/",
        user=cfg.get("User") or "",
        shell=shell,
        cmd=tuple(cmd) if cmd else None,
        entrypoint=tuple(entry) if entry else None,
    )


def pulled_base(name: str, state_dir: Path) -> tuple[Path, ImageConfig, str] | None:
    """(root filesystem, config, image id) of the real image `name`, or None (use the recipe)."""
    if pull_mode() == "never":
        return None
    return _pulled(name, str(state_dir))


@lru_cache(maxsize=256)
def _pulled(name: str, state_dir: str) -> tuple[Path, ImageConfig, str] | None:
    """Per process: a name that could not be had is not asked for again."""
    from sandbox.base import SandboxUnavailable
    from sandbox.docker_api import docker_client
    from sandbox.podman import BASE_LABEL

    try:
        client = docker_client()
    except SandboxUnavailable:
        return None
    try:
        try:
            image = client.images.get(name)
        except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound: try the registry
            repo, sep, tag = name.rpartition(":")
            if not sep or "/" in tag:  # no tag (a registry port is not one)
                repo, tag = name, "latest"
            image = client.images.pull(repo, tag=tag)
        if BASE_LABEL in (image.labels or {}):
            return None  # our own recipe, imported: not the real image
        return _export(client, image, Path(state_dir) / "pulled")
    except Exception:  # noqa: BLE001 - no registry, no such image, an engine error: recipe
        return None
    finally:
        client.close()


def _export(client: Any, image: Any, root: Path) -> tuple[Path, ImageConfig, str]:
    key = str(image.id).split(":")[-1][:16]
    final = root / f"{key}-{STORAGE_TAG}"
    config = config_of(image.attrs)
    if (final / "rootfs").is_dir():
        return final / "rootfs", config, key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "rootfs").is_dir():
            return final / "rootfs", config, key
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".pull-"))
        container = client.containers.create(image.id, command=["true"])
        try:
            (tmp / "rootfs").mkdir()
            tar = subprocess.Popen(
                ["tar", "--numeric-owner", "--xattrs", "-xf", "-", "-C", str(tmp / "rootfs")],
                stdin=subprocess.PIPE,
            )
            assert tar.stdin is not None
            for chunk in container.export():
                tar.stdin.write(chunk)
            tar.stdin.close()
            if tar.wait() != 0:
                raise RuntimeError(f"extracting image {image.id} failed")
            shift_tree(tmp / "rootfs")
            (tmp / "config.json").write_text(json.dumps(image.attrs.get("Config") or {}))
            tmp.rename(final)
        finally:
            force_remove(container)
            shutil.rmtree(tmp, ignore_errors=True)
    return final / "rootfs", config, key
