"""Fixtures for the orchestration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipelines.campaign_store import t1_store_at


@pytest.fixture
def t1_store(tmp_path: Path):
    """A store whose t1 v1 holds the tiny-cpu preset's two training seeds and a child of its
    held-out task: (store path, training tasks, the child)."""
    return t1_store_at(tmp_path / "wh")


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server and database for the session's tests that need one (its
    start is their slow part: 20 s idle, minutes on a busy machine)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield
