"""`t1 sandbox prune`: the layer cache loses the layers no build used lately, with every layer
built on them, and nothing while a process uses the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.build import build_image
from sandbox.layer_cache import doomed_layers, hold, prune, release
from tests.sandbox.test_build import RecordingRunner, state, task  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400.0


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def _layer(root: Path, name: str, parent: str | None, days_unused: float) -> None:
    (root / name / "etc").mkdir(parents=True)
    (root / name / "etc" / "f").write_bytes(b"x" * 8192)
    (root / f"{name}.json").write_text(json.dumps({"key": name + "0" * 48, "parent": parent}))
    (root / f"{name}.lock").touch()
    _age(root / f"{name}.lock", days_unused)


def _prune_elsewhere(root: Path, days: float) -> dict:
    """`prune` in another process (one that never used the cache)."""
    code = (
        "import json, sys, dataclasses; from pathlib import Path; "
        "from sandbox.layer_cache import prune; "
        "r = prune(float(sys.argv[2]) * 86400, Path(sys.argv[1])); "
        "print(json.dumps(dataclasses.asdict(r)))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(root), str(days)], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


def test_a_doomed_layer_takes_every_layer_built_on_it():
    parents = {"a": None, "b": "a", "c": "b", "d": "c", "e": "a", "x": None}
    assert doomed_layers(parents, {"b"}) == {"b", "c", "d"}
    assert doomed_layers(parents, {"a"}) == {"a", "b", "c", "d", "e"}
    assert doomed_layers(parents, set()) == set()


def test_prune_removes_unused_layers_their_children_and_killed_builds(tmp_path):
    root = tmp_path / "l"
    a, b, c, d = (f"{i}" * 16 for i in "abcd")
    _layer(root, a, "f" * 64, days_unused=30)  # over a base: no parent in the cache
    _layer(root, b, a + "0" * 48, days_unused=0)  # used today, built on an unused one
    _layer(root, c, None, days_unused=0)
    _layer(root, d, c + "0" * 48, days_unused=6)
    (root / ".b-killed" / "up").mkdir(parents=True)
    r = prune(7 * DAY, root)
    assert sorted(r.removed) == [a, b] and r.kept == 2 and r.leftovers == 1
    assert r.freed_bytes >= 2 * 8192 and r.holders == []
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [".in-use", c, f"{c}.json", f"{c}.lock", d, f"{d}.json", f"{d}.lock"]
    )


def test_prune_does_nothing_while_a_process_uses_the_cache(state: Path) -> None:  # noqa: F811
    """A real build holds the cache: prune from another process refuses and names it; once
    the builder lets go, the layers the build made (aged) are removed."""
    first = build_image(task("FROM tiny:1\nCOPY a /a\nRUN make\n", {"a": b"x"}), RecordingRunner())
    root = state / "l"
    made = [layer.name for layer in first.layers[1:]]
    assert len(made) == 2 and all((root / name).is_dir() for name in made)
    for name in made:
        _age(root / f"{name}.lock", 30)
    try:
        refused = _prune_elsewhere(root, 7)
        assert refused["holders"] == [os.getpid()] and refused["removed"] == []
        assert all((root / name).is_dir() for name in made)
        with pytest.raises(RuntimeError, match="this process uses the layer cache"):
            prune(7 * DAY, root)
    finally:
        release(root)
    done = _prune_elsewhere(root, 7)
    assert sorted(done["removed"]) == sorted(made) and done["holders"] == []
    assert not any((root / name).exists() for name in made)


def test_a_reused_layer_is_stamped_and_survives(state: Path) -> None:  # noqa: F811
    dockerfile = "FROM tiny:1\nCOPY a /a\n"
    image = build_image(task(dockerfile, {"a": b"x"}), RecordingRunner())
    root, name = state / "l", image.layers[-1].name
    _age(root / f"{name}.lock", 30)
    build_image(task(dockerfile, {"a": b"x"}, tid="again"), RecordingRunner())
    assert time.time() - (root / f"{name}.lock").stat().st_mtime < DAY
    release(root)
    assert _prune_elsewhere(root, 7)["removed"] == []
    assert (root / name).is_dir()


def test_hold_waits_for_a_running_prune(tmp_path):
    """A process that starts using the cache while a prune runs waits for it to end."""
    import fcntl

    root = tmp_path / "l"
    root.mkdir()
    fd = os.open(root / ".in-use", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as prune holds it
    code = (
        "import sys; from pathlib import Path; from sandbox.layer_cache import hold; "
        "hold(Path(sys.argv[1])); print('held')"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(root)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(1.0)
        assert child.poll() is None, "hold did not wait for the prune"
    finally:
        os.close(fd)
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "held"
    hold(root)  # and in this process too, once free
    release(root)


def test_the_prune_command(tmp_path):
    state_dir = tmp_path / "state"
    root = state_dir / "l"
    name = "e" * 16
    _layer(root, name, None, days_unused=30)
    env = os.environ | {"T1_SANDBOX_STATE": str(state_dir)}

    def t1(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pipelines.cli", "sandbox", "prune", *args]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)

    hold(root)
    try:
        busy = t1("--unused-days", "7")
        assert busy.returncode == 1 and f"in use by pid(s) {os.getpid()}" in busy.stderr
    finally:
        release(root)
    kept = t1("--unused-days", "60")
    assert kept.returncode == 0 and "removed 0 layer(s)" in kept.stdout and (root / name).is_dir()
    gone = t1("--unused-days", "7")
    assert gone.returncode == 0 and "removed 1 layer(s)" in gone.stdout, gone.stdout
    assert not (root / name).exists()
