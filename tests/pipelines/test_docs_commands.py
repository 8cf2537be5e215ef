"""The `t1` commands the README and docs/ show, checked against the real CLI.

Every command line in a fenced block is parsed by the CLI itself (the command exists, every
option exists and every value converts: pool names, formats, numbers); a synopsis line
(placeholders such as PATH, `[--opt]`, `a|b`) has its command and option names checked. Each
concrete command is then either run as written (in a scratch directory holding a small store;
`/tmp/...` paths are moved under it) or listed in NOT_RUN with the reason, so a new documented
command fails this test until someone decides which.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.cli import _register
from pipelines.cli.root import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
T1 = str(Path(sys.executable).parent / "t1")

# Concrete documented commands run end to end here, with the markers they need.
RUN: dict[str, tuple[str, ...]] = {
    "t1 seeds": (),
    "t1 task check tasks/seeds/git-bisect-regression": ("sandbox",),
    't1 sql "SELECT * FROM synth_rounds"': (),
    't1 sql "FROM pools" --format markdown': (),
    "t1 warehouse catalog": (),
    't1 sql "SELECT pool, pool_version, tasks FROM pools"': (),
    "t1 warehouse catalog --store data/warehouse": (),
    "t1 warehouse ddl --store data/warehouse": (),
    "t1 train --pool seed --steps 4 --no-flow --no-report --runs-dir /tmp/runs --store /tmp/t1wh": (
        "torch",
        "sandbox",
        "slow",
    ),
}
# Concrete documented commands not run here, and why (each is parsed above all the same).
NOT_RUN: dict[str, str] = {
    "t1 audit run-all": "minutes of sandbox trials; tests/audit/test_reports.py runs it",
    "t1 synth --rounds 3 --per-round 6 --no-llm --store /tmp/synthwh --seed 0": (
        "minutes of synthesis (the hack-share measurement's pool); "
        "tests/pipelines/test_cli_team.py runs t1 synth"
    ),
    "t1 warehouse export-pool rst /tmp/rstpool --store /tmp/synthwh": (
        "needs the synthesized store above; tests/warehouse/test_cli.py runs export-pool"
    ),
    "t1 train --pool seed --steps 4": "the Prefect flow; tests/pipelines/test_prefect_flow.py",
    "t1 train --pool t1 --pool-version 2": "needs a built t1 v2; test_prefect_flow trains on t1",
    "t1 train --steps 4": "needs a built t1; the browser and loop tests train on t1",
    "t1 train --preset path/to/campaign.toml": "a placeholder path",
    "t1 ui": "a server; tests/pipelines/test_dagster_ui.py drives it in a browser",
    "t1 demo": "`make demo` itself; its stages have their own tests",
    "t1 sql": "the interactive shell; tests/warehouse/test_cli.py feeds it statements",
    "t1 sql < report.sql": "the reader's own file; tests/warehouse/test_cli.py pipes statements",
    "t1 synth --rounds 2 --per-round 6 --no-llm --workers 2 --seed-ids "
    "vc-gitignore-untrack,sa-dedupe-hardlinks,ds-sensor-summary-stats": "a Ray cluster and an S3 "
    "endpoint (docs/scale.md); tests/executor runs synthesis on a simulated cluster",
    "t1 train --pool rst --steps 2 --no-flow --no-report --runs-dir runs-cluster": "a Ray cluster "
    "and S3; tests/executor/test_cluster_campaign.py trains on a simulated cluster",
}
PLACEHOLDER = re.compile(r"\.\.\.|\||\[|<|\b(PATH|DIR|TASK|N|P|S)\b")


@dataclass(frozen=True)
class Documented:
    where: str
    text: str

    @property
    def synopsis(self) -> bool:
        return bool(PLACEHOLDER.search(self.text.replace(" < ", " ")))


def documented_commands() -> list[Documented]:
    out = []
    for doc in DOCS:
        in_block = False
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                in_block = not in_block
                continue
            text = line.split(" # ")[0].strip()
            if in_block and re.match(r"t1( [a-z-]+|$)", text):
                out.append(Documented(f"{doc.name}:{n}", text))
    return out


COMMANDS = documented_commands()


def resolve(args: list[str]):
    """The click command `args` names, and the arguments left for it, resolved by each group
    itself (`t1 audit DIR` is the audit group's `dir` command)."""
    import typer.main

    _register()
    cmd = typer.main.get_command(app)
    while args and hasattr(cmd, "commands") and not args[0].lstrip("[").startswith("-"):
        _, sub, args = cmd.resolve_command(
            cmd.make_context(cmd.name, [], resilient_parsing=True), args
        )
        assert sub is not None, f"no command {args[0]!r} in {cmd.name}"
        cmd = sub
    return cmd, args


def test_every_documented_command_is_run_or_excused():
    concrete = {c.text for c in COMMANDS if not c.synopsis}
    unclassified = concrete - RUN.keys() - NOT_RUN.keys()
    assert not unclassified, f"documented commands neither run nor excused: {unclassified}"
    stale = (RUN.keys() | NOT_RUN.keys()) - concrete
    assert not stale, f"listed here but no longer documented: {stale}"


@pytest.mark.parametrize("doc", COMMANDS, ids=[c.where for c in COMMANDS])
def test_documented_command_parses(doc: Documented):
    words = shlex.split(doc.text.replace(" < report.sql", ""))[1:]
    cmd, rest = resolve(words)
    options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    named = [w.split("=")[0] for w in re.findall(r"--[a-z][a-z-]*", doc.text)]
    unknown = [o for o in named if o not in options]
    assert not unknown, f"{doc.where}: `{doc.text}`: no option {unknown} on {cmd.name}"
    if not doc.synopsis:
        ctx = cmd.make_context(cmd.name, list(rest))  # converts every value, runs nothing
        ctx.close()


@pytest.mark.parametrize(
    "text",
    [pytest.param(t, marks=[getattr(pytest.mark, m) for m in marks]) for t, marks in RUN.items()],
)
def test_documented_command_runs_as_written(text: str, tmp_path: Path, request):
    from tests.pipelines.campaign_store import t1_store_at

    if "torch" in RUN[text]:
        # the campaign reads the cached warm start: built (or waited for) before the clock below
        request.getfixturevalue("warm_policy")
    t1_store_at(tmp_path / "data" / "warehouse")
    args = shlex.split(text.replace("/tmp/", f"{tmp_path}/tmp/"))[1:]
    cwd = ROOT if any(a.startswith("tasks/") for a in args) else tmp_path
    env = {**os.environ, "PYTHONPATH": str(ROOT), "T1_WAREHOUSE": str(tmp_path / "data/warehouse")}
    result = subprocess.run(
        [T1, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, f"`{text}` exited {result.returncode}:\n{result.stderr[-3000:]}"
