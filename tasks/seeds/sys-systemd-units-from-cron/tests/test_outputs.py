import os
import re
import subprocess
import sys

UNITS = "/app/deploy/units"
LINTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unitcheck.py")


def parse(name):
    """{section: {key: [values]}}; space-separated list keys are split into words."""
    secs, cur = {}, None
    with open(os.path.join(UNITS, name)) as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            m = re.fullmatch(r"\[(\w+)\]", line)
            if m:
                cur = secs.setdefault(m.group(1), {})
            elif cur is not None and "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                cur.setdefault(k, []).append(v)
    return secs


def last(secs, sec, key):
    return secs.get(sec, {}).get(key, [None])[-1]


def words(secs, sec, key):
    return [w for v in secs.get(sec, {}).get(key, []) for w in v.split()]


def seconds(span):
    m = re.fullmatch(r"(\d+)\s*(s|sec|)", span or "")
    return int(m.group(1)) if m else None


def test_linter_accepts_units():
    r = subprocess.run([sys.executable, LINTER, UNITS], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stdout[-1000:]


def test_webapp_service_fixed():
    s = parse("webapp.service")
    assert last(s, "Service", "ExecStart") == \
        "/srv/webapp/venv/bin/gunicorn app:wsgi --bind 127.0.0.1:8000"
    assert last(s, "Service", "Restart") == "on-failure"
    assert seconds(last(s, "Service", "RestartSec")) == 5
    assert "network-online.target" in words(s, "Unit", "After")
    assert "network-online.target" in words(s, "Unit", "Wants")
    assert last(s, "Service", "LimitNOFILE") == "65536"
    assert last(s, "Service", "User") == "webapp"
    assert last(s, "Service", "WorkingDirectory") == "/srv/webapp"
    assert "APP_ENV=production" in words(s, "Service", "Environment")
    assert "multi-user.target" in words(s, "Install", "WantedBy")


def test_webapp_dropin():
    s = parse("webapp.service.d/override.conf")
    assert "APP_WORKERS=4" in words(s, "Service", "Environment"), s


def test_backup_service():
    s = parse("backup.service")
    assert last(s, "Service", "Type") == "oneshot"
    assert last(s, "Service", "User") == "root"
    assert last(s, "Service", "Nice") == "10"
    assert s["Service"]["ExecStart"] == ["/usr/local/bin/backup.sh --full"]
    assert "Install" not in s, "backup.service must not have an [Install] section"


def test_backup_timer_daily_0230():
    s = parse("backup.timer")
    cal = s.get("Timer", {}).get("OnCalendar", [])
    assert len(cal) == 1, f"expected one OnCalendar=, got {cal}"
    m = re.fullmatch(r"(?:\*-\*-\*\s+)?0?2:30(?::00)?", cal[0])
    assert m, f"OnCalendar={cal[0]} is not every day at 02:30"
    assert last(s, "Timer", "Persistent").lower() in ("true", "yes", "on", "1")
    assert last(s, "Timer", "Unit") == "backup.service"
    assert words(s, "Install", "WantedBy") == ["timers.target"]
