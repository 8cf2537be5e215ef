"""Scheduling and service configuration: a script over a result, run by cron or systemd.

The script reads the result when it runs, so writing it takes none of the result's data; the
first run, logged now, does (its log is checked against the result: the data-flow probe sees
the dependency there, and that test keeps the prerequisite guard)."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_SCRIPT_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_script_runs_and_reports():
    import os
    import subprocess

    spec = _@T@_SPEC
    assert os.access(spec["script"], os.X_OK), "script is not executable"
    with open(spec["script"]) as f:
        assert f.readline().startswith("#!"), "script needs a shebang line"
    r = subprocess.run([spec["script"]], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(spec["target"], "rb") as f:
        data = f.read()
    if spec["prints"] == "sha256":
        import hashlib

        want = f"{hashlib.sha256(data).hexdigest()}  {spec['target']}\\n"
    else:
        newlines = data.count(b"\\n")
        want = f"{newlines}\\n"
    assert r.stdout == want, f"expected {want!r}, got {r.stdout!r}"
"""

_LOG_TESTS = """

def test_@T@_first_run_logged():
    spec = _@T@_SPEC
    with open(spec["target"], "rb") as f:
        data = f.read()
    if spec["prints"] == "sha256":
        import hashlib

        want = f"{hashlib.sha256(data).hexdigest()}  {spec['target']}\\n"
    else:
        newlines = data.count(b"\\n")
        want = f"{newlines}\\n"
    with open(spec["log"]) as f:
        got = f.read()
    assert got == want, f"the first run's log holds {got!r}, expected {want!r}"
"""

_CRON_TESTS = """

def test_@T@_crontab_entry():
    spec = _@T@_SPEC
    with open(spec["crontab"]) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines == [spec["entry"]], f"expected exactly {spec['entry']!r}, got {lines!r}"
"""

_SYSTEMD_TESTS = """

def _@T@_unit(path):
    import configparser

    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str
    with open(path) as f:
        cp.read_file(f)
    return cp


def test_@T@_service_unit():
    spec = _@T@_SPEC
    unit = _@T@_unit(spec["service"])
    assert unit.get("Unit", "Description", fallback="").strip(), "Description missing"
    assert unit.get("Service", "Type", fallback=None) == "oneshot"
    assert unit.get("Service", "ExecStart", fallback=None) == spec["script"]


def test_@T@_timer_unit():
    spec = _@T@_SPEC
    unit = _@T@_unit(spec["timer"])
    assert unit.get("Timer", "OnCalendar", fallback=None) == spec["calendar"]
    assert unit.get("Timer", "Unit", fallback=None) == spec["service_name"]
    assert unit.get("Timer", "Persistent", fallback=None) == "true"
    assert unit.get("Install", "WantedBy", fallback=None) == "timers.target"
"""


def _script_steps(script: str, body: str) -> list[str]:
    d = script.rsplit("/", 1)[0]
    return [
        f"mkdir -p {d}",
        f"cat > {script} <<'SH'",
        "#!/bin/sh",
        body,
        "SH",
        f"chmod 755 {script}",
    ]


class CronDigestJob(Operator):
    name = "cron_digest_job"
    family = "scheduling"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        script, crontab = f"{wd}/bin/digest_{tag}.sh", f"{wd}/cron/digest_{tag}.crontab"
        minute, hour = ctx.rng.randint(0, 59), ctx.rng.randint(0, 23)
        log = f"{wd}/log/digest_{tag}.log"
        entry = f"{minute} {hour} * * * {script} >> {log} 2>&1"
        spec = {"script": script, "target": target, "prints": "sha256", "log": log}
        spec |= {"crontab": crontab, "entry": entry}
        return Extension(
            title="schedule a digest job with cron",
            steps=[
                *_script_steps(script, f"exec sha256sum {target}"),
                f"mkdir -p {wd}/cron",
                f"echo '{entry}' > {crontab}",
                f"mkdir -p {wd}/log",
                f"{script} >> {log} 2>&1",
            ],
            tests=render_tests(_SCRIPT_TESTS + _LOG_TESTS + _CRON_TESTS, tag, spec),
            text=(
                f"Create the executable script `{script}` "
                f"(with a `#!` line) that prints the SHA-256 digest of `{target}` exactly as "
                f"`sha256sum {target}` prints it and exits 0. Then write the crontab file "
                f"`{crontab}` (user crontab format) whose only non-comment line is exactly:\n\n"
                f"```\n{entry}\n```\n\nThen run the job once now, exactly as that line "
                f"does, so that `{log}` holds the output of its first run (and nothing else)."
            ),
            requires=["sha256sum"],
            consumes=[target],
            creates=[script, crontab, log],
        )


class SystemdTimerUnit(Operator):
    name = "systemd_timer_unit"
    family = "scheduling"
    kinds = ("text", "csv", "json")

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        name = f"t1-linecount-{tag}"
        script = f"{wd}/bin/linecount_{tag}.sh"
        service, timer = f"{wd}/systemd/{name}.service", f"{wd}/systemd/{name}.timer"
        calendar = f"*-*-* {ctx.rng.randint(0, 23):02d}:{ctx.rng.randint(0, 59):02d}:00"
        log = f"{wd}/log/linecount_{tag}.log"
        spec = {"script": script, "target": target, "prints": "lines", "service": service}
        spec |= {"log": log}
        spec |= {"timer": timer, "calendar": calendar, "service_name": f"{name}.service"}
        service_text = [
            "[Unit]",
            f"Description=Count lines of {target}",
            "",
            "[Service]",
            "Type=oneshot",
            f"ExecStart={script}",
        ]
        timer_text = [
            "[Unit]",
            f"Description=Run {name}.service on a schedule",
            "",
            "[Timer]",
            f"OnCalendar={calendar}",
            f"Unit={name}.service",
            "Persistent=true",
            "",
            "[Install]",
            "WantedBy=timers.target",
        ]
        return Extension(
            title="schedule a line count with systemd",
            steps=[
                *_script_steps(script, f"exec wc -l < {target}"),
                f"mkdir -p {wd}/systemd",
                f"cat > {service} <<'UNIT'",
                *service_text,
                "UNIT",
                f"cat > {timer} <<'UNIT'",
                *timer_text,
                "UNIT",
                f"mkdir -p {wd}/log",
                f"{script} > {log}",
            ],
            tests=render_tests(_SCRIPT_TESTS + _LOG_TESTS + _SYSTEMD_TESTS, tag, spec),
            text=(
                f"Create the executable script `{script}` "
                f"(with a `#!` line) that prints the number of newline characters in `{target}` "
                f"(what `wc -l < {target}` prints: the bare number and a newline) and exits 0. "
                f"Then write two systemd unit files. `{service}`: a `[Unit]` section with a "
                f"non-empty `Description=`, and a `[Service]` section with `Type=oneshot` and "
                f"`ExecStart={script}`. `{timer}`: a `[Timer]` section with "
                f"`OnCalendar={calendar}`, `Unit={name}.service` and `Persistent=true`, and an "
                f"`[Install]` section with `WantedBy=timers.target`. Then run the script once "
                f"now and save what it prints (only that) to `{log}`."
            ),
            requires=["wc"],
            consumes=[target],
            creates=[script, service, timer, log],
        )


OPERATORS: list[Operator] = [CronDigestJob(), SystemdTimerUnit()]
