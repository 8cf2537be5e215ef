"""One campaign at a time per store and engine, whatever starts it.

Regression (issue 36): the deployment's limit queued a second run from a UI, but a terminal
`t1 train` ran beside it on the same store and local engine."""

from __future__ import annotations

import threading

import pytest

from pipelines.campaign_slot import campaign_slot, engine_key
from training.campaign_config import load_campaign_config
from warehouse.locks import LockHeldError

pytestmark = pytest.mark.torch


def test_a_second_campaign_on_one_store_and_engine_is_refused_or_waits(tmp_path):
    cfg = load_campaign_config("tiny-cpu", store=tmp_path / "wh", run_id="first")
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with campaign_slot(cfg):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    assert holding.wait(30)
    second = cfg.model_copy(update={"run_id": "second"})
    with pytest.raises(LockHeldError, match=r"campaign local engine on .* is being written by"):
        with campaign_slot(second):  # a terminal `t1 train`: told at once (exit 2)
            pass
    heard: list[str] = []

    def waited(line: str) -> None:  # a flow run from a UI: waits, saying why
        heard.append(line)
        release.set()

    with campaign_slot(second, wait=waited, poll_s=0.05):
        assert not thread.is_alive() or release.is_set()
    thread.join()
    assert heard and heard[0].startswith("waiting for the campaign slot of the local engine on")
    assert "campaign first" in heard[0]  # the holder is named
    # another engine on the same store does not wait
    other = cfg.model_copy(update={"engine_url": "http://10.0.0.5:30000", "run_id": "other"})
    assert engine_key(other) == "http://10.0.0.5:30000"
    with campaign_slot(cfg), campaign_slot(other):
        pass


def test_runs_and_reports_follow_the_store_t1_ui_names(tmp_path, monkeypatch):
    """Regression (issue 36): `t1 ui --store X` wrote runs/ and artifacts/ into the directory
    it was started from; they go beside X now (its children read T1_RUNS_DIR and
    T1_REPORTS_DIR; a launch that names --runs-dir still wins)."""
    from pipelines.campaign_plan import campaign_config
    from pipelines.cli.ui_cmds import beside_store
    from pipelines.defs.resources import forge_config_from_env

    env = beside_store(tmp_path / "team-a" / "wh")
    assert env == {
        "T1_RUNS_DIR": str(tmp_path / "team-a" / "runs"),
        "T1_REPORTS_DIR": str(tmp_path / "team-a" / "artifacts" / "reports"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    common = {"steps": None, "eval_every": None, "pool": "seed", "store": None,
              "policy_path": None}  # fmt: skip
    assert (
        campaign_config("tiny-cpu", runs_dir=None, **common).runs_dir
        == tmp_path / "team-a" / "runs"
    )
    assert campaign_config("tiny-cpu", runs_dir="mine", **common).runs_dir.name == "mine"
    assert forge_config_from_env().reports_dir == env["T1_REPORTS_DIR"]
