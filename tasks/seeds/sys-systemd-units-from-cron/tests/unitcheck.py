#!/usr/bin/env python3
"""Offline lint for systemd unit files (a subset of `systemd-analyze verify`).

Usage: unitcheck.py DIR   - checks every *.service / *.timer file in DIR and every
*.conf drop-in in DIR/<unit>.d/. Prints problems, exits 1 if any, else prints OK."""
import os
import re
import sys

KNOWN = {
    "Unit": {"Description", "Documentation", "After", "Before", "Wants", "Requires",
             "BindsTo", "PartOf", "Conflicts", "ConditionPathExists"},
    "Service": {"Type", "User", "Group", "WorkingDirectory", "ExecStart", "ExecStartPre",
                "ExecStartPost", "ExecReload", "ExecStop", "Restart", "RestartSec",
                "Environment", "EnvironmentFile", "LimitNOFILE", "Nice", "TimeoutStartSec",
                "TimeoutStopSec", "RemainAfterExit", "StandardOutput", "StandardError"},
    "Timer": {"OnCalendar", "OnBootSec", "OnUnitActiveSec", "Persistent", "Unit",
              "RandomizedDelaySec", "AccuracySec"},
    "Install": {"WantedBy", "RequiredBy", "Alias", "Also"},
}
ALLOWED_SECTIONS = {".service": {"Unit", "Service", "Install"}, ".timer": {"Unit", "Timer", "Install"}}
RESTART = {"no", "on-success", "on-failure", "on-abnormal", "on-watchdog", "on-abort", "always"}
TYPES = {"simple", "exec", "forking", "oneshot", "dbus", "notify", "idle"}
BOOL = {"yes", "no", "true", "false", "on", "off", "1", "0"}
TIMESPAN = re.compile(r"^\d+(us|ms|s|sec|m|min|h|hr|d)?$")
CAL_KEYWORDS = {"minutely", "hourly", "daily", "weekly", "monthly", "yearly", "annually"}
CAL = re.compile(r"^((Mon|Tue|Wed|Thu|Fri|Sat|Sun)([.,-](Mon|Tue|Wed|Thu|Fri|Sat|Sun))* )?"
                 r"((\*|\d{4})-(\*|\d{1,2})-(\*|\d{1,2}) )?"
                 r"(\*|\d{1,2}):(\*|\d{1,2})(:(\*|\d{1,2}))?$")


def parse(path, problems):
    sections, current = {}, None
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            m = re.fullmatch(r"\[(\w+)\]", line)
            if m:
                current = sections.setdefault(m.group(1), {})
                continue
            if current is None or "=" not in line:
                problems.append(f"{path}:{n}: not a section header or key=value line")
                continue
            k, v = (s.strip() for s in line.split("=", 1))
            current.setdefault(k, []).append(v)
    return sections


def check_unit(path, kind, dropin, problems):
    secs = parse(path, problems)
    for name, keys in secs.items():
        if name not in ALLOWED_SECTIONS[kind]:
            problems.append(f"{path}: section [{name}] not allowed in a {kind} unit")
            continue
        for k, vals in keys.items():
            if k not in KNOWN[name]:
                problems.append(f"{path}: unknown key {k}= in [{name}]")
            for v in vals:
                if k.startswith("Exec") and not re.match(r"^[-@+!:]*/", v):
                    problems.append(f"{path}: {k}= must start with an absolute path: {v!r}")
                if k == "Restart" and v not in RESTART:
                    problems.append(f"{path}: Restart={v} invalid")
                if k == "Type" and v not in TYPES:
                    problems.append(f"{path}: Type={v} invalid")
                if k in ("Persistent", "RemainAfterExit") and v.lower() not in BOOL:
                    problems.append(f"{path}: {k}={v} is not a boolean")
                if k in ("RestartSec", "OnBootSec", "OnUnitActiveSec", "RandomizedDelaySec") \
                        and not TIMESPAN.match(v):
                    problems.append(f"{path}: {k}={v} is not a time span")
                if k == "OnCalendar" and v not in CAL_KEYWORDS and not CAL.match(v):
                    problems.append(f"{path}: OnCalendar={v} is not a calendar expression")
                if k == "Nice" and not (re.fullmatch(r"-?\d+", v) and -20 <= int(v) <= 19):
                    problems.append(f"{path}: Nice={v} out of range")
                if k == "LimitNOFILE" and not re.fullmatch(r"\d+(:\d+)?|infinity", v):
                    problems.append(f"{path}: LimitNOFILE={v} invalid")
    if dropin:
        return
    if kind == ".service":
        svc = secs.get("Service", {})
        if "ExecStart" not in svc:
            problems.append(f"{path}: [Service] needs ExecStart=")
        elif svc.get("Type", ["simple"])[-1] != "oneshot" and len(svc["ExecStart"]) > 1:
            problems.append(f"{path}: only Type=oneshot services may have several ExecStart=")
    if kind == ".timer":
        timer = secs.get("Timer", {})
        if not any(k.startswith("On") for k in timer):
            problems.append(f"{path}: [Timer] needs an On...= trigger")
        if "WantedBy" not in secs.get("Install", {}):
            problems.append(f"{path}: a timer needs [Install] WantedBy= to be enabled")


def main(d):
    problems, seen = [], 0
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        ext = os.path.splitext(name)[1]
        if os.path.isfile(p) and ext in ALLOWED_SECTIONS:
            seen += 1
            check_unit(p, ext, False, problems)
        elif os.path.isdir(p) and name.endswith(".d"):
            ext = os.path.splitext(name[:-2])[1]
            for conf in sorted(os.listdir(p)):
                if conf.endswith(".conf"):
                    check_unit(os.path.join(p, conf), ext, True, problems)
    if not seen:
        problems.append(f"{d}: no unit files")
    for pr in problems:
        print(pr)
    if not problems:
        print("OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
