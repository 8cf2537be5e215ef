"""The docker backend against a real engine (a private Podman service, tests/sandbox/conftest.py):
trials, the image's config, limits, the agent's shell, the verifier's isolation and network
policy. Tests of the shared contract run on both backends (`backend` fixture); where the local
backend does not have a feature yet they skip on it, saying which."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import CommandAgent, get_backend, run_trial
from sandbox.base import NetworkMode, NetworkPolicy, Sandbox
from tasks.corpus import load_task
from tasks.model import EnvironmentSpec, Limits, Task
from tasks.reports import collect_report
from tasks.results import FailureMode, ReportSource
from tests.factories import make_task
from tests.sandbox.images import verifier_spec_for

pytestmark = pytest.mark.docker
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOST_PORT = 18611  # this suite's port range: 18600-18699
WAIT_FOR_PORT = (
    "for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
    "sleep 0.1; done"
)

# An image like the public Harbor corpus's: Debian's python3 plus pytest from PyPI (over
# HTTPS, so building it also shows that builds trust the host's CA bundle).
PYTHON_DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-pip \\
    >/dev/null && rm -rf /var/lib/apt/lists/*
RUN pip3 install --no-cache-dir --break-system-packages -q pytest==8.3.5
WORKDIR /srv/job
"""
PYTEST_VERIFIER = {
    "test.sh": b"#!/bin/bash\ncd /srv/job && pytest /tests/test_outputs.py -rA "
    b"--junitxml=/logs/verifier/junit.xml\n",
    "test_outputs.py": b"import os\n\n"
    b"def test_done():\n    assert os.path.exists('/srv/job/done')\n\n"
    b"def test_content():\n    assert open('/srv/job/done').read() == 'ok\\n'\n",
}


def python_task(task_id: str = "py", **limits: float) -> Task:
    base = make_task(task_id, solve="echo ok > /srv/job/done\n")
    return base.model_copy(
        update={
            "environment": EnvironmentSpec(
                files={"Dockerfile": PYTHON_DOCKERFILE.encode()}, workdir="/srv/job"
            ),
            "verifier": PYTEST_VERIFIER,
            # python3 and pip add about 165 MB to the base: a disk that holds them (the
            # default 64 MB failed the build's size check once the image was built afresh)
            "limits": base.limits.model_copy(update={"memory_mb": 512, "disk_mb": 512, **limits}),
        }
    )


def opened(backend: str, task: Task) -> Sandbox:
    return get_backend(backend).open(task)


def run_verifier(sb: Sandbox, task: Task, **kw: bool):
    run = sb.verify(verifier_spec_for(sb, task, **kw))
    return run, collect_report(run.files, run.result.stdout)


def rewarded(run, report) -> bool:
    return report.total > 0 and report.passed == report.total


@pytest.fixture
def host_server() -> Iterator[int]:
    """An HTTP server on all of the host's addresses (this suite's port)."""
    server = http.server.ThreadingHTTPServer(
        ("0.0.0.0", HOST_PORT), http.server.BaseHTTPRequestHandler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield HOST_PORT
    finally:
        server.shutdown()
        server.server_close()


# -- trials on both backends -----------------------------------------------------------
def test_oracle_passes_and_nop_fails_on_a_junit_task(backend):
    task = load_task(FIXTURES / "harbor" / "csv-report")
    oracle = run_trial(task, "oracle", backend=backend)
    assert oracle.failure_mode == FailureMode.NONE, oracle.failure_detail
    assert oracle.report.source == ReportSource.JUNIT
    assert (oracle.passed, oracle.total) == (3, 3)
    nop = run_trial(task, "nop", backend=backend)
    assert nop.failure_mode == FailureMode.NONE, nop.failure_detail
    assert (nop.passed, nop.total) == (0, 3)


def test_oracle_and_nop_on_a_pytest_image(docker_engine):
    task = python_task()
    oracle = run_trial(task, "oracle", backend="docker")
    assert oracle.failure_mode == FailureMode.NONE, oracle.failure_detail
    assert (oracle.passed, oracle.total) == (2, 2)
    nop = run_trial(task, "nop", backend="docker")
    assert (nop.passed, nop.total) == (0, 2)


def test_trials_run_concurrently(docker_engine):
    from concurrent.futures import ThreadPoolExecutor

    tasks = [
        make_task(f"conc-{i}", expect=(f"/app/f{i}",), solve=f"touch /app/f{i}\n") for i in range(4)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: run_trial(t, "oracle", backend="docker"), tasks))
    assert all(r.resolved for r in results), [r.failure_detail for r in results]


