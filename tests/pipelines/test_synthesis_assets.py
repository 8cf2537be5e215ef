"""Synthesis assets: a round partition materializes in process; validation trials and their
blocking check read the same store."""

import dagster as dg
import pytest

from pipelines.defs.resources import ForgeConfig
from pipelines.defs.synthesis_assets import (
    accepted_tasks_have_a_passing_oracle,
    synthesis_round,
    validation_trials,
)
from pipelines.defs.task_assets import seed_corpus

pytestmark = [pytest.mark.orchestration, pytest.mark.sandbox]


def test_round_partition_then_validation_trials(tmp_path):
    forge = ForgeConfig(
        store=str(tmp_path / "wh"),
        per_round=2,
        seed_ids="git-bisect-regression,sa-log-rotate-script",
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("synthesis_rounds", ["1"])
        res = dg.materialize(
            [seed_corpus, synthesis_round],
            partition_key="1",
            resources={"forge": forge},
            instance=instance,
            selection=[synthesis_round],
        )
        assert res.success
        md = res.asset_materializations_for_node("synthesis_round")[0].metadata
        assert md["round"].value == 1 and md["candidates"].value == 2
        res = dg.materialize(
            [validation_trials, accepted_tasks_have_a_passing_oracle],
            resources={"forge": forge},
            instance=instance,
        )
    assert res.success
    checks = res.get_asset_check_evaluations()
    assert len(checks) == 1 and checks[0].passed
    assert res.asset_materializations_for_node("validation_trials")[0].metadata["trials"].value > 0
