"""The agent's long-lived shell: state persists between commands as in a terminal."""

from __future__ import annotations

import pytest

from sandbox import get_backend, run_trial
from sandbox.session import ansi_c_quote, typed_lines
from tests.factories import make_task
from tests.sandbox.images import tools_task

pytestmark = pytest.mark.sandbox


WAIT_FOR_PORT = (
    "for i in $(seq 150); do curl -s -o /dev/null http://127.0.0.1:{port}/ && break;"
    " sleep 0.1; done"
)


@pytest.fixture(scope="module")
def sandbox():
    sb = get_backend("local").open(tools_task())
    yield sb
    sb.stop()


def test_server_started_in_one_command_is_used_in_the_next(sandbox):
    s = sandbox.session()
    r = s.run("cd /tmp && python3 -m http.server 8123 >/dev/null 2>&1 &", timeout_s=10)
    assert r.exit_code == 0
    s.run(WAIT_FOR_PORT.format(port=8123), timeout_s=20)  # python starts slowly under load
    r = s.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8123/", timeout_s=10)
    assert r.stdout.strip().endswith("200"), r


def test_cwd_and_exports_carry_over(sandbox):
    s = sandbox.session()
    s.run("mkdir -p /srv/work && cd /srv/work && export GREETING='hi there' && X=local")
    r = s.run('pwd; echo "$GREETING"; echo "$X"; bash -c \'echo "$GREETING"\'')
    assert r.stdout.split("\n")[:4] == ["/srv/work", "hi there", "local", "hi there"]


def test_exit_status_duration_and_timeout(sandbox):
    s = sandbox.session()
    r = s.run("exit_with() { return $1; }; exit_with 7")
    assert r.exit_code == 7 and not r.timed_out and r.duration_s < 5
    r = s.run("sleep 30", timeout_s=0.5)
    assert r.timed_out and 0.5 <= r.duration_s < 5
    r = s.run("echo still-here")  # the sleep was interrupted before this was typed
    assert r.stdout == "still-here\n" and r.exit_code == 0


def test_keystrokes_reach_an_interactive_program(sandbox):
    s = sandbox.session()
    r = s.run("python3 -q", timeout_s=1)
    assert r.timed_out  # the REPL waits for input
    s.send_keys("print(6 * 7)\n")
    assert "42" in s.read(wait_s=1.0)
    s.send_keys("exit()\n")
    s.read(wait_s=0.5)
    assert s.run("echo back").stdout == "back\n"


def test_a_command_that_turns_echo_on_does_not_echo_the_next(sandbox):
    """The runner keeps the terminal's echo off between commands (no `stty` of its own runs
    in the sandbox): the next command's typed lines never show up in its output."""
    s = sandbox.session()
    assert s.run("stty echo").exit_code == 0
    r = s.run("echo clean")
    assert r.stdout == "clean\n", r
    s.run("stty echo; sleep 30", timeout_s=0.5)  # interrupted with echo on
    assert s.run("echo still-clean").stdout == "still-clean\n"


def test_any_bytes_survive_typing(sandbox):
    s = sandbox.session()
    weird = "tab\there 'q' \"dq\" $HOME `x` \\back !bang ünï €\n" + "z" * 3000
    r = s.run(f"cat <<'EOF'\n{weird}\nEOF")
    assert r.stdout == weird + "\n"


def test_typed_lines_are_short_printable_ascii():
    lines = typed_lines("echo 'a\tb'\n" + "é" * 2000, "abc")
    assert all(len(line) < 1000 and line.isascii() and line.isprintable() for line in lines)
    assert ansi_c_quote("it's !") == "$'it\\x27s \\x21'"


def test_exit_ends_the_shell_and_a_new_one_starts(sandbox):
    s = sandbox.session()
    s.run("export OLD=1; sleep 1000 &")
    r = s.run("exit 3", timeout_s=5)
    assert r.exit_code == 3 and not r.timed_out
    r = s.run('echo "new:$OLD"; pgrep -c -x sleep || true')
    assert r.stdout == "new:\n0\n"  # a fresh shell: nothing of the old one survives


def test_two_sandboxes_listen_on_the_same_port():
    a = get_backend("local").open(tools_task())
    b = get_backend("local").open(tools_task())
    try:
        for sb, word in ((a, "alpha"), (b, "beta")):
            sb.session().run(
                f"mkdir -p /srv/{word} && echo {word} > /srv/{word}/id && cd /srv/{word} && "
                "python3 -m http.server 8080 >/dev/null 2>&1 &",
                timeout_s=10,
            )
            sb.session().run(WAIT_FOR_PORT.format(port=8080), timeout_s=20)
        for sb, word in ((a, "alpha"), (b, "beta")):
            r = sb.session().run("curl -s http://127.0.0.1:8080/id", timeout_s=10)
            assert r.stdout.strip() == word
    finally:
        a.stop()
        b.stop()


def test_oracle_and_nop_use_the_session():
    # the oracle's solve.sh starts a background job the next command relies on
    task = make_task(solve="(sleep 0.3; touch /app/done) &\nwait\n")
    assert run_trial(task, "oracle").resolved
    assert not run_trial(task, "nop").resolved
