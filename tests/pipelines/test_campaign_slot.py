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
