"""The learning benchmark's verdict and result cache on synthetic numbers (no model, no run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "ppo_learning.py"
_spec = importlib.util.spec_from_file_location("ppo_learning_bench", _PATH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["ppo_learning_bench"] = bench
_spec.loader.exec_module(bench)

SEEDS = (0, 1, 2)


def rows(rates: dict[str, tuple[float, ...]], n: int = 300) -> list[dict]:
    return [
        {"arm": arm, "seed": s, "resolved": r, "dense": 4 * r, "samples": n, "steps": 0,
         "minutes": 1.0}
        for arm, rs in rates.items()
        for s, r in zip(SEEDS, rs, strict=True)
    ]  # fmt: skip


BASE = {
    "sft-t0.5": (0.40, 0.41, 0.39),
    "sft-t0.7": (0.35, 0.36, 0.34),
    "sft-t1.0": (0.25, 0.26, 0.24),
    "placebo": (0.24, 0.25, 0.23),
}


def test_gain_shown_only_beyond_two_standard_errors_and_the_seed_spread():
    # SE of one arm's mean ~ 0.028 / sqrt(3) = 0.016; of the difference ~ 0.023: margin ~ 4.6
    clear = bench.verdict(rows({**BASE, "ppo-dense": (0.52, 0.53, 0.51)}), seeds=SEEDS)
    assert clear.startswith("verdict: gain shown"), clear
    # beats T = 1.0 by far, but not the best temperature by 2 SE: sharpening, not learning
    sharp = bench.verdict(rows({**BASE, "ppo-dense": (0.43, 0.44, 0.42)}), seeds=SEEDS)
    assert sharp.startswith("verdict: no gain shown") and "sft-t0.5" in sharp, sharp
    # a mean far above, but seeds spread wider than the difference
    spread = bench.verdict(rows({**BASE, "ppo-dense": (0.30, 0.75, 0.50)}), seeds=SEEDS)
    assert spread.startswith("verdict: no gain shown"), spread
    # the placebo does as well as PPO: the update's size, not its signal
    placebo = bench.verdict(
        rows({**BASE, "placebo": (0.51, 0.52, 0.50), "ppo-dense": (0.52, 0.53, 0.51)}),
        seeds=SEEDS,
    )
    assert placebo.startswith("verdict: no gain shown") and "does not beat" in placebo


def test_no_verdict_without_every_seed_of_every_compared_arm():
    partial = [
        r
        for r in rows({**BASE, "ppo-dense": (0.9, 0.9, 0.9)})
        if r["seed"] != 2 or r["arm"] != "placebo"
    ]
    out = bench.verdict(partial, seeds=SEEDS)
    assert out.startswith("incomplete") and "placebo" in out


def test_standard_error_of_the_planned_evaluation_is_at_most_three_points():
    assert bench.standard_error(0.5, 100 * 3) <= 0.03
    assert bench.standard_error(0.5, 40 * 2) > 0.05  # the old evaluation


def test_results_are_cached_per_arm_and_seed_and_resumed(tmp_path):
    results = tmp_path / "results"
    todo = bench.pending(["ppo-dense", "sft-t0.5", "placebo"], [0, 1], bench.load_results(results))
    assert todo == [("sft-t0.5", 0), ("ppo-dense", 0), ("placebo", 0),
                    ("sft-t0.5", 1), ("ppo-dense", 1), ("placebo", 1)]  # fmt: skip
    for row in rows({"sft-t0.5": (0.4, 0.4, 0.4)})[:2]:
        bench.save_result(results, row)
    (results / "ppo-dense-s0.tmp").write_text("{half")  # a kill mid-write is not a result
    loaded = bench.load_results(results)
    assert [(r["arm"], r["seed"]) for r in loaded] == [("sft-t0.5", 0), ("sft-t0.5", 1)]
    assert bench.pending(["ppo-dense", "sft-t0.5"], [0, 1], loaded) == [
        ("ppo-dense", 0),
        ("ppo-dense", 1),
    ]
    assert "| sft-t0.5 | 2 |" in bench.table(loaded)


def test_arm_summary_spread_and_standard_error():
    s = bench.arm_summary(rows({"placebo": (0.2, 0.3, 0.25)}, n=100), "placebo")
    assert s["spread"] == pytest.approx(0.1) and s["resolved"] == pytest.approx(0.25)
    per_seed = [bench.standard_error(r, 100) for r in (0.2, 0.3, 0.25)]
    assert s["se"] == pytest.approx(sum(x * x for x in per_seed) ** 0.5 / 3)


def test_no_verdict_from_rows_of_two_sft_checkpoints():
    mixed = rows({**BASE, "ppo-dense": (0.9, 0.9, 0.9)})
    for r in mixed:
        r["checkpoint"] = "a" * 16 if r["seed"] < 2 else "b" * 16
    out = bench.verdict(mixed, seeds=SEEDS)
    assert out.startswith("incomplete") and "2 SFT checkpoints" in out, out
    for r in mixed:
        r["checkpoint"] = "a" * 16
    assert bench.verdict(mixed, seeds=SEEDS).startswith("verdict: gain shown")


def test_cached_rows_of_another_checkpoint_are_run_again(tmp_path):
    results = tmp_path / "results"
    old, new = rows({"sft-t0.5": (0.4, 0.4, 0.4)})[:2]
    old["checkpoint"], new["checkpoint"] = "a" * 16, "b" * 16
    bench.save_result(results, old)  # seed 0, from checkpoint a
    bench.save_result(results, new)  # seed 1, from checkpoint b
    current = bench.of_checkpoint(bench.load_results(results), "b" * 16)
    assert bench.pending(["sft-t0.5"], [0, 1], current) == [("sft-t0.5", 0)]


def test_checkpoint_id_is_the_weights_digest(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "model.safetensors").write_bytes(b"w" * 10)
    (tmp_path / "b" / "model.safetensors").write_bytes(b"w" * 9 + b"v")
    ids = {bench.checkpoint_id(tmp_path / d) for d in "ab"}
    assert len(ids) == 2 and all(len(i) == 16 for i in ids)


def test_the_rejection_sampling_baseline_is_compared_but_does_not_gate():
    """PPO beating SFT and the placebo but not the rejection-sampling baseline: the verdict
    stays 'gain shown' (the protocol's claim) and says on its own line that it does not beat
    the cheap alternative; without every seed of the baseline there is no such line."""
    rates = {**BASE, "ppo-dense": (0.52, 0.53, 0.51), "rejection-sft": (0.55, 0.56, 0.54)}
    text = bench.verdict(rows(rates), seeds=SEEDS)
    assert text.startswith("verdict: gain shown"), text
    line = [x for x in text.splitlines() if "rejection-sft" in x]
    assert len(line) == 1 and "does not beat" in line[0]
    partial = [r for r in rows(rates) if r["arm"] != "rejection-sft" or r["seed"] != 2]
    assert "rejection-sft" not in bench.verdict(partial, seeds=SEEDS)


def test_rejection_keeps_resolved_trials_and_fits_their_sampled_tokens(random_checkpoint):
    """Only resolved, rewardable trials are kept, as TITO streams; fitting them raises the
    likelihood of their sampled ids."""
    import time

    import torch

    from tests.training.synthetic import Finish, rollout
    from tests.training.test_harness import FakeSandbox, ScriptedEngine
    from training.chat_format import IM_END
    from training.chat_tokenizer import load_chat_tokenizer
    from training.harness import HarnessConfig, PolicyAgent
    from training.logprobs import batch_logprobs
    from training.policy import load_policy

    tok = load_chat_tokenizer(random_checkpoint)
    agent = PolicyAgent(ScriptedEngine(tok), tok, HarnessConfig(max_turns=2))
    trials = []
    for i, passed in enumerate((1, 0, 1)):
        traj = agent.rollout(FakeSandbox(), "t", "Say hi.", time.monotonic() + 60)
        trials.append(rollout(traj.turns, "turn_limit", Finish(passed, 1), slot=i))
    kept = bench.resolved_streams(
        trials, im_end_id=tok.convert_tokens_to_ids(IM_END), layers=2, top_k=2
    )
    assert len(kept) == 2 and all(k.loss_mask.any() for k in kept)
    model = load_policy(random_checkpoint)

    def mean_logp() -> float:
        lp = batch_logprobs(model, [kept[0].token_ids])[0]
        return float(lp[torch.as_tensor(kept[0].loss_mask)].mean())

    before = mean_logp()
    losses = bench.fit_streams(model, kept, steps=5, batch=2, lr=1e-2, seed=0)
    assert losses[-1] < losses[0] and mean_logp() > before + 0.1
