"""sandbox.trusted without a sandbox: what opens as a trusted path, and the check that the
engine mounted the very directory that was opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import trusted
from sandbox.base import AgentSabotage


def test_only_link_free_directories_below_the_root_open(tmp_path: Path):
    root = tmp_path / "root"
    (root / "usr" / "local").mkdir(parents=True)
    (root / "usr" / "file").write_text("x")
    outside = tmp_path / "host"
    outside.mkdir()
    os.symlink(str(outside), root / "srv")  # the agent's link, absolute: a host path here
    os.symlink("usr", root / "u")  # a relative link inside the root: refused all the same
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        opened = trusted.open_trusted(fd, "/usr/local")
        assert opened is not None
        os.close(opened)
        for path in ("/srv", "/srv/x", "/u/local", "/usr/file", "/missing", "/../host",
                     "/usr/local/../../../host", "usr/local"):  # fmt: skip
            assert trusted.open_trusted(fd, path) is None, path
    finally:
        os.close(fd)


def test_a_directory_swapped_after_the_open_is_sabotage(tmp_path: Path):
    """What the engine mounted is compared with what was opened (a kept agent process could
    swap a component for a link between the two). Here the "container" is the agent's root
    itself: the same directory first, then another one at the place."""
    agent = tmp_path / "agent"
    (agent / "usr" / "local").mkdir(parents=True)
    fd = os.open(agent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with trusted.opened(fd, ["/usr/local"]) as held:
            assert [p for p, _ in held] == ["/usr/local"]
            trusted.check_bound(str(agent), held)
            (agent / "usr" / "local").rename(agent / "usr" / "was")
            (agent / "usr" / "local").mkdir()
            with pytest.raises(AgentSabotage):
                trusted.check_bound(str(agent), held)
    finally:
        os.close(fd)
