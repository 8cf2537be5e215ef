"""Shared test setup: skip hardware/service-bound tests with a stated reason."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from sandbox.local import local_backend_problem

    problem = local_backend_problem()
    if problem is None:
        return
    skip = pytest.mark.skip(reason=f"local sandbox unavailable: {problem}")
    for item in items:
        if "sandbox" in item.keywords:
            item.add_marker(skip)
