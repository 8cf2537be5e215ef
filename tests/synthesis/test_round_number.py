"""`run_round_number`: one round at a time (the Dagster partition path)."""

import pytest

from synthesis.rounds import SynthConfig, run_round_number


def test_a_round_needs_its_predecessor(tmp_path):
    cfg = SynthConfig(rounds=3, per_round=1, campaign="solo")
    with pytest.raises(ValueError, match="round 2 needs round 1"):
        run_round_number(cfg, 2, tmp_path / "wh")
    with pytest.raises(ValueError, match="rounds start at 1"):
        run_round_number(cfg, 0, tmp_path / "wh")


@pytest.mark.sandbox
def test_round_by_round_matches_and_is_idempotent(tmp_path):
    cfg = SynthConfig(
        rounds=2,
        per_round=2,
        campaign="solo",
        seed_ids=("git-bisect-regression", "sa-log-rotate-script"),
    )
    first = run_round_number(cfg, 1, tmp_path / "wh")
    assert first.round == 1 and first.candidates == 2
    again = run_round_number(cfg, 1, tmp_path / "wh")
    assert again == first  # recorded stats come back, nothing re-run
    second = run_round_number(cfg, 2, tmp_path / "wh")
    assert second.round == 2
