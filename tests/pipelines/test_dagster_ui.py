"""Browser tests: headless Chromium (Debian's, driven by Playwright) against `t1 ui` on a fresh
instance (temporary DAGSTER_HOME, PREFECT_HOME and store, a small synthesis budget).

1. The build path: Jobs -> build_pools -> Materialize all. One launch builds t1 (regression:
   a fresh instance offered no round partitions, rounds launched together failed, and T1
   appeared only after three launches).
2. The loop: Jobs -> train_campaign -> Launchpad -> Launch run. The job starts the Prefect
   deployment `t1 ui` serves; the campaign trains on t1 and its evaluation arrives in
   `evaluation_results` with the pool version, linked to both runs; from the asset's page
   the Prefect link (a URL value) is followed to the flow run, and from the flow run's
   evaluation artifact the link back to the Dagster run that started it.

Screenshots are saved under artifacts/ as test artifacts. With T1_SCREENSHOTS=<folder>
(`T1_SCREENSHOTS=docs/images pytest -m browser ...`), the click-through's pictures are also
written there, palette-reduced, for the docs (docs/orchestration.md shows them).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pipelines.services import free_port
from training.campaign_config import load_campaign_config

pytestmark = [pytest.mark.browser, pytest.mark.orchestration, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
SCREENSHOTS_ENV = "T1_SCREENSHOTS"
VIEWPORT = {"width": 1280, "height": 800}
SEEDS = "git-bisect-regression,sa-log-rotate-script,vc-gitignore-untrack,sa-dedupe-hardlinks"


class UI:
    def __init__(
        self, dagster: str, prefect: str, store: Path, proc: subprocess.Popen, log: Path
    ) -> None:
        self.dagster, self.prefect, self.store = dagster, prefect, store
        self.proc, self.log = proc, log

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = {"query": query, "variables": variables or {}}
        r = httpx.post(f"{self.dagster}/graphql", json=body, timeout=30).json()
        assert "errors" not in r, r
        return r["data"]

    def runs(self, job: str) -> list[dict]:
        query = """query($job: String!) { runsOrError(filter: {pipelineName: $job}) {
            ... on Runs { results { runId status } } } }"""
        return self.graphql(query, {"job": job})["runsOrError"]["results"]

    def wait_for_run(self, job: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            runs = self.runs(job)
            if runs and runs[0]["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                return runs[0]
            time.sleep(3)
        pytest.fail(f"no finished {job} run within {timeout_s:.0f} s: {self.runs(job)}")

    def latest_metadata(self, asset: str) -> dict[str, str]:
        query = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) {
            ... on Asset { assetMaterializations(limit: 1) { metadataEntries { label
              ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue }
              ... on UrlMetadataEntry { url } } } } } }"""
        mats = self.graphql(query, {"path": [asset]})["assetOrError"]["assetMaterializations"]
        assert mats, f"{asset} was never materialized"
        return {
            e["label"]: str(e.get("text") or e.get("intValue") or e.get("url") or "")
            for e in mats[0]["metadataEntries"]
        }


def wait_until_up(url: str, deadline: float, log: Path) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"{url} did not come up:\n{log.read_text(errors='replace')[-3000:]}")


def ui_command(tmp: Path, port: int, prefect_port: int) -> tuple[list[str], dict[str, str]]:
    """`t1 ui`'s command line and environment on a fresh instance under `tmp` (homes, store
    and server log there; a small synthesis budget). Also used by benchmarks/ui_kill_walk.py."""
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp / "dagster"),
        "T1_WAREHOUSE": str(tmp / "wh"),
        "T1_DEMO_ROUNDS": "2",
        "T1_DEMO_PER_ROUND": "2",
        "T1_DEMO_SEED_IDS": SEEDS,
        "T1_DEMO_PREFLIGHT_N": "2",  # the main job test's budget
        "T1_DEMO_AUDIT_MUTANTS": "2",
    }
    env.pop("PREFECT_API_URL", None)
    t1 = str(Path(sys.executable).parent / "t1")
    argv = [t1, "ui", "--port", str(port), "--prefect-port", str(prefect_port)]
    argv += ["--prefect-home", str(tmp / "prefect"), "--log-file", str(tmp / "servers.log")]
    return argv, env


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("ui")
    port, prefect_port = free_port(), free_port()
    argv, env = ui_command(tmp, port, prefect_port)
    # Logs go to a file: an unread pipe fills up and blocks the servers (a past flake).
    log_path = tmp / "ui.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        argv, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    dagster, prefect = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{prefect_port}"
    try:
        deadline = time.monotonic() + 240
        wait_until_up(f"{dagster}/server_info", deadline, log_path)
        wait_until_up(f"{prefect}/api/deployments/name/ppo_campaign/t1", deadline, log_path)
        yield UI(dagster, prefect, tmp / "wh", proc, log_path)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=40)
        except ProcessLookupError:
            pass  # the last test stopped it
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(log_path, ARTIFACTS / "t1-ui.log")
        if (tmp / "servers.log").exists():
            shutil.copy(tmp / "servers.log", ARTIFACTS / "t1-ui-servers.log")


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser.new_page(viewport=VIEWPORT)
        browser.close()


