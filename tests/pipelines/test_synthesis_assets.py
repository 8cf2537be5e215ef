"""Synthesis assets: rounds run in order in one asset, whatever the launch asks; `add_rounds`
adds rounds after the last recorded one; validation trials and their blocking check read the
same store."""

import dagster as dg
import pytest

from pipelines.defs.resources import ForgeConfig
from pipelines.defs.synthesis_assets import (
    accepted_tasks_have_a_passing_oracle,
    synthesis_rounds,
    target_rounds,
    validation_trials,
)
from pipelines.defs.task_assets import seed_corpus
from warehouse import open_snapshot

pytestmark = [pytest.mark.orchestration]


def test_target_rounds_continues_after_the_last_recorded_round():
    assert target_rounds(set(), 3, 0) == 3
    assert target_rounds({1, 2, 3}, 3, 0) == 3  # nothing to do
    assert target_rounds({1, 2, 3, 4}, 3, 0) == 4  # report every recorded round
    assert target_rounds({1, 2}, 3, 2) == 4
    assert target_rounds(set(), 3, 1) == 1


@pytest.mark.sandbox
def test_rounds_in_order_then_add_one_then_validation_trials(tmp_path):
    """Regression: rounds as partitions ran side by side from the UI and rounds 2 and 3
    failed ("round 2 needs round 1 recorded first"); one asset now runs them in order."""
    forge = ForgeConfig(
        store=str(tmp_path / "wh"),
        rounds=2,
        per_round=2,
        seed_ids="git-bisect-regression,sa-log-rotate-script",
    )
    with dg.instance_for_test() as instance:
        res = dg.materialize(
            [seed_corpus, synthesis_rounds],
            resources={"forge": forge},
            instance=instance,
            selection=[synthesis_rounds],
        )
        assert res.success
        md = res.asset_materializations_for_node("synthesis_rounds")[0].metadata
        with open_snapshot(forge.store_path) as snap:
            made = dict(snap.sql("SELECT round, candidates FROM synth_rounds").rows)
        # as many as the caps allow (both seeds have one feasible operator, one family)
        assert md["rounds"].value == 2 and md["candidates"].value == sum(made.values()) >= 2
        # A log line per seed profiled and per candidate validated, as each one ends.
        lines = [e.user_message for e in instance.all_logs(res.run_id)]
        for line in ("profile seeds: 1/2", "profile seeds: 2/2"):
            assert line in lines, lines
        for r, n in made.items():
            assert [f"round {r}: {i}/{n}" for i in range(1, n + 1)] == [
                x for x in lines if x.startswith(f"round {r}: ") and not x.endswith(f" 0/{n}")
            ], lines
        more = dg.materialize(
            [synthesis_rounds],
            resources={"forge": forge},
            instance=instance,
            run_config={"ops": {"synthesis_rounds": {"config": {"add_rounds": 1}}}},
        )
        added = more.asset_materializations_for_node("synthesis_rounds")[0].metadata
        # Round 3 samples the whole pool (the seeds and all accepted so far): it always runs.
        assert added["rounds"].value == 3 and added["stopped_early"].value == "no"
        res = dg.materialize(
            [validation_trials, accepted_tasks_have_a_passing_oracle],
            resources={"forge": forge},
            instance=instance,
        )
    with open_snapshot(forge.store_path) as snap:
        rounds = [r[0] for r in snap.sql("SELECT round FROM synth_rounds ORDER BY round").rows]
        rst = snap.sql("SELECT count(*) FROM pool_members WHERE pool = 'rst'").rows[0][0]
    assert rounds[:2] == [1, 2] and rounds == list(range(1, len(rounds) + 1))
    assert rst >= 1
    assert res.success
    checks = res.get_asset_check_evaluations()
    assert len(checks) == 1 and checks[0].passed
    assert res.asset_materializations_for_node("validation_trials")[0].metadata["trials"].value > 0
