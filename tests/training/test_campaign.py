"""The PPO campaign: task drawing by the epoch permutation, task selection guards, and a real
2-step campaign (tiny preset, warm-started policy, local engine, local sandbox)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from training.campaign import campaign_tasks, draw_tasks, run_campaign  # noqa: E402
from training.campaign_config import load_campaign_config  # noqa: E402
from warehouse.permutation import epoch_permutation  # noqa: E402

pytestmark = pytest.mark.torch


def test_draw_tasks_walks_each_epoch_permutation():
    pool, per_step, seed = 5, 2, 7
    drawn = [i for step in range(5) for i in draw_tasks(pool, per_step, step, seed)]  # 10 draws
    assert drawn[:5] == epoch_permutation(pool, seed, 0)
    assert drawn[5:] == epoch_permutation(pool, seed, 1)
    assert sorted(drawn[:5]) == list(range(pool))
    assert drawn[:5] != drawn[5:], "two epochs drew the same order"
    with pytest.raises(ValueError):
        draw_tasks(0, 1, 0, seed)


def test_campaign_tasks_rejects_overlap_and_unknown_ids():
    cfg = load_campaign_config("tiny-cpu")
    train, held_out = campaign_tasks(cfg)
    assert [t.id for t in train] == sorted(cfg.train_task_ids)
    assert [t.id for t in held_out] == cfg.eval_task_ids
    with pytest.raises(ValueError, match="both trained on and held out"):
        campaign_tasks(cfg.model_copy(update={"eval_task_ids": [cfg.train_task_ids[0]]}))
    with pytest.raises(ValueError, match="unknown eval task"):
        campaign_tasks(cfg.model_copy(update={"eval_task_ids": ["no-such-task"]}))


@pytest.mark.sandbox
@pytest.mark.slow
def test_two_step_campaign_trains_publishes_and_records(tmp_path, warm_policy):
    import torch

    from training.engine_local import LocalEngine
    from training.policy import load_policy
    from warehouse import open_snapshot

    cfg = load_campaign_config(
        "tiny-cpu", run_dir=tmp_path / "run", store=tmp_path / "wh", policy_path=warm_policy
    )
    before = {k: v.clone() for k, v in load_policy(warm_policy).state_dict().items()}
    reported = []
    with LocalEngine(warm_policy, seed=0, weight_version="0") as engine:
        cfg = cfg.model_copy(update={"engine_url": engine.base_url})
        result = run_campaign(cfg, on_evaluation=reported.append)
        served_version = engine.weight_version
        served = {k: v.float() for k, v in engine.model.state_dict().items()}

    # the engine serves the last published version, and those weights are not the initial ones
    assert served_version == str(cfg.steps)
    assert any(not torch.allclose(served[k], before[k].to(torch.bfloat16).float()) for k in before)
    published = load_policy(tmp_path / "run" / "weights" / f"v{cfg.steps}").state_dict()
    changed = [k for k in before if not torch.equal(published[k], before[k])]
    assert changed, "the actor update changed no weight"

    assert len(result.metrics) == cfg.steps
    for m in result.metrics:
        for name in ("rollout/reward", "losses/policy", "losses/value", "train/kl"):
            assert name in m and m[name] == m[name], f"{name} missing or NaN in {m}"
    assert [m["weights/version"] for m in result.metrics] == [1.0, 2.0]
    assert (tmp_path / "run" / "config.json").is_file()
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == cfg.steps + 1

    with open_snapshot(tmp_path / "wh") as snap:
        traj = snap.rows(
            "SELECT step, weight_version, reward, assertions_passed, assertions_total, turns "
            "FROM trajectories WHERE campaign = 'tiny-cpu' ORDER BY step"
        )
        evals = snap.rows("SELECT checkpoint, task_id, dense_score FROM evaluations")
    assert len(traj) == cfg.steps * cfg.tasks_per_step
    # step s was sampled by weight version s: generation saw each publish before the next step
    assert [(r["step"], r["weight_version"]) for r in traj] == [(0, 0), (0, 0), (1, 1), (1, 1)]
    assert all(r["reward"] == r["assertions_passed"] <= r["assertions_total"] for r in traj)
    assert all(1 <= r["turns"] <= cfg.harness.max_turns for r in traj)
    assert [(e["checkpoint"], e["task_id"]) for e in evals] == [
        ("v2", "sa-fix-snapshot-script-filenames")
    ]
    assert len(reported) == 1 and reported[0].checkpoint == "v2"
    assert reported[0].dense_score == evals[0]["dense_score"]
