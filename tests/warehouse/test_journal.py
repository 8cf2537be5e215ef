"""Batched commits (`warehouse.journal`) and automatic compaction (`Store.auto_compact`).

A batched writer must lose nothing when killed: every `add` that returned is in the
warehouse after the next writer's `replay`, exactly once, each entry whole; an entry
committed just before a kill (its journal entry not yet dropped) adds nothing again.
Automatic compaction keeps a long run's part count, and with it the commit cost, bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from warehouse.journal import BatchedWriter, JournalError, decode_entry, encode_entry
from warehouse.recording import tables_of
from warehouse.records import AssertionRecord, TrialRecord
from warehouse.snapshot import Snapshot
from warehouse.store import PartInfo, Store, tiered_groups

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def candidate(i: int, assertions: int = 3) -> list:
    """One candidate's rows across two tables: a trial and its assertions."""
    tid = f"trial-{i:05d}"
    return [
        TrialRecord(trial_id=tid, task_hash=f"h{i}", task_id=f"t{i}", agent="oracle",
                    backend="local", started_at=T0),
        *[AssertionRecord(trial_id=tid, name=f"a{j}", position=j, task_hash=f"h{i}",
                          status="passed", ok=True) for j in range(assertions)],
    ]  # fmt: skip


def counts(path: Path) -> tuple[int, int, int]:
    """(trials, distinct trials, assertion rows) stored."""
    with Snapshot.open(path, with_lineage=False) as snap:
        t = snap.sql("SELECT count(*), count(DISTINCT trial_id) FROM trials").fetchone()
        a = snap.sql("SELECT count(*) FROM assertion_results").fetchone()
    assert t is not None and a is not None
    return t[0], t[1], a[0]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.warehouse.test_journal import candidate
    from warehouse.journal import BatchedWriter
    from warehouse.store import Store

    store = Store.open(Path(sys.argv[1]), create=True)
    w = BatchedWriter(store, "synthesis-kill", every=int(sys.argv[2]), interval_s=3600)
    for i in range(10_000):
        w.add(candidate(i), tag=i)
        w.maybe_flush()
        print(i, flush=True)
    """
)


def test_a_killed_batched_writer_loses_nothing_and_doubles_nothing(tmp_path):
    """SIGKILL a writer that commits every 7 candidates after its 18th `add` returned:
    14 are committed, 4 only journaled. The next writer's replay commits those 4, each whole
    (trial and assertions together), none twice; a second replay finds nothing."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "wh"), "7"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if int(line) == 17:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    added = 18 + sum(1 for _ in proc.stdout)  # adds that returned before the kill landed
    committed = counts(tmp_path / "wh")[0]
    assert committed % 7 == 0 and committed < added, (committed, added)
    store = Store.open(tmp_path / "wh")
    w = BatchedWriter(store, "synthesis-kill")
    result = w.replay()
    assert result is not None and result.written["trials"] == added - committed
    assert counts(tmp_path / "wh") == (added, added, 3 * added)
    assert w.replay() is None and store.journal_names("synthesis-kill") == []


def test_an_entry_committed_before_the_kill_is_not_written_twice(tmp_path):
    """Killed between the commit and dropping its journal entries: the replay re-commits
    them, and the first-write-wins keys make that a no-op."""
    store = Store.open(tmp_path, create=True)
    seen: list[list[object]] = []
    w = BatchedWriter(store, "s", every=3, interval_s=3600, on_commit=seen.append)
    store.journal_drop = lambda stream, names: (_ for _ in ()).throw(OSError("killed"))  # type: ignore[method-assign]
    w.add(candidate(0), tag=0)
    w.add(candidate(1), tag=1)
    assert not w.due()
    w.add(candidate(2), tag=2)
    assert w.due()
    with pytest.raises(OSError, match="killed"):
        w.flush()
    assert counts(tmp_path) == (3, 3, 9) and seen == []
    fresh = Store.open(tmp_path)
    assert len(fresh.journal_names("s")) == 3
    result = BatchedWriter(fresh, "s").replay()
    assert result is not None and result.written == {"trials": 0, "assertion_results": 0}
    assert counts(tmp_path) == (3, 3, 9) and fresh.journal_names("s") == []


def test_due_by_count_or_age_and_one_commit_per_flush(tmp_path):
    now = [0.0]
    store = Store.open(tmp_path, create=True)
    w = BatchedWriter(store, "s", every=4, interval_s=2.0, clock=lambda: now[0])
    assert w.wait_s() is None and not w.due()
    w.add(candidate(0))
    now[0] = 1.5
    assert w.wait_s() == pytest.approx(0.5) and not w.due()
    now[0] = 2.0
    assert w.due()
    generation = store.read_manifest().generation
    w.add(candidate(1))
    w.flush()
    assert store.read_manifest().generation == generation + 1  # two entries, one commit
    assert w.stats.entries == [2] and w.pending == 0


def test_a_damaged_entry_is_named():
    data = encode_entry(tables_of(candidate(1)))
    assert set(decode_entry(data)) == {"trials", "assertion_results"}
    with pytest.raises(JournalError, match="s/x: table 'assertion_results' is cut short"):
        decode_entry(data[:-10], "s/x")
    with pytest.raises(JournalError, match="not a warehouse journal entry"):
        decode_entry(b"PAR1....", "s/y")


def parts(*sizes: int) -> list[PartInfo]:
    return [PartInfo(file=f"p{i}", rows=1, bytes=b) for i, b in enumerate(sizes)]


def test_tiered_groups_merge_like_sized_parts_once_past_the_limit():
    k = 1024
    small = parts(*([10 * k] * 5), 600 * k, 700 * k, 5_000 * k, 100 * 2**20)
    assert tiered_groups(small, max_parts=9) == []  # at the limit: nothing
    groups = tiered_groups(small, max_parts=8)
    # tier 0 (<= 64 KiB): the five small parts; tier 1 (512 KiB-4 MiB): 600 and 700 KiB;
    # the 5 MB part is alone in its tier, the 100 MiB one is not small: both left alone.
    assert [[p.file for p in g] for g in groups] == [["p0", "p1", "p2", "p3", "p4"], ["p5", "p6"]]
    capped = tiered_groups(parts(*([40 * k] * 6)), max_parts=1, target=100 * k)
    assert [len(g) for g in capped] == [2, 2, 2]


def test_commits_compact_automatically_and_keep_every_row(tmp_path):
    store = Store.open(tmp_path, create=True)
    store.max_parts, store.compact_in_background = 6, False
    most = 0
    for i in range(40):
        store.append(tables_of(candidate(i)))
        most = max(most, len(store.read_manifest().parts("trials")))
    # The commit that passes the limit compacts before it returns: never more than 6 seen.
    assert most == 6 and store.auto_compactions >= 5
    assert counts(tmp_path) == (40, 40, 120)
    store.compact_in_background = True  # the default: a thread merges while commits go on
    for i in range(40, 80):
        store.append(tables_of(candidate(i)))
    store.wait_for_compaction(60)
    assert store.compaction_errors == [] and counts(tmp_path) == (80, 80, 240)
    assert len(store.read_manifest().parts("trials")) <= 8
    retired = store.read_manifest().retired
    assert retired and all((tmp_path / r.table / r.file).exists() for r in retired)
    store.max_parts = None
    for i in range(80, 88):
        store.append(tables_of(candidate(i)))
    assert len(store.read_manifest().parts("trials")) > 7  # switched off: parts pile up
