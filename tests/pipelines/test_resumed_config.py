"""A resumed run continues with its own settings: `t1 train --resume RUN_DIR` (and the flow's
`resume_from`) reads the run's config.json and takes only the options given from the command
line (`campaign_plan.resumed_config`).

Regression (the kill walk of issue 36, docs/orchestration.md "After a kill"): `--resume` took
the preset, steps, cadences, pool and store from the command line's defaults; a run launched
with its own preset and `--steps 10`, resumed with `--resume RUN_DIR` alone, went on with
tiny-cpu's 2 steps and `checkpoint_every` 10: it ran no step, ended at once, dropped its last
step from metrics.jsonl and rewrote config.json with those settings. (The whole resume through
`t1 train`: tests/pipelines/test_cli_team.py, test_train_resume_continues_the_run.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.campaign_plan import campaign_config, resumed_config
from training.campaign_config import CampaignConfig, load_campaign_config


def stopped_run(tmp_path: Path, **settings: object) -> Path:
    """A run directory as a run killed after its step-2 checkpoint leaves it: config.json
    as `run_campaign` writes it (the config, its extras) and the checkpoint's state.json."""
    run_dir = tmp_path / "runs" / "mine-1"
    cfg = load_campaign_config("tiny-cpu", **settings).model_copy(
        update={"run_id": "mine-1", "runs_dir": tmp_path / "runs", "preset": "/p/mine.toml"}
    )
    (run_dir / "checkpoints" / "step-000002").mkdir(parents=True)
    (run_dir / "config.json").write_text(
        json.dumps({**cfg.model_dump(mode="json"), "policy_path": "/warm", "resumed_from": None})
    )
    state = {"run_id": "mine-1", "step": 2, "weight_version": 2, "data_position": 4,
             "policy_path": "/warm"}  # fmt: skip
    (run_dir / "checkpoints" / "step-000002" / "state.json").write_text(json.dumps(state))
    return run_dir


RECORDED = {"steps": 10, "eval_every": 5, "checkpoint_every": 2, "seed": 7, "lr": 3e-4,
            "pool": "rst", "pool_version": 3, "store": "/w/wh"}  # fmt: skip


def test_a_resumed_run_keeps_its_recorded_settings(tmp_path):
    run_dir = stopped_run(tmp_path, **RECORDED)
    recorded = CampaignConfig.model_validate(
        {k: v for k, v in json.loads((run_dir / "config.json").read_text()).items()
         if k != "resumed_from"}
    )  # fmt: skip
    settings = recorded.model_dump(exclude={"resume_from"})
    for resume in (run_dir, run_dir / "checkpoints" / "step-000002"):
        cfg = resumed_config(resume)
        assert cfg.model_dump(exclude={"resume_from"}) == settings
        assert (cfg.resume_from, cfg.run_id, cfg.runs_dir) == (resume, "mine-1", run_dir.parent)
    # through `campaign_config`, as `t1 train --resume RUN_DIR` alone and the flow call it
    alone = campaign_config(
        None, steps=None, eval_every=None, pool=None, store=None, policy_path=None,
        runs_dir=None, resume_from=str(run_dir),
    )  # fmt: skip
    assert (alone.steps, alone.eval_every, alone.checkpoint_every) == (10, 5, 2)
    assert (alone.pool, alone.pool_version, str(alone.store)) == ("rst", 3, "/w/wh")
    assert (alone.preset, alone.seed, alone.lr) == ("/p/mine.toml", 7, 3e-4)


def test_the_options_given_replace_what_they_set(tmp_path):
    run_dir = stopped_run(tmp_path, **RECORDED)
    longer = resumed_config(run_dir, steps=20, eval_every=4, store="/other", cluster_address="auto")
    assert (longer.steps, longer.eval_every, str(longer.store)) == (20, 4, "/other")
    assert longer.executor.address == "auto" and longer.checkpoint_every == 2
    assert (longer.pool, longer.pool_version) == ("rst", 3)
    assert resumed_config(run_dir, pool_version=4).pool_version == 4
    # another pool: its latest version unless one is given (v3 is the recorded pool's)
    assert resumed_config(run_dir, pool="t1").pool_version is None
    assert resumed_config(run_dir, pool="t1", pool_version=2).pool_version == 2
    assert resumed_config(run_dir, preset="/p/mine.toml").steps == 10  # its own: accepted
    with pytest.raises(ValueError, match=r"--preset tiny-cpu: a resumed run keeps the settings"):
        resumed_config(run_dir, preset="tiny-cpu")


def test_a_run_without_a_readable_config_is_refused_naming_the_file(tmp_path):
    run_dir = stopped_run(tmp_path)
    path = run_dir / "config.json"
    path.unlink()
    with pytest.raises(ValueError, match=rf"^{path}: not a readable run config: No such file"):
        resumed_config(run_dir)
    path.write_text('{"steps": 0}')
    with pytest.raises(ValueError, match=rf"^{path}: not a readable run config: steps: Input"):
        resumed_config(run_dir)
    path.write_text("{")
    with pytest.raises(ValueError, match=rf"^{path}: not a readable run config: Expecting"):
        resumed_config(run_dir)
