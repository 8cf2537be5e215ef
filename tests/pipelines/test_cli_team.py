"""`t1` when more than one person, or one mistake, meets it (issue: orchestration v3): a
second writer of a synthesis campaign or a pool build is refused in one line naming the
holder; a read-only store and a refused option value are one line with exit 2; `t1 synth`
puts its summary on stdout (`--format table|json`), progress on stderr, and exits 1 when
seeds were lost to environment errors; JSON is strict; piped tables are not cut; the
Prefect form refuses `steps=0` and the run name never raises.

Regressions: two `t1 synth` at once both exited 0 (`synth_rounds` said 2 candidates a round
while `synth_candidates` held 4); `t1 train --steps 0` printed only pydantic's "For further
information visit..." line; a read-only store printed a 117-line traceback; 2 of 3 seeds
timed out on a fresh sandbox cache and `t1 synth` exited 0 with 0 candidates."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from synthesis.rounds import SynthConfig, load_seed_tasks
from tasks.results import FailureMode, TrialResult
from warehouse import Store, record_tasks
from warehouse.locks import lock_path, read_holder
from warehouse.recording import record_synthesis
from warehouse.records import SynthProfileRecord, SynthRoundRecord

ROOT = Path(__file__).resolve().parents[2]
T1 = str(Path(sys.executable).parent / "t1")
SEEDS = ("vc-gitignore-untrack", "dbg-makefile-repair")
HOLD = """
import sys, time
from pathlib import Path
from warehouse.locks import exclusive
with exclusive(Path(sys.argv[1]), sys.argv[2], command="t1 synth --seed 7"):
    print("held", flush=True)
    time.sleep(300)
"""


def environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # as a pipe sees it
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def t1(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [T1, *args], capture_output=True, text=True, env=environ(**env), timeout=1500, check=False
    )


def one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    """The command's one error line: the last on stderr (progress lines may precede it),
    the only one, and no traceback."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    return lines[-1]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator:
    """Start a process holding a job's lock on a store; killed afterwards."""
    procs: list[subprocess.Popen] = []

    def start(store: Path, job: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(store), job],
            stdout=subprocess.PIPE,
            text=True,
            env=environ(),
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_second_synth_of_a_campaign_is_refused_naming_the_holder(tmp_path, holder):
    store = tmp_path / "wh"
    Store.open(store, create=True)
    first = holder(store, "synthesis campaign 'c1'")
    line = one_line_error(t1("synth", "--campaign", "c1", "--store", str(store), "--no-llm"))
    assert f"pid {first.pid}" in line and "t1 synth --seed 7" in line, line
    assert "synthesis campaign 'c1'" in line and "wait for it" in line, line
    assert not (store / "synth_rounds").exists()


def test_a_second_pool_build_is_refused(tmp_path, holder):
    store = tmp_path / "wh"
    Store.open(store, create=True)
    first = holder(store, "pool build")
    line = one_line_error(t1("audit", "--store", str(store), "--stage", "aggregate"))
    assert "pool build" in line and f"pid {first.pid}" in line, line


@pytest.mark.sandbox
@pytest.mark.slow
def test_two_synth_runs_at_once_the_second_is_refused(tmp_path):
    """Two real `t1 synth` processes on one store and campaign: the second exits 2 while
    the first runs, and the first is not disturbed by it."""
    store = tmp_path / "wh"
    args = [T1, "synth", "--store", str(store), "--no-llm", "--rounds", "3", "--per-round", "4"]
    args += ["--seed-ids", ",".join(SEEDS), "--workers", "1", "--campaign", "twice"]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environ())  # fmt: skip
    try:
        path = lock_path(store, "synthesis campaign 'twice'")
        deadline = time.monotonic() + 120
        while (h := read_holder(path)) is None or h.pid != first.pid:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.2)
        second = t1(*args[1:], "--seed", "2")
        line = one_line_error(second)
        assert f"pid {first.pid}" in line and "synth --store" in line, line
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
    assert first.returncode in (0, 1, 130), first.returncode