# -- the image as built ------------------------------------------------------------------
def test_workdir_env_and_user_come_from_the_dockerfile(docker_engine):
    dockerfile = (
        "FROM debian:bookworm-slim\nRUN useradd -m -u 1234 agent && mkdir -p /srv/job && "
        "chown agent /srv/job\nENV GREETING='hello there' PATH=/opt/tools:$PATH\n"
        "WORKDIR /srv/job\nUSER agent\n"
    )
    task = make_task(
        "imgcfg", environment=EnvironmentSpec(files={"Dockerfile": dockerfile.encode()})
    )
    sb = opened("docker", task)
    try:
        r = sb.session().run('pwd; id -un; echo "$GREETING"; echo "$PATH"', timeout_s=10)
        assert r.stdout.split("\n")[:4] == [
            "/srv/job",
            "agent",
            "hello there",
            "/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
        harness = sb.exec("id -u; pwd")
        assert harness.stdout.split() == ["0", "/srv/job"]
    finally:
        sb.stop()


def test_unmapped_base_image_is_a_clear_environment_error(docker_engine):
    files = {"Dockerfile": b"FROM registry.example.com/nowhere/nothing:1.0\nRUN true\n"}
    r = run_trial(
        make_task("unmapped", environment=EnvironmentSpec(files=files)), "oracle", "docker"
    )
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR
    assert "registry.example.com/nowhere/nothing:1.0" in r.failure_detail
    assert "no offline base image" in r.failure_detail


def test_failing_run_step_is_an_environment_error_with_its_output(docker_engine):
    files = {"Dockerfile": b"FROM debian:bookworm-slim\nRUN echo oops-7f3a >&2; exit 3\n"}
    r = run_trial(make_task("badrun", environment=EnvironmentSpec(files=files)), "oracle", "docker")
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR
    assert "oops-7f3a" in r.failure_detail and "exit status 3" in r.failure_detail


def test_build_ca_is_used_at_build_time_only(docker_engine):
    task = python_task()
    sb = opened("docker", task)  # building it pip-installed pytest from PyPI over HTTPS
    try:
        r = sb.exec(
            "pytest --version; ls /run/secrets/t1-ca.crt; env | grep -c -e SSL_CERT -e PIP_CERT"
        )
        assert "pytest 8.3.5" in r.stdout + r.stderr
        assert "No such file" in r.stderr
        assert r.stdout.strip().endswith("0")
    finally:
        sb.stop()


def test_https_in_builds_trusts_the_host_bundle_by_default(docker_engine, monkeypatch):
    """The host's CA bundle reaches RUN steps even when no variable names it."""
    if not _internet_reachable():
        pytest.skip("this machine has no route to deb.debian.org")
    import uuid

    base = opened("docker", python_task())  # the image with python3, as a FROM
    base.stop()
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("T1_BUILD_CA_BUNDLE", raising=False)
    dockerfile = (
        f'FROM {base.image}\n# {uuid.uuid4().hex}\nRUN python3 -c "import urllib.request as u; '
        "u.urlopen('https://pypi.org/simple/iniconfig/', timeout=20)\" && echo ok > /https.txt\n"
    )
    task = make_task(
        "https", environment=EnvironmentSpec(files={"Dockerfile": dockerfile.encode()})
    )
    sb = opened("docker", task)
    try:
        assert sb.exec("cat /https.txt").stdout == "ok\n"
    finally:
        sb.stop()
        sb.client.images.remove(sb.image, force=True)


# -- limits ------------------------------------------------------------------------------
def test_memory_exhaustion_is_out_of_memory(docker_engine):
    limits = Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=96, pids=64)
    hog = "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo ${#x}"
    r = run_trial(make_task(limits=limits), CommandAgent(hog), backend="docker")
    assert r.failure_mode == FailureMode.OUT_OF_MEMORY, r.failure_detail


def test_fork_bomb_is_contained_and_the_verifier_still_runs(docker_engine):
    limits = Limits(agent_timeout_s=5, verifier_timeout_s=20, memory_mb=256, pids=64)
    task = make_task(limits=limits)
    sb = opened("docker", task)
    try:
        t0 = time.monotonic()
        r = sb.session().run(":(){ :|:& };:; sleep 30", timeout_s=5)
        assert r.timed_out and time.monotonic() - t0 < 30
        run, report = run_verifier(sb, task)  # the bomb's processes die with the agent phase
        assert report.total == 1 and run.result.exit_code == 0, run.result
    finally:
        sb.stop()


def test_timeout_and_output_limit(docker_engine):
    limits = Limits(agent_timeout_s=2, verifier_timeout_s=20, output_bytes=10_000)
    t0 = time.monotonic()
    slow = run_trial(make_task(limits=limits), CommandAgent("sleep 1000"), "docker")
    assert time.monotonic() - t0 < 15
    assert slow.failure_mode == FailureMode.AGENT_TIMEOUT
    loud = run_trial(make_task(limits=limits), CommandAgent("yes"), "docker")
    assert loud.failure_mode == FailureMode.OUTPUT_LIMIT
    sb = opened("docker", make_task(limits=limits))
    try:
        r = sb.exec("yes", timeout_s=10)
        assert r.output_truncated and len(r.stdout) == 10_000 and r.duration_s < 5
        r = sb.exec("sleep 100 & sleep 100", timeout_s=1)
        assert r.timed_out and r.duration_s < 5
        left = sb.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
        assert "sleep 100" not in left.stdout
    finally:
        sb.stop()


# -- the agent's shell -------------------------------------------------------------------
def test_shell_keeps_cwd_exports_and_background_processes(docker_engine, backend):
    task = (
        python_task()
        if backend == "docker"
        else make_task(environment=EnvironmentSpec(requires=["python3"]))
    )
    sb = opened(backend, task)
    try:
        s = sb.session()
        assert s.run("mkdir -p /tmp/site && cd /tmp/site && echo hi > index.html").exit_code == 0
        assert s.run("export T1_MARK='a b'; python3 -m http.server 8765 >/dev/null 2>&1 &").ok
        r = s.run(
            'for i in $(seq 50); do python3 -c "import urllib.request as u; '
            "print(u.urlopen('http://127.0.0.1:8765/index.html').read().decode().strip())\" "
            '2>/dev/null && break; sleep 0.1; done; pwd; echo "$T1_MARK"',
            timeout_s=20,
        )
        assert r.stdout.split("\n")[:3] == ["hi", "/tmp/site", "a b"], r.stdout
        assert s.run("false").exit_code == 1
        multi = s.run("for i in 1 2; do echo $i; done\ncat <<EOF\nheredoc\nEOF")
        assert multi.stdout == "1\n2\nheredoc\n"
    finally:
        sb.stop()


def test_shell_timeout_interrupts_the_command_not_the_shell(docker_engine, backend):
    sb = opened(backend, make_task())
    try:
        s = sb.session()
        s.run("cd /tmp; sleep 300 &")
        t0 = time.monotonic()
        r = s.run("echo started; sleep 100", timeout_s=1)
        assert r.timed_out and "started" in r.stdout and time.monotonic() - t0 < 10
        after = s.run("pwd; jobs | grep -c 'sleep 300'")
        assert after.stdout.split() == ["/tmp", "1"]
        big = s.run("echo " + "x" * 20_000 + " | wc -c")  # longer than a terminal line
        assert big.stdout.strip() == "20001"
    finally:
        sb.stop()


def test_a_shell_that_exits_is_replaced(backend):
    """On both backends: `exit` returns the shell's status and the next command gets a fresh
    shell in the task's working directory."""
    sb = opened(backend, make_task())
    try:
        s = sb.session()
        s.run("cd /tmp")
        assert s.run("exit 3").exit_code == 3
        assert s.run("echo again; pwd").stdout.split() == ["again", sb.workdir]
    finally:
        sb.stop()


