"""A 38k-candidate synthesis campaign's warehouse writes: commit latency and manifest size.

    python benchmarks/warehouse_campaign.py [--candidates 38000] [--every 16] [--s3]
        [--report-every 2000] [--baseline 1000]

Each candidate writes what a real one writes (`synthesis.rounds.candidate_rows`): its task
row with a bundle of `--bundle-bytes` (real candidates: ~13.5 KB, the seeds' mean), a
`synth_candidates` row, a `synth_profiles` row, `--trials` trial rows (the default
validation recorded 16 per candidate) and `--assertions` assertion rows per trial (seeds
have 5.7 on average, a candidate adds its own). The rows are built once from the real record
classes and copied with fresh keys, so what is timed is the warehouse alone.

They go through `warehouse.journal.BatchedWriter` as `run_synthesis` sends them: every
candidate journaled (`add`), a commit every `--every` candidates (or `--interval-s`), with
the store's automatic compaction (`--max-parts`). Every `--report-every` candidates it prints
one line: commits so far, commit latency p50 / p95 / max over that window (automatic
compactions included: they run inside the commit that triggers them), the journal `add`'s
p95, the manifest's size, the parts per table and the compactions so far.

`--baseline N` instead runs N candidates the way `run_synthesis` committed before batching:
one `Store.append` per candidate, nothing else. Run it with the code before on the path to
measure that code: `git archive <commit> warehouse tasks | tar -x -C /tmp/old`, then
`PYTHONPATH=/tmp/old:. python benchmarks/warehouse_campaign.py --baseline 1000`
(the issue measured 0.4 s per commit at 100 parts, 2.5-5.7 s at 1,000).

`--s3`: the store on moto's S3 server (a subprocess on a free loopback port), manifest
history `--history` versions; the manifest line then also counts the versions stored.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH first: --baseline

from tasks.corpus import load_seeds  # noqa: E402
from warehouse.records import (  # noqa: E402
    AssertionRecord,
    Record,
    SynthCandidateRecord,
    SynthProfileRecord,
    TrialRecord,
    records_table,
    task_record,
)
from warehouse.schema import table_spec  # noqa: E402
from warehouse.store import META_FILE, Store  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def template(trials: int, assertions: int, bundle_bytes: int) -> dict[str, pa.Table]:
    """One candidate's rows in their Arrow schemas (real record classes, realistic text)."""
    seed = load_seeds()[0]
    task = task_record(seed, pool="rst", assertion_count=assertions)
    have = sum(len(v) for v in task.bundle.values())
    if bundle_bytes > have:
        task.bundle["environment/data.txt"] = b"x" * (bundle_bytes - have)
    rows: list[Record] = [task]
    for j in range(trials):
        tid = f"validate:r1:{j}"
        rows.append(
            TrialRecord(trial_id=tid, task_hash=task.content_hash, task_id=task.task_id,
                        agent=("oracle", "nop", "parent", "hack:stub")[j % 4], backend="local",
                        started_at=T0, environment_s=0.4, agent_s=1.2, verifier_s=0.3,
                        total_s=2.0, failure_detail="" if j % 3 else "exit 1: " + "e" * 120)
        )  # fmt: skip
        rows.extend(
            AssertionRecord(trial_id=tid, name=f"test_outputs::test_assertion_{k}", position=k,
                            task_hash=task.content_hash, status="passed" if k % 2 else "failed",
                            ok=bool(k % 2), message="" if k % 2 else "AssertionError: " +
                            "m" * 100, duration_s=0.01)
            for k in range(assertions)
        )  # fmt: skip
    rows.append(
        SynthCandidateRecord(campaign="bench", candidate_hash=task.content_hash,
                             assignment="1:0", round=1, slot=0, parent_hash="a" * 64,
                             root_seed="b" * 64, operator="wc_report", family="text",
                             chain=["wc_report"], status="accepted", reason="accepted",
                             detail="", trial_ids=[f"validate:r1:{j}" for j in range(trials)],
                             new_assertions=["test_assertion_1", "test_assertion_2"],
                             solution_steps=7, assertion_count=assertions,
                             instruction_chars=900, synthesis_s=0.1, sandbox_s=30.0,
                             stages_json="[]")
    )  # fmt: skip
    rows.append(SynthProfileRecord(task_hash=task.content_hash, ok=True, outputs_json="[]"))
    by_table: dict[str, list[Record]] = {}
    for rec in rows:
        by_table.setdefault(rec.table.name, []).append(rec)
    return {name: records_table(recs, table_spec(name)) for name, recs in by_table.items()}


