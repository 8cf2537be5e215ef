"""Kill the Prefect server, then `t1 ui` as a whole, while a campaign runs, and walk what is
left in Chromium (docs/orchestration.md "After a kill", "The walk, in Chromium"; issue 36).

On a fresh instance (temporary DAGSTER_HOME, PREFECT_HOME and store, as
tests/pipelines/test_dagster_ui.py sets them up, with the campaign tests' small t1 pool):

1. `t1 ui`; Jobs -> train_campaign -> Launchpad: the config typed in (a copy of the tiny-cpu
   preset that checkpoints every `--checkpoint-every` steps, `--steps` steps) -> Launch Run.
2. Once the flow run is Running and has a checkpoint: SIGKILL the Prefect server `t1 ui`
   started. `t1 ui` starts it again; the flow run goes on (steps after the restart).
3. Once it has a checkpoint after that: SIGKILL `t1 ui` and every process under it (a crashed
   machine), start `t1 ui` again: the flow run is Crashed with the reason and the resume
   command, the Dagster run Failure, `campaign_runs.status` failed. Then the printed
   `t1 train --resume ...` runs (against the restarted server) and the resumed run's
   metrics.jsonl is checked to hold each step once.

Each stop prints what it saw, with the time since the start: the output is the record
(benchmarks/results/ui_kill_walk.txt; temporary paths shown as $WALK). Screenshots go to
--shots (default artifacts/), palette-reduced as the browser test's doc pictures are.

    PYTHONPATH=$PWD python benchmarks/ui_kill_walk.py --shots docs/images

Not a test (the suite is at its time limit): about 20-40 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.campaign_recovery import process_started  # noqa: E402
from pipelines.services import free_port, port_in_use  # noqa: E402
from tests.pipelines import test_dagster_ui as browser  # noqa: E402
from tests.pipelines.campaign_store import t1_store_at  # noqa: E402
from training.checkpoint import latest_checkpoint, read_state  # noqa: E402

T0 = time.monotonic()
WALK = Path()  # the temporary instance, shown as $WALK


def say(line: str) -> None:
    """One line of the record: minutes:seconds since the start, temporary paths as $WALK."""
    line = line.replace(str(WALK.resolve()), "$WALK").replace(str(WALK), "$WALK")
    line = line.replace(str(REPO), ".")
    m, s = divmod(int(time.monotonic() - T0), 60)
    print(f"[{m:02d}:{s:02d}] {line}", flush=True)


def poll(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 3) -> Any:
    """`check()`'s first truthy value within `timeout_s` (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            got = check()
            if got:
                return got
        time.sleep(every_s)
    raise SystemExit(f"gave up waiting for {what} after {timeout_s:.0f} s")


# ---- processes ----------------------------------------------------------------------------
def children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += tree.get(p, [])
    return found


def pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def kill_tree(pid: int) -> list[int]:
    """SIGSTOP then SIGKILL `pid` and every process under it (nothing reacts in between)."""
    pids = descendants(pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
    return pids


class T1UI:
    """`t1 ui` on the walk's instance, started with the browser test's command line."""

    def __init__(self, tmp: Path, port: int, prefect_port: int) -> None:
        self.tmp, self.port, self.prefect_port = tmp, port, prefect_port
        self.proc: subprocess.Popen | None = None
        self.dagster = f"http://127.0.0.1:{port}"
        self.prefect = f"http://127.0.0.1:{prefect_port}"
        self.log = tmp / "ui.log"
        self.api: browser.UI | None = None
        self.mark = 0

    def start(self) -> browser.UI:
        argv, env = browser.ui_command(self.tmp, self.port, self.prefect_port)
        self.mark = len(self.terminal()) if self.log.exists() else 0
        with open(self.log, "ab") as log:  # appended: both starts' terminals in one file
            self.proc = subprocess.Popen(
                argv, cwd=self.tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 600
        browser.wait_until_up(f"{self.dagster}/server_info", deadline, self.log)
        browser.wait_until_up(
            f"{self.prefect}/api/deployments/name/ppo_campaign/t1", deadline, self.log
        )
        # the banner comes last, after the reconciliation: a deployment a previous start
        # registered answers before then
        poll("t1 ui's banner", lambda: "Ctrl-C to stop." in self.terminal()[self.mark :], 600, 1)
        self.api = browser.UI(self.dagster, self.prefect, self.tmp / "wh", self.proc, self.log)
        return self.api

    def terminal(self) -> str:
        return self.log.read_text(errors="replace")

    def said(self) -> list[str]:
        """What this start of `t1 ui` printed on its terminal."""
        return self.terminal()[self.mark :].splitlines()

    def stop(self) -> None:
        """Stop `t1 ui` as Ctrl-C does; whatever of it is left after a minute is killed."""
        if self.proc is None or self.proc.poll() is not None:
            return
        mine = {p: process_started(p) for p in descendants(self.proc.pid)}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        for p, started in mine.items():  # the same process (not a reused pid) still there
            if started is not None and process_started(p) == started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)


# ---- Prefect and the run ------------------------------------------------------------------
def flow_runs(prefect: str) -> list[dict]:
    body = {"flows": {"name": {"any_": ["ppo_campaign"]}}, "sort": "START_TIME_DESC"}
    return httpx.post(f"{prefect}/api/flow_runs/filter", json=body, timeout=20).json()


def flow_run(prefect: str, run_id: str) -> dict:
    return httpx.get(f"{prefect}/api/flow_runs/{run_id}", timeout=20).json()


def campaign_id(run: dict) -> str | None:
    tag = next((t for t in run.get("tags", []) if t.startswith("campaign:")), None)
    return tag.removeprefix("campaign:") if tag else None


def checkpoint_step(run_dir: Path) -> int:
    try:
        return read_state(latest_checkpoint(run_dir)).step
    except ValueError:
        return 0


def metric_steps(run_dir: Path, evaluations: bool = False) -> list[int]:
    """The steps of metrics.jsonl's training lines (`evaluations`: of its evaluation lines,
    `validate/...`, logged under the step they followed)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError):
            row = json.loads(line)
            if any(k.startswith("validate/") for k in row) == evaluations:
                steps.append(int(row["step"]))
    return steps


def gone(pid: str) -> bool:
    """Whether process `pid` is gone (a zombie not yet reaped counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def dagster_status(ui: browser.UI, run_id: str) -> str:
    query = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
    return ui.graphql(query, {"id": run_id})["runOrError"]["status"]


def warehouse_status(store: Path, flow_run_id: str) -> list[tuple]:
    from warehouse.snapshot import Snapshot

    with Snapshot.open(store) as snap:
        return snap.sql(
            "SELECT run_id, status, steps FROM campaign_runs WHERE prefect_flow_run_id = "
            f"'{flow_run_id}' ORDER BY started_at"
        ).rows


# ---- the walk -----------------------------------------------------------------------------
def preset_file(tmp: Path, every: int) -> Path:
    """tiny-cpu, checkpointing every `every` steps (its evaluation only after the last)."""
    text = (REPO / "training" / "presets" / "tiny-cpu.toml").read_text()
    text = text.replace("\n[harness]", f"\ncheckpoint_every = {every}\n\n[harness]", 1)
    path = tmp / f"tiny-cpu-ckpt{every}.toml"
    path.write_text(text)
    return path


def launch_from_launchpad(page, ui: browser.UI, config: str, shots: Path) -> None:
    page.goto(f"{ui.dagster}/jobs", timeout=180_000)
    browser.dismiss_welcome(page)
    browser.click(page, page.get_by_role("link", name="train_campaign").first)
    browser.dismiss_welcome(page)
    browser.click(page, page.get_by_role("tab", name="Launchpad").first)
    editor = page.locator(".CodeMirror").first
    editor.wait_for(timeout=120_000)
    browser.click(page, editor)
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(config)  # as pasted: no auto-indent or bracket closing
    page.get_by_text(config.strip().splitlines()[-1].strip()).first.wait_for(timeout=60_000)
    page.wait_for_timeout(3000)  # the config is validated as typed
    say(f"Launchpad: errors panel says {page.get_by_text('No errors').count() and 'No errors'}")
    shot(page, "ui-kill-1-launchpad.png", shots)
    browser.click(page, page.get_by_role("button", name="Launch Run").first)


def shot(page, name: str, shots: Path) -> None:
    os.environ[browser.SCREENSHOTS_ENV] = str(shots)
    browser.shot(page, name, doc=True)
    size = (shots / name).stat().st_size
    say(f"screenshot {shots.name}/{name} ({size // 1024} KB)")


def prefect_page(page, prefect: str, flow_run_id: str):
    page.goto(f"{prefect}/runs/flow-run/{flow_run_id}", timeout=180_000)
    page.wait_for_load_state(timeout=180_000)
    return page


def tall(page, height: int = 1300) -> None:
    """A taller window for a page whose point is below the fold (the state message, logs)."""
    page.set_viewport_size({"width": browser.VIEWPORT["width"], "height": height})


def step_line(page, prefect: str, flow_run_id: str, state: str, last: bool) -> tuple[Any, str]:
    """The flow run's Prefect page once it shows `state`, scrolled to its log's last (or
    first) `step i/n:` line: (the page, that line's first 60 characters)."""
    page = prefect_page(page, prefect, flow_run_id)
    page.get_by_text(state).first.wait_for(timeout=120_000)
    tall(page)
    lines = page.get_by_text(re.compile(r"step \d+/\d+:"))
    line = lines.last if last else lines.first
    line.wait_for(timeout=120_000)
    line.scroll_into_view_if_needed()
    return page, line.inner_text()[:60]


def show_state_message(page) -> str:
    """The flow run's state message as its page shows it: the Details tab's State Message,
    opened in full ("See More"); the text shown."""
    browser.click(page, page.get_by_text("Details", exact=True).first)
    label = page.get_by_text("State Message", exact=True).first
    label.wait_for(timeout=60_000)
    more = page.get_by_text("See More", exact=True)
    if more.count():
        browser.click(page, more.first)
    tall(page)
    label.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    return page.get_by_text("crashed: ").first.inner_text()


def walk(args: argparse.Namespace, tmp: Path, shots: Path, page) -> int:
    store, _, _ = t1_store_at(tmp / "wh")
    say(f"store with t1 v1 (the campaign tests' pool) at {store}")
    warm = REPO / ".cache" / "t1-forge" / "policy"
    say(f"warm-started policies cached: {len(list(warm.glob('*')))} (none: the run builds one)")
    preset = preset_file(tmp, args.checkpoint_every)
    port, prefect_port = free_port(), free_port()
    t1ui = T1UI(tmp, port, prefect_port)
    try:
        t = time.monotonic()
        ui = t1ui.start()
        say(f"t1 ui up (banner) in {time.monotonic() - t:.0f} s")

        # 1. launch from the Launchpad
        # the preset's path relative to t1 ui's directory, where the runner starts flow runs
        fields = [f"preset: {preset.name}", f"steps: {args.steps}", f"eval_every: {args.steps}"]
        config = "ops:\n  campaign_flow_run:\n    config:\n" + "".join(
            f"      {f}\n" for f in fields
        )
        say(f"Launchpad config: {' '.join(config.split())}")
        launch_from_launchpad(page, ui, config, shots)
        dagster_run = poll("the train_campaign run", lambda: ui.runs("train_campaign"), 300)[0]
        say(f"Dagster run {dagster_run['runId']} launched: {dagster_run['status']}")
        fr = poll("the campaign flow run", lambda: flow_runs(ui.prefect), 600)[0]
        say(f"Prefect flow run {fr['name']} ({fr['id']}): {fr['state']['name']}")
        fr = poll(
            "the flow run Running with a run id",
            lambda: (
                (r := flow_run(ui.prefect, fr["id"]))["state"]["type"] == "RUNNING"
                and campaign_id(r)
                and r
            ),
            900,
        )
        run_dir = tmp / "runs" / str(campaign_id(fr))
        say(f"flow run Running; campaign run {run_dir.name}, pid {fr.get('infrastructure_pid')}")

        # 2. the Prefect server killed mid-run
        first = poll("a first checkpoint", lambda: checkpoint_step(run_dir), 1800, every_s=5)
        say(f"checkpoint at step {first}; metrics hold steps {metric_steps(run_dir)}")
        server = browser.pid_of(
            "server", "start", "--host", "127.0.0.1", "--port", str(prefect_port)
        )
        killed_at = time.monotonic()
        os.kill(server, signal.SIGKILL)
        say(f"SIGKILLed the Prefect server (pid {server}); flow run in flight")
        line = poll(
            "t1 ui's restart line",
            lambda: next((x for x in t1ui.terminal().splitlines() if "restarting it" in x), None),
            300,
            every_s=1,
        )
        say(f"t1 ui's terminal: {line}")
        poll(
            "the restarted server",
            lambda: httpx.get(f"{ui.prefect}/api/health", timeout=5).status_code == 200,
            600,
            every_s=1,
        )
        say(f"Prefect answers again {time.monotonic() - killed_at:.0f} s after the kill")
        state = flow_run(ui.prefect, fr["id"])["state"]["name"]
        say(f"flow run after the restart: {state}; Dagster run: "
            f"{dagster_status(ui, dagster_run['runId'])}")  # fmt: skip
        before = len(metric_steps(run_dir))
        poll("a step after the restart", lambda: len(metric_steps(run_dir)) > before, 1800, 5)
        r = flow_run(ui.prefect, fr["id"])
        dstatus = dagster_status(ui, dagster_run["runId"])
        say(f"a step after the restart: metrics hold steps {metric_steps(run_dir)}; flow run "
            f"{r['state']['name']}; Dagster run {dstatus}")  # fmt: skip
        page, line = step_line(page, ui.prefect, fr["id"], "Running", last=True)
        say(f"Prefect UI: Running; its log's last step line: {line}")
        shot(page, "ui-kill-2-prefect-running-after-restart.png", shots)

        # 3. t1 ui killed as a whole mid-campaign
        mid = poll(
            "a checkpoint after the restart",
            lambda: (c := checkpoint_step(run_dir)) > first and c,
            1800,
            every_s=5,
        )
        poll("a step after that checkpoint", lambda: len(metric_steps(run_dir)) > mid, 900, 2)
        mid = checkpoint_step(run_dir)
        running = flow_run(ui.prefect, fr["id"])["state"]["name"]
        assert t1ui.proc is not None
        pids = descendants(t1ui.proc.pid)
        groups = {pgid(p) for p in pids} - {None}
        own = sum(pgid(p) == t1ui.proc.pid for p in pids)
        say(f"checkpoint at step {mid}; flow run {running}; metrics hold steps "
            f"{metric_steps(run_dir)}; t1 ui is {len(pids)} processes in {len(groups)} "
            f"process groups (its own group holds {own})")  # fmt: skip
        kill_tree(t1ui.proc.pid)
        t1ui.proc.wait(timeout=60)
        killed_step = len(metric_steps(run_dir))
        say(f"SIGKILLed t1 ui and the {len(pids)} processes under it (a crashed machine); "
            f"{killed_step} steps logged, checkpoint at step {mid}")  # fmt: skip
        pid = str(fr.get("infrastructure_pid") or "").rpartition(":")[2]
        done = poll("the flow run's process gone", lambda: gone(pid), 30, 1)
        say(f"the flow run's process {pid}: {'gone' if done else 'alive'}")
        poll("the ports free", lambda: not port_in_use("127.0.0.1", port)
             and not port_in_use("127.0.0.1", prefect_port), 120, 1)  # fmt: skip
        t = time.monotonic()
        ui = t1ui.start()
        say(f"t1 ui started again, banner after {time.monotonic() - t:.0f} s; before it:")
        for x in t1ui.said():
            if "marked" in x or "warning" in x or "error" in x:
                say(f"  {x}")
        r = poll(
            "the flow run Crashed",
            lambda: (x := flow_run(ui.prefect, fr["id"]))["state"]["type"] == "CRASHED" and x,
            300,
        )
        message = r["state"]["message"]
        say(f"flow run: {r['state']['name']}: {message}")
        status = poll(
            "the Dagster run ended",
            lambda: (s := dagster_status(ui, dagster_run["runId"])) in ("FAILURE", "SUCCESS",
                                                                         "CANCELED") and s,
            300,
        )  # fmt: skip
        say(f"Dagster run {dagster_run['runId']}: {status}")
        say(f"campaign_runs: {warehouse_status(store, fr['id'])}")

        page = prefect_page(page, ui.prefect, fr["id"])
        page.get_by_text("Crashed").first.wait_for(timeout=120_000)
        main_view = page.get_by_text("continue it with").count()
        seen = show_state_message(page)
        say(f"Prefect UI: Crashed; the state message on the run's main view: "
            f"{'yes' if main_view else 'no'}; under Details -> State Message -> See More: "
            f"{seen!r}")  # fmt: skip
        shot(page, "ui-kill-3-prefect-crashed.png", shots)
        page.set_viewport_size(browser.VIEWPORT)
        page.goto(f"{ui.dagster}/runs/{dagster_run['runId']}", timeout=180_000)
        browser.dismiss_welcome(page)
        page.get_by_text("Failure").first.wait_for(timeout=120_000)
        with contextlib.suppress(Exception):
            page.get_by_text("while nothing followed it").first.wait_for(timeout=60_000)
        shot(page, "ui-kill-4-dagster-failure.png", shots)

        # the printed command, run in the terminal
        found = re.search(r"continue it with `([^`]+)`", message)
        if found is None:
            say("no resume command in the message")
            return 1
        command = shlex.split(found.group(1))
        command[0] = str(Path(sys.executable).parent / "t1")
        env = {**os.environ, "PREFECT_API_URL": f"{ui.prefect}/api",
               "DAGSTER_HOME": str(tmp / "dagster"), "T1_WAREHOUSE": str(store)}  # fmt: skip
        say(f"$ PREFECT_API_URL={ui.prefect}/api {found.group(1)}   (in $WALK, as t1 ui's cwd)")
        t = time.monotonic()
        with open(tmp / "resume.log", "wb") as out:
            rc = subprocess.run(command, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT,
                                timeout=3600).returncode  # fmt: skip
        lines = (tmp / "resume.log").read_text(errors="replace").splitlines()
        say(f"exit {rc} after {time.monotonic() - t:.0f} s; its step lines:")
        for x in lines:
            if x.startswith('{"step"') or x.startswith("error"):
                say(f"  {x[:110]}")
        steps = metric_steps(run_dir)
        once = steps == list(range(args.steps))
        say(f"metrics.jsonl's training lines: steps {steps}: "
            f"{'each step once' if once else 'NOT each step once'}; its evaluation lines: "
            f"after steps {metric_steps(run_dir, evaluations=True)}")  # fmt: skip
        cfg = json.loads((run_dir / "config.json").read_text())
        say(f"config.json after the resume: steps {cfg['steps']}, checkpoint_every "
            f"{cfg['checkpoint_every']}, resumed_from {cfg['resumed_from']}")  # fmt: skip
        resumed = next(x for x in flow_runs(ui.prefect) if x["id"] != fr["id"])
        say(f"the resumed run's flow run {resumed['name']}: {resumed['state']['name']}")
        say(f"campaign_runs: {warehouse_status(store, fr['id'])} then "
            f"{warehouse_status(store, resumed['id'])}")  # fmt: skip
        page, line = step_line(page, ui.prefect, resumed["id"], "Completed", last=False)
        say(f"Prefect UI: the resumed run Completed; its log's first step line: {line}")
        shot(page, "ui-kill-5-prefect-resumed-completed.png", shots)
        return 0 if rc == 0 and once else 1
    finally:
        t1ui.stop()
        for name in ("ui.log", "servers.log", "resume.log"):
            if (tmp / name).exists():
                shutil.copy(tmp / name, browser.ARTIFACTS / f"ui-kill-walk-{name}")


def main() -> int:
    global WALK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=Path, default=REPO / "artifacts")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--checkpoint-every", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary instance")
    args = parser.parse_args()
    shots = args.shots.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    browser.ARTIFACTS.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="t1-ui-kill-"))
    WALK = tmp
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(
                executable_path=browser.CHROMIUM, args=browser.CHROMIUM_ARGS
            )
            try:
                page = chromium.new_page(viewport=browser.VIEWPORT)  # type: ignore[arg-type]
                rc = walk(args, tmp, shots, page)
            finally:
                chromium.close()
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"done: exit {rc} after {time.monotonic() - T0:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
