"""`make demo`'s warm start is its own step (issue 25: it was built silently inside the next
step, the longest wait of a first run). Without running the steps: their order, and that the
warm-start step builds and caches the very checkpoint the campaign then reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import _register, demo_cmds
from pipelines.cli.root import app

_register()  # every command on `app`, as `t1` has them

STEPS = ("check_seeds", "run_pipeline", "warm_start", "measure_gap", "run_loop")


@pytest.fixture
def called(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The demo's steps replaced by recorders (each succeeds); the list is the order run."""
    seen: list[str] = []
    for name in STEPS:
        monkeypatch.setattr(demo_cmds, name, lambda *a, _n=name, **k: seen.append(_n) or True)
    return seen


def test_the_warm_start_runs_as_its_own_step_before_what_needs_it(called: list[str]) -> None:
    r = CliRunner().invoke(app, ["demo"])
    assert r.exit_code == 0, r.output
    assert called == list(STEPS)  # after the pools, before the gap measurement and the loop


def test_the_warm_start_step_is_skipped_only_when_nothing_needs_it(called: list[str]) -> None:
    assert CliRunner().invoke(app, ["demo", "--no-train", "--no-loop"]).exit_code == 0
    assert "warm_start" not in called
    called.clear()
    assert CliRunner().invoke(app, ["demo", "--no-train"]).exit_code == 0
    assert called.index("warm_start") < called.index("run_loop")


def test_the_warm_start_step_caches_the_checkpoint_the_campaign_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SFT itself (`_build`, minutes of torch) is replaced by a writer of its marker; the
    cache key, the cache directory and the campaign's lookup are the real ones."""
    import training.warm_start as ws

    monkeypatch.setenv("T1_FORGE_CACHE", str(tmp_path))
    builds: list[Path] = []

    def build(policy, warm, trajectories, texts, out: Path, *, log: bool, device=None) -> None:
        assert log  # the step shows its progress
        builds.append(out)
        out.mkdir(parents=True)
        (out / "warm_start.json").write_text(json.dumps({"steps": warm.steps}))

    monkeypatch.setattr(ws, "_build", build)
    monkeypatch.setattr(demo_cmds.console, "width", 400)
    assert demo_cmds.warm_start()
    first = capsys.readouterr().out
    assert "3. the tiny policy" in first and ", built) " in first, first
    assert demo_cmds.warm_start()  # the second time: read from the cache
    assert ", cached) " in capsys.readouterr().out
    assert len(builds) == 1
    made = ws.warm_started_policy()  # what training.campaign reads when no policy is given
    assert made.parent == tmp_path / "policy" and (made / "warm_start.json").is_file()
    assert ws.warm_started_policy(reuse_stale=True) == made
    assert len(builds) == 1


@pytest.fixture
def no_cgroups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A host with neither cgroup v1 nor v2 (the local backend cannot run), no engine started."""
    from contextlib import nullcontext

    from pipelines import host
    from sandbox import cgroups

    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.delenv(host.BACKEND_ENV, raising=False)
    monkeypatch.setattr(host, "engine_for", lambda backend: nullcontext())


def test_without_a_local_sandbox_the_demo_says_why_and_uses_docker(
    monkeypatch: pytest.MonkeyPatch, no_cgroups: None
) -> None:
    """Regression (issue 36): on a host without cgroup v1 every seed was reported invalid.
    The host is checked first; the docker backend (Podman) runs every trial instead."""
    from pipelines import host

    backends: list[str] = []
    monkeypatch.setattr(host, "engine_problem", lambda: None)
    monkeypatch.setattr(demo_cmds, "check_seeds", lambda w, b: backends.append(b) or True)
    for name in STEPS[1:]:
        monkeypatch.setattr(demo_cmds, name, lambda *a, **k: True)
    r = CliRunner().invoke(app, ["demo"])
    assert r.exit_code == 0, r.output
    line = r.output.splitlines()[0]
    assert line.startswith("the local sandbox cannot run here (no cgroup hierarchy under ")
    assert line.endswith("; using the docker backend (Podman)")
    assert backends == ["docker"]


def test_with_no_backend_at_all_the_demo_exits_2_in_one_line(
    monkeypatch: pytest.MonkeyPatch, no_cgroups: None, called: list[str]
) -> None:
    from pipelines import host

    monkeypatch.setattr(host, "engine_problem", lambda: "no engine answers; podman not found")
    r = CliRunner().invoke(app, ["demo"])
    assert r.exit_code == 2 and called == []
    assert "no sandbox backend can run here: local: no cgroup hierarchy" in r.output
    assert "docker: no engine answers; podman not found" in r.output