def keyed(tpl: dict[str, pa.Table], i: int) -> dict[str, pa.Table]:
    """The template with candidate `i`'s own keys (content hash, trial ids, assignment)."""
    h = hashlib.sha256(f"candidate-{i}".encode()).hexdigest()
    out = {}
    for name, table in tpl.items():
        n = table.num_rows
        for col, value in (("content_hash", h), ("task_hash", h), ("candidate_hash", h)):
            if col in table.column_names:
                idx = table.schema.get_field_index(col)
                table = table.set_column(idx, col, pa.array([value] * n, pa.string()))
        if "task_key" in table.column_names:
            idx = table.schema.get_field_index("task_key")
            key = pa.array([int(h[:16], 16)] * n, table.schema.field("task_key").type)
            table = table.set_column(idx, "task_key", key)
        if "trial_id" in table.column_names:
            idx = table.schema.get_field_index("trial_id")
            ids = [f"validate:{i}:{t.as_py().rsplit(':', 1)[1]}" for t in table.column(idx)]
            table = table.set_column(idx, "trial_id", pa.array(ids, pa.string()))
        if "trial_ids" in table.column_names:
            idx = table.schema.get_field_index("trial_ids")
            lists = [[f"validate:{i}:{t.rsplit(':', 1)[1]}" for t in row.as_py()]
                   for row in table.column(idx)]  # fmt: skip
            table = table.set_column(idx, "trial_ids", pa.array(lists, table.schema[idx].type))
        if "assignment" in table.column_names:
            idx = table.schema.get_field_index("assignment")
            table = table.set_column(idx, "assignment", pa.array([f"{i // 64 + 1}:{i % 64}"] * n))
        out[name] = table
    return out