def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    src, ro = tmp_path / "src", tmp_path / "ro"
    store = src / "wh"
    Store.open(store, create=True)
    ro.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", src, ro]).returncode != 0:
        pytest.skip("needs root to make a read-only bind mount (a read-only store)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", ro], check=True)
        yield ro / "wh"
    finally:
        subprocess.run(["umount", ro], check=False)


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    yield from read_only_mount(tmp_path)


def test_a_read_only_store_is_one_line(read_only_store):
    synth = one_line_error(t1("synth", "--store", str(read_only_store), "--no-llm"))
    assert "cannot write" in synth and str(read_only_store) in synth, synth
    catalog = one_line_error(t1("warehouse", "catalog", "--store", str(read_only_store)))
    assert "cannot write" in catalog and "read-only" in catalog, catalog


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("train", "--steps", "0"), "--steps: Input should be greater than or equal to 1"),
        (("train", "--eval-every", "-3"), "--eval-every: Input should be greater than or equal"),
        (("train", "--pool-version", "0"), "--pool-version: Input should be greater than"),
        (("synth", "--rounds", "0"), "rounds"),
    ],
)
def test_refused_option_values_are_one_line_naming_the_option(args, needle, tmp_path):
    line = one_line_error(t1(*args, "--store", str(tmp_path / "wh")))
    assert needle in line, line
    assert "errors.pydantic.dev" not in line


def test_task_check_on_a_missing_path_is_a_usage_error():
    line = one_line_error(t1("task", "check", "/nonexistent/task"))
    assert "/nonexistent/task" in line


def synth_store(store: Path, campaign: str, seed_ids: tuple[str, ...], lost: int) -> None:
    """A store where `campaign`'s round 1 is recorded (so `t1 synth --rounds 1` has no work
    left) and the first `lost` seeds' profiling failed with environment errors."""
    seeds = load_seed_tasks(SynthConfig(seed_ids=seed_ids))
    record_tasks(store, seeds)
    trials = [
        TrialResult(trial_id=f"profile-{t.id}", task_id=t.id, task_hash=t.content_hash,
                    agent="oracle", backend="local", failure_mode=mode,
                    failure_detail="timed out waiting for the base image build")
        for t, mode in zip(seeds[:lost], [FailureMode.ENVIRONMENT_ERROR, FailureMode.SANDBOX_ERROR],
                           strict=False)
    ]  # fmt: skip
    profiles = [SynthProfileRecord(task_hash=t.content_hash, ok=i >= lost, detail="")
                for i, t in enumerate(seeds)]  # fmt: skip
    round1 = SynthRoundRecord(
        campaign=campaign, round=1, parents=len(seeds) - lost, candidates=0, accepted=0,
        discarded=0, mean_free_reward_share=float("nan"),
    )  # fmt: skip
    record_synthesis(store, trials=trials, rows=[*profiles, round1])


def test_synth_summary_json_and_seeds_lost_to_the_environment(tmp_path):
    store = tmp_path / "wh"
    synth_store(store, "c", SEEDS, lost=1)
    args = ("synth", "--store", str(store), "--campaign", "c", "--rounds", "1", "--no-llm")
    result = t1(*args, "--seed-ids", ",".join(SEEDS), "--format", "json")
    assert result.returncode == 1, result.stderr
    summary = json.loads(result.stdout)  # strict: NaN would not parse as JSON here
    assert "NaN" not in result.stdout
    assert summary["campaign"] == "c" and [r["round"] for r in summary["rounds"]] == [1]
    assert summary["rounds"][0]["mean_free_reward_share"] is None
    lost = summary["seeds_lost"]
    assert summary["seeds"] == 2 and len(lost) == 1
    assert lost[0]["failure_mode"] == "environment_error"
    assert lost[0]["task_id"] in SEEDS
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning and "1 of 2 seeds lost to environment errors" in warning[0], result.stderr
    assert "campaign 'c'" in result.stderr  # the progress line is on stderr ...
    assert "campaign 'c'" not in result.stdout.replace('"campaign": "c"', "")  # ... not here


