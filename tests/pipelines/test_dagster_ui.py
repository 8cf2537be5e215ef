"""Browser test: headless Chromium (Debian's, driven by Playwright) opens the running Dagster
UI started by `t1 ui`, finds the asset graph, launches a materialization of `seed_corpus`
and sees it succeed. The screenshot is saved under artifacts/ as a test artifact."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.orchestration, pytest.mark.slow]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    tmp_path = tmp_path_factory.mktemp("ui")
    port, prefect_port = free_port(), free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "dh"),
        "T1_WAREHOUSE": str(tmp_path / "wh"),
        "PREFECT_HOME": str(tmp_path / "prefect"),
    }
    t1 = str(Path(sys.executable).parent / "t1")
    # Logs go to a file: an unread pipe fills up and blocks the servers (a past flake).
    log = open(tmp_path / "ui.log", "wb")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        [t1, "ui", "--port", str(port), "--prefect-port", str(prefect_port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            tail = (tmp_path / "ui.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"the Dagster webserver did not come up within 120 s:\n{tail}")
        prefect = f"http://127.0.0.1:{prefect_port}/api/health"
        while time.monotonic() < deadline:
            try:
                if httpx.get(prefect, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail("the Prefect server started by `t1 ui` did not come up")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def latest_run_status(url: str) -> str | None:
    query = "{ runsOrError(limit: 1) { ... on Runs { results { status } } } }"
    r = httpx.post(f"{url}/graphql", json={"query": query}, timeout=10).json()
    runs = r["data"]["runsOrError"]["results"]
    return runs[0]["status"] if runs else None


def dismiss_welcome(page) -> None:
    """Close the first-visit community dialog if it shows."""
    page.wait_for_timeout(1500)
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()


def test_materialize_from_the_ui(dagster_ui: str):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{dagster_ui}/asset-groups", timeout=120_000)
        page.get_by_text("Global asset lineage").first.wait_for(timeout=120_000)
        dismiss_welcome(page)
        page.get_by_text("tasks").first.wait_for(timeout=60_000)  # the group in the graph
        page.screenshot(path=str(ARTIFACTS / "dagster-asset-graph.png"))
        page.goto(f"{dagster_ui}/assets/seed_corpus", timeout=60_000)
        page.get_by_text("seed_corpus").first.wait_for(timeout=60_000)
        dismiss_welcome(page)
        page.locator("button", has_text="Materialize").first.click(timeout=60_000)
        deadline = time.monotonic() + 240
        status = None
        while time.monotonic() < deadline:
            status = latest_run_status(dagster_ui)
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                break
            time.sleep(2)
        page.goto(f"{dagster_ui}/assets/seed_corpus", timeout=60_000)
        dismiss_welcome(page)
        page.get_by_text("pool_version").first.wait_for(timeout=60_000)  # its metadata
        page.screenshot(path=str(ARTIFACTS / "dagster-materialized.png"))
        browser.close()
    assert status == "SUCCESS"


def test_campaign_reports_evaluation_over_http(dagster_ui: str):
    from pipelines.reporting import report_evaluation

    report_evaluation({"checkpoint": "v7", "resolved_rate": 0.25}, webserver_url=dagster_ui)
    query = """{ assetOrError(assetKey: {path: ["evaluation_results"]}) {
        ... on Asset { assetMaterializations(limit: 1) { metadataEntries {
            label ... on TextMetadataEntry { text } } } } } }"""
    body = httpx.post(f"{dagster_ui}/graphql", json={"query": query}, timeout=10).json()
    mats = body["data"]["assetOrError"]["assetMaterializations"]
    assert mats, body
    entries = {e["label"]: e.get("text") for e in mats[0]["metadataEntries"]}
    assert entries.get("checkpoint") == "v7"
