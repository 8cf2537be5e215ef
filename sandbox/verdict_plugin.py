"""The test runner's end of the verifier's report channel: a pytest plugin (docs/sandbox.md,
"The report channel").

Not imported by the project: `sandbox.verdict_channel` ships this file's text into the
verifier's view (/tests/.t1-verdict/t1_verdict.py, on PYTHONPATH) with a `pytest11` entry
point, so every pytest the verifier starts loads it. It runs on the image's Python, so it is
stdlib-only and written for Python 3.6.

The channel's sitecustomize opens the channel when a pytest process starts (`open_early`, this
file loaded as `t1_verdict_early`), before pytest reads a configuration file of the agent's
project; the plugin takes that channel over when pytest configures itself. Where nothing
opened it yet (a pytest run by `pytest.main` in a Python process), the plugin opens it when
pytest configures itself (before it imports a test module, so before any test runs).

Opening reads the run's key from the file T1_VERDICT_KEY names and destroys it (unlink, else
truncate), makes this process non-dumpable (its memory, environment and descriptors are then
out of reach of the tests' children through /proc and ptrace, which need CAP_SYS_PTRACE that
no sandbox process has) and marks the environment, so that a pytest the tests start stays
silent. It then appends to T1_VERDICT_RECORDS one line per test outcome and one closing line,
each authenticated: HMAC-SHA256 under the key over the record, which carries its sequence
number. A pytest that finds the key already destroyed (a second run of the entry script, or a
forger's) writes a line that cannot authenticate, which voids the run's records.

Test runners other than pytest speak the same protocol through `open_runner` (the seeds'
run_checks.py loads this file by path): the first record names the runner, so the harness
records where the verdict came from.
"""

import ctypes
import hashlib
import hmac
import json
import os
import sys

KEY_ENV = "T1_VERDICT_KEY"
RECORDS_ENV = "T1_VERDICT_RECORDS"
EARLY_MODULE = "t1_verdict_early"
NESTED_ENV = "T1_VERDICT_NESTED"
PR_SET_DUMPABLE = 4
MAX_MESSAGE = 2000


class _Channel:
    def __init__(self, key, fd):
        self.key = key
        self.fd = fd
        self.seq = 0
        self.tests = 0

    def test(self, name, outcome, message="", duration=0.0):
        self.tests += 1
        self.emit("test", name=name, outcome=outcome, message=message[-MAX_MESSAGE:],
                  duration=float(duration))  # fmt: skip

    def end(self, exitstatus):
        self.emit("end", exitstatus=int(exitstatus), tests=self.tests)

    def emit(self, kind, **fields):
        body = dict(fields, seq=self.seq, kind=kind)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(self.key, text.encode("utf-8"), hashlib.sha256).hexdigest()
        line = json.dumps({"b": text, "m": mac}, separators=(",", ":")) + "\n"
        os.write(self.fd, line.encode("utf-8"))
        self.seq += 1


_CHANNEL = None


def _destroy(path):
    """The key file gone, or emptied where the directory is not ours to change."""
    try:
        os.unlink(path)
        return True
    except OSError:
        pass
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
        return True
    except OSError:
        return False


def _undumpable():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no libc to call: the key cannot be kept
        return False


def _open():
    key_path, records = os.environ.get(KEY_ENV), os.environ.get(RECORDS_ENV)
    if not key_path or not records or os.environ.get(NESTED_ENV):
        return None
    os.environ[NESTED_ENV] = str(os.getpid())  # pytest runs the tests start stay silent
    try:
        with open(key_path, "rb") as f:
            text = f.read(256)
    except OSError:
        text = b""
    kept = _destroy(key_path) and _undumpable()
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(records, flags, 0o644)
    except OSError:
        return None  # no records at all: the harness scores the run as cut short
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except ValueError:
        key = b""
    if len(key) < 32 or not kept:
        reason = "no key" if len(key) < 32 else "key not kept"
        os.write(fd, (json.dumps({"unkeyed": reason, "pid": os.getpid()}) + "\n").encode())
        os.close(fd)
        return None
    return _Channel(key, fd)


def open_runner(runner):
    """The channel for a test runner other than pytest, opened as pytest opens it (the key read
    and destroyed, the process non-dumpable, nested pytest runs silent): call it before the
    tests are imported. None when the run has no channel or the key is not there."""
    channel = _open()
    if channel is not None:
        channel.emit("start", pid=os.getpid(), runner=str(runner))
    return channel


def open_early():
    """The channel of a pytest process, opened at its start by the sitecustomize (the start
    record written): kept here until the plugin takes it over."""
    global _CHANNEL
    if _CHANNEL is None:
        _CHANNEL = open_runner("pytest")


def pytest_configure(config):
    """The first pytest of the run records through an object registered with its own plugin
    manager only, so that pytest sessions run inside it (pytester's in-process runs) add
    nothing: the channel the process opened at its start, else one opened now."""
    global _CHANNEL
    plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p]
    if "t1_verdict" in plugins:  # named by our sitecustomize, now read: no child inherits it
        plugins.remove("t1_verdict")
        if plugins:
            os.environ["PYTEST_PLUGINS"] = ",".join(plugins)
        else:
            del os.environ["PYTEST_PLUGINS"]
    if _CHANNEL is None:
        early = sys.modules.get(EARLY_MODULE)
        if early is not None and getattr(early, "_CHANNEL", None) is not None:
            _CHANNEL = early._CHANNEL
            setattr(early, "_CHANNEL", None)  # noqa: B010 - taken over: one holder
        else:
            _CHANNEL = open_runner("pytest")
        if _CHANNEL is not None:
            config.pluginmanager.register(_Recorder(_CHANNEL), "t1_verdict_recorder")


def _message(report):
    text = getattr(report, "longreprtext", "") or ""
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        text = str(report.longrepr[2])
    return text[-MAX_MESSAGE:]


def _outcome(report):
    """The outcome one phase's report adds, as pytest's `-rA` summary lists it (None: none)."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpass" if xfail else "passed"
        if report.skipped:
            return "xfail" if xfail else "skipped"
        return "failed"
    if report.failed:
        return "error"
    if report.when == "setup" and report.skipped:
        return "xfail" if xfail else "skipped"
    return None


class _Recorder:
    def __init__(self, channel):
        self.channel = channel

    def pytest_runtest_logreport(self, report):
        outcome = _outcome(report)
        if outcome is not None:
            self.channel.test(
                report.nodeid,
                outcome,
                _message(report) if outcome != "passed" else "",
                getattr(report, "duration", 0.0) or 0.0,
            )

    def pytest_collectreport(self, report):
        if report.failed:
            self.channel.test(report.nodeid or "collection", "error", _message(report))

    def pytest_sessionfinish(self, session, exitstatus):
        self.channel.end(exitstatus)
