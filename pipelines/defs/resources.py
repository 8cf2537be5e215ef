"""The Dagster program's one config, `ForgeConfig` (the `forge` resource), switched by
environment.

`T1_ENV=local` (default): local sandbox, store under ./data/warehouse, no LLM; the variables in
`LOCAL_ENV` override single fields. `T1_ENV=configured`: every setting from environment
variables (`CONFIGURED_ENV`), read when a run starts. Every field is documented once, here;
the Launchpad shows them all and a run may override any. Stage defaults are not repeated:
fields that keep a stage's default take it from that stage's config; the budget fields
(rounds, per_round, preflight_n, audit_*) are the local profile's smaller budget, so one
launch builds T1 in minutes, and say what they shrink.
"""

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from audit.judge_exec import ExecConfig
from audit.judge_llm import LlmConfig
from audit.pools import T1_CATEGORY_QUOTA, T1_FULL_SIZE
from audit.rubric import load_rubric
from audit.selection import SelectionConfig
from executor import ADDRESS_ENV, LOCAL, ExecutorConfig
from synthesis.rounds import SynthConfig
from synthesis.validate import ValidationConfig
from warehouse import Store
from warehouse.store import DEFAULT_STORE


class ForgeConfig(dg.ConfigurableResource):
    """Where the store lives, which sandbox and LLM to use, and the pipeline's budget."""

    store: str = Field(str(DEFAULT_STORE), description="warehouse directory")
    sandbox_backend: str = Field(
        ExecConfig.model_fields["backend"].default, description="sandbox backend: local, docker"
    )
    llm_base_url: str = Field("", description="OpenAI-compatible endpoint ('' = no LLM)")
    llm_model: str = Field("", description="model name at llm_base_url")
    llm_api_key: str = Field("", description="API key for llm_base_url")
    tmax_dir: str = Field("", description="corpus imported as the tmax pool ('' = none)")
    benchmark_dir: str = Field("", description="held-out benchmark for decontamination")
    campaign: str = Field(SynthConfig.campaign, description="synthesis campaign (resume key)")
    rounds: int = Field(3, ge=1, description=f"synthesis rounds (full scale: {SynthConfig.rounds})")
    per_round: int = Field(
        6, ge=1, description=f"candidates per round (full scale: {SynthConfig.per_round})"
    )
    seed_ids: str = Field("", description="comma-separated seed ids to synthesize from ('' = all)")
    t1_size: int = Field(T1_FULL_SIZE, ge=1, description="T1 target size")
    category_quota: float = Field(
        T1_CATEGORY_QUOTA, gt=0, le=1, description="largest category share in T1"
    )
    preflight_n: int = Field(10, ge=1, description="T1 tasks sampled by the pre-flight check")
    preflight_threshold: float = Field(
        0.8, ge=0, le=1, description="share of usable per-assertion records T1 must reach"
    )
    audit_pool: str = Field(
        "", description="what to audit: '' = synthesis output, else a pool name (e.g. seed)"
    )
    audit_mutants: int = Field(
        4,
        ge=0,
        description="solution mutants per task "
        f"(full scale: {ExecConfig.model_fields['max_mutants'].default})",
    )
    audit_reruns: int = Field(
        1,
        ge=0,
        description=f"oracle reruns (full scale: {ExecConfig.model_fields['reruns'].default})",
    )
    reports_dir: str = Field("artifacts/reports", description="where pool reports are written")
    cluster_address: str = Field(
        LOCAL,
        description="where the sandbox trials run (synthesis validation, the audit's judge, "
        "the campaign's rollouts): 'local' threads in this run's process, or a Ray address "
        "(auto, host:6379, ray://host:10001; docs/scale.md)",
    )
    trial_workers: int | None = Field(
        None,
        ge=1,
        description="units in flight: synthesis threads and audit tasks at once (None: the "
        f"stages' defaults, {SynthConfig.workers} and "
        f"{SelectionConfig.model_fields['task_workers'].default}); on a cluster about its "
        "sandbox slots",
    )

    @property
    def store_path(self) -> Path:
        return Path(self.store)

    def open_store(self) -> Store:
        """The warehouse the assets write to (created on first use)."""
        return Store.open(self.store_path, create=True)

    def executor_config(self) -> ExecutorConfig:
        """The one executor of this run's fan-out (Ray's slots, not Dagster's processes)."""
        return ExecutorConfig(address=self.cluster_address)

    def selection_config(self) -> SelectionConfig:
        llm = None
        if self.llm_base_url and self.llm_model:
            llm = LlmConfig(
                base_url=self.llm_base_url, model=self.llm_model, api_key=self.llm_api_key or "none"
            )
        cfg = SelectionConfig(
            rubric=load_rubric("t1"),
            exec=ExecConfig(
                backend=self.sandbox_backend,
                reruns=self.audit_reruns,
                max_mutants=self.audit_mutants,
            ),
            llm=llm,
            executor=self.executor_config(),
        )
        if self.trial_workers:
            return cfg.model_copy(update={"task_workers": self.trial_workers})
        return cfg

    def synth_config(self) -> SynthConfig:
        ids = tuple(i for i in self.seed_ids.split(",") if i)
        cfg = SynthConfig(
            rounds=self.rounds,
            per_round=self.per_round,
            campaign=self.campaign,
            benchmark=Path(self.benchmark_dir) if self.benchmark_dir else None,
            seed_ids=ids,
            validation=ValidationConfig(backend=self.sandbox_backend),
            executor=self.executor_config(),
        )
        return replace(cfg, workers=self.trial_workers) if self.trial_workers else cfg


