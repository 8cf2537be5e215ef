"""Real base images where an engine has them (sandbox.pull): a FROM name no recipe maps is
built from the engine's image, config included; without an engine, the recipes."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from sandbox.build import ImageBuildError, base_image, build_image
from sandbox.local import LocalStepRunner
from sandbox.pull import config_of
from tasks.model import EnvironmentSpec, Task


def test_config_of_maps_the_engine_config():
    attrs = {
        "Config": {
            "Env": ["PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8"],
            "WorkingDir": "/srv",
            "User": "app",
            "Cmd": ["python3"],
            "Entrypoint": None,
        }
    }
    c = config_of(attrs)
    assert c.env == {"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8"}
    assert (c.workdir, c.user, c.cmd, c.entrypoint) == ("/srv", "app", ("python3",), None)
    assert config_of({}).workdir == "/" and "PATH" in config_of({}).env


def test_without_an_engine_an_unmapped_name_is_still_the_clear_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(ImageBuildError) as e:
        base_image(f"example.invalid/nothing-{uuid.uuid4().hex[:6]}:1")
    assert e.value.kind.value == "unknown_base"


def _inside(root: Path, path: str) -> Path:
    """`path` resolved within `root` (absolute symlinks point inside it, not at the host)."""
    p = Path(path)
    for _ in range(40):
        target = root / str(p).lstrip("/")
        if not target.is_symlink():
            parent = target.parent.resolve()  # relative symlinks in the directories
            return parent / target.name
        link = Path(target.readlink())
        p = link if link.is_absolute() else p.parent / link
    raise RuntimeError(f"symlink loop at {path}")


def _tiny_rootfs(dest: Path) -> None:
    """/bin/sh and the libraries it needs, copied from an offline base: a few MB."""
    base = base_image("debian:bookworm-slim").layers[0]
    libs = subprocess.run(
        ["chroot", str(base), "ldd", "/bin/dash"], capture_output=True, text=True, check=True
    ).stdout
    for p in ["/bin/dash"] + [w for w in libs.split() if w.startswith("/")]:
        target = dest / p.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_inside(base, p), target)
    (dest / "bin" / "sh").symlink_to("dash")
    (dest / "marker").write_text("from the engine\n")


@pytest.mark.sandbox
def test_an_engine_image_is_the_base(docker_engine, tmp_path):
    from sandbox.docker_api import docker_client

    name = f"t1-test/pulled-{uuid.uuid4().hex[:8]}:1"
    _tiny_rootfs(tmp_path / "root")
    tar = subprocess.run(
        ["tar", "-C", str(tmp_path / "root"), "-cf", "-", "."], capture_output=True, check=True
    ).stdout
    client = docker_client()
    try:
        out = client.api.import_image_from_data(tar, changes=["ENV GREETING=hello"])
        image_id = out.strip().split('"')[-2] if '"' in str(out) else str(out).strip()
        repo, tag = name.rsplit(":", 1)
        client.images.get(image_id).tag(repo, tag)
        dockerfile = f'FROM {name}\nRUN test -f /marker && test "$GREETING" = hello && : > /built\n'
        task = Task(
            id="pulled",
            name="pulled",
            instruction="x\n",
            environment=EnvironmentSpec(files={"Dockerfile": dockerfile.encode()}),
            verifier={"test.sh": b"#!/bin/sh\n"},
        )
        image = build_image(task, LocalStepRunner())
        assert "/pulled/" in str(image.layers[0])
        assert image.config.env.get("GREETING") == "hello"
        assert any((layer / "built").exists() for layer in image.layers[1:])
    finally:
        client.images.remove(name, force=True)
        client.close()