def test_synth_table_on_a_pipe_is_whole_and_exit_0_when_no_seed_is_lost(tmp_path):
    store = tmp_path / "wh"
    synth_store(store, "d", SEEDS, lost=0)
    args = ("synth", "--store", str(store), "--campaign", "d", "--rounds", "1", "--no-llm")
    result = t1(*args, "--seed-ids", ",".join(SEEDS))
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) > 80  # 16 columns, none squeezed
    assert any("wall s" in line for line in table) and "…" not in result.stdout
    assert "warning" not in result.stderr


def test_sql_json_is_strict_and_piped_tables_are_not_cut(t1_store):
    store, _, _ = t1_store
    nan = t1("sql", "SELECT 'nan'::DOUBLE AS x, 'inf'::DOUBLE AS y, 1.5 AS z", "--store",
             str(store), "--format", "json")  # fmt: skip
    assert nan.returncode == 0, nan.stderr
    assert json.loads(nan.stdout) == [{"x": None, "y": None, "z": 1.5}]
    wide = t1("sql", "SELECT * FROM tasks ORDER BY task_id", "--store", str(store))
    assert wide.returncode == 0, wide.stderr
    assert "more columns" not in wide.stdout
    assert max(len(line) for line in wide.stdout.splitlines()) > 80


def test_strict_json_maps_every_non_finite_float_to_null():
    from pipelines.cli.output import dumps

    text = dumps({"a": math.nan, "b": [1.0, -math.inf], "c": {"d": math.inf}, "e": 2})
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": {"d": None}, "e": 2}


def test_the_prefect_form_refuses_steps_0_and_the_run_name_never_raises():
    """The flow's parameter schema carries the constraints (the Prefect form and the
    server refuse steps=0 before a run exists); the run-name callable raised on it, so the
    run crashed with "This run didn't generate logs"."""
    from prefect.utilities.schema_tools import ValidationError, validate

    from pipelines.campaign_deployment import run_name_of
    from pipelines.flows import ppo_campaign

    schema = ppo_campaign.parameters.model_dump(exclude_none=True)
    validate({"steps": 3, "eval_every": 1, "pool_version": 2}, schema, raise_on_error=True)
    for bad in ({"steps": 0}, {"eval_every": 0}, {"pool_version": -1}, {"preset": ""}):
        with pytest.raises(ValidationError):
            validate(bad, schema, raise_on_error=True)
    assert (
        run_name_of({"preset": "tiny-cpu", "pool": "t1", "steps": 4})
        == "tiny-cpu-t1-vlatest-4steps"
    )
    bad_parameters: list[dict[str, object]] = [
        {"steps": 0}, {"pool": "nope"}, {"preset": None, "steps": "x"}, {}
    ]  # fmt: skip
    for params in bad_parameters:
        assert isinstance(run_name_of(params), str)
    assert run_name_of({"preset": "tiny-cpu", "steps": 0}) == "tiny-cpu-invalid-parameters"


def test_the_campaign_deployment_runs_one_campaign_at_a_time():
    from prefect.client.schemas.objects import ConcurrencyLimitStrategy

    from pipelines.flows import ppo_campaign
    from pipelines.serve_campaign import deployment_options

    options = deployment_options("http://127.0.0.1:3000")
    limit = options.pop("global_limit")
    assert limit.limit == 1 and limit.collision_strategy == ConcurrencyLimitStrategy.ENQUEUE
    deployment = cast(Any, ppo_campaign.to_deployment(**options, concurrency_limit=limit))
    assert deployment.concurrency_limit == 1
    assert deployment.parameters == {"dagster_url": "http://127.0.0.1:3000"}


