"""Audit reports as files the Dagster assets attach: the stage funnel, per-dimension score
distributions, the category composition (a chart like the paper's Figure 3 and a table) and
the pre-flight result.

The counting is pure (`funnel_counts`, `composition`); the `write_*` functions render files
under an output directory and return their paths. Charts use matplotlib's Agg backend.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from audit.preflight import PreflightReport
from audit.rubric import Dimension
from audit.selection import STAGE_JUDGE, FinalRow, Stage
from audit.verdict import EVIDENCE_CODES, Code, Verdict
from tasks.model import PAPER_CATEGORIES, Category
from warehouse.records import AuditRecord


class FunnelRow(BaseModel):
    stage: Stage
    entered: int
    outcomes: dict[str, int]
    reasons: dict[str, int] = {}
    """Rejected tasks per finding code (a task counts once per code)."""


def funnel_counts(rows: list[AuditRecord]) -> list[FunnelRow]:
    """Per stage: how many tasks it decided, each verdict's count, and the finding codes of
    its rejects (pure)."""
    out = []
    for stage in Stage:
        mine = [r for r in rows if r.judge == STAGE_JUDGE[stage]]
        verdicts = Counter(r.verdict for r in mine)
        reasons: Counter[str] = Counter()
        for r in mine:
            if r.verdict in (Verdict.REJECTED, Verdict.ERROR):
                reasons.update({f.code for f in r.findings if Code(f.code) not in EVIDENCE_CODES})
        out.append(
            FunnelRow(
                stage=stage,
                entered=len(mine),
                outcomes=dict(verdicts),
                reasons=dict(reasons.most_common()),
            )
        )
    return out


def composition(categories: list[str]) -> list[tuple[str, int, float]]:
    """(category, count, share) for every category present, largest first (pure)."""
    counts = Counter(categories)
    total = sum(counts.values())
    order = {c.value: i for i, c in enumerate(Category)}
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], order.get(kv[0], 99)))
    return [(c, n, n / total) for c, n in ranked] if total else []


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_funnel(rows: list[FunnelRow], out: Path, selected: int | None = None) -> list[Path]:
    """funnel.json, funnel.md and funnel.png (one bar group per stage)."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {"stages": [r.model_dump(mode="json") for r in rows], "selected": selected}
    (out / "funnel.json").write_text(json.dumps(doc, indent=1))
    lines = ["| stage | entered | outcomes | reject reasons |", "|---|---:|---|---|"]
    for r in rows:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items()))
        reasons = ", ".join(f"{k} {v}" for k, v in r.reasons.items())
        lines.append(f"| {r.stage.value} | {r.entered} | {outcomes} | {reasons} |")
    if selected is not None:
        lines.append(f"| **T1 selected** | {selected} | |")
    (out / "funnel.md").write_text("\n".join(lines) + "\n")
    plt = _plt()
    colors: dict[str, str] = {Verdict.PASS: "#4c9a5b", Verdict.ACCEPTED: "#4c9a5b",
              Verdict.BORDERLINE: "#e0a030", Verdict.REJECTED: "#c0504d",
              Verdict.REPAIRED: "#4a7ebb", Verdict.UNREPAIRED: "#999999",
              Verdict.ERROR: "#7f7f7f"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for i, r in enumerate(rows):
        left = 0
        for verdict, n in sorted(r.outcomes.items()):
            ax.barh(i, n, left=left, color=colors.get(verdict, "#777777"), edgecolor="white")
            if n:
                ax.text(left + n / 2, i, f"{verdict} {n}", ha="center", va="center", fontsize=8)
            left += n
    ax.set_yticks(range(len(rows)), [f"{k + 1}. {r.stage.value}" for k, r in enumerate(rows)])
    ax.invert_yaxis()
    ax.set_xlabel("tasks")
    title = "Audit funnel" + (f" (T1 selected: {selected})" if selected is not None else "")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / "funnel.png", dpi=120)
    plt.close(fig)
    return [out / "funnel.json", out / "funnel.md", out / "funnel.png"]


