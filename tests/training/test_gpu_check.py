"""benchmarks/gpu_check.py, the one prepared GPU run: its smoke mode runs every section on the
CPU at tiny sizes (the same code the GPU run takes), and a failing or late section never loses
the others (the JSON file is rewritten after each one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_a_failing_section_and_a_spent_budget_keep_the_others(tmp_path):
    sys.path.insert(0, str(REPO))
    from benchmarks.gpu_check import Report

    out = tmp_path / "check.json"
    report = Report(out, budget_s=1000, smoke=True, meta={})

    def boom() -> dict:
        raise RuntimeError("a kernel failed")

    report.run("parity", boom)
    report.run("r3_w1024", lambda: {"mean_abs_dlogp_r3": 0.5})
    report.budget_s = 0  # spent
    report.run("throughput", lambda: {"never": True})
    got = json.loads(out.read_text())["sections"]
    assert got["parity"]["status"] == "error" and "a kernel failed" in got["parity"]["error"]
    assert got["r3_w1024"] == {**got["r3_w1024"], "status": "ok", "mean_abs_dlogp_r3": 0.5}
    assert got["throughput"]["status"] == "skipped" and "budget" in got["throughput"]["reason"]


@pytest.mark.torch
@pytest.mark.slow
def test_the_smoke_run_covers_every_section(tmp_path):
    """About a minute on two loaded cores: megatron on the CPU, the R3 gap, throughput and
    memory at tiny sizes; the PPO arm checks its prerequisites only."""
    pytest.importorskip("megatron.core")
    out = tmp_path / "smoke.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--smoke", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert json.loads(proc.stdout) == data
    sections = data["sections"]
    assert set(sections) == {"env", "parity", "r3_w1024", "throughput", "memory", "r3_w2048", "ppo"}
    bad = {k: v.get("error") for k, v in sections.items() if v["status"] == "error"}
    assert not bad, bad
    parity = sections["parity"]
    assert parity["fp32_max_abs_logit_diff"] < 1e-4
    assert parity["r3_replayed_vs_hf_mean_abs_dlogp"] < 1e-5
    assert parity["r3_perturbed_record_mean_abs_dlogp"] > 1e-4
    for name in ("r3_w1024", "r3_w2048"):
        assert 0 <= sections[name]["mean_abs_dlogp_r3"] < 1
    assert sections["throughput"]["hf"]["tokens_per_s"] > 0
    assert sections["throughput"]["megatron"]["tokens_per_s"] > 0
    assert sections["ppo"]["status"] == "skipped" and sections["ppo"]["reason"]
