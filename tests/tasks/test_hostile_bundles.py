"""A hostile task author's bundle, read on the host (no sandbox): its task.toml and its links.

A task's files are read by the loader on the host before any sandbox exists, so what they
name must never reach a host path: a `trusted_paths` entry is bound into the verifier's
view by the backends, a link in the bundle would be read as the link's target.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tasks.corpus import load_task
from tasks.errors import TaskFormatError
from tasks.harbor import load_harbor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def harbor_task(tmp_path: Path, t1: str = "") -> Path:
    src = tmp_path / "task"
    shutil.copytree(FIXTURES / "harbor" / "csv-report", src)
    if t1:
        toml = src / "task.toml"
        toml.write_text(toml.read_text() + "\n[t1]\n" + t1 + "\n")
    return src


# Varied surface forms of a path that does not name the directory it seems to once joined to
# a host path (the docker backend bound `/../../../tmp/victim` read-write into the verifier).
BAD_TRUSTED = {
    "dotdot-escape": "/../../../tmp/victim",
    "dotdot-inside": "/usr/local/../../etc",
    "relative": "usr/local",
    "dot": "/usr/./local",
    "trailing-slash": "/usr/local/",
    "double-slash": "//usr/local",
    "root": "/",
    "newline": "/usr/local\n/etc",
    "empty": "",
}


@pytest.mark.parametrize("name", sorted(BAD_TRUSTED))
def test_bad_trusted_path_is_a_one_line_error_naming_the_file_and_field(tmp_path, name):
    value = BAD_TRUSTED[name]
    src = harbor_task(tmp_path, f"trusted_paths = [{value!r}]".replace("'", '"'))
    with pytest.raises(TaskFormatError) as e:
        load_harbor(src)
    text = str(e.value)
    assert "task.toml" in text and "[trusted_paths]" in text, text
    assert "\n" not in text, text


def test_normalized_absolute_trusted_paths_load():
    from tasks.model import trusted_path_problem

    assert trusted_path_problem("/usr/local") is None
    assert trusted_path_problem("/opt/tool-1.2/lib") is None
    assert all(trusted_path_problem(v) for v in BAD_TRUSTED.values())


# -- links in the bundle ------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["environment", "tests", "solution"])
def test_a_bundle_directory_that_links_out_is_refused(tmp_path, entry):
    """`environment -> /etc` read this host's files into the build context (and a `COPY .`
    handed them to the agent): refused, naming the link."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("host-secret")
    (host / "test.sh").write_text("#!/bin/bash\n")
    (host / "solve.sh").write_text("#!/bin/bash\n")
    src = harbor_task(tmp_path)
    shutil.rmtree(src / entry)
    os.symlink(host, src / entry)
    with pytest.raises(TaskFormatError) as e:
        load_harbor(src)
    assert entry in str(e.value) and "symbolic link" in str(e.value), str(e.value)


@pytest.mark.parametrize("entry", ["instruction.md", "task.toml"])
def test_a_bundle_file_that_links_out_is_refused(tmp_path, entry):
    """`instruction.md -> /etc/shadow` gave this host's file to the agent as its instruction."""
    host = tmp_path / "host-file"
    host.write_bytes((harbor_task(tmp_path / "copy") / entry).read_bytes() + b"\nhost-secret\n")
    src = harbor_task(tmp_path)
    (src / entry).unlink()
    os.symlink(host, src / entry)
    with pytest.raises(TaskFormatError) as e:
        load_task(src)
    assert entry in str(e.value) and "symbolic link" in str(e.value), str(e.value)


def test_links_and_fifos_inside_the_bundle_are_not_read(tmp_path):
    """A link inside environment/ (to a host file) and a FIFO are skipped, never read (the
    FIFO would hang the loader): contained before, kept."""
    host = tmp_path / "host-file"
    host.write_text("host-secret")
    src = harbor_task(tmp_path)
    (src / "environment" / "data").mkdir(parents=True, exist_ok=True)
    os.symlink(host, src / "environment" / "data" / "leak")
    os.mkfifo(src / "environment" / "data" / "fifo")
    task = load_harbor(src)
    assert not any(k.startswith("data/") for k in task.environment.files), task.environment.files
    assert all(b"host-secret" not in v for v in task.environment.files.values())