@pytest.mark.slow
def test_ui_serves_the_store_it_names_and_logs_to_a_file(tmp_path):
    """`t1 ui --store`: the banner, printed last, names the warehouse and the log file; the
    servers' chatter goes to the file, not the terminal (regression: ~1,200 of 1,559 terminal
    lines in an hour were sensor-daemon lines, and the banner, printed under them, did not
    say which warehouse it served)."""
    from pipelines.services import free_port

    port, store, logs = free_port(), tmp_path / "team-wh", tmp_path / "servers.log"
    argv = [T1, "ui", "--no-prefect", "--port", str(port), "--store", str(store)]
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([*argv, "--log-file", str(logs)], stdout=o, stderr=e,
                                env=environ(DAGSTER_HOME=str(tmp_path / "dh")), cwd=tmp_path,
                                start_new_session=True)  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while "Ctrl-C to stop." not in out.read_text():
                assert proc.poll() is None, (out.read_text(), err.read_text())
                assert time.monotonic() < deadline, (out.read_text(), err.read_text())
                time.sleep(1)
            time.sleep(3)  # the servers keep logging: none of it reaches the terminal
            banner = out.read_text().strip().splitlines()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    assert banner[0] == f"Dagster UI:   http://127.0.0.1:{port}"
    assert f"warehouse:    {store}" in banner and f"server logs:  {logs}" in banner
    assert banner[-1] == "Ctrl-C to stop."
    assert len(err.read_text().strip().splitlines()) <= 2, err.read_text()  # starting, stopped
    assert "dagster" in logs.read_text(errors="replace").lower()


HOLD_PREFECT = """
import sys, time
from pathlib import Path
from pipelines.services import prefect_database
with prefect_database(Path(sys.argv[1]), "http://127.0.0.1:4299/api"):
    print("held", flush=True)
    time.sleep(300)
"""