def write_composition(comp: list[tuple[str, int, float]], out: Path, title: str) -> list[Path]:
    """composition.png (horizontal bars with percentages, paper Figure 3), .csv and .md."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "composition.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["category", "tasks", "share"])
        for c, n, s in comp:
            w.writerow([c, n, f"{s:.4f}"])
    md = ["| category | tasks | share |", "|---|---:|---:|"]
    md += [f"| {c} | {n} | {100 * s:.1f}% |" for c, n, s in comp]
    (out / "composition.md").write_text("\n".join(md) + "\n")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.45 * max(3, len(comp)) + 1))
    paper = {c.value for c in PAPER_CATEGORIES}
    names = [c.replace("-", " ") for c, _, _ in comp]
    shares = [100 * s for _, _, s in comp]
    bars = ax.barh(
        names, shares, color=["#3b6ea5" if c in paper else "#9bb3cf" for c, _, _ in comp]
    )
    for bar, s in zip(bars, shares, strict=True):
        ax.text(bar.get_width() + 0.5, bar.get_y() + bar.get_height() / 2, f"{s:.1f}%",
                va="center", fontsize=9)  # fmt: skip
    ax.invert_yaxis()
    ax.set_xlabel("share of tasks (%)")
    ax.set_xlim(0, max(shares + [1]) * 1.2)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / "composition.png", dpi=120)
    plt.close(fig)
    return [out / "composition.png", out / "composition.csv", out / "composition.md"]


def write_scores(finals: list[FinalRow], out: Path) -> list[Path]:
    """scores.csv (one row per task) and scores.png (a histogram per dimension)."""
    out.mkdir(parents=True, exist_ok=True)
    cols = [d.value for d in Dimension] + ["composite"]
    with open(out / "scores.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task_id", "task_hash", "category", "verdict", "stage", *cols])
        for r in finals:
            vals = [f"{r.scores[c]:.4f}" if c in r.scores else "" for c in cols]
            w.writerow([r.task_id, r.task_hash, r.category, r.verdict, r.stage.value, *vals])
    plt = _plt()
    fig, axes = plt.subplots(2, 4, figsize=(12, 5))
    for ax, c in zip(axes.flat, cols, strict=False):
        got = [r.scores[c] for r in finals if c in r.scores]
        ax.hist(got, bins=[i / 10 for i in range(11)], color="#3b6ea5", edgecolor="white")
        ax.set_title(c.replace("_", " "), fontsize=10)
        ax.set_xlim(0, 1)
    for ax in list(axes.flat)[len(cols) :]:
        ax.axis("off")
    fig.suptitle(f"Audit score distributions ({len(finals)} tasks)")
    fig.tight_layout()
    fig.savefig(out / "scores.png", dpi=110)
    plt.close(fig)
    return [out / "scores.csv", out / "scores.png"]


def write_preflight(report: PreflightReport, out: Path) -> list[Path]:
    """preflight.json and preflight.png (sampled tasks by record usability)."""
    out.mkdir(parents=True, exist_ok=True)
    doc = report.model_dump(mode="json") | {"share": report.share, "reasons": report.reasons()}
    (out / "preflight.json").write_text(json.dumps(doc, indent=1))
    plt = _plt()
    reasons = report.reasons()
    fig, ax = plt.subplots(figsize=(6, 0.5 * max(2, len(reasons)) + 1.2))
    names = list(reasons)
    ax.barh(names, [reasons[n] for n in names],
            color=["#4c9a5b" if n == "usable" else "#c0504d" for n in names])  # fmt: skip
    ax.invert_yaxis()
    ax.set_xlabel("sampled tasks")
    ax.set_title(
        f"Pre-flight {report.pool}: {100 * report.share:.0f}% of {report.sampled} sampled tasks "
        "have per-assertion records"
    )
    fig.tight_layout()
    fig.savefig(out / "preflight.png", dpi=120)
    plt.close(fig)
    return [out / "preflight.json", out / "preflight.png"]
