"""The lock (constraints.txt, what `make install` installs) agrees with pyproject.toml, and the
environment the tests run in is the lock's.

Regression (issue 36): torch was pinned but transformers and tokenizers were ranges and no
lock existed: a fresh install took transformers 5.25.0 while the committed learning rows were
built with 5.24.0, and a rebuild under other versions moved an SFT arm from 40.7% to 20.7%."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from benchmarks.provenance import (
    LOCK,
    canonical,
    locked_versions,
    same_version,
    with_environment,
)

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("train", "orchestrate", "dev")  # what the Makefile installs


def installed_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in EXTRAS:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def test_the_makefile_installs_from_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt -e '.[" + ",".join(EXTRAS) + "]'" in makefile
    assert "$(STAMP): pyproject.toml constraints.txt" in makefile  # a new lock reinstalls


def test_every_requirement_is_pinned_inside_its_range():
    pins = locked_versions(LOCK.read_text())
    problems = []
    for req in installed_requirements():
        name = canonical(req.name)
        if name not in pins:
            problems.append(f"{req}: not in constraints.txt")
        elif not req.specifier.contains(Version(pins[name]), prereleases=True):
            problems.append(f"{req}: locked at {pins[name]}, outside the range")
    assert problems == []


def test_torch_stays_the_pinned_cpu_build():
    """The lock pins torch as pyproject does, without a local label that would need an index
    of its own; pip prefers the +cpu wheel (PIP_FIND_LINKS) to PyPI's build of the same
    version, so the lock never pulls another torch."""
    (torch,) = [r for r in installed_requirements() if r.name == "torch"]
    assert str(torch.specifier) == "==2.13.0"
    assert locked_versions(LOCK.read_text())["torch"] == "2.13.0"
    assert same_version("2.13.0+cpu", "2.13.0") and not same_version("2.13.1", "2.13.0")


def test_a_bad_lock_line_is_named():
    with pytest.raises(ValueError, match="line 2: not a `name==version` pin: 'torch>=2'"):
        locked_versions("# a comment\ntorch>=2\n")


def test_the_environment_is_the_locks():
    """The tests run in what `make install` made from the lock (a venv that predates the lock
    is reinstalled by make, whose stamp depends on constraints.txt)."""
    pins = locked_versions(LOCK.read_text())
    for req in installed_requirements():
        name = canonical(req.name)
        installed = metadata.version(name)
        assert same_version(installed, pins[name]), f"{name} {installed}, locked {pins[name]}"


def test_benchmark_rows_record_their_environment():
    row = with_environment({"arm": "sft", "resolved": 0.4})
    env = row["environment"]
    assert env["transformers"] == metadata.version("transformers")
    assert env["lock"] != "-" and isinstance(env["lock_mismatches"], list)
    assert with_environment(row) is row  # a cached row keeps what it was measured with
