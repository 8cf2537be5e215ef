"""Regression: while seeds were profiled on a fresh sandbox cache, the base image their
workers built (or waited on) was said nowhere, so `t1 synth` and the Dagster synthesis step
were silent for minutes. `seed_parents(log=...)` has the bases first, in the caller, and the
caller's log hears of it."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from sandbox import bases
from synthesis.rounds import SynthConfig, seed_parents
from tasks.harbor import write_harbor
from tasks.model import EnvironmentSpec, Limits, Task
from warehouse.store import Store

TINY_TABLE = """
[recipes.tiny]
suite = "tiny-test-root"

[[images]]
pattern = "tiny:*"
recipe = "tiny"
"""


@pytest.mark.sandbox
def test_seed_profiling_says_the_base_it_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandbox.local

    monkeypatch.setattr(sandbox.local, "STATE_DIR", tmp_path / "state")
    table = tmp_path / "bases.toml"
    table.write_text(TINY_TABLE)
    monkeypatch.setenv(bases.USER_TABLE_ENV, str(table))
    root = bases.base_dir(bases.lookup("tiny:1").recipe)
    away = root.with_name(f"{root.name}.building")
    for d in ("usr/bin", "etc", "tmp"):
        (away / d).mkdir(parents=True)
    os.symlink("usr/bin", away / "bin")
    (away / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (away / "etc/group").write_text("root:x:0:\n")
    seed = Task(
        id="tiny-seed",
        name="tiny-seed",
        instruction="x\n",
        environment=EnvironmentSpec(files={"Dockerfile": b"FROM tiny:1\n"}),
        verifier={"test.sh": b"#!/bin/sh\nexit 0\n"},
        solution={"solve.sh": b"#!/bin/sh\ntrue\n"},
        limits=Limits(build_timeout_s=30, agent_timeout_s=30, verifier_timeout_s=30),
    )
    write_harbor(seed, tmp_path / "seeds" / seed.id)
    lock = open(root.parent / f"{root.name}.lock", "w")  # noqa: SIM115 - closed by finish()
    fcntl.flock(lock, fcntl.LOCK_EX)

    lines: list[str] = []

    def finish() -> None:  # another process building the base: done once waited on (or 60 s)
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        away.rename(root)
        lock.close()

    other = threading.Thread(target=finish)
    other.start()
    store = Store.open(tmp_path / "wh", create=True)
    seed_parents(store, SynthConfig(seeds_dir=tmp_path / "seeds"), log=lines.append)
    other.join()
    assert lines[:1] == ["waiting for base image tiny: another process is building it"], lines
    assert any(ln.startswith("base image tiny ready (waited ") for ln in lines), lines
