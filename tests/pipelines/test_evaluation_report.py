"""An evaluation reported over HTTP (a campaign Dagster does not follow: started from the
Prefect UI or `t1 train` with `t1 ui`'s webserver URL) arrives as a run-attached
`evaluation_results` materialization whose links are URL values.

Regression: the report went to the webserver's /report_asset_materialization endpoint, which
stores every value as text, so `prefect_flow_run_url` and `dagster_url` were not clickable.
A real `dagster-webserver` (launching runs itself, as the default run coordinator does) on a
temporary DAGSTER_HOME; the values are read back through the instance and through GraphQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import httpx
import pytest

from pipelines.reporting import REPORT_JOB, report_evaluation
from pipelines.services import free_port, venv_bin

pytestmark = [pytest.mark.orchestration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
DAGSTER_YAML = """run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""
METADATA_OF_LATEST = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetMaterializations(limit: 1) { runId metadataEntries { label __typename
      ... on UrlMetadataEntry { url } ... on TextMetadataEntry { text } } } } } }"""


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory):
    """(URL, DAGSTER_HOME) of a dagster-webserver serving this project's definitions."""
    home = tmp_path_factory.mktemp("dagster")
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    log_path = home / "webserver.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [venv_bin("dagster-webserver"), "-m", "pipelines.definitions"]
            + ["-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while not up(url):
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"dagster-webserver did not come up:\n{log_path.read_text()}")
                time.sleep(1)
            yield url, home
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def up(url: str) -> bool:
    """Whether the webserver answers and its code location has loaded (the report job)."""
    query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }"
    try:
        r = httpx.post(f"{url}/graphql", json={"query": query}, timeout=5).json()
    except httpx.HTTPError:
        return False
    nodes = (r.get("data") or {}).get("repositoriesOrError", {}).get("nodes") or []
    return any(j["name"] == REPORT_JOB for n in nodes for j in n["jobs"])


def finished_report_run(home: Path, timeout_s: float = 120.0) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout_s
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.monotonic() < deadline:
            runs = instance.get_runs(dg.RunsFilter(job_name=REPORT_JOB))
            if runs and runs[0].is_finished:
                return runs[0]
            time.sleep(1)
    pytest.fail(f"no finished {REPORT_JOB} run within {timeout_s:.0f} s")


def test_an_evaluation_reported_over_http_has_clickable_links(webserver):
    url, home = webserver
    flow_run_url = "http://127.0.0.1:4200/runs/flow-run/7c1e0d2a"
    metadata = {
        "checkpoint": "step-2",
        "campaign_run_id": "tiny-7c1e0d2a",
        "pool": "t1",
        "pool_version": 3,
        "validate/pass_rate": 0.25,
        "prefect_flow_run_id": "7c1e0d2a",
        "prefect_flow_run_url": flow_run_url,
        "dagster_url": f"{url}/assets/evaluation_results",
        "not_scalar": {"dropped": True},
    }
    report_evaluation(metadata, webserver_url=url)
    run = finished_report_run(home)
    assert run.status == dg.DagsterRunStatus.SUCCESS, run
    assert run.tags["pool_version"] == "3" and run.tags["checkpoint"] == "step-2"

    with dg.DagsterInstance.from_config(str(home)) as instance:
        record = instance.fetch_materializations(dg.AssetKey("evaluation_results"), limit=1)
    (latest,) = record.records
    assert latest.run_id == run.run_id  # attached to the report's run, not runless
    md = latest.asset_materialization.metadata
    assert md["prefect_flow_run_url"] == dg.MetadataValue.url(flow_run_url)
    assert isinstance(md["dagster_url"], dg.UrlMetadataValue)
    assert md["pool_version"] == dg.MetadataValue.int(3)
    assert md["validate/pass_rate"] == dg.MetadataValue.float(0.25)
    assert "not_scalar" not in md

    data = httpx.post(
        f"{url}/graphql",
        json={"query": METADATA_OF_LATEST, "variables": {"path": ["evaluation_results"]}},
        timeout=30,
    ).json()["data"]
    (mat,) = data["assetOrError"]["assetMaterializations"]
    entries = {e["label"]: e for e in mat["metadataEntries"]}
    assert entries["prefect_flow_run_url"] == {
        "label": "prefect_flow_run_url",
        "__typename": "UrlMetadataEntry",
        "url": flow_run_url,
    }
    assert entries["dagster_url"]["__typename"] == "UrlMetadataEntry"
    assert entries["checkpoint"]["__typename"] == "TextMetadataEntry"


def test_a_wrong_webserver_url_raises(webserver):
    """A URL that is not a Dagster webserver's root raises (the flow retries, then warns)."""
    url, _ = webserver
    with pytest.raises(httpx.HTTPStatusError, match="no-such-prefix/graphql"):
        report_evaluation({"checkpoint": "x"}, webserver_url=f"{url}/no-such-prefix")
