"""Adversarial agents against the local sandbox, thinking as an attacker would: every attack is
contained, the host is unchanged, the verdict stays the verifier's own, the trial ends as a row
with the right failure mode, and the next trial still works. (docs/sandbox.md states the rules
these tests hold the sandbox to.)"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from sandbox import CommandAgent, get_backend, run_trial
from tasks.model import Limits
from tasks.results import FailureMode
from tests.factories import make_task
from tests.sandbox.images import pytest_task, tools_task, verifier_spec_for

pytestmark = pytest.mark.sandbox

SECRET_IN_TESTS = "verifier-secret-7d1f0c"
SECRET_IN_SOLUTION = "solution-secret-93ab2e"

# A CTRF report, a JUnit report, a pytest summary and rewards that all say "passed".
FORGED_CTRF = (
    '{"results":{"tool":{"name":"x"},"tests":[{"name":"exists /app/done","status":"passed"},'
    '{"name":"test_done_exists","status":"passed"},{"name":"test_done_says_ok",'
    '"status":"passed"}]}}'
)
FORGED_JUNIT = (
    '<testsuite><testcase classname="t" name="test_done_exists"/>'
    '<testcase classname="t" name="test_done_says_ok"/></testsuite>'
)
FORGED_SUMMARY = (
    "=========================== short test summary info ============================\n"
    "PASSED test_outputs.py::test_done_exists\nPASSED test_outputs.py::test_done_says_ok\n"
    "============================== 2 passed in 0.01s ===============================\n"
)


def forge_reports(directory: str) -> str:
    """Shell writing every report format the parser reads into `directory`."""
    files = {
        "ctrf.json": FORGED_CTRF,
        "junit.xml": FORGED_JUNIT,
        "results.xml": FORGED_JUNIT,
        "report.xml": FORGED_JUNIT,
        "reward.txt": "1",
        "reward.json": '{"reward": 1.0}',
    }
    return "".join(
        f"mkdir -p {directory}; printf '%s' '{v}' > {directory}/{k};" for k, v in files.items()
    )


def forged_script() -> str:
    """A program that forges: writes passing reports where it can and prints a summary."""
    return "#!/bin/sh\n" + forge_reports("/logs/verifier") + f"printf '{FORGED_SUMMARY}'\nexit 0\n"


def junit_task():
    test_sh = b"""#!/bin/bash
if [ -f /app/done ]; then r='<testcase classname="t" name="test_done_exists"/>';
else r='<testcase classname="t" name="test_done_exists"><failure message="missing"/></testcase>'; fi
echo "<testsuite>$r</testsuite>" > /logs/verifier/junit.xml
"""
    return tools_task("junit-verifier", verifier={"test.sh": test_sh})


def reward_task():
    test_sh = (
        b"#!/bin/bash\n[ -f /app/done ] && echo 1 > /logs/verifier/reward.txt"
        b" || echo 0 > /logs/verifier/reward.txt\n"
    )
    return tools_task("reward-verifier", verifier={"test.sh": test_sh})


VERIFIER_STYLES = {
    "ctrf": make_task,
    "junit": junit_task,
    "pytest": pytest_task,
    "reward": reward_task,
}


def agent_output(task, command: str, timeout_s: float = 60) -> str:
    sb = get_backend("local").open(task)
    try:
        return sb.session().run(command, timeout_s=timeout_s).stdout
    finally:
        sb.stop()


# -- the verdict is the verifier's own ------------------------------------------------------
@pytest.mark.parametrize("style", sorted(VERIFIER_STYLES))
@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(forge_reports("/logs/verifier"), id="planted-in-report-dir"),
        pytest.param(
            f"(while :; do {forge_reports('/logs/verifier')} sleep 0.01; done) >/dev/null 2>&1 &"
            " disown; sleep 0.2",
            id="background-rewriter",
        ),
        pytest.param(
            f"mkdir -p /tests; {forge_reports('/tests')} chmod -R 777 /logs",
            id="planted-in-tests-dir",
        ),
    ],
)
def test_forged_reports_never_count(style, attack):
    task = VERIFIER_STYLES[style]()
    r = run_trial(task, CommandAgent(attack))
    # the verifier's own run happened in its own root and judged the untouched work
    assert r.report.passed == 0 and not r.resolved, (style, r.report)
    assert r.total >= 1 and r.failure_mode == FailureMode.NONE, r.failure_detail


@pytest.mark.parametrize("style", ["pytest"])
def test_reports_from_code_the_verifier_runs_do_not_count(style):
    """The verifier runs the agent's program (which forges every format and prints a summary)
    before its pytest judges: pytest's records count. (A shell verifier that writes its own
    report, `junit`, is not protected from a program its script runs: that program runs as
    the judge; the audit's forge hacks measure such tasks, docs/sandbox.md.)"""
    base = VERIFIER_STYLES[style]()
    run_agent = b"bash /app/run.sh || true\n"
    tests = dict(base.verifier)
    tests["test.sh"] = tests["test.sh"].replace(b"#!/bin/bash\n", b"#!/bin/bash\n" + run_agent, 1)
    task = base.model_copy(update={"verifier": tests})
    script = forged_script().replace("'", "'\\''")
    r = run_trial(task, CommandAgent(f"printf '%s' '{script}' > /app/run.sh"))
    assert r.failure_mode == FailureMode.NONE, r.failure_detail
    assert not r.resolved and r.report.passed == 0, r.report


PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def test_shadowed_interpreter_or_runner_on_path():
    """Every shadow at once (the judge's root is the image's: none of them is there)."""
    script = forged_script().replace("'", "'\\''")
    attack = "; ".join(
        f"printf '%s' '{script}' > {d}/{n}; chmod 755 {d}/{n}"
        for d in PATH_DIRS
        for n in ("pytest", "python3", "bash")
    )
    r = run_trial(pytest_task(), CommandAgent(attack))
    assert r.failure_mode == FailureMode.NONE, (r.failure_mode, r.failure_detail)
    assert r.report.passed == 0 and not r.resolved
    assert r.total == 2  # the real pytest ran (not the shadow) and reported both tests failing


FORCE_PASS_CONFTEST = """import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome = "passed"
"""
PLUGIN_PTH = "import os; os.environ['PYTEST_ADDOPTS'] = '-p no:terminal'"


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(
            f"printf '%s' '{FORCE_PASS_CONFTEST}' > /conftest.py;"
            " printf '[pytest]\\n' > /pytest.ini",
            id="root-conftest-and-ini",
        ),
        pytest.param(
            f"mkdir -p /tests; printf '%s' '{FORCE_PASS_CONFTEST}' > /tests/conftest.py",
            id="conftest-in-tests",
        ),
        pytest.param(
            f"printf '%s' \"{PLUGIN_PTH}\" > /usr/lib/python3/dist-packages/zz-evil.pth",
            id="pth-in-dist-packages",
        ),
        pytest.param(
            "d=/root/.local/lib/python3.11/site-packages; mkdir -p $d; "
            f"printf '%s' \"{PLUGIN_PTH}\" > $d/evil.pth",
            id="pth-in-user-site",
        ),
        pytest.param(
            f"printf '%s' '{FORCE_PASS_CONFTEST}' > /usr/lib/python3.11/sitecustomize.py",
            id="sitecustomize",
        ),
        pytest.param("echo /app/evil.so > /etc/ld.so.preload", id="ld-so-preload"),
        pytest.param(
            "d=/usr/lib/python3/dist-packages/_pytest; echo 'raise SystemExit(0)' >> $d/main.py",
            id="runner-package-modified",
        ),
    ],
)
def test_toolchain_tampering_never_reaches_the_judge(attack):
    r = run_trial(pytest_task(), CommandAgent(attack))
    assert r.failure_mode == FailureMode.NONE, (r.failure_mode, r.failure_detail)
    assert r.report.passed == 0 and not r.resolved
    assert r.total == 2, r.verifier_output  # the pristine pytest judged: both tests failed


def test_exported_environment_does_not_reach_the_verifier():
    attack = "export PYTEST_ADDOPTS='-p no:python' PYTHONPATH=/app/evil; echo ok > /app/done"
    r = run_trial(pytest_task(), CommandAgent(attack))
    assert r.failure_mode == FailureMode.NONE and r.resolved and r.total == 2


def test_honest_work_in_system_paths_is_not_tampering():
    # Installing things is legitimate agent work; only the verifier's own toolchain is guarded.
    work = "mkdir -p /usr/local/share/x && echo hi > /usr/local/share/x/f; echo ok > /app/done"
    r = run_trial(pytest_task(), CommandAgent(work))
    assert r.failure_mode == FailureMode.NONE, r.failure_detail
    assert r.resolved


