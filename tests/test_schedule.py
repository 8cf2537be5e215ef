"""The suite's schedule (tests/schedule.py): files needing the warm-started policy last, the
longest first within each group, each file's tests kept together and in order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tests.schedule import load_durations, ordered


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: list[str] = field(default_factory=list)
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_policy_files_go_last_and_the_longest_first_within_each_group(tmp_path):
    items = [
        FakeItem("a.py::t1"),
        FakeItem("ui.py::build"),
        FakeItem("ui.py::campaign", markers=("warm_policy",)),  # asks for it while it runs
        FakeItem("b.py::t1"),
        FakeItem("b.py::t2"),
        FakeItem("train.py::t1", fixturenames=["tmp_path", "warm_policy"]),
        FakeItem("c.py::t1"),
        FakeItem("d.py::t1", fixturenames=["warm_policy"]),
    ]
    record = tmp_path / "durations.json"
    record.write_text(json.dumps({"a.py": 5.0, "c.py": 50.0, "ui.py": 400.0, "train.py": 90.0}))
    got = [i.nodeid for i in ordered(items, load_durations(record))]
    assert got == [
        "c.py::t1",  # 50 s
        "a.py::t1",  # 5 s
        "b.py::t1",  # not recorded: 2 tests, 2 s
        "b.py::t2",
        "ui.py::build",  # needs the policy: after every file that does not
        "ui.py::campaign",
        "train.py::t1",
        "d.py::t1",  # not recorded: 1 s
    ]


def test_a_missing_or_unreadable_record_orders_by_the_number_of_tests(tmp_path):
    bad = tmp_path / "durations.json"
    bad.write_text("{not json")
    assert load_durations(bad) == {} and load_durations(tmp_path / "absent.json") == {}
    items = [FakeItem("one.py::t"), FakeItem("two.py::a"), FakeItem("two.py::b")]
    assert [i.nodeid for i in ordered(items, {})] == ["two.py::a", "two.py::b", "one.py::t"]
