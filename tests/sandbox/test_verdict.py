"""The judge's rules without a sandbox (sandbox.judge): what a verifier run says, whose
failure a verifier that did not run is, what of the agent's outputs is carried, and the test
runner's guards against the agent's files (the attacks in a sandbox: test_judge.py)."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandbox import judge as judge_mod
from sandbox.base import ExecResult, SandboxError, VerifierRun, VerifierSpec
from sandbox.docker import carried_tar
from sandbox.judge import (
    carried_link,
    carried_mode,
    carried_path,
    judge,
    outputs_of,
    read_verdict,
)
from sandbox.verdict_channel import CHANNEL_DIR, PLUGIN_MODULE, Channel, open_channel
from tasks.model import VERIFIER_VENV, Task
from tasks.results import FailureMode, ReportSource, TrialResult
from tests.factories import make_task
from tests.sandbox.test_verdict_channel import run_pytest

CTRF = b'{"results":{"tests":[{"name":"a","status":"passed"},{"name":"b","status":"failed"}]}}'


def run(exit_code: int = 0, files: dict[str, bytes] | None = None, **kw) -> VerifierRun:
    result = ExecResult(exit_code, kw.pop("stdout", ""), "", 0.1, **kw)
    return VerifierRun(result=result, files=files or {})


def untouched(channel: Channel) -> dict[str, bytes]:
    return dict(channel.report_files())


def test_a_report_in_the_judges_directory_is_the_verdict_whatever_the_exit():
    channel = open_channel()
    for code in (0, 1, 127):
        v = read_verdict(run(code, {**untouched(channel), "ctrf.json": CTRF}), channel)
        assert v.ran and v.failure_mode == FailureMode.NONE and v.report.passed == 1


def test_no_report_after_a_run_to_its_end_is_a_failed_attempt():
    """No exit status makes it infrastructure: 127 (a command missing) included."""
    channel = open_channel()
    for code in (0, 1, 2, 126, 127):
        v = read_verdict(run(code, untouched(channel)), channel)
        assert v.ran and v.failure_mode == FailureMode.NONE, code
        assert v.report.total == 1 and v.report.passed == 0 and "no report" in v.detail


def test_what_did_not_run_to_its_end_is_for_the_proof():
    channel = open_channel()
    killed = read_verdict(run(137, {**untouched(channel), "ctrf.json": CTRF}), channel)
    assert not killed.ran and "signal 9" in killed.detail  # a report left then is no verdict
    opened = read_verdict(run(0, {}), channel)  # the key taken, no records
    assert not opened.ran and "did not finish" in opened.detail


def test_limits_and_garbage_keep_their_failure_modes():
    channel = open_channel()
    assert read_verdict(run(0, timed_out=True), channel).failure_mode == (
        FailureMode.VERIFIER_TIMEOUT
    )
    assert read_verdict(run(137, oom_killed=True), channel).failure_mode == (
        FailureMode.OUT_OF_MEMORY
    )
    garbage = read_verdict(run(1, {**untouched(channel), "ctrf.json": b"{oops"}), channel)
    assert garbage.ran and garbage.failure_mode == FailureMode.PARSE_ERROR


def test_authenticated_records_are_the_verdict_and_edits_are_tampering(tmp_path):
    channel = open_channel()
    files = run_pytest(tmp_path, channel)
    v = read_verdict(run(1, {**files, "ctrf.json": CTRF}), channel)
    assert v.ran and v.report.authenticated and v.report.source == ReportSource.PYTEST
    edited = files[next(k for k in files if k.endswith(".jsonl"))].replace(b"failed", b"passed")
    forged = read_verdict(run(1, {**files, "t1-verdict.jsonl": edited}), channel)
    assert forged.failure_mode == FailureMode.TAMPERED


class FakeSandbox:
    """A sandbox whose verifier runs are scripted (the judge's protocol only)."""

    workdir = "/app"

    def __init__(self, verify: Callable[[VerifierSpec], VerifierRun]) -> None:
        self._verify = verify
        self.specs: list[VerifierSpec] = []
        self.stopped = False

    def verify(self, spec: VerifierSpec) -> VerifierRun:
        self.specs.append(spec)
        return self._verify(spec)

    def stop(self) -> None:
        self.stopped = True


def reported(spec: VerifierSpec) -> VerifierRun:
    return run(1, {**spec.report_files, "ctrf.json": CTRF})


def does_not_start(spec: VerifierSpec) -> VerifierRun:
    raise SandboxError("the agent's /app is a FIFO")


def trial(task, agent: FakeSandbox, pristine: FakeSandbox | None) -> TrialResult:
    result = TrialResult(trial_id="t", task_id=task.id, task_hash="-", agent="a", backend="x")
    opener = (lambda: pristine) if pristine is not None else None
    judge(agent, task, result, backend="fake", open_pristine=opener)  # type: ignore[arg-type]
    return result


def test_a_verifier_that_does_not_run_after_the_agent_but_on_the_image_is_the_agents_failure():
    judge_mod._PROOFS.clear()
    task = make_task("proof-agent")
    pristine = FakeSandbox(reported)
    r = trial(task, FakeSandbox(does_not_start), pristine)
    assert r.rewardable and not r.resolved and r.passed == 0, (r.failure_mode, r.failure_detail)
    assert "the agent's doing" in r.failure_detail and "FIFO" in r.failure_detail
    assert pristine.specs[0].outputs == () and pristine.stopped  # the image, no outputs
    # cached per task: a second trial proves nothing again
    again = FakeSandbox(reported)
    r = trial(task, FakeSandbox(does_not_start), again)
    assert r.rewardable and not again.specs


def test_a_verifier_that_runs_nowhere_is_infrastructure():
    judge_mod._PROOFS.clear()
    r = trial(make_task("proof-broken"), FakeSandbox(does_not_start), FakeSandbox(does_not_start))
    assert r.failure_mode == FailureMode.VERIFIER_ERROR and not r.rewardable
    # a pristine sandbox that cannot even be opened is the harness's failure, not cached
    task = make_task("proof-harness")

    def broken() -> FakeSandbox:
        raise SandboxError("engine down")

    result = TrialResult(trial_id="t", task_id=task.id, task_hash="-", agent="a", backend="x")
    judge(FakeSandbox(does_not_start), task, result, backend="fake", open_pristine=broken)  # type: ignore[arg-type]
    assert result.failure_mode == FailureMode.SANDBOX_ERROR
    assert (task.content_hash, "fake") not in judge_mod._PROOFS


def test_a_judge_sandbox_that_did_not_start_once_is_started_again_before_any_proof():
    """A start that failed once (the harness under load) is not the agent's failure: the
    judge's sandbox is made once more from the same outputs, and its verdict counts; one that
    fails again is proven as before."""
    judge_mod._PROOFS.clear()
    task = make_task("proof-retry")
    tries: list[int] = []

    def second_time(spec: VerifierSpec) -> VerifierRun:
        tries.append(1)
        return does_not_start(spec) if len(tries) == 1 else reported(spec)

    pristine = FakeSandbox(reported)
    r = trial(task, FakeSandbox(second_time), pristine)
    assert r.failure_mode == FailureMode.NONE and r.report.assertions, r.failure_detail
    assert "the agent's doing" not in r.failure_detail and not pristine.specs
    assert len(tries) == 2


def test_a_verifier_that_times_out_on_the_image_proves_nothing_against_the_agent():
    """The pristine run must go to its end to put a failure on the agent: a verifier that
    times out on the task's own image does not (before: counted as run, so a judge sandbox
    that did not start became the agent's failed attempt)."""
    judge_mod._PROOFS.clear()
    task = make_task("proof-timeout")
    r = trial(task, FakeSandbox(does_not_start), FakeSandbox(lambda spec: run(-9, timed_out=True)))
    assert r.failure_mode == FailureMode.VERIFIER_ERROR and not r.rewardable, r.failure_detail
    assert "timed out" in r.failure_detail


def test_the_judge_asks_for_the_outputs_and_the_verifiers_own_places():
    task = make_task("spec").model_copy(
        update={"outputs": ["/app", "/etc/nginx"], "trusted_paths": ["/usr/local"]}
    )
    sb = FakeSandbox(reported)
    trial(task, sb, None)
    spec = sb.specs[0]
    assert spec.outputs == ("/app", "/etc/nginx", "/usr/local")
    assert spec.user == "" and spec.cwd == "/app"
    assert f"{CHANNEL_DIR}/{PLUGIN_MODULE}.py" in spec.tests and "test.sh" in spec.tests
    assert list(spec.report_files) == [".t1-verdict-key"]  # the key: never with the tests
    assert spec.env["T1_AGENT_IDS"] == "64999:64999"
    assert outputs_of(make_task("default")) == ("/app",)


def test_outputs_never_leave_the_sandbox_nor_bring_the_verifiers_toolchain():
    """A task made in code skips the model's validators (`model_copy`): a path that is not
    absolute and normalized is dropped before any backend joins it to a host path (carried,
    `/../../tmp/x` read and wrote the host's /tmp/x; main's sandbox.trusted refused it when
    it bound trusted paths), and so is the verifier's own venv, which stays the image's."""
    hostile = ["/" + "../" * 30 + "tmp/victim", "/srv/../../etc", "app", "/", "//etc"]
    task = make_task("escape").model_copy(
        update={
            "outputs": ["/app", *hostile, VERIFIER_VENV, f"{VERIFIER_VENV}/bin"],
            "trusted_paths": [*hostile, "/usr/lib", "/usr/local"],
        }
    )
    assert outputs_of(task) == ("/app", "/usr/lib", "/usr/local")
    assert not carried_path(f"{VERIFIER_VENV}/bin/pytest") and carried_path("/usr/lib/x")


def test_a_carried_tar_keeps_the_image_toolchain_and_links_only_within():
    """The engine's archive of /usr/lib (member names from `lib`): the agent's copy of the
    verifier's venv is left out (the image's stays), and a hard link is kept only to a
    file carried with it."""
    venv = "lib/" + VERIFIER_VENV.removeprefix("/usr/lib/")
    entries = [
        _info("lib", tarfile.DIRTYPE, 0o755),
        _info("lib/libx.so", tarfile.REGTYPE, 0o644),
        _info(venv, tarfile.DIRTYPE, 0o755),
        _info(f"{venv}/bin/pytest", tarfile.REGTYPE, 0o755),  # the agent's copy
        _info("lib/to-pytest", tarfile.LNKTYPE, 0o755),
        _info("lib/to-libx", tarfile.LNKTYPE, 0o644),
        _info("lib/to-passwd", tarfile.LNKTYPE, 0o644),
    ]
    entries[4].linkname = f"{venv}/bin/pytest"
    entries[5].linkname = "lib/libx.so"
    entries[6].linkname = "../etc/passwd"
    data = {"lib/libx.so": b"ELF", f"{venv}/bin/pytest": b"#!/bin/sh\necho forged\n"}
    tar, _ = carried_tar(_tar(entries, data), "/usr/lib", set(), None)
    with tarfile.open(fileobj=io.BytesIO(tar)) as out:
        got = {m.name: m for m in out}
    assert sorted(got) == ["lib", "lib/libx.so", "lib/to-libx"]
    assert got["lib/to-libx"].islnk() and got["lib/to-libx"].linkname == "lib/libx.so"


LINKS = [  # (where the agent's link is, what it says, whether the judge carries it)
    ("/app/node_modules/.bin/cli", "../pkg/bin/cli.js", True),  # a climb first, then names
    ("/app/.venv/bin/python", "/usr/bin/python3", True),
    ("/app/current", "releases/v2", True),
    ("/etc/systemd/system/x.service", "/dev/null", True),  # a masked service
    ("/app/a/b/up", "../../tests/x", True),  # ends in /app (it cannot be moved up: no REFER)
    ("/app/tests-like", "/testsuite/x", True),
    ("/app/answer.txt", "/tests/test_outputs.py", False),
    ("/app/answer.txt", "../tests/test_outputs.py", False),
    ("/app/a/up", "../../../tests", False),  # a climb stops at /
    ("/app/r", "/", False),  # above every judge's place
    ("/app/r", "..//..", False),
    ("/app/t", "/tests", False),
    ("/app/k", "/logs/verifier/key", False),
    ("/app/l", "/logs", False),
    ("/app/p", "/proc/self/root/tests/x", False),
    ("/app/p", "/sys/kernel", False),
    ("/app/u", "d/u/../tests/x", False),  # a climb after a name (d/u may be a link)
    ("/app/u", "/usr/../tests/x", False),
    ("/app/d", "/dev", False),
    ("/app/d", "/dev/fd/3", False),  # the follower's descriptors
    ("/app/d", "/dev/stdin", False),
    ("/app/d", "/dev/shm/x", False),
]


@pytest.mark.parametrize(("place", "target", "carried"), LINKS)
def test_a_link_is_carried_only_where_it_cannot_lead_to_the_judges_places(place, target, carried):
    assert carried_link(place, target) is carried


def test_a_carried_tar_leaves_out_a_link_to_the_judges_places():
    entries = [_info("app", tarfile.DIRTYPE, 0o755)]
    for name, target in [("ok", "data/answer.txt"), ("bad", "../tests/test_outputs.py")]:
        entries.append(_info(f"app/{name}", tarfile.SYMTYPE, 0o777))
        entries[-1].linkname = target
    tar, _ = carried_tar(_tar(entries, {}), "/app", set(), None)
    with tarfile.open(fileobj=io.BytesIO(tar)) as out:
        assert sorted(m.name for m in out) == ["app", "app/ok"]


@pytest.mark.parametrize("bad", ["app", "/", "/app/../etc", "/app//x", "/app/./x"])
def test_outputs_are_normalized_absolute_paths(bad: str):
    with pytest.raises(ValidationError, match="outputs"):
        Task.model_validate(make_task("bad").model_dump() | {"outputs": [bad]})


def test_only_plain_entries_are_carried_and_never_setuid():
    assert carried_mode(stat.S_IFREG | 0o4755) == carried_mode(stat.S_IFREG | 0o2755) == 0o755
    assert carried_mode(stat.S_IFDIR | 0o3777) == 0o3777  # a directory's setgid: no privilege
    assert carried_mode(stat.S_IFLNK | 0o777) == 0o777
    for kind in (stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK):
        assert carried_mode(kind | 0o644) is None


def _tar(entries: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info in entries:
            body = data.get(info.name)
            if body is not None:
                info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if body is not None else None)
    return buf.getvalue()


def _info(name: str, kind: bytes, mode: int, uid: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid = kind, mode, uid, uid
    return info


def test_the_docker_backend_carries_a_tar_as_the_rule_says():
    entries = [
        _info("app", tarfile.DIRTYPE, 0o755),
        _info("app/kept.py", tarfile.REGTYPE, 0o644),  # the image's, unchanged
        _info("app/rootsh", tarfile.REGTYPE, 0o4755),  # the agent's setuid copy of a shell
        _info("app/fifo", tarfile.FIFOTYPE, 0o644),
        _info("app/.git/config", tarfile.REGTYPE, 0o644),
        _info("etc/passwd", tarfile.REGTYPE, 0o644),  # outside the output path
    ]
    data = {"app/kept.py": b"x", "app/rootsh": b"ELF", "app/.git/config": b"[core]\n"}
    entries[2].pax_headers = {"SCHILY.xattr.security.capability": "\x01"}
    changed = {"/app/rootsh", "/app/.git/config"}
    tar, git = carried_tar(_tar(entries, data), "/app", changed, (64999, 64999))
    with tarfile.open(fileobj=io.BytesIO(tar)) as out:
        got = {m.name: m for m in out}
    assert sorted(got) == ["app", "app/.git/config", "app/kept.py", "app/rootsh"]
    assert got["app/rootsh"].mode == 0o755 and got["app/rootsh"].uid == 64999
    assert not got["app/rootsh"].pax_headers
    assert got["app/kept.py"].uid == 0 and got["app"].uid == 64999
    assert git == {"/app/.git/config": b"[core]\n"}


# -- the test runner's guards, in a real pytest (no sandbox: files owned by another uid) ------
AGENT = 64999
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to the agent's uid needs root")
FORCE = (
    "import _pytest.reports as r\ni = r.TestReport.__init__\n"
    "def f(self, *a, **k):\n    i(self, *a, **k); self.outcome = 'passed'\n"
    "r.TestReport.__init__ = f\n"
)


@needs_root
def test_the_runner_reads_nothing_the_agent_wrote_as_its_own(tmp_path: Path):
    """In the agent's project: its conftest, its pytest.ini naming a plugin, its pytest.py
    for `python -m pytest`; the task's test, copied there by the judge, fails honestly."""
    project = tmp_path / "app"
    project.mkdir()
    files = {
        "conftest.py": FORCE,
        "pytest.ini": "[pytest]\naddopts = -p agentplugin\n",
        "agentplugin.py": FORCE,
        "pytest.py": "import sys\nsys.exit(0)\n",
    }
    for name, text in files.items():
        (project / name).write_text(text)
        os.chown(project / name, AGENT, AGENT)
    (project / "test_task.py").write_text("def test_work():\n    assert False\n")
    channel = open_channel()
    tests = tmp_path / "tests"
    for rel, data in channel.files().items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_bytes(data)
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, data in channel.report_files().items():
        (logs / name).write_bytes(data)
    env = {**os.environ, **channel.env(str(logs)), "T1_AGENT_IDS": f"{AGENT}:{AGENT}"}
    env.pop("PYTHONPATH", None)
    cmd = f"cd {project} && {sys.executable} -m pytest -q -p no:cacheprovider test_task.py"
    r = subprocess.run(
        ["bash", "-c", channel.command(cmd, str(tests))], env=env, capture_output=True, timeout=60
    )
    out = {p.name: p.read_bytes() for p in logs.iterdir()}
    verdict = channel.verdict(out)
    assert verdict.report.passed == 0 and verdict.report.total == 1, (r.stdout, r.stderr)


def test_a_program_is_the_tasks_only_when_its_code_lies_in_the_tests(tmp_path, monkeypatch):
    """`task_program`: the task's own programs (a validator shipped beside the tests, run by
    the image's interpreter or directly) read the held-out tests; every other program the
    runner starts is the agent's, also one given a file of the tests as an argument."""
    from sandbox import verdict_plugin

    tests, app = tmp_path / "tests", tmp_path / "app"
    (tests / ".t1-git").mkdir(parents=True)
    app.mkdir()
    for f in (tests / "validate.py", tests / ".t1-git" / "gpg.sh", app / "prog.sh", app / "py"):
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    v = str(tests / "validate.py")
    monkeypatch.setenv("T1_AGENT_OUTPUTS", str(app))
    monkeypatch.setenv("T1_AGENT_IDS", f"{os.getuid() + 1}:{os.getgid() + 1}")
    monkeypatch.setattr(verdict_plugin, "SCRATCH", ("/var/tmp",))  # tmp_path lies under /tmp
    monkeypatch.setenv("T1_HELD_OUT_SHARED", str(tests / ".t1-git"))
    task = verdict_plugin.task_program
    assert not task([sys.executable, v]), "no held-out directory named: nothing is the task's"
    monkeypatch.setenv("T1_HELD_OUT", str(tests))
    assert task([sys.executable, v, "/app/out.txt"])
    assert task(v) and task([v, "x"])
    assert task(["python3", "validate.py"], cwd=str(tests))
    assert task(f"python3 {v} /app/out.txt", shell=True)
    assert not task(f"python3 {v}; bash {app}/prog.sh", shell=True)
    assert not task(f"python3 {v} $(cat /app/x)", shell=True)
    assert not task([str(app / "prog.sh"), v]), "the agent's program given a test's file"
    assert not task([str(app / "py"), v]), "an interpreter in the agent's outputs"
    assert not task(["bash", str(app / "prog.sh")])
    assert not task([sys.executable, "-c", "print(1)", v])
    assert not task([str(tests / ".t1-git" / "gpg.sh")]), "the harness's: everyone's"
    assert not task(["no-such-program-t1", v])


def test_a_module_where_the_agents_programs_write_is_the_agents(tmp_path, monkeypatch):
    """`agents_module`: owned by the agent, or lying in its outputs or a scratch place (its
    programs keep the runner's uid in their Landlock domain: ownership no longer tells)."""
    from sandbox import verdict_plugin

    app, lib = tmp_path / "app", tmp_path / "lib"
    app.mkdir()
    lib.mkdir()
    (app / "statistics.py").write_text("")
    (lib / "statistics.py").write_text("")
    monkeypatch.setenv("T1_AGENT_OUTPUTS", str(app))
    monkeypatch.setattr(verdict_plugin, "SCRATCH", ("/var/tmp",))  # tmp_path lies under /tmp
    monkeypatch.delenv("T1_AGENT_IDS", raising=False)
    assert not verdict_plugin.agents_module(str(app / "statistics.py")), "no agent: no rule"
    monkeypatch.setenv("T1_AGENT_IDS", f"{os.getuid() + 1}:{os.getgid() + 1}")
    assert verdict_plugin.agents_module(str(app / "statistics.py"))
    assert not verdict_plugin.agents_module(str(lib / "statistics.py"))
    (app / "link.py").symlink_to(lib / "statistics.py")
    assert not verdict_plugin.agents_module(str(app / "link.py")), "judged by the file's place"


WATCH = r"""
import json, pickle, sys
sys.path.insert(0, sys.argv[2])
import verdict_plugin as vp
app = sys.argv[1]
marks = []
vp.watch_agent_code(type("Ch", (), {"agent_code": lambda self, path: marks.append(path)})())
steps = []
def step(name):
    steps.append((name, list(marks)))
with open(app + "/data.pkl", "rb") as f:
    pickle.load(f)
step("plain-data pickle")
__import__("json")
import ast, dataclasses
dataclasses.make_dataclass("Point", ["x", "y"])
ast.literal_eval("[1, 2]")
step("the image's module, strings a library compiles")
sys.path.insert(0, app)  # solution.pyc: bytecode with no source, named as the image's
import solution
step("bytecode named as the image's")
with open(app + "/model.pkl", "rb") as f:
    pickle.load(f)
step("a pickle naming a global")
import ctypes
ctypes.CDLL("libagent.so")
step("a library of the agent's by LD_LIBRARY_PATH")
compile("[1, 2]", "answer", "eval")
step("a string the tests only compile")
eval("[1, 2]")
step("a string the tests evaluate")
print(json.dumps(steps))
"""


def test_code_of_the_agents_is_marked_by_its_file(tmp_path):
    """`watch_agent_code` in a Python of its own (an audit hook cannot be removed): nothing for
    a pickle of plain data, a module of the image's or a string a library compiles; the agent's
    bytecode by its file, not by the name compiled into it; a pickle naming a global by the
    file the caller holds open; a library by LD_LIBRARY_PATH; a string the tests evaluate (not
    one they only compile)."""
    import collections
    import marshal
    import pickle
    from importlib.util import MAGIC_NUMBER

    app = tmp_path / "app"
    app.mkdir()
    (app / "data.pkl").write_bytes(pickle.dumps({"a": [1, 2.0, "x"]}))
    (app / "model.pkl").write_bytes(pickle.dumps(collections.OrderedDict(a=1)))
    code = compile("VALUE = 1", "/usr/lib/python3/forged_name.py", "exec")
    (app / "solution.pyc").write_bytes(MAGIC_NUMBER + bytes(12) + marshal.dumps(code))
    import ctypes.util
    import shutil

    libm = ctypes.util.find_library("m")
    real = next((p for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64")
                 if libm and os.path.exists(p := os.path.join(d, libm))), None)  # fmt: skip
    if real is None:
        pytest.skip("no libm to copy as the agent's library")
    shutil.copy(real, app / "libagent.so")
    env = {**os.environ, "T1_AGENT_OUTPUTS": str(app), "T1_AGENT_IDS": "64999:64999"}
    env["LD_LIBRARY_PATH"] = str(app)
    tests = tmp_path / "tests"  # the script stands for the tests' own code
    tests.mkdir()
    (tests / "watch.py").write_text(WATCH)
    env["T1_HELD_OUT"] = str(tests)
    out = subprocess.run(
        [sys.executable, str(tests / "watch.py"), str(app), str(Path(judge_mod.__file__).parent)],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert [tuple(s) for s in json.loads(out)] == [
        ("plain-data pickle", []),
        ("the image's module, strings a library compiles", []),
        ("bytecode named as the image's", [f"{app}/solution.pyc"]),
        ("a pickle naming a global", [f"{app}/solution.pyc", f"{app}/model.pkl"]),
        (
            "a library of the agent's by LD_LIBRARY_PATH",
            [f"{app}/solution.pyc", f"{app}/model.pkl", f"{app}/libagent.so"],
        ),
        (
            "a string the tests only compile",
            [f"{app}/solution.pyc", f"{app}/model.pkl", f"{app}/libagent.so"],
        ),
        (
            "a string the tests evaluate",
            [f"{app}/solution.pyc", f"{app}/model.pkl", f"{app}/libagent.so", "<eval>"],
        ),
    ]


def test_the_tests_modes_hold_them_out_by_themselves():
    """`tests_layout`: nothing held out is readable by others (the agent's uid, where the kernel
    has no Landlock), its group (TESTS_GID) reads it; what every program needs is readable by
    all; each directory comes before what it holds; a name that climbs out is refused."""
    from sandbox.judge import SHARED_TESTS_DIRS, tests_layout

    names = ["test.sh", "test_outputs.py", "expected/out.txt"]
    names += [f"{SHARED_TESTS_DIRS[0]}/loader.py", f"{SHARED_TESTS_DIRS[1]}/g.sh"]
    files = dict.fromkeys(names, b"")
    layout = tests_layout(files)
    by = {e.rel: e for e in layout}
    assert by[""].mode == 0o751 and by[""].data is None
    for e in layout[1:]:
        shared = e.rel.split("/")[0] in SHARED_TESTS_DIRS
        assert e.held is not shared, e
        assert bool(e.mode & 0o004) is shared, (e.rel, oct(e.mode))
        assert e.mode & 0o040, (e.rel, oct(e.mode))  # the group reads it
    assert by["test.sh"].mode & 0o100 and not by["test.sh"].mode & 0o001
    order = [e.rel for e in layout]
    assert order.index("expected") < order.index("expected/out.txt")
    with pytest.raises(ValueError, match="escapes"):
        tests_layout({"../x": b""})


def _run_bpf(prog: list[tuple[int, int, int, int]], arch: int, nr: int) -> int:
    """What a classic BPF program of loads, equality jumps and returns returns for one call."""
    data, acc, pc = {0: nr, 4: arch}, 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


def test_without_landlock_the_agents_programs_are_refused_symbolic_links_only():
    """The fallback's seccomp program refuses symlink and symlinkat with EACCES on each
    architecture it names (x32 numbers too) and allows every other call, and every call of
    an architecture it does not name."""
    from sandbox.verdict_plugin import NO_LINK_SYSCALLS, no_links_program

    prog, deny, allow = no_links_program(), 0x00050000 | 13, 0x7FFF0000
    x86_64, aarch64, i386 = (a for a, _ in NO_LINK_SYSCALLS)
    refused = {(x86_64, 88), (x86_64, 266), (x86_64, 0x40000058), (x86_64, 0x4000010A),
               (aarch64, 36), (i386, 83), (i386, 304)}  # fmt: skip
    for arch in (x86_64, aarch64, i386, 0xDEADBEEF):
        for nr in (0, 1, 36, 82, 83, 86, 88, 265, 266, 304, 316, 0x40000058, 0x4000010A):
            want = deny if (arch, nr) in refused else allow
            assert _run_bpf(prog, arch, nr) == want, (hex(arch), nr)
