"""A killed campaign can always be resumed, and a resumed run's metrics hold each step once;
a preset's validation error names the field.

Regressions (issue 36): `checkpoint_every` defaulted to 0 and no preset set it, so a campaign
killed mid-run had no checkpoint to `--resume` from; with a preset that did checkpoint, a run
killed between checkpoints and resumed logged the replayed steps to metrics.jsonl again (step
1 twice); a bad preset value was reported as the file's name and pydantic's banner only.
(The whole kill-and-resume of a real campaign: tests/training/test_campaign.py,
test_resume_reproduces_a_straight_run.)"""

from __future__ import annotations

import json

import pytest

from training.campaign import keep_metrics_before
from training.campaign_config import CampaignConfig, load_campaign_config
from training.checkpoint import checkpoint_due


def saves(cfg: CampaignConfig, steps: int, minutes_per_step: float) -> list[int]:
    """The steps after which a run of `cfg` saves, each step taking `minutes_per_step`."""
    out, since = [], 0.0
    for step in range(1, steps + 1):
        since += minutes_per_step * 60
        if checkpoint_due(
            step, last=step == steps, every=cfg.checkpoint_every,
            minutes=cfg.checkpoint_minutes, since_s=since,
        ):  # fmt: skip
            out.append(step)
            since = 0.0
    return out


def test_campaigns_checkpoint_periodically_by_default():
    cfg = CampaignConfig()
    assert saves(cfg, 25, 0.1) == [10, 20, 25]  # short steps: every 10th
    assert saves(cfg, 12, 4.0) == [3, 6, 9, 10, 12]  # long steps: every 10 minutes too
    for preset in ("tiny-cpu", "fileops-learning", "countdown-busy"):
        cfg = load_campaign_config(preset)  # no preset turns it off
        assert saves(cfg, 30, 0.5)[:2] == [10, 20], preset
    off = CampaignConfig(checkpoint_every=0, checkpoint_minutes=None)
    assert saves(off, 25, 1.0) == [25]  # only the last, as every run used to


def test_a_resumed_run_logs_each_step_once(tmp_path):
    """What a run killed after step 3 (checkpoint after step 2) left, cut mid-line by the
    kill, is trimmed to the steps before the checkpoint; the resumed run logs 2 and 3."""
    metrics = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "rollout/reward": 0.5}) for s in range(4)]
    metrics.write_text("\n".join(lines) + '\n{"step": 4, "rollout/rew')
    assert keep_metrics_before(metrics, 2) == 3
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [0, 1]
    assert keep_metrics_before(metrics, 2) == 0  # idempotent
    assert keep_metrics_before(tmp_path / "none.jsonl", 2) == 0


def test_a_bad_preset_value_names_the_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('campaign = "x"\nsteps = 0\n[harness]\nmax_turns = "many"\n')
    with pytest.raises(ValueError) as e:
        load_campaign_config(bad)
    assert str(e.value) == (
        f"{bad}: steps: Input should be greater than or equal to 1 (got 0); and 1 more"
    )
    bad.write_text('campaign = "x"\n[harness]\nmax_turns = "many"\n')
    with pytest.raises(ValueError, match=r"bad.toml: harness.max_turns: Input should be a valid"):
        load_campaign_config(bad)