def test_keys_reach_an_interactive_program(docker_engine, backend):
    sb = opened(backend, python_task() if backend == "docker" else make_task())
    try:
        s = sb.session()
        s.send_keys('read -r answer; echo "got [$answer]"\n')
        s.send_keys("forty two\n")
        assert "got [forty two]" in _read_until(s, "got [")
        s.send_keys("python3 -q\n")
        s.send_keys("print(6 * 7)\n")
        assert "42" in _read_until(s, "42")
        s.send_keys("exit()\n")
        for _ in range(50):  # keys typed while the REPL still runs would go to the REPL
            procs = sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
            if "python3 -q" not in procs:
                break
            time.sleep(0.1)
        # what the terminal showed since the last read (the REPL's last prompt) comes first
        assert s.run("echo back-in-bash", timeout_s=10).stdout.endswith("back-in-bash\n")
    finally:
        sb.stop()


def _read_until(session, text: str, wait_s: float = 10.0) -> str:
    seen, deadline = "", time.monotonic() + wait_s
    while text not in seen and time.monotonic() < deadline:
        seen += session.read(wait_s=0.2)
    return seen


def test_two_sandboxes_listen_on_the_same_port(docker_engine):
    a, b = opened("docker", python_task()), opened("docker", python_task())
    try:
        for sb, word in ((a, "alpha"), (b, "beta")):
            s = sb.session()
            s.run(f"mkdir -p /tmp/w && echo {word} > /tmp/w/i && cd /tmp/w")
            assert s.run("python3 -m http.server 8000 >/dev/null 2>&1 &").ok
        for sb, word in ((a, "alpha"), (b, "beta")):
            sb.exec(WAIT_FOR_PORT.format(port=8000))
            got = sb.exec(
                'python3 -c "import urllib.request as u; '
                "print(u.urlopen('http://127.0.0.1:8000/i').read().decode())\""
            )
            assert got.stdout.strip() == word
    finally:
        a.stop()
        b.stop()


# -- the verifier --------------------------------------------------------------------------
PASSING_CTRF = (
    b'{"results":{"tool":{"name":"x"},"tests":[{"name":"exists /app/done","status":"passed",'
    b'"duration":0}]}}'
)
PASSING_JUNIT = b'<testsuite name="x"><testcase classname="c" name="exists"/></testsuite>'
FORGED = {
    "ctrf.json": PASSING_CTRF,
    "junit.xml": PASSING_JUNIT,
    "results.xml": PASSING_JUNIT,
    "report.xml": PASSING_JUNIT,
    "reward.txt": b"1\n",
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_report_in_the_report_dir_is_never_read(backend, name):
    task = make_task("forged")
    sb = opened(backend, task)
    try:
        sb.upload({name: FORGED[name]}, "/logs/verifier")
        sb.session().run(
            f"cp /logs/verifier/{name} /tmp/{name}; (sleep 0.5; cp /tmp/{name} /logs/verifier/) &"
        )
        run, report = run_verifier(sb, task)
        assert not rewarded(run, report)
        assert (report.passed, report.total) == (0, 1)
    finally:
        sb.stop()


def test_report_dir_and_tests_start_empty_and_fresh(backend):
    task = make_task("fresh")
    listing = b"#!/bin/bash\nls -A /logs/verifier; ls -A /tests; "
    task = task.model_copy(
        update={"verifier": task.verifier | {"test.sh": listing + task.verifier["test.sh"][12:]}}
    )
    sb = opened(backend, task)
    try:
        sb.session().run(
            "mkdir -p /tests && echo planted > /tests/conftest.py; "
            "echo planted > /logs/verifier/extra.txt; touch /app/done"
        )
        run, report = run_verifier(sb, task)
        listed = run.result.stdout.split()
        assert "conftest.py" not in listed and "extra.txt" not in listed  # neither plant
        assert {"expect", "test.sh"} <= set(listed)
        assert "extra.txt" not in run.files and "ctrf.json" in run.files
        assert (report.passed, report.total) == (1, 1)
    finally:
        sb.stop()


VIEW_PROBE = (
    "for p in /app/done /etc/myapp.conf /usr/local/bin/mytool /root/notes; do "
    '[ -e $p ] && echo "seen $p" || echo "gone $p"; done; '
    'echo "pytest.ini=[$(cat /pytest.ini)]"; cat /usr/bin/env | head -c 2 | od -c | head -1; '
    "stat -c '%n %u %a' /app /app/done /app/image.txt /app/rootsh"
)


@pytest.mark.parametrize("declared", [False, True], ids=["default", "declared"])
def test_the_verifier_sees_the_outputs_as_data_and_the_image_elsewhere(backend, declared):
    """The judge's root is the image's; the agent's outputs (the working directory, and the
    paths a task declares) are carried in, owned by the agent's uid where the agent wrote
    them, never setuid."""
    outputs = ["/app", "/etc/myapp.conf", "/root"] if declared else []
    env = EnvironmentSpec(files={"app/image.txt": b"from the image\n"})
    task = make_task("view", environment=env).model_copy(
        update={"outputs": outputs, "trusted_paths": ["/usr/local"] if declared else []}
    )
    sb = opened(backend, task)
    try:
        r = sb.session().run(
            "touch /app/done; echo x > /etc/myapp.conf; echo n > /root/notes; "
            "printf '#!/bin/sh\\n' > /usr/local/bin/mytool; chmod +x /usr/local/bin/mytool; "
            "printf '[pytest]\\naddopts = -p evil\\n' > /pytest.ini; "
            "printf '#!/bin/sh\\necho forged\\n' > /usr/bin/env; "
            "cp /bin/bash /app/rootsh; chmod 4755 /app/rootsh"
        )
        assert r.exit_code == 0, r.stdout
        run = sb.verify(verifier_spec_for(sb, task, VIEW_PROBE, timeout_s=30))
        out = run.result.stdout
        assert "seen /app/done" in out, out
        for path in ("/etc/myapp.conf", "/root/notes", "/usr/local/bin/mytool"):
            assert ("seen " if declared else "gone ") + path in out, out
        assert "pytest.ini=[]" in out  # never an output
        assert "177   E" in out  # the image's /usr/bin/env (ELF), not the agent's script
        owners = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith("/app"))
        assert owners["/app"] == "64999 755" and owners["/app/done"].startswith("64999 ")
        assert owners["/app/image.txt"].startswith("0 ")  # the image's file, untouched
        assert owners["/app/rootsh"] == "64999 755", owners  # no setuid bit carried
    finally:
        sb.stop()


