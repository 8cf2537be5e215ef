"""The toolchain tamper rule (sandbox.tamper) on changes in many surface forms: what it flags
(replacing or shadowing the verifier's interpreter and test runner) and what it leaves alone
(an agent's ordinary work: new tools, packages, project files)."""

from __future__ import annotations

import pytest

from sandbox.tamper import Change, ChangeKind, tampered_paths

A, M, D = ChangeKind.ADDED, ChangeKind.MODIFIED, ChangeKind.DELETED
IMAGE = frozenset(
    {"bash", "sh", "dash", "env", "timeout", "sleep", "python3", "python3.11", "pytest"}
)
SITE = "/usr/local/lib/python3.11/dist-packages"
PLUGIN = "[pytest11]\nforge = forgeplug\n"

FLAGGED = [
    ("/usr/local/bin/python3", A),
    ("/usr/local/sbin/bash", A),
    ("/usr/bin/python3.11", M),
    ("/bin/bash", M),
    ("/usr/bin/sh", D),
    ("/usr/local/bin/timeout", A),
    ("/usr/bin/sleep", M),
    ("/opt/venv/bin/pytest", M),
    ("/usr/lib/python3.11/json/__init__.py", M),
    ("/usr/lib/python3.11/__pycache__/os.cpython-311.pyc", A),
    ("/usr/local/lib/python3.12/encodings/utf_8.py", M),
    (f"{SITE}/_pytest/main.py", M),
    (f"{SITE}/pytest/__init__.py", D),
    (f"{SITE}/pluggy/_hooks.py", M),
    (f"{SITE}/iniconfig/__init__.py", A),
    (f"{SITE}/pytest-8.3.5.dist-info/RECORD", M),
    ("/usr/lib/python3/dist-packages/py.py", A),
    ("/opt/venv/lib/python3.11/site-packages/sitecustomize.py", A),
    ("/usr/local/lib/python3.11/site-packages/usercustomize.py", A),
    (f"{SITE}/zz-forge.pth", A),
    (f"{SITE}/forgeplug-1.0.dist-info/entry_points.txt", A),
    ("/conftest.py", A),
    ("/pytest.ini", A),
    ("/.pytest.ini", A),
    ("/pyproject.toml", A),
    ("/tox.ini", A),
    ("/setup.cfg", M),
    ("/etc/ld.so.preload", A),
    ("/etc/python3.11/sitecustomize.py", M),
    ("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", M),
]
LEGITIMATE = [
    ("/usr/local/bin/jq", A),  # a new tool
    ("/usr/local/bin/python3.12", A),  # a new interpreter the image did not have
    ("/usr/local/bin/uv", A),  # not in the image either
    (f"{SITE}/requests/__init__.py", A),
    (f"{SITE}/pandas-2.2.0.dist-info/entry_points.txt", A),  # no pytest11 section
    ("/usr/lib/python3.11", M),  # only a parent of the change below
    ("/usr/lib/python3.11/dist-packages/numpy/__init__.py", A),
    ("/app/conftest.py", A),
    ("/app/pytest.ini", A),
    ("/srv/job/pyproject.toml", M),
    ("/etc/nginx/nginx.conf", M),
    ("/root/.bashrc", M),
    ("/tmp/bash", A),  # not on PATH
    ("/usr/local/bin", M),
]


def flagged(changes: list[tuple[str, ChangeKind]]) -> tuple[str, ...]:
    entry_points = {p: PLUGIN for p, _ in changes if "forgeplug" in p}
    entry_points |= {p: "[console_scripts]\nx = y\n" for p, _ in changes if "pandas" in p}
    return tampered_paths(
        [Change(p, k) for p, k in changes],
        path_dirs=["/opt/venv/bin", "/usr/local/bin", "/usr/bin"],
        image_commands=IMAGE,
        entry_points=entry_points,
    )


@pytest.mark.parametrize(("path", "kind"), FLAGGED, ids=[p for p, _ in FLAGGED])
def test_toolchain_changes_are_flagged(path, kind):
    assert flagged([(path, kind)]) == (path,)


@pytest.mark.parametrize(("path", "kind"), LEGITIMATE, ids=[p for p, _ in LEGITIMATE])
def test_ordinary_work_is_not_flagged(path, kind):
    assert flagged([(path, kind)]) == ()


def test_a_whole_diff_yields_exactly_the_toolchain_paths():
    changes = [*LEGITIMATE, *FLAGGED]
    assert set(flagged(changes)) == {p for p, _ in FLAGGED}


def test_a_shadow_needs_the_image_to_have_the_command():
    change = [Change("/usr/local/bin/pytest", A)]
    assert tampered_paths(change, image_commands=frozenset({"pytest"})) == (
        "/usr/local/bin/pytest",
    )
    assert tampered_paths(change, image_commands=frozenset()) == ()


def test_writes_in_the_verifiers_venv_are_tampering():
    """Where the verifier's view is a snapshot of the agent's container (a remote engine), the
    agent's writes under the verifier's own venv are visible: they are tampering."""
    from tasks.model import VERIFIER_VENV

    for kind in (ChangeKind.MODIFIED, ChangeKind.ADDED, ChangeKind.DELETED):
        assert tampered_paths([Change(VERIFIER_VENV + "/bin/pytest", kind)]) == (
            VERIFIER_VENV + "/bin/pytest",
        )
