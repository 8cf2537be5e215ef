"""The order `make test`'s two workers take the suite's files in (pytest-xdist `loadfile`,
with `--no-loadscope-reorder`: a file's tests stay on one worker, files go out in this order).

1. Files that need no warm-started policy before those that do (a test using the
   `warm_policy` fixture, or marked `warm_policy` where it asks for it while it runs): the
   policy is built beside the suite (Makefile) and a test that needs it earlier waits for
   it, its worker idle (the documented `t1 train` took 200 s on a fresh clone against 37 s
   with the policy cached).
2. Within each group, the longest first (the seconds `durations.json` records for the file,
   else its number of tests as seconds): the short files fill in at the end, so the two
   workers end close together.

`pytest --record-durations tests/durations.json` rewrites the record (tests/conftest.py); a
stale record only costs balance, never a test.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS = Path(__file__).with_name("durations.json")
POLICY = "warm_policy"  # the fixture, and the marker of a test that asks for it while it runs


class Item(Protocol):
    nodeid: str
    fixturenames: Sequence[str]

    def get_closest_marker(self, name: str) -> object | None: ...


T = TypeVar("T", bound=Item)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def needs_policy(item: Item) -> bool:
    return POLICY in item.fixturenames or item.get_closest_marker(POLICY) is not None


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """File -> seconds, as recorded ({} where there is no readable record)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def ordered(items: list[T], durations: dict[str, float]) -> list[T]:
    """`items`, files in schedule order (see the module doc), each file's tests as given."""
    files: dict[str, list[T]] = {}
    for item in items:
        files.setdefault(file_of(item.nodeid), []).append(item)

    def key(name: str) -> tuple[bool, float, str]:
        tests = files[name]
        needs = any(needs_policy(t) for t in tests)
        return needs, -durations.get(name, float(len(tests))), name

    return [item for name in sorted(files, key=key) for item in files[name]]