def test_hard_links_the_agent_made_stay_links_for_the_verifier(backend):
    """A snapshot image as the verifier's lower layer broke this: a write through one name
    copied that name up alone (the seed sa-dedupe-hardlinks failed its oracle on docker)."""
    sb = opened(backend, make_task("links"))
    try:
        assert sb.session().run("echo a > /app/x && ln /app/x /app/y").exit_code == 0
        run = sb.verify(verifier_spec_for(sb, make_task("links"), "echo b >> /app/x; cat /app/y"))
        assert run.result.stdout == "a\nb\n"
    finally:
        sb.stop()


def test_the_verifier_sees_the_link_counts_the_agent_left(backend):
    """Carrying a file by a hard link from the agent's layer doubled its link count for the
    verifier (a file the agent wrote: 2, a pair it linked: 4): the seed sa-dedupe-hardlinks,
    whose tests check that unique files stay unlinked, failed every rerun that touched them."""
    sb = opened(backend, make_task("nlink"))
    try:
        made = "echo u > /app/u && echo a > /app/x && ln /app/x /app/y && touch /app/image.txt"
        assert sb.session().run(made).exit_code == 0
        probe = "stat -c '%n %h' /app/u /app/x /app/y /app/image.txt"
        for _ in range(2):  # the outputs carried again to a second verifier, as they were
            run = sb.verify(verifier_spec_for(sb, make_task("nlink"), probe))
            assert run.result.stdout.split("\n")[:4] == [
                "/app/u 1", "/app/x 2", "/app/y 2", "/app/image.txt 1"
            ], run.result.stdout  # fmt: skip
        if backend == "local":  # the agent's layer whole again (docker stops its container)
            assert sb.exec("cat /app/u /app/y").stdout == "u\na\n"
    finally:
        sb.stop()


SHADOWS = [("/usr/local/bin", "pytest"), ("/bin", "sh"), ("/usr/bin", "python3.11")]


@pytest.mark.parametrize(("directory", "name"), SHADOWS, ids=["/".join(s) for s in SHADOWS])
def test_a_shadowed_interpreter_or_runner_is_never_rewarded(docker_engine, directory, name):
    task = python_task()
    sb = opened("docker", task)
    try:
        fake = (
            "#!/bin/sh\nmkdir -p /logs/verifier; printf '%s' '"
            + PASSING_JUNIT.decode().replace("exists", "test_done")
            + "' > /logs/verifier/junit.xml; exit 0\n"
        )
        sb.upload({name: fake.encode()}, directory, mode=0o755)
        run, report = run_verifier(sb, task)
        assert not rewarded(run, report) and report.total == 2  # the image's pytest judged
    finally:
        sb.stop()


