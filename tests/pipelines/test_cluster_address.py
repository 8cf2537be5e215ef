"""Which cluster a run's trials go to is chosen once per run: the Dagster `forge` resource's
`cluster_address` (run config, or $T1_RAY_ADDRESS) for the assets' fan-out, and the campaign's
`cluster_address` parameter (Prefect deployment, Dagster `train_campaign`, `t1 train`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.orchestration
dg = pytest.importorskip("dagster")
pytest.importorskip("prefect")

from executor import ADDRESS_ENV  # noqa: E402
from pipelines.defs.resources import ForgeConfig, forge_config_from_env  # noqa: E402


def test_the_forge_resource_hands_one_address_to_every_stage(monkeypatch):
    monkeypatch.delenv(ADDRESS_ENV, raising=False)
    monkeypatch.delenv("T1_ENV", raising=False)
    local = forge_config_from_env()
    assert local.synth_config().executor.local and local.selection_config().executor.local
    assert local.synth_config().workers == 2  # the stage's own default when unset
    monkeypatch.setenv(ADDRESS_ENV, "ray://head:10001")
    forge = forge_config_from_env()
    assert forge.synth_config().executor.address == "ray://head:10001"
    assert forge.selection_config().executor.address == "ray://head:10001"
    sized = ForgeConfig(cluster_address="auto", trial_workers=16)
    assert (sized.synth_config().workers, sized.selection_config().task_workers) == (16, 16)
    monkeypatch.setenv("T1_ENV", "configured")
    assert isinstance(forge_config_from_env().cluster_address, dg.EnvVar)


def test_the_campaign_takes_the_cluster_address_as_a_parameter():
    from pipelines.campaign_deployment import CampaignRequest
    from pipelines.campaign_plan import campaign_config
    from pipelines.flows import ppo_campaign

    schema = ppo_campaign.parameters.model_dump()["properties"]
    assert "cluster_address" in schema
    assert CampaignRequest().cluster_address is None
    with pytest.raises(ValueError):
        CampaignRequest(cluster_address="")

    def cfg(address: str | None) -> Any:
        return campaign_config(
            "tiny-cpu", steps=None, eval_every=None, pool="seed", store=None, policy_path=None,
            runs_dir=None, cluster_address=address,
        )  # fmt: skip

    preset = cfg(None).executor
    there = cfg("ray://head:10001").executor
    assert there.address == "ray://head:10001"
    assert (there.slots_per_trial, there.retries) == (preset.slots_per_trial, preset.retries)


def test_train_campaign_passes_the_runs_cluster_to_the_flow(tmp_path, monkeypatch):
    import pipelines.defs.campaign as campaign
    from tasks.corpus import load_seeds
    from warehouse import record_pool

    seeds = load_seeds()[:2]
    record_pool(tmp_path / "wh", "t1", seeds, tasks=seeds)
    sent: list[Any] = []

    def start(request, **_: Any) -> Any:
        sent.append(request)
        return SimpleNamespace(id="00000000-0000-0000-0000-000000000000", name="run")

    monkeypatch.setattr(campaign, "start_campaign_run", start)
    forge = ForgeConfig(store=str(tmp_path / "wh"), cluster_address="auto")
    for config, expected in (({"wait": False}, "auto"),
                             ({"wait": False, "cluster_address": "local"}, "local")):  # fmt: skip
        result = campaign.train_campaign.execute_in_process(
            run_config={"ops": {"campaign_flow_run": {"config": config}}},
            resources={"forge": forge},
        )
        assert result.success and sent[-1].cluster_address == expected
