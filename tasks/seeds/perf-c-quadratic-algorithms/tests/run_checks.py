#!/usr/bin/env python3
"""Stdlib-only assertion runner shipped inside each task's tests/ as run_checks.py.

Usage: python3 run_checks.py test_outputs.py [--out /logs/verifier]
Runs every top-level `test_*` function of the module in definition order, each separately,
and writes ctrf.json (one entry per assertion) and reward.txt (1 if all pass, else 0). It
also prints a pytest-style `-rA` short test summary so plain log scrapers work.
In a verifier run with the harness's report channel (T1_VERDICT_RECORDS set), each outcome is
also recorded there, authenticated (docs/sandbox.md, "The report channel"): that, not the
files above, is the verdict, since a program a check runs can write the files.
This file must stay free of third-party imports: it runs inside minimal sandboxes.
"""

import importlib.util
import inspect
import json
import os
import sys
import time
import traceback

CHANNEL_MODULE = os.path.join(".t1-verdict", "t1_verdict.py")  # staged by the harness


def open_channel():
    """The report channel's recorder, before any check is imported (None: no channel)."""
    if not os.environ.get("T1_VERDICT_RECORDS"):
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), CHANNEL_MODULE)
    try:
        spec = importlib.util.spec_from_file_location("t1_verdict", path)
        channel = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(channel)
    except (OSError, ImportError):
        return None
    return channel.open_runner("run_checks")


def main(argv):
    if not argv:
        print("usage: run_checks.py TEST_FILE [--out DIR]", file=sys.stderr)
        return 2
    path = argv[0]
    out = argv[argv.index("--out") + 1] if "--out" in argv else "/logs/verifier"
    os.makedirs(out, exist_ok=True)
    channel = open_channel()
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("test_outputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [
        (name, fn)
        for name, fn in vars(module).items()
        if name.startswith("test_") and inspect.isfunction(fn)
    ]
    tests.sort(key=lambda item: item[1].__code__.co_firstlineno)
    results = []
    start_all = time.time()
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            status, message = "passed", ""
        except AssertionError as e:
            status, message = "failed", str(e) or "assertion failed"
        except Exception as e:  # noqa: BLE001 - a crashing check is a failed assertion
            status, message = "failed", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        results.append(
            {
                "name": name,
                "status": status,
                "duration": int((time.time() - t0) * 1000),
                "message": message[:2000],
            }
        )
        if channel is not None:
            channel.test(name, status, message[:2000], time.time() - t0)
    passed = sum(r["status"] == "passed" for r in results)
    all_ok = bool(results) and passed == len(results)
    if channel is not None:
        channel.end(0 if all_ok else 1)
    summary = {
        "tests": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "skipped": 0,
        "pending": 0,
        "other": 0,
        "start": int(start_all * 1000),
        "stop": int(time.time() * 1000),
    }
    doc = {"results": {"tool": {"name": "t1-run-checks"}, "summary": summary, "tests": results}}
    with open(os.path.join(out, "ctrf.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out, "reward.txt"), "w") as f:
        f.write("1\n" if all_ok else "0\n")
    print("=" * 20 + " short test summary info " + "=" * 20)
    for r in results:
        line = f"{r['status'].upper()} {os.path.basename(path)}::{r['name']}"
        if r["message"]:
            line += " - " + r["message"].splitlines()[0]
        print(line)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
