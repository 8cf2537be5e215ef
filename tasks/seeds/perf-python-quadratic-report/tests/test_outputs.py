import os
import random
import resource
import subprocess
import tempfile

SCRIPT = "/app/perf/report.py"
DATA = "/app/perf/data/events.csv"
# The shipped (slow) script, kept verbatim so the checks can compare against it.
ORIGINAL = '#!/usr/bin/env python3\n"""Per-user activity report.\n\nusage: report.py EVENTS_CSV    (CSV header: ts,user,page; ts is an integer)\nPrints one line per user, in order of the user\'s first event in the file:\n    user,events,first_ts,last_ts,distinct_pages,top_page\ntop_page is the user\'s most visited page; ties go to the page that user visited first.\nThen a final line: TOTAL users=<U> events=<N>\n"""\nimport sys\n\n\ndef main(path):\n    rows = []\n    with open(path) as f:\n        next(f)\n        for line in f:\n            ts, user, page = line.rstrip("\\n").split(",")\n            rows.append((int(ts), user, page))\n\n    users = []\n    for _, user, _ in rows:\n        if user not in users:\n            users.append(user)\n\n    counts = [0] * len(users)\n    first = [None] * len(users)\n    last = [None] * len(users)\n    pages = [[] for _ in users]\n    visits = [[] for _ in users]\n    for ts, user, page in rows:\n        i = users.index(user)\n        counts[i] += 1\n        if first[i] is None or ts < first[i]:\n            first[i] = ts\n        if last[i] is None or ts > last[i]:\n            last[i] = ts\n        if page not in pages[i]:\n            pages[i].append(page)\n        visits[i].append(page)\n\n    out = ""\n    for i, user in enumerate(users):\n        best, best_n = None, -1\n        for p in pages[i]:\n            n = visits[i].count(p)\n            if n > best_n:\n                best, best_n = p, n\n        out += f"{user},{counts[i]},{first[i]},{last[i]},{len(pages[i])},{best}\\n"\n    out += f"TOTAL users={len(users)} events={len(rows)}\\n"\n    sys.stdout.write(out)\n\n\nif __name__ == "__main__":\n    main(sys.argv[1])\n'
_CACHE = {}


def original_path():
    if "orig" not in _CACHE:
        fd, p = tempfile.mkstemp(suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(ORIGINAL)
        _CACHE["orig"] = p
    return _CACHE["orig"]


def timed(script, data):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(["python3", script, data], capture_output=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r, cpu


def baseline():
    if "base" not in _CACHE:
        r, cpu = timed(original_path(), DATA)
        assert r.returncode == 0
        _CACHE["base"] = (r.stdout, cpu)
    return _CACHE["base"]


def candidate():
    if "cand" not in _CACHE:
        _CACHE["cand"] = timed(SCRIPT, DATA)
    return _CACHE["cand"]


def test_output_identical_on_events():
    want, _ = baseline()
    r, _ = candidate()
    assert r.returncode == 0, r.stderr[-400:]
    assert r.stdout == want, "output differs from the original script"


def test_output_identical_on_generated_inputs():
    rng = random.Random(2024)
    for k in range(6):
        fd, p = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write("ts,user,page\n")
            for _ in range(rng.choice([0, 1, 50, 3000])):
                f.write(f"{rng.randint(0, 99)},u{rng.randint(0, 40)},/{rng.choice('abcd')}\n")
        want = subprocess.run(["python3", original_path(), p], capture_output=True).stdout
        got = subprocess.run(["python3", SCRIPT, p], capture_output=True)
        assert got.returncode == 0, got.stderr[-400:]
        assert got.stdout == want, f"output differs on generated input #{k}"


def test_five_times_less_cpu_than_original():
    _, base_cpu = baseline()
    _, cpu = candidate()
    assert cpu <= base_cpu / 5, f"{cpu:.3f}s CPU vs original {base_cpu:.3f}s (need <= 1/5)"


def test_under_one_cpu_second():
    _, cpu = candidate()
    assert cpu <= 1.0, f"{cpu:.3f}s CPU"


def test_clean_exit_no_stderr():
    r, _ = candidate()
    assert r.returncode == 0 and r.stderr == b"", r.stderr[-400:]