def test_no_program_of_the_snapshot_runs_beside_the_verifier(docker_engine):
    task = make_task("idle")
    sb = opened("docker", task)
    try:
        forger = "#!/bin/sh\nwhile :; do printf '%s' '" + PASSING_CTRF.decode() + "' > "
        forger += "/logs/verifier/ctrf.json 2>/dev/null; done\n"
        for directory in ("/usr/bin", "/usr/local/bin"):
            sb.upload({"sleep": forger.encode()}, directory, mode=0o755)
        run, report = run_verifier(sb, task)
        assert (report.passed, report.total) == (0, 1), run.files
    finally:
        sb.stop()


PYTEST_HOOK = (
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    rep = outcome.get_result()\n"
    "    rep.outcome = 'passed'\n"
)
SITE = "/usr/local/lib/python3.11/dist-packages"
HOOKS = {
    "root-conftest": {"/conftest.py": PYTEST_HOOK},
    "root-pytest-ini": {
        "/pytest.ini": "[pytest]\naddopts = -p forgeplug\n",
        f"{SITE}/forgeplug.py": PYTEST_HOOK,
    },
    "plugin-entry-point": {
        f"{SITE}/forgeplug.py": PYTEST_HOOK,
        f"{SITE}/forgeplug-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: forgeplug\n"
        "Version: 1.0\n",
        f"{SITE}/forgeplug-1.0.dist-info/entry_points.txt": "[pytest11]\nforge = forgeplug\n",
    },
    "pth-file": {
        f"{SITE}/zz-forge.pth": "import forgeplug_pth\n",
        f"{SITE}/forgeplug_pth.py": "import sys\n",
    },
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_pytest_hooks_planted_by_the_agent_never_reach_the_judge(docker_engine, hook):
    task = python_task()
    sb = opened("docker", task)
    try:
        for path, text in HOOKS[hook].items():
            directory, _, name = path.rpartition("/")
            sb.upload({name: text.encode()}, directory or "/")
        run, report = run_verifier(sb, task)
        assert not rewarded(run, report) and report.total == 2, run.result.stdout[-2000:]
    finally:
        sb.stop()


def test_legitimate_installs_and_work_files_are_judged(docker_engine):
    task = python_task()
    sb = opened("docker", task)
    try:
        r = sb.session().run(
            f"mkdir -p {SITE}/mylib && echo 'X = 1' > {SITE}/mylib/__init__.py && "
            "printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/mytool && "
            "chmod +x /usr/local/bin/mytool && "
            "printf '[pytest]\\n' > /srv/job/pytest.ini && "
            "echo 'import os' > /srv/job/conftest.py && "
            "python3 -c 'import mylib' && echo ok > /srv/job/done",
            timeout_s=30,
        )
        assert r.exit_code == 0, r.stdout
        run, report = run_verifier(sb, task)
        assert rewarded(run, report), run.result.stdout[-2000:]
    finally:
        sb.stop()


def test_agent_processes_are_killed_unless_kept(docker_engine):
    task = python_task()
    check = {
        "test.sh": b'#!/bin/bash\npython3 -c "import urllib.request as u; '
        b"u.urlopen('http://127.0.0.1:8766/', timeout=3)\" && echo 1 > /logs/verifier/reward.txt "
        b"|| echo 0 > /logs/verifier/reward.txt\n"
    }
    task = task.model_copy(update={"verifier": check})
    for keep, expected in ((True, 1.0), (False, 0.0)):
        sb = opened("docker", task)
        try:
            s = sb.session()
            s.run("cd /tmp && python3 -m http.server 8766 >/dev/null 2>&1 &")
            s.run(WAIT_FOR_PORT.format(port=8766))
            run, report = run_verifier(sb, task, keep_agent_processes=keep)
            assert report.reward == expected, (keep, run.result)
        finally:
            sb.stop()


def test_stop_removes_every_engine_object(docker_engine):
    import docker

    task = make_task("cleanup")
    sb = opened("docker", task)
    sb.session().run("touch /app/done")
    run, _ = run_verifier(sb, task)
    sb.stop()
    sb.stop()  # idempotent
    client = docker.from_env()
    label = {"label": f"t1-forge.sandbox={sb.id}"}
    assert client.containers.list(all=True, filters=label) == []
    assert [v.name for v in client.volumes.list() if v.name.startswith(sb.id)] == []
    assert [i for i in client.images.list() if any(sb.id in t for t in i.tags)] == []


# -- network -----------------------------------------------------------------------------
def _probe(sb: Sandbox, targets: list[str]) -> dict[str, bool]:
    """Which host:port targets accept a TCP connection from inside the sandbox (bash only)."""
    script = "; ".join(
        f"(exec 3<>/dev/tcp/{t.replace(':', '/')}) 2>/dev/null && echo 'open {t}' || echo shut"
        for t in targets
    )
    out = sb.exec(f'timeout 20 bash -c "{script}"', timeout_s=30).stdout
    return {t: f"open {t}" in out for t in targets}


def _host_targets(port: int) -> list[str]:
    from sandbox.egress import host_addresses

    return [f"127.0.0.1:{port}", f"10.0.2.2:{port}"] + [f"{a}:{port}" for a in host_addresses()]


def _internet_reachable() -> bool:
    try:
        socket.create_connection(("deb.debian.org", 80), timeout=5).close()
        return True
    except OSError:
        return False


def test_no_network_reaches_nothing(docker_engine, host_server):
    sb = opened("docker", make_task("nonet"))
    try:
        seen = _probe(sb, _host_targets(host_server) + ["deb.debian.org:80"])
        assert not any(seen.values()), seen
        assert sb.exec("ls /sys/class/net").stdout.split() == ["lo"]
    finally:
        sb.stop()


def test_internet_reaches_out_but_not_the_host(docker_engine, host_server):
    if not _internet_reachable():
        pytest.skip("this machine has no route to deb.debian.org")
    socket.create_connection(("127.0.0.1", host_server), timeout=5).close()  # the server is up
    task = make_task("net", environment=EnvironmentSpec(allow_network=True))
    sb = opened("docker", task)
    try:
        seen = _probe(sb, _host_targets(host_server) + ["deb.debian.org:80"])
        assert seen.pop("deb.debian.org:80"), "egress to the internet is broken"
        assert not any(seen.values()), f"host reachable: {seen}"
    finally:
        sb.stop()


def test_allowlist_reaches_only_the_allowed_hosts(docker_engine, host_server):
    if not _internet_reachable():
        pytest.skip("this machine has no route to deb.debian.org")
    from sandbox.docker import DockerSandbox
    from sandbox.docker_api import docker_client
    from sandbox.docker_build import build_image, image_config
    from sandbox.docker_hosts import engine_site

    client = docker_client()
    task = make_task("allow")
    image = build_image(client, task, engine_site(client))
    seen = {}
    for allowed in (("deb.debian.org",), ("192.0.2.123",)):
        policy = NetworkPolicy(NetworkMode.ALLOWLIST, allowed)
        sb = DockerSandbox(client, image, task.limits, policy, image_config(client, image))
        sb.start()
        try:
            seen[allowed] = _probe(sb, _host_targets(host_server) + ["deb.debian.org:80"])
        finally:
            sb.stop()
    assert seen[("deb.debian.org",)].pop("deb.debian.org:80")
    assert not seen[("192.0.2.123",)].pop("deb.debian.org:80")  # reachable with internet
    assert not any(v for probe in seen.values() for v in probe.values()), seen


def test_slirp_host_alias_stays_closed_when_the_host_listens_on_loopback(docker_engine):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", HOST_PORT + 1), http.server.BaseHTTPRequestHandler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sb = opened("docker", make_task("alias", environment=EnvironmentSpec(allow_network=True)))
    try:
        seen = _probe(sb, [f"10.0.2.2:{HOST_PORT + 1}", f"127.0.0.1:{HOST_PORT + 1}"])
        assert not any(seen.values()), seen
    finally:
        sb.stop()
        server.shutdown()
        server.server_close()


def test_build_steps_reach_the_internet_but_not_the_host(docker_engine, host_server):
    if not _internet_reachable():
        pytest.skip("this machine has no route to deb.debian.org")
    import uuid

    targets = [t.replace(":", "/") for t in _host_targets(host_server)] + ["deb.debian.org/80"]
    dockerfile = (
        f'FROM debian:bookworm-slim\nSHELL ["/bin/bash", "-c"]\n'
        f"RUN : {uuid.uuid4().hex}; for t in {' '.join(targets)}; do (exec 3<>/dev/tcp/$t) 2>&1 "
        '&& echo "open $t" || echo "shut $t"; done > /probe.txt\n'
    )
    task = make_task(
        "buildnet", environment=EnvironmentSpec(files={"Dockerfile": dockerfile.encode()})
    )
    sb = opened("docker", task)
    try:
        probe = sb.exec("cat /probe.txt").stdout
    finally:
        sb.stop()
        sb.client.images.remove(sb.image, force=True)
    assert "open deb.debian.org/80" in probe, probe
    assert probe.count("shut ") == len(targets) - 1, probe


def test_the_build_nat_waits_for_its_namespace(tmp_path, monkeypatch):
    """The build NAT attaches to the holder's namespace, never to the host's: with an
    `unshare` slow to leave the host's namespace (as under load), the NAT still comes up in
    the build's namespace (lo up, tap0 there) and the host gains no tap device."""
    import os
    import shutil
    import subprocess

    from sandbox.egress import UserNat

    if shutil.which("slirp4netns") is None or os.geteuid() != 0:
        pytest.skip("needs root and slirp4netns")
    slow = tmp_path / "unshare"
    slow.write_text(f'#!/bin/sh\nsleep 0.5\nexec {shutil.which("unshare")} "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with UserNat(NetworkPolicy(NetworkMode.BUILD)) as nat:
        inside = subprocess.run(
            ["nsenter", f"--net={nat.netns}", "ip", "-br", "link"], capture_output=True, text=True
        ).stdout
        host = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert "tap0" in inside and "tap0" not in host, (inside, host)
    lo = next(line for line in inside.splitlines() if line.startswith("lo "))
    assert "DOWN" not in lo, inside


def test_the_sandbox_cannot_change_its_routes(docker_engine):
    sb = opened("docker", make_task("routes", environment=EnvironmentSpec(allow_network=True)))
    try:
        caps = sb.session().run("grep CapEff /proc/self/status").stdout.split()[-1]
        assert int(caps, 16) & (1 << 12) == 0  # no CAP_NET_ADMIN, so the routes stay
        assert int(sb.exec("grep CapEff /proc/self/status").stdout.split()[-1], 16) & (1 << 12) == 0
    finally:
        sb.stop()


def test_leftovers_are_removed_per_endpoint(docker_engine):
    """A crashed run's containers are found by label; another service's are left alone."""
    from sandbox.podman import remove_containers

    sb = opened("docker", make_task("leftover"))  # never stopped: a crashed runner
    label = {"label": f"t1-forge.sandbox={sb.id}"}
    assert remove_containers(sb.client, "unix:///elsewhere.sock") == 0
    assert len(sb.client.containers.list(all=True, filters=label)) == 1
    assert remove_containers(sb.client, docker_engine) >= 1
    assert sb.client.containers.list(all=True, filters=label) == []


def test_a_killed_agents_outputs_are_read_once_for_every_verifier_run(docker_engine, monkeypatch):
    """The engine's diff of a killed agent's container runs once per trial: the judge's
    reruns take what the first run read. A failed read is not kept: the judge's start retry
    reads again (a read the harness lost under load is not the agent's failure)."""
    from sandbox.base import SandboxError

    task = make_task("once")
    for fails in (False, True):
        sb = opened("docker", task)
        diffs: list[int] = []
        real = sb._changed_paths  # type: ignore[attr-defined]

        def diff(real=real, fails=fails, diffs=diffs) -> set[str]:
            diffs.append(1)
            if fails:
                raise RuntimeError("the engine did not answer")
            return real()

        monkeypatch.setattr(sb, "_changed_paths", diff)
        try:
            sb.exec("touch /app/done")
            for _ in range(2):
                if fails:
                    with pytest.raises(SandboxError, match="did not answer"):
                        run_verifier(sb, task)
                else:
                    run, report = run_verifier(sb, task)
                    assert rewarded(run, report), report  # the second run got the outputs too
        finally:
            sb.stop()
        assert len(diffs) == (2 if fails else 1), (fails, diffs)
