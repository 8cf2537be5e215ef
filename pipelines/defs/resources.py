"""Resources switched by environment.

`T1_ENV=local` (default): local sandbox, store under ./data/warehouse, no LLM.
`T1_ENV=configured`: every setting from environment variables (T1_WAREHOUSE,
T1_SANDBOX_BACKEND, T1_LLM_BASE_URL, T1_LLM_MODEL, T1_LLM_API_KEY, T1_TMAX_DIR,
T1_BENCHMARK_DIR), read when a run starts.
"""

import os
from pathlib import Path

import dagster as dg

from audit.judge_exec import ExecConfig
from audit.judge_llm import LlmConfig
from audit.rubric import load_rubric
from audit.selection import SelectionConfig
from synthesis.rounds import SynthConfig
from synthesis.validate import ValidationConfig
from warehouse import Store


class ForgeConfig(dg.ConfigurableResource):
    """Where the store lives, which sandbox and LLM to use, and the pipeline budget."""

    store: str = "data/warehouse"
    sandbox_backend: str = "local"
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    tmax_dir: str = ""
    benchmark_dir: str = ""
    campaign: str = "rst"
    rounds: int = 3
    per_round: int = 6
    seed_ids: str = ""  # comma-separated seed ids to restrict synthesis (small runs, tests)
    t1_size: int = 15000
    category_quota: float = 0.5  # largest share one category may take in T1
    preflight_n: int = 10
    preflight_threshold: float = 0.8
    audit_pool: str = ""  # what to audit: "" = synthesis output, else the seeds
    audit_mutants: int = 4
    audit_reruns: int = 1
    reports_dir: str = "artifacts/reports"

    @property
    def store_path(self) -> Path:
        return Path(self.store)

    def open_store(self) -> Store:
        """The warehouse the assets write to (created on first use)."""
        return Store.open(self.store_path, create=True)

    def selection_config(self) -> SelectionConfig:
        llm = None
        if self.llm_base_url and self.llm_model:
            llm = LlmConfig(
                base_url=self.llm_base_url, model=self.llm_model, api_key=self.llm_api_key or "none"
            )
        return SelectionConfig(
            rubric=load_rubric("t1"),
            exec=ExecConfig(
                backend=self.sandbox_backend,
                reruns=self.audit_reruns,
                max_mutants=self.audit_mutants,
            ),
            llm=llm,
        )

    def synth_config(self) -> SynthConfig:
        ids = tuple(i for i in self.seed_ids.split(",") if i)
        return SynthConfig(
            rounds=self.rounds,
            per_round=self.per_round,
            campaign=self.campaign,
            benchmark=Path(self.benchmark_dir) if self.benchmark_dir else None,
            seed_ids=ids,
            validation=ValidationConfig(backend=self.sandbox_backend),
        )


def forge_config_from_env() -> ForgeConfig:
    env = os.environ.get("T1_ENV", "local")
    if env == "local":
        return ForgeConfig(
            store=os.environ.get("T1_WAREHOUSE", "data/warehouse"),
            tmax_dir=os.environ.get("T1_TMAX_DIR", ""),
            benchmark_dir=os.environ.get("T1_BENCHMARK_DIR", ""),
            rounds=int(os.environ.get("T1_DEMO_ROUNDS", "3")),
            per_round=int(os.environ.get("T1_DEMO_PER_ROUND", "6")),
            seed_ids=os.environ.get("T1_DEMO_SEED_IDS", ""),
        )
    if env != "configured":
        raise ValueError(f"T1_ENV must be 'local' or 'configured', got {env!r}")
    return ForgeConfig(
        store=dg.EnvVar("T1_WAREHOUSE"),
        sandbox_backend=dg.EnvVar("T1_SANDBOX_BACKEND"),
        llm_base_url=dg.EnvVar("T1_LLM_BASE_URL"),
        llm_model=dg.EnvVar("T1_LLM_MODEL"),
        llm_api_key=dg.EnvVar("T1_LLM_API_KEY"),
        tmax_dir=dg.EnvVar("T1_TMAX_DIR"),
        benchmark_dir=dg.EnvVar("T1_BENCHMARK_DIR"),
    )


defs = dg.Definitions(resources={"forge": forge_config_from_env()})