def manifest_bytes(store: Store) -> int:
    text, _ = store._read_manifest_text()
    return len(text.encode())


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Direct:
    """The code path before batching: one `Store.append` per candidate (what `run` calls of
    a BatchedWriter: `add_tables`, `maybe_flush`, `flush`, `stats`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stats = SimpleNamespace(seconds=[], cpu_seconds=[])

    def add_tables(self, tables: dict[str, pa.Table]) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        self.store.append(tables)
        self.stats.seconds.append(time.perf_counter() - t0)
        self.stats.cpu_seconds.append(time.process_time() - c0)

    def maybe_flush(self) -> None:
        pass

    def flush(self) -> None:
        pass


def run(
    store: Store, tpl: dict[str, pa.Table], n: int, every: int, interval_s: float, report: int
) -> dict[str, float]:
    """Write `n` candidates through a BatchedWriter (`every` 0: one `append` each, the code
    before); print a line per `report` candidates."""
    w: Any
    if every:
        from warehouse.journal import BatchedWriter

        w = BatchedWriter(store, "synthesis-bench", every=every, interval_s=interval_s)
    else:
        w = Direct(store)
    adds: list[float] = []
    seen = 0
    print("| candidates | commits | commit p50 s | p95 s | max s | CPU s p50 / p95 "
          "| add p95 ms | manifest KB | versions | parts (trials / assertions / tasks) "
          "| compactions |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    t_all = time.perf_counter()
    for i in range(n):
        rows = keyed(tpl, i)
        t0 = time.perf_counter()
        w.add_tables(rows)
        adds.append(time.perf_counter() - t0)
        w.maybe_flush()
        if (i + 1) % report == 0 or i + 1 == n:
            if i + 1 == n:
                w.flush()
            window = w.stats.seconds[seen:]
            cpu = w.stats.cpu_seconds[seen:]
            seen = len(w.stats.seconds)
            m = store.read_manifest()
            compactions = getattr(store, "auto_compactions", 0)
            versions = "-"
            if hasattr(store, "manifest_versions"):
                versions = str(len(store.manifest_versions()))
            print(f"| {i + 1:,} | {len(w.stats.seconds):,} | {pct(window, 0.5):.3f} | "
                  f"{pct(window, 0.95):.3f} | {max(window, default=float('nan')):.3f} | "
                  f"{pct(cpu, 0.5):.3f} / {pct(cpu, 0.95):.3f} | {1e3 * pct(adds, 0.95):.1f} | "
                  f"{manifest_bytes(store) / 1024:.1f} | "
                  f"{versions} | {len(m.parts('trials'))} / "
                  f"{len(m.parts('assertion_results'))} / {len(m.parts('tasks'))} | "
                  f"{compactions} |", flush=True)  # fmt: skip
            adds = []
    s, c = w.stats.seconds, w.stats.cpu_seconds
    rebuilt = sum(1 for a in getattr(w.stats, "attempts", []) if a > 1)
    return {"wall_s": time.perf_counter() - t_all, "commits": len(s), "p50": pct(s, 0.5),
            "p95": pct(s, 0.95), "max": max(s), "cpu50": pct(c, 0.5),
            "cpu95": pct(c, 0.95), "rebuilt": rebuilt}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=38_000)
    ap.add_argument("--every", type=int, default=16, help="candidates per commit")
    ap.add_argument("--interval-s", type=float, default=2.0, help="or seconds per commit")
    ap.add_argument("--max-parts", type=int, default=24, help="auto-compaction threshold")
    ap.add_argument("--trials", type=int, default=16, help="trial rows per candidate")
    ap.add_argument("--assertions", type=int, default=8, help="assertion rows per trial")
    ap.add_argument("--bundle-bytes", type=int, default=13_500)
    ap.add_argument("--report-every", type=int, default=2_000)
    ap.add_argument("--baseline", type=int, default=0, help="only: N candidates, one append each")
    ap.add_argument("--s3", action="store_true", help="the store on S3 (moto, loopback)")
    ap.add_argument("--history", type=int, default=200, help="S3 manifest versions kept")
    args = ap.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {os.cpu_count()} cores; before: {load}")
    tpl = template(args.trials, args.assertions, args.bundle_bytes)
    rows = sum(t.num_rows for t in tpl.values())
    print(f"per candidate: {rows} rows ({', '.join(f'{k} {v.num_rows}' for k, v in tpl.items())})")
    os.environ["T1_WAREHOUSE_MANIFEST_HISTORY"] = str(args.history)
    with tempfile.TemporaryDirectory(prefix="t1-wh-campaign-") as tmp, contextlib.ExitStack() as st:
        where: Path | str = Path(tmp) / "store"
        if args.s3:
            from benchmarks.warehouse_scale import moto_s3  # (it puts this checkout first)

            where = st.enter_context(moto_s3(Path(tmp) / "cache"))
        if args.baseline:
            base = Store.open(where, create=True)
            base.max_parts = None  # (the code before has no automatic compaction)
            import warehouse.store as code

            print(f"\nbaseline: one append per candidate, {args.baseline:,} candidates, "
                  f"warehouse code from {Path(code.__file__).parent}")  # fmt: skip
            b = run(base, tpl, args.baseline, 0, 0.0, max(1, args.baseline // 10))
            print(f"baseline: {b['commits']:,} commits, p50 {b['p50']:.3f} s, p95 "
                  f"{b['p95']:.3f} s, max {b['max']:.3f} s (CPU p50 {b['cpu50']:.3f} s, p95 "
                  f"{b['cpu95']:.3f} s), {b['wall_s']:.0f} s in all")  # fmt: skip
            return
        store = Store.open(where, create=True)
        store.max_parts = args.max_parts or None
        print(
            f"\nbatched: a commit per {args.every} candidates or {args.interval_s} s, "
            f"automatic compaction past {args.max_parts} parts, {args.candidates:,} candidates"
        )
        r = run(store, tpl, args.candidates, args.every, args.interval_s, args.report_every)
        print(
            f"batched: {r['commits']:,} commits, p50 {r['p50']:.3f} s, p95 {r['p95']:.3f} s, "
            f"max {r['max']:.3f} s (CPU p50 {r['cpu50']:.3f} s, p95 {r['cpu95']:.3f} s), "
            f"{r['wall_s']:.0f} s in all (goal: p95 < 1 s)"
        )
        store.wait_for_compaction(600)
        m = store.read_manifest()
        print(
            f"commits that lost a race and were rebuilt: {r['rebuilt']:,}; compaction swaps "
            f"retried: {getattr(store, 'compaction_retries', '-')}; background compactions "
            f"failed: {len(store.compaction_errors)}; parts once the compaction in flight "
            f"finished (trials / assertions / tasks): {len(m.parts('trials'))} / "
            f"{len(m.parts('assertion_results'))} / {len(m.parts('tasks'))}"
        )
        if not args.s3:
            size = sum(f.stat().st_size for f in Path(where).rglob("*") if f.is_file())
            print(f"store on disk: {size / 2**20:.0f} MiB ({META_FILE} included)")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"\nafter: {load}")


if __name__ == "__main__":
    main()