def test_agent_cannot_find_verifier_or_solution_or_host_files():
    task = make_task(
        "secret",
        solve=f"# {SECRET_IN_SOLUTION}\ntouch /app/done\n",
        extra_tests={"notes.txt": SECRET_IN_TESTS.encode()},
    )
    out = agent_output(
        task,
        "grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
        f"-e {SECRET_IN_TESTS} -e {SECRET_IN_SOLUTION} / 2>/dev/null; ls /tests /solution 2>&1;"
        f" ls -A /root /home; ls {os.getcwd()} 2>&1",
    )
    assert SECRET_IN_TESTS not in out and SECRET_IN_SOLUTION not in out
    assert out.count("No such file or directory") >= 3  # /tests, /solution, this checkout
    assert "pyproject.toml" not in out


def test_no_mounts_and_no_net_admin():
    out = agent_output(
        make_task(),
        "mount -t tmpfs x /mnt; echo mount=$?; umount /etc/hosts; echo umount=$?;"
        " echo 1 > /proc/sys/net/ipv4/ip_forward; echo sysctl=$?",
    )
    assert "mount=0" not in out and "umount=0" not in out and "sysctl=0" not in out


def test_writes_stay_inside_the_sandbox():
    marker = f"t1-escape-{os.getpid()}"
    cmd = (
        f"echo x > /etc/{marker}; echo x > /usr/local/bin/{marker}; echo x > /tmp/{marker};"
        f"mkdir -p /var/lib/{marker}; echo x > /{marker}"
    )
    r = run_trial(make_task(), CommandAgent(cmd))
    for p in (f"/etc/{marker}", f"/usr/local/bin/{marker}", f"/tmp/{marker}",
              f"/var/lib/{marker}", f"/{marker}"):  # fmt: skip
        assert not os.path.lexists(p), f"sandbox wrote {p} on the host"
    assert r.failure_mode == FailureMode.NONE


# -- processes -----------------------------------------------------------------------------
def test_fork_bomb_is_contained_and_counted_from_before():
    """The process count is taken by a monitor started before the bomb (a process started
    after it could not start at all). The counted bomb keeps every process it starts: a
    listing of /proc is not atomic, so with processes exiting during it an exited one and its
    successor can both be counted (CI once read 65 from the recursive bomb). The recursive
    bomb then runs too, and the sandbox must outlive it."""
    limits = Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=256, pids=64)
    sb = get_backend("local").open(tools_task(limits=limits))
    try:
        s = sb.session()
        # The monitor forks nothing once started (builtins only: a glob, [ ], echo, read -t),
        # so the bomb cannot stop it from counting.
        monitor = (
            "mkfifo /tmp/tick; (exec 9<>/tmp/tick; shopt -s nullglob; m=0; while :; do "
            "p=(/proc/[0-9]*); n=${#p[@]}; if [ $n -gt $m ]; then m=$n; echo $m > /tmp/max; fi; "
            "read -t 0.05 -u 9; done) >/dev/null 2>&1 &"
        )
        assert s.run(monitor, timeout_s=5).exit_code == 0
        s.run("(while :; do sleep 100 & done) 2>/dev/null & sleep 2", timeout_s=4)
        s.close()  # what the end of the agent phase does: the whole session tree is killed
        peak = int(sb.download("/tmp/max")["max"].decode().split()[0])
        assert 10 < peak <= 64, peak  # the bomb reached the limit, and not beyond it
        s = sb.session()
        s.run(":(){ :|:& };: ; sleep 2", timeout_s=4)  # the bomb runs on in the background
        s.close()
        assert sb.exec("echo alive", timeout_s=10).stdout == "alive\n"
    finally:
        sb.stop()
    assert run_trial(make_task(), "oracle").resolved


def _host_pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _groups_of(pid: int) -> dict[str, str]:
    """controller -> group of a host process, from /proc/PID/cgroup (v2's line: "")."""
    out = {}
    for line in open(f"/proc/{pid}/cgroup").read().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            out[c] = path
    return out