@pytest.fixture
def prefect_home_in_use(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    """A Prefect home whose database a server (as `t1 ui` holds it) is running on."""
    home = tmp_path / "prefect-home"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_PREFECT, str(home)], stdout=subprocess.PIPE, text=True,
        env=environ(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield home, proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.torch
def test_train_refuses_a_second_prefect_server_on_a_database_in_use(tmp_path, prefect_home_in_use):
    """Regression: `t1 train` with no PREFECT_API_URL started a temporary Prefect server on
    the database a running `t1 ui` served ('database is locked' mid-run)."""
    home, server = prefect_home_in_use
    env = {k: v for k, v in environ().items() if k != "PREFECT_API_URL"}
    result = subprocess.run(
        [T1, "train", "--pool", "seed", "--steps", "1", "--store", str(tmp_path / "wh")],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        env={**env, "PREFECT_HOME": str(home), "DAGSTER_HOME": str(tmp_path / "dh")},
    )  # fmt: skip
    line = one_line_error(result)
    assert f"pid {server.pid}" in line and "http://127.0.0.1:4299/api" in line, line
    assert "database is locked" in line and "PREFECT_API_URL" in line, line
    assert not (tmp_path / "runs").exists()  # refused before any run started


def test_ui_refuses_a_prefect_home_another_server_runs_on(tmp_path, prefect_home_in_use):
    from pipelines.services import free_port

    home, server = prefect_home_in_use
    line = one_line_error(
        t1("ui", "--port", str(free_port()), "--prefect-port", str(free_port()),
           "--prefect-home", str(home), DAGSTER_HOME=str(tmp_path / "dh"))
    )  # fmt: skip
    assert f"pid {server.pid}" in line and "already runs on the database" in line, line


HOLD_UI = """
import sys, time
from pathlib import Path
from pipelines.services import dagster_home_lock
with dagster_home_lock(Path(sys.argv[1]), "http://127.0.0.1:3099"):
    print("held", flush=True)
    time.sleep(300)
"""


def test_a_second_ui_on_one_dagster_home_is_refused_naming_the_first(tmp_path):
    """Regression (issue 36): a second `t1 ui` on the same DAGSTER_HOME started a second
    daemon (its sensors could start a campaign twice; only its log file complained). It is
    refused before anything starts, whatever its ports, as a second Prefect home is."""
    from pipelines.services import free_port

    home = tmp_path / "dagster-home"
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_UI, str(home)], stdout=subprocess.PIPE, text=True,
        env=environ(),
    )  # fmt: skip
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "held"
        try:
            second = subprocess.run(
                [T1, "ui", "--port", str(free_port()), "--prefect-port", str(free_port()),
                 "--prefect-home", str(tmp_path / "prefect")],
                capture_output=True, text=True, timeout=120, check=False,
                env=environ(DAGSTER_HOME=str(home)),
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail("the second t1 ui started its servers instead of being refused")
    finally:
        first.kill()
        first.wait()
    line = one_line_error(second)
    assert f"a t1 ui already serves DAGSTER_HOME {home}: pid {first.pid}" in line, line
    assert "http://127.0.0.1:3099" in line and "sensors twice" in line, line
    assert not (tmp_path / "prefect").exists()  # refused before any server started


@pytest.mark.torch
def test_train_resume_without_a_checkpoint_or_its_config_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    line = one_line_error(t1("train", "--resume", str(run), "--no-flow"))
    assert "--resume" in line and "no campaign checkpoint" in line, line
    (run / "checkpoints" / "step-000001").mkdir(parents=True)
    (run / "checkpoints" / "step-000001" / "state.json").write_text(json.dumps(
        {"run_id": "run", "step": 1, "weight_version": 1, "data_position": 2, "policy_path": "/p"}
    ))  # fmt: skip
    line = one_line_error(t1("train", "--resume", str(run), "--no-flow"))
    assert f"--resume {run}: {run / 'config.json'}: not a readable run config" in line, line


@pytest.mark.torch
@pytest.mark.sandbox
@pytest.mark.slow
def test_train_resume_continues_the_run(t1_store, tmp_path, warm_policy):
    """`t1 train --resume RUN_DIR` continues that run (its id, its directory) from its last
    checkpoint with its own recorded settings, printing only the steps it adds; an option
    given replaces the recorded one (`--steps 4`: to 4 in all).

    Regression (the kill walk of issue 36): `--resume RUN_DIR` alone took the preset, steps
    and store from the command line's defaults; a 3-step run of its own preset checkpointed
    at step 2 went on with tiny-cpu's 2 steps: it ran no step, dropped step 2 from
    metrics.jsonl and rewrote config.json with tiny-cpu's settings."""
    from training.campaign_config import PRESETS
    from training.checkpoint import checkpoint_dir

    store, _, _ = t1_store
    runs = tmp_path / "runs"
    preset = tmp_path / "mine.toml"  # tiny-cpu, checkpointing every step, evaluating last
    preset.write_text(
        (PRESETS / "tiny-cpu.toml").read_text()
        .replace('campaign = "tiny-cpu"', 'campaign = "mine"\ncheckpoint_every = 1')
        .replace("eval_every = 2", "eval_every = 5")
    )  # fmt: skip
    policy = str(warm_policy)
    first = t1("train", "--no-flow", "--no-report", "--store", str(store), "--runs-dir",
               str(runs), "--policy-path", policy, "--preset", str(preset),
               "--steps", "3")  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    (run_dir,) = runs.iterdir()
    assert [json.loads(line)["step"] for line in first.stdout.splitlines()] == [0, 1, 2]
    shutil.rmtree(checkpoint_dir(run_dir, 3))  # killed after logging step 2, before its save

    def steps_logged() -> list[int]:
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        return [r["step"] for r in rows if "rollout/reward" in r]  # step rows, not evals

    def recorded() -> dict[str, Any]:
        return json.loads((run_dir / "config.json").read_text())

    again = t1("train", "--no-flow", "--no-report", "--resume", str(run_dir))
    assert again.returncode == 0, again.stderr[-3000:]
    assert [json.loads(line)["step"] for line in again.stdout.splitlines()] == [2]
    assert [p.name for p in runs.iterdir()] == [run_dir.name]  # the same run, continued
    assert steps_logged() == [0, 1, 2]
    cfg = recorded()
    assert (cfg["steps"], cfg["checkpoint_every"], cfg["eval_every"]) == (3, 1, 5)
    assert (cfg["campaign"], cfg["preset"], cfg["store"]) == ("mine", str(preset), str(store))
    assert (cfg["pool"], cfg["pool_version"]) == ("t1", 1)
    assert cfg["resumed_from"] == str(checkpoint_dir(run_dir, 2))

    longer = t1("train", "--no-flow", "--no-report", "--resume", str(run_dir), "--steps", "4")
    assert longer.returncode == 0, longer.stderr[-3000:]
    assert [json.loads(line)["step"] for line in longer.stdout.splitlines()] == [3]
    assert steps_logged() == [0, 1, 2, 3]
    assert (recorded()["steps"], recorded()["checkpoint_every"]) == (4, 1)