def dismiss_welcome(page) -> None:
    """Close the first-visit dialog if it shows (it may open a moment after a page loads)."""
    page.wait_for_timeout(1500)
    for _ in range(3):
        skip = page.get_by_role("button", name="Skip")
        if skip.count():
            skip.first.click()
        elif page.locator(".bp5-overlay-backdrop").count():
            page.keyboard.press("Escape")
        else:
            return
        page.wait_for_timeout(500)


def shot(page, name: str, *, doc: bool = False) -> None:
    """Save a screenshot under artifacts/; a `doc` one also under $T1_SCREENSHOTS, as a
    256-colour PNG (a UI page keeps its look at a fraction of the size)."""
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    folder = os.environ.get(SCREENSHOTS_ENV)
    if doc and folder:
        from PIL import Image

        Path(folder).mkdir(parents=True, exist_ok=True)
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
            small.save(Path(folder) / name, optimize=True)


def opened_at(page, prefix: str, timeout_ms: int = 60_000):
    """The page (this one or a tab it opened) whose URL starts with `prefix`."""
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        for candidate in page.context.pages:
            if candidate.url.startswith(prefix):
                candidate.wait_for_load_state(timeout=timeout_ms)
                return candidate
        page.wait_for_timeout(500)
    pytest.fail(f"no page opened at {prefix}: {[p.url for p in page.context.pages]}")