REPORTS_DIR_ENV = "T1_REPORTS_DIR"  # `t1 ui --store` puts reports beside the store
# Environment variable -> field. Local: any of these that is set overrides the field's default.
LOCAL_ENV = {
    "T1_WAREHOUSE": "store",
    "T1_SANDBOX_BACKEND": "sandbox_backend",
    REPORTS_DIR_ENV: "reports_dir",
    "T1_TMAX_DIR": "tmax_dir",
    "T1_BENCHMARK_DIR": "benchmark_dir",
    "T1_DEMO_ROUNDS": "rounds",
    "T1_DEMO_PER_ROUND": "per_round",
    "T1_DEMO_SEED_IDS": "seed_ids",
    "T1_DEMO_PREFLIGHT_N": "preflight_n",
    "T1_DEMO_AUDIT_MUTANTS": "audit_mutants",
    "T1_RAY_ADDRESS": "cluster_address",
}
# Configured: each of these must be set (read when a run starts).
CONFIGURED_ENV = {
    "T1_WAREHOUSE": "store",
    "T1_SANDBOX_BACKEND": "sandbox_backend",
    "T1_LLM_BASE_URL": "llm_base_url",
    "T1_LLM_MODEL": "llm_model",
    "T1_LLM_API_KEY": "llm_api_key",
    "T1_TMAX_DIR": "tmax_dir",
    "T1_BENCHMARK_DIR": "benchmark_dir",
}


def forge_config_from_env() -> ForgeConfig:
    env = os.environ.get("T1_ENV", "local")
    overrides: dict[str, Any]  # strings the fields convert (or EnvVars read at run time)
    if env == "local":
        overrides = {f: os.environ[v] for v, f in LOCAL_ENV.items() if v in os.environ}
    elif env == "configured":
        overrides = {f: dg.EnvVar(v) for v, f in CONFIGURED_ENV.items()}
        if ADDRESS_ENV in os.environ:  # optional: unset, the trials run in the run's process
            overrides["cluster_address"] = dg.EnvVar(ADDRESS_ENV)
    else:
        raise ValueError(f"T1_ENV must be 'local' or 'configured', got {env!r}")
    return ForgeConfig(**overrides)


defs = dg.Definitions(resources={"forge": forge_config_from_env()})
