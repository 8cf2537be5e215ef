import datetime
import os
import re
from collections import Counter

CRONTAB = "/app/cron/app.crontab"
NAMES = {
    "month": {m: i + 1 for i, m in enumerate(
        "jan feb mar apr may jun jul aug sep oct nov dec".split())},
    "dow": {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())},
}
LIMITS = [("minute", 0, 59), ("hour", 0, 23), ("dom", 1, 31), ("month", 1, 12), ("dow", 0, 7)]
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}


def field_values(text, kind, lo, hi):
    out = set()
    for part in text.lower().split(","):
        step = 1
        if "/" in part:
            part, s = part.split("/", 1)
            step = int(s)
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a, b = (NAMES.get(kind, {}).get(x) if x in NAMES.get(kind, {}) else int(x)
                    for x in part.split("-", 1))
        else:
            a = NAMES.get(kind, {}).get(part) if part in NAMES.get(kind, {}) else int(part)
            b = hi if step != 1 else a
        assert lo <= a <= hi and lo <= b <= hi, f"{kind} value out of range in {text!r}"
        out.update(range(a, b + 1, step))
    if kind == "dow" and 7 in out:
        out = (out - {7}) | {0}
    return out


def parse():
    env, jobs = {}, []
    with open(CRONTAB) as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", line)
            if m and not line.split()[0][0].isdigit() and not line.startswith("*"):
                v = m.group(2)
                if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                    v = v[1:-1]
                env[m.group(1)] = v
                continue
            if line.startswith("@"):
                macro, cmd = line.split(None, 1)
                fields = MACROS[macro].split()
            else:
                parts = line.split(None, 5)
                assert len(parts) == 6, f"bad job line {line!r}"
                fields, cmd = parts[:5], parts[5]
            sets = [field_values(t, k, lo, hi) for t, (k, lo, hi) in zip(fields, LIMITS)]
            restricted = (not fields[2].startswith("*"), not fields[4].startswith("*"))
            jobs.append((sets, restricted, " ".join(cmd.split())))
    return env, jobs


def runs(command):
    """Counter of the 2024 minutes at which cron would start `command`."""
    _, jobs = parse()
    mine = [j for j in jobs if j[2] == command]
    assert mine, f"no job line runs {command!r}"
    c = Counter()
    t = datetime.datetime(2024, 1, 1)
    end = datetime.datetime(2025, 1, 1)
    step = datetime.timedelta(minutes=1)
    while t < end:
        dow = (t.weekday() + 1) % 7
        for (mi, hr, dom, mon, dw), (rdom, rdow), _ in mine:
            if t.minute in mi and t.hour in hr and t.month in mon:
                if rdom and rdow:
                    day_ok = t.day in dom or dow in dw
                else:
                    day_ok = t.day in dom and dow in dw
                if day_ok:
                    c[t] += 1
        t += step
    return c


def check(command, predicate):
    got = runs(command)
    twice = [t for t, n in got.items() if n > 1]
    assert not twice, f"{command} starts twice at {twice[0]}"
    t, end = datetime.datetime(2024, 1, 1), datetime.datetime(2025, 1, 1)
    step = datetime.timedelta(minutes=1)
    while t < end:
        want = predicate(t)
        assert want == (t in got), f"{command}: at {t} expected {'a' if want else 'no'} run"
        t += step


def test_environment_lines():
    env, _ = parse()
    assert env.get("SHELL") == "/bin/bash", env
    assert env.get("MAILTO") == "ops@example.com", env


def test_rotate_weekday_business_hours():
    check("/app/jobs/rotate.sh",
          lambda t: t.weekday() < 5 and 8 <= t.hour <= 17 and t.minute % 15 == 0)


def test_weekly_report_and_cleanup():
    check("/app/jobs/report.sh --weekly",
          lambda t: t.weekday() == 0 and (t.hour, t.minute) == (6, 30))
    check("/app/jobs/cleanup.sh", lambda t: t.day in (1, 15) and (t.hour, t.minute) == (3, 0))


def test_sync_every_five_minutes_with_log():
    check("/app/jobs/sync.sh >> /app/logs/sync.log 2>&1", lambda t: t.minute % 5 == 0)
    assert os.path.isdir("/app/logs"), "/app/logs must exist"


def test_snapshot_weekends_and_first_of_month_once():
    check("/app/jobs/snapshot.sh",
          lambda t: (t.weekday() >= 5 or t.day == 1) and (t.hour, t.minute) == (12, 0))


def test_quarterly():
    check("/app/jobs/quarterly.sh",
          lambda t: t.month in (1, 4, 7, 10) and t.day == 1 and (t.hour, t.minute) == (0, 5))


def test_referenced_scripts_executable():
    _, jobs = parse()
    scripts = {cmd.split()[0] for _, _, cmd in jobs}
    assert len(scripts) >= 6, scripts
    for s in scripts:
        assert os.path.isfile(s) and os.access(s, os.X_OK), f"{s} is not executable"