def click(page, locator, timeout_ms: int = 60_000) -> None:
    """Click `locator`, closing a dialog that opens over it first."""
    for _ in range(3):
        try:
            locator.click(timeout=timeout_ms // 3)
            return
        except Exception:  # noqa: BLE001 - a dialog intercepted the click: close it, retry
            dismiss_welcome(page)
    locator.click(timeout=timeout_ms)


@pytest.mark.sandbox
def test_build_pools_in_one_launch(ui: UI, page):
    page.goto(f"{ui.dagster}/jobs", timeout=120_000)
    dismiss_welcome(page)
    click(page, page.get_by_role("link", name="build_pools").first)
    dismiss_welcome(page)
    click(page, page.get_by_role("button", name="Materialize all").first)
    run = ui.wait_for_run("build_pools", timeout_s=900)
    assert run["status"] == "SUCCESS", run
    assert len(ui.runs("build_pools")) == 1  # one launch
    page.goto(f"{ui.dagster}/assets/t1_pool", timeout=60_000)
    dismiss_welcome(page)
    page.get_by_text("pool_version").first.wait_for(timeout=60_000)
    shot(page, "ui-build-pools-t1.png")
    md = ui.latest_metadata("t1_pool")
    assert md["pool"] == "t1" and int(md["tasks"]) >= 1 and md["pool_version"] == "1"


@pytest.mark.sandbox
@pytest.mark.torch
def test_start_a_campaign_on_t1_from_dagster(ui: UI, page, request):
    if not any(r["status"] == "SUCCESS" for r in ui.runs("build_pools")):
        pytest.skip("needs t1, built by test_build_pools_in_one_launch")
    request.getfixturevalue("warm_policy")  # built once (minutes on a clean clone), outside the run
    page.goto(f"{ui.dagster}/jobs", timeout=120_000)
    dismiss_welcome(page)
    click(page, page.get_by_role("link", name="train_campaign").first)
    dismiss_welcome(page)
    click(page, page.get_by_role("tab", name="Launchpad").first)
    click(page, page.get_by_role("button", name="Launch Run").first)
    run = ui.wait_for_run("train_campaign", timeout_s=900)
    assert run["status"] == "SUCCESS", run

    md = ui.latest_metadata("evaluation_results")
    assert (md["pool"], md["pool_version"]) == ("t1", "1")
    assert md["audit_version"] not in ("", "unknown")
    assert md["dagster_run_id"] == run["runId"]  # Prefect -> Dagster
    flow_run_id = md["prefect_flow_run_id"]
    assert md["prefect_flow_run_url"].endswith(f"/runs/flow-run/{flow_run_id}")
    flow_run = httpx.get(f"{ui.prefect}/api/flow_runs/{flow_run_id}", timeout=10).json()
    assert {"pool:t1", "pool_version:1"} <= set(flow_run["tags"])
    # the preset's steps are in the name of a run that chose none (as it waits in the queue)
    steps = load_campaign_config("tiny-cpu").steps
    assert flow_run["name"] == f"tiny-cpu-t1-v1-{steps}steps"
    assert flow_run["state"]["type"] == "COMPLETED"
    artifacts = httpx.post(
        f"{ui.prefect}/api/artifacts/filter",
        json={"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}},
        timeout=10,
    ).json()
    kinds = sorted(a["type"] for a in artifacts)
    assert kinds == ["markdown", "progress", "table"]  # 1 evaluation, steps, step progress
    (evaluation,) = [a for a in artifacts if a["type"] == "markdown"]
    assert "t1 v1" in evaluation["data"] and run["runId"] in evaluation["data"]

    tags = ui.graphql(
        """query($id: ID!) { runOrError(runId: $id) { ... on Run { tags { key value } } } }""",
        {"id": run["runId"]},
    )["runOrError"]["tags"]
    tag = {t["key"]: t["value"] for t in tags}
    assert (tag["pool"], tag["pool_version"]) == ("t1", "1")  # a Launchpad run, tagged

    click_through(ui, page, run["runId"], md)


def click_through(ui: UI, page, dagster_run_id: str, md: dict[str, str]) -> None:
    """Dagster's evaluation -> its Prefect link -> the flow run -> its evaluation artifact ->
    the link back -> the Dagster run that started it, by clicks, a screenshot at each stop."""
    page.goto(f"{ui.dagster}/assets/evaluation_results", timeout=60_000)
    dismiss_welcome(page)
    page.get_by_placeholder("Filter metadata keys").fill("pool")
    page.get_by_text("pool_version").first.wait_for(timeout=60_000)
    shot(page, "ui-1-dagster-evaluation-pool-version.png", doc=True)
    # The evaluation's Prefect link is a URL value (it was text): follow it from the asset.
    page.get_by_placeholder("Filter metadata keys").fill("prefect_flow_run_url")
    link = page.get_by_role("link", name=md["prefect_flow_run_url"]).first
    link.wait_for(timeout=60_000)
    shot(page, "ui-2-dagster-evaluation-prefect-link.png", doc=True)
    click(page, link)
    prefect_page = opened_at(page, md["prefect_flow_run_url"])
    prefect_page.get_by_text("pool_version:1").first.wait_for(timeout=60_000)
    prefect_page.get_by_text(" of t1 v1 ").first.wait_for(timeout=60_000)  # its log, loaded
    shot(prefect_page, "ui-3-prefect-flow-run.png", doc=True)
    # Back: the flow run's evaluation artifact links the Dagster run that started it.
    click(prefect_page, prefect_page.get_by_text("Artifacts", exact=True).first)
    card = prefect_page.locator("a[href*='/artifacts/artifact/']", has_text="evaluation-")
    for _ in range(60):  # task runs' artifacts load once their section scrolls into view
        if card.count():
            break
        prefect_page.mouse.wheel(0, 2000)
        prefect_page.wait_for_timeout(1000)
    click(prefect_page, card.first)
    back = prefect_page.get_by_role("link", name=dagster_run_id).first
    back.wait_for(timeout=60_000)
    shot(prefect_page, "ui-4-prefect-evaluation-artifact.png", doc=True)
    click(prefect_page, back)
    dagster_page = opened_at(prefect_page, f"{ui.dagster}/runs/{dagster_run_id}")
    dismiss_welcome(dagster_page)
    dagster_page.get_by_role("link", name=md["prefect_flow_run_url"]).first.wait_for(
        timeout=60_000
    )  # the run links to Prefect in turn
    shot(dagster_page, "ui-5-dagster-campaign-run.png", doc=True)


def pid_of(*argv: str) -> int:
    """The pid of the one process whose command line contains `argv` in order."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmdline]
        if any(words[i : i + len(argv)] == list(argv) for i in range(len(words))):
            found.append(int(entry.name))
    assert len(found) == 1, found
    return found[0]


def test_ui_restarts_prefect_and_exits_1_when_dagster_stops(ui: UI):
    """A Prefect server that dies is started again (a campaign in flight retries its calls);
    a Dagster webserver that dies ends `t1 ui` with exit 1, the others stopped (regression:
    a server that failed took the others down and `t1 ui` exited 0). Runs last: it stops
    this module's UI."""
    port = ui.prefect.rsplit(":", 1)[1]
    os.kill(pid_of("server", "start", "--host", "127.0.0.1", "--port", port), signal.SIGKILL)
    deadline = time.monotonic() + 180
    while "prefect server stopped" not in ui.log.read_text(errors="replace"):
        assert ui.proc.poll() is None and time.monotonic() < deadline, ui.log.read_text()
        time.sleep(1)
    while True:  # the new one answers on the same port
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{ui.prefect}/api/health", timeout=5).status_code == 200:
                break
        assert ui.proc.poll() is None and time.monotonic() < deadline, ui.log.read_text()
        time.sleep(1)
    dport = ui.dagster.rsplit(":", 1)[1]
    os.kill(pid_of("-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", dport), signal.SIGKILL)
    assert ui.proc.wait(timeout=60) == 1
    assert "error: dagster webserver stopped" in ui.log.read_text(errors="replace")
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{ui.prefect}/api/health", timeout=5)  # the others were stopped too