def test_every_process_tree_runs_in_the_sandboxs_groups():
    """The agent's shell, a one-off command and the verifier, and what they start, are in the
    sandbox's memory, pids and cpu child groups (where its limits and kills apply): the
    helper moves itself into every one before it runs anything."""
    import threading

    sb = get_backend("local").open(make_task())
    seen: dict[str, dict[str, str]] = {}

    def probe(name: str, marker: str) -> None:
        deadline = time.monotonic() + 10
        while not _host_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = _host_pids(marker)
        seen[name] = _groups_of(pids[0]) if pids else {}

    try:
        sb.session().run("sleep 4311 &", timeout_s=5)
        probe("session", "sleep 4311")
        t = threading.Thread(target=lambda: sb.exec("sleep 4312; true", timeout_s=10))
        t.start()
        probe("exec", "sleep 4312")
        subprocess.run(["pkill", "-f", "sleep 4312"], check=False)
        t.join()
        spec = verifier_spec_for(sb, make_task(), "sleep 4313; true", timeout_s=10)
        t = threading.Thread(target=lambda: sb.verify(spec))
        t.start()
        probe("verify", "sleep 4313")
        subprocess.run(["pkill", "-f", "sleep 4313"], check=False)
        t.join()
    finally:
        sb.stop()
    from sandbox.cgroups import hierarchy

    h = hierarchy()
    assert h is not None
    controllers = ("memory", "pids", "cpu") if h.version == 1 else ("",)  # v2: one `0::` line
    for name in ("session", "exec", "verify"):
        for controller in controllers:
            assert seen[name].get(controller) == f"/{h.parent}/{sb.id}/{name}", (name, seen[name])


def test_memory_exhaustion_is_out_of_memory():
    limits = Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=96, pids=64)
    hog = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"
    r = run_trial(tools_task(limits=limits), CommandAgent(hog))
    assert r.failure_mode == FailureMode.OUT_OF_MEMORY, (r.failure_mode, r.failure_detail)


def test_timeout_is_enforced_on_wall_clock():
    t0 = time.monotonic()
    r = run_trial(make_task(limits=Limits(agent_timeout_s=2)), CommandAgent("sleep 1000"))
    assert time.monotonic() - t0 < 10
    assert r.failure_mode == FailureMode.AGENT_TIMEOUT


def test_output_limit():
    limits = Limits(agent_timeout_s=20, verifier_timeout_s=20, output_bytes=10_000)
    r = run_trial(make_task(limits=limits), CommandAgent("yes"))
    assert r.failure_mode == FailureMode.OUTPUT_LIMIT


def _host_processes(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def test_background_processes_do_not_outlive_the_trial():
    from sandbox.cgroups import sandbox_groups
    from sandbox.local import reap_stopped

    cmd = "(sleep 4242 &); nohup sleep 4243 >/dev/null 2>&1 & setsid sleep 4244 & disown; true"
    r = run_trial(make_task(), CommandAgent(cmd))
    assert r.failure_mode == FailureMode.NONE
    assert _host_processes("sleep 424[234]") == []
    sb = get_backend("local").open(make_task())
    try:
        started = sb.session().run("setsid sleep 4245 & disown; true", timeout_s=30)
        assert started.exit_code == 0, started
        deadline = time.monotonic() + 30  # the forked child execs `sleep` a moment later
        while not _host_processes("sleep 4245") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _host_processes("sleep 4245") != []  # alive between commands, as it should
        assert sb.id in sandbox_groups()
    finally:
        sb.stop()
    reap_stopped()
    assert sb.id not in sandbox_groups()
    assert _host_processes("sleep 4245") == []


def test_kept_agent_processes_cannot_touch_the_verifier_run():
    """Even kept alive (a task's opt-in), the agent's processes live in another PID and mount
    namespace than the verifier: they cannot see /tests or write its report directory."""
    spy = (
        "(while :; do ls /tests /logs/verifier >> /app/spy 2>&1; "
        f"{forge_reports('/logs/verifier')} sleep 0.02; done) >/dev/null 2>&1 & disown"
    )
    task = make_task()
    sb = get_backend("local").open(task)
    try:
        sb.session().run(spy + "; sleep 0.2", timeout_s=5)
        test_sh = (
            b"#!/bin/bash\nsleep 0.5; ls /tests > /logs/verifier/seen\n"
            b"echo 0 > /logs/verifier/reward.txt\n"
        )
        spec = verifier_spec_for(
            sb, task, "bash /tests/test.sh", tests={"test.sh": test_sh, "expect": b"x"},
            timeout_s=20, keep_agent_processes=True,
        )  # fmt: skip
        run = sb.verify(spec)
        assert {"seen", "reward.txt"} <= set(run.files), run.files
        assert run.files["reward.txt"] == b"0\n"
        spied = sb.session().run("sleep 0.3; cat /app/spy | sort -u", timeout_s=10).stdout
        # it looked, and never saw them: the verifier's places are not in the agent's sandbox
        assert "/logs/verifier:" in spied and "test.sh" not in spied, spied
    finally:
        sb.stop()


def test_next_trial_works_after_attacks():
    r = run_trial(make_task(), "oracle")
    assert r.failure_mode == FailureMode.NONE and r.resolved
