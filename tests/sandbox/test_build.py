"""The layer builder on a small hand-made root (no mmdebstrap, no RUN): COPY/ADD/WORKDIR
semantics written into layers, the layer cache, the stack cap, and the typed build errors.

RUN steps are exercised through `RecordingRunner`, a fake: it does not execute anything, it
records what the builder asked for and writes what a test tells it to into the new layer.
The real runner (the runtime's) is exercised in test_images.py.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from sandbox import bases, build
from sandbox.base import ExecResult, NetworkMode, NetworkPolicy
from sandbox.build import BuildFailure, BuildStats, ImageBuildError, build_image
from sandbox.idmap import host_id
from sandbox.layer_cache import release
from sandbox.layerfs import OPAQUE, ImageView, flatten
from tasks.model import EnvironmentSpec, Limits, Task

TINY_TABLE = """
[recipes.tiny]
suite = "tiny-test-root"

[[images]]
pattern = "tiny:*"
recipe = "tiny"
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private state dir whose `tiny:*` base is a hand-made root (merged /usr, passwd)."""
    import sandbox.local

    monkeypatch.setattr(sandbox.local, "STATE_DIR", tmp_path / "state")
    table = tmp_path / "bases.toml"
    table.write_text(TINY_TABLE)
    monkeypatch.setenv(bases.USER_TABLE_ENV, str(table))
    root = bases.base_dir(bases.lookup("tiny:1").recipe)
    for d in ("usr/bin", "etc", "tmp", "srv/data"):
        (root / d).mkdir(parents=True)
    (root / "tmp").chmod(0o1777)
    (root / "srv").chmod(0o750)
    os.symlink("usr/bin", root / "bin")
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n"
    )
    (root / "etc/group").write_text("root:x:0:\napp:x:1001:\nstaff:x:50:\n")
    (root / "srv/data/keep").write_text("base\n")
    yield tmp_path / "state"
    release(tmp_path / "state" / "l")  # the builds' hold on this cache


def task(dockerfile: str, files: dict[str, bytes] | None = None, tid: str = "t") -> Task:
    env_files = {"Dockerfile": dockerfile.encode(), **(files or {})}
    return Task(
        id=tid,
        name=tid,
        instruction="x\n",
        environment=EnvironmentSpec(files=env_files),
        verifier={"test.sh": b"#!/bin/bash\n"},
        limits=Limits(build_timeout_s=60),
    )


class RecordingRunner:
    """FAKE StepRunner: executes nothing. Records each call; writes `writes` into `upper`
    and returns `result`. Used only to pin what the builder hands the runtime."""

    def __init__(self, result: ExecResult | None = None, writes: dict[str, bytes] | None = None):
        self.calls: list[dict] = []
        self.result = result or ExecResult(0, "", "", 0.01)
        self.writes = writes or {}

    def run(
        self,
        layers: Sequence[Path],
        upper: Path,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        user: str,
        network: NetworkPolicy,
        timeout_s: float,
        disk_mb: int,
    ) -> ExecResult:
        self.calls.append(dict(layers=list(layers), argv=list(argv), env=dict(env), cwd=cwd,
                               user=user, network=network, timeout_s=timeout_s,
                               disk_mb=disk_mb))  # fmt: skip
        for rel, data in self.writes.items():
            (upper / rel).parent.mkdir(parents=True, exist_ok=True)
            (upper / rel).write_bytes(data)
        return self.result


def view(image) -> ImageView:
    return ImageView(image.layers)


def host(image, path: str) -> Path:
    p = view(image).entry(path)
    assert p is not None, f"{path} missing from the image"
    return p


# -- COPY / ADD ----------------------------------------------------------------------------------
def test_state_dir_is_narrowed_again_on_every_lookup(state: Path) -> None:
    """The private directories are checked on every call, not once per process: one widened
    after a first lookup (here: the layer cache) is narrowed by the next."""
    from sandbox.local import PRIVATE_DIRS, private_state_dir

    build_image(task("FROM tiny:1\nCOPY a /a\n", {"a": b"x"}), RecordingRunner())
    (state / "l").chmod(0o755)
    shutil.rmtree(state / "disks")  # (a build made its disk template there)
    assert private_state_dir() == state
    for name in PRIVATE_DIRS:
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o700, name


def test_copy_file_dir_wildcard_and_modes(state: Path) -> None:
    files = {"run.sh": b"echo\n", "tool": b"#!/bin/sh\n", "data/a.csv": b"1\n",
             "data/sub/b.csv": b"2\n", "x.txt": b"x", "y.txt": b"y"}  # fmt: skip
    img = build_image(
        task(
            "FROM tiny:1\nWORKDIR /w\nCOPY run.sh tool ./\nCOPY data/ /d/\nCOPY *.txt t/\n"
            "COPY x.txt /renamed\n",
            files,
        ),  # fmt: skip
        RecordingRunner(),
    )
    assert stat.S_IMODE(os.stat(host(img, "/w/run.sh")).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(host(img, "/w/tool")).st_mode) == 0o755
    assert host(img, "/d/a.csv").read_bytes() == b"1\n"  # a directory source copies contents
    assert host(img, "/d/sub/b.csv").read_bytes() == b"2\n"
    assert stat.S_IMODE(os.stat(host(img, "/d/a.csv")).st_mode) == 0o644
    assert view(img).listdir("/w/t") == ["x.txt", "y.txt"]
    assert host(img, "/renamed").read_bytes() == b"x"
    assert os.stat(host(img, "/d/a.csv")).st_uid == host_id(0)  # the image's root, shifted
    assert img.config.workdir == "/w"


def test_copy_through_an_image_symlink_lands_in_the_target_dir(state: Path) -> None:
    img = build_image(task("FROM tiny:1\nCOPY tool /bin/\n", {"tool": b"#!/bin/sh\n"}),
                      RecordingRunner())  # fmt: skip
    top = img.layers[-1]
    assert (top / "usr/bin/tool").is_file()
    assert not (top / "bin").exists()  # /bin stays the base's symlink
    assert view(img).resolve("/bin/tool") == "/usr/bin/tool"


def test_parent_dirs_keep_the_attributes_they_have_in_the_image(state: Path) -> None:
    img = build_image(task("FROM tiny:1\nCOPY f /tmp/f\nCOPY f /srv/new/f\n", {"f": b"1"}),
                      RecordingRunner())  # fmt: skip
    assert stat.S_IMODE(os.stat(img.layers[-2] / "tmp").st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(img.layers[-1] / "srv").st_mode) == 0o750
    assert view(img).listdir("/srv") == ["data", "new"]


def test_copy_chown_and_chmod(state: Path) -> None:
    img = build_image(
        task(
            "FROM tiny:1\nCOPY --chown=app:staff --chmod=0600 f /o/\nCOPY --chown=app g /o/\n",
            {"f": b"1", "g": b"2"},
        ),  # fmt: skip
        RecordingRunner(),
    )
    st = os.stat(host(img, "/o/f"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (host_id(1000), host_id(50), 0o600)
    st = os.stat(host(img, "/o/g"))
    assert (st.st_uid, st.st_gid) == (host_id(1000), host_id(1001))


def test_copy_unknown_user_is_a_copy_error(state: Path) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task("FROM tiny:1\nCOPY --chown=nobody f /o/\n", {"f": b"1"}),
                    RecordingRunner())  # fmt: skip
    assert e.value.kind == BuildFailure.COPY and e.value.line == 2


def test_dockerignore_and_whole_context(state: Path) -> None:
    files = {".dockerignore": b"*.log\n!keep.log\nsecret/\n", "a.log": b"", "keep.log": b"k",
             "secret/k": b"s", "src/m.py": b"print()"}  # fmt: skip
    img = build_image(task("FROM tiny:1\nCOPY . /ctx/\n", files), RecordingRunner())
    assert view(img).listdir("/ctx") == [".dockerignore", "keep.log", "src"]


def test_add_extracts_local_tar_archives_and_copies_other_files(state: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("pkg/a.txt", b"A"), ("pkg/bin/run", b"#!/bin/sh\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith("run") else 0o644
            tar.addfile(info, io.BytesIO(data))
    files = {"pkg.tar.gz": buf.getvalue(), "plain.gz": b"\x1f\x8bnot really"}
    img = build_image(task("FROM tiny:1\nADD pkg.tar.gz /opt/\nADD plain.gz /opt/\n", files),
                      RecordingRunner())  # fmt: skip
    assert host(img, "/opt/pkg/a.txt").read_bytes() == b"A"
    assert stat.S_IMODE(os.stat(host(img, "/opt/pkg/bin/run")).st_mode) == 0o755
    assert host(img, "/opt/plain.gz").read_bytes() == b"\x1f\x8bnot really"


def test_copy_heredoc_writes_the_file(state: Path) -> None:
    img = build_image(task("FROM tiny:1\nARG V=3\nCOPY <<EOF /etc/app.conf\nv=${V}\nEOF\n"),
                      RecordingRunner())  # fmt: skip
    assert host(img, "/etc/app.conf").read_text() == "v=3\n"


def test_copy_from_an_earlier_stage(state: Path) -> None:
    text = "FROM tiny:1 AS b\nCOPY f /out/f\nFROM tiny:1\nCOPY --from=b /out /app/\n"
    img = build_image(task(text, {"f": b"built"}), RecordingRunner())
    assert host(img, "/app/f").read_bytes() == b"built"


def test_missing_copy_source_names_the_line(state: Path) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task("FROM tiny:1\n\nCOPY nothere /x\n"), RecordingRunner())
    assert e.value.kind == BuildFailure.COPY and e.value.line == 3
    assert "nothere: not found in the build context" in str(e.value)


# -- WORKDIR, config -------------------------------------------------------------------------------
def test_workdir_creates_its_directory_only_when_missing(state: Path) -> None:
    img = build_image(task("FROM tiny:1\nWORKDIR /srv/data\nWORKDIR /new/dir\nUSER app\n"
                           "ENV A=1\n"), RecordingRunner())  # fmt: skip
    assert len(img.layers) == 2  # base + the layer that creates /new/dir
    assert view(img).is_dir("/new/dir")
    assert img.config.user == "app" and img.config.env["A"] == "1"


# -- errors ----------------------------------------------------------------------------------------
def test_unmapped_from_is_a_clear_typed_error(state: Path) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task("FROM scratchy/thing:9\nRUN true\n"), RecordingRunner())
    assert e.value.kind == BuildFailure.UNKNOWN_BASE and e.value.line == 1
    assert "FROM scratchy/thing:9: no offline base image" in str(e.value)


def test_unmapped_from_says_how_to_map_it(state: Path) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(
            task("FROM docker.io/library/nosuch@sha256:0ab1\nRUN true\n"), RecordingRunner()
        )
    message = str(e.value)
    assert "FROM docker.io/library/nosuch@sha256:0ab1: no offline base image" in message
    # the entry to add, under the normalized name, and the recipes it may name
    assert (
        '$T1_BASE_IMAGES names: [[images]] pattern = "nosuch:latest" recipe = "<one of ' in message
    )
    assert "debian-bookworm" in message and "docs/images.md" in message


def test_malformed_dockerfile_is_a_dockerfile_error(state: Path) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task("FROM tiny:1\nFETCH x\n"), RecordingRunner())
    assert e.value.kind == BuildFailure.DOCKERFILE and e.value.line == 2


# -- RUN through the StepRunner protocol (fake runner: see module docstring) -------------------
def test_run_gets_env_cwd_user_build_network_and_the_ca_layer(state: Path) -> None:
    runner = RecordingRunner(writes={"usr/bin/made": b"x"})
    img = build_image(
        task("FROM tiny:1\nARG V=1\nENV E=2\nWORKDIR /w\nUSER app\nRUN make it\n"), runner
    )
    (call,) = runner.calls
    assert call["argv"] == ["/bin/sh", "-c", "make it"]
    assert call["env"]["V"] == "1" and call["env"]["E"] == "2"
    assert call["env"]["HOME"] == "/home/app"
    assert call["cwd"] == "/w" and call["user"] == "app"
    assert call["network"] == NetworkPolicy(NetworkMode.BUILD)
    if Path(build.HOST_CA_BUNDLE).is_file():
        assert call["env"]["PIP_CERT"] == build.BUILD_CA
        assert (call["layers"][-1] / build.BUILD_CA.lstrip("/")).is_file()
        assert call["layers"][:-1] == list(img.layers[:-1])
    # The CA bundle and its variables are build-only: never in the image.
    assert all(build.BUILD_CA.lstrip("/").split("/")[0] not in os.listdir(p) for p in img.layers)
    assert "PIP_CERT" not in img.config.env
    assert host(img, "/usr/bin/made").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (ExecResult(2, "", "E: Unable to locate package nope\n", 1.0), BuildFailure.STEP_FAILED),
        (
            ExecResult(6, "curl: (6) Could not resolve host: github.com\n", "", 1.0),
            BuildFailure.NEEDS_INTERNET,
        ),  # fmt: skip
        (ExecResult(-9, "", "", 60.0, timed_out=True), BuildFailure.TIMEOUT),
    ],
)
def test_failed_run_is_typed_with_line_and_output(state: Path, result, kind) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task("FROM tiny:1\nRUN step one\n"), RecordingRunner(result))
    assert e.value.kind == kind and e.value.line == 2
    assert e.value.instruction == "RUN step one"
    assert (result.stdout + result.stderr)[-50:] in e.value.output_tail
    assert not [p for p in (state / "l").iterdir() if p.is_dir() and not p.name.startswith("ca-")]


# -- the cache ----------------------------------------------------------------------------------
def test_layers_are_reused_across_tasks_sharing_a_prefix(state: Path) -> None:
    prefix = "FROM tiny:1\nRUN apt-get update\nCOPY a /a\n"
    runner = RecordingRunner()
    first, second = BuildStats(), BuildStats()
    build_image(task(prefix + "COPY b /b\n", {"a": b"1", "b": b"2"}, "one"), runner, stats=first)
    img = build_image(task(prefix + "COPY c /c\n", {"a": b"1", "c": b"3"}, "two"), runner,
                      stats=second)  # fmt: skip
    assert (first.built, first.reused) == (3, 0)
    assert (second.built, second.reused) == (1, 2)
    assert len(runner.calls) == 1  # the shared RUN ran once
    again = BuildStats()
    build_image(task(prefix + "COPY c /c\n", {"a": b"1", "c": b"3"}, "two"), runner, stats=again)
    assert (again.built, again.reused) == (0, 3)
    assert host(img, "/c").read_bytes() == b"3"


def test_changed_copied_content_invalidates_that_layer_and_after(state: Path) -> None:
    runner = RecordingRunner()
    build_image(task("FROM tiny:1\nCOPY a /a\nRUN x\n", {"a": b"1"}), runner)
    stats = BuildStats()
    build_image(task("FROM tiny:1\nCOPY a /a\nRUN x\n", {"a": b"2"}), runner, stats=stats)
    assert (stats.built, stats.reused) == (2, 0) and len(runner.calls) == 2


def test_deep_stacks_are_flattened_and_stay_within_one_page(state: Path) -> None:
    n = build.MAX_LAYERS + 5
    files = {f"f{i}": str(i).encode() for i in range(n)}
    text = "FROM tiny:1\n" + "".join(f"COPY f{i} /many/\n" for i in range(n))
    img = build_image(task(text, files), RecordingRunner())
    assert len(img.layers) - 1 <= build.MAX_LAYERS
    assert view(img).listdir("/many") == sorted(files)
    assert len(":".join(str(p) for p in img.layers)) < 4096


def test_flatten_keeps_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    base, l1, l2, out = (tmp_path / n for n in ("base", "l1", "l2", "out"))
    for d in (base / "etc", base / "opt/old", l1 / "opt", l2):
        d.mkdir(parents=True)
    (base / "etc/gone").write_text("x")
    (base / "opt/old/f").write_text("x")
    (l1 / "etc").mkdir()
    os.mknod(l1 / "etc/gone", stat.S_IFCHR, os.makedev(0, 0))  # whiteout
    os.setxattr(l1 / "opt", OPAQUE, b"y")
    (l1 / "opt/new").write_text("n")
    (l2 / "added").write_text("a")
    out.mkdir()
    flatten([l1, l2], out)
    merged = ImageView([base, out])
    assert merged.entry("/etc/gone") is None
    assert merged.listdir("/opt") == ["new"]
    assert merged.listdir("/") == ["added", "etc", "opt"]
    assert ImageView([base, l1, l2]).listdir("/opt") == ["new"]


def test_build_rows_tell_the_truth_per_task(state: Path) -> None:
    from sandbox.build import build_row

    runner = RecordingRunner(ExecResult(100, "", "E: Unable to locate package nope\n", 0.5))
    ok = build_row(task("FROM tiny:1\nCOPY a /a\n", {"a": b"1"}, "ok"), RecordingRunner())
    bad_base = build_row(task("FROM nvidia/cuda:12\n", tid="cuda"), runner)
    bad_run = build_row(task("FROM tiny:1\n\nRUN apt-get install -y nope\n", tid="apt"), runner)
    assert ok.built and ok.failure is None and ok.layers_built == 1
    assert (bad_base.built, bad_base.failure, bad_base.line) == (
        False, BuildFailure.UNKNOWN_BASE, 1)  # fmt: skip
    assert (bad_run.failure, bad_run.line) == (BuildFailure.STEP_FAILED, 3)
    assert bad_run.reason == "RUN exited 100: E: Unable to locate package nope"
    assert "\n" not in bad_base.reason and "nvidia/cuda:12" in bad_base.reason


def test_seed_base_tasks_build_their_current_spec_others_their_dockerfile() -> None:
    from sandbox.build import dockerfile_of
    from tasks.corpus import load_seeds

    seed = load_seeds()[0]
    assert dockerfile_of(seed) == seed.environment.files["Dockerfile"].decode()
    env = seed.environment.model_copy(update={"setup": [*seed.environment.setup, "touch /x"]})
    child = seed.model_copy(update={"environment": env})  # a synthesized descendant
    assert "RUN bash -c 'touch /x'" in dockerfile_of(child)
    own = task("FROM debian:bookworm\nRUN true\n")
    assert dockerfile_of(own) == "FROM debian:bookworm\nRUN true\n"


def test_waiting_for_a_base_another_process_builds_is_not_build_time(state: Path) -> None:
    """Regression: on a fresh sandbox cache, seeds profiled together waited on the lock of
    the one building their base image, the wait counted against build_timeout_s, and 2 of 3
    timed out before their first RUN. Here another holder of the recipe's lock finishes the
    base after longer than the task's whole build budget."""
    import fcntl
    import threading
    import time

    root = bases.base_dir(bases.lookup("tiny:1").recipe)
    away = root.with_name(f"{root.name}.building")
    root.rename(away)
    lock = open(root.parent / f"{root.name}.lock", "w")  # noqa: SIM115 - closed by finish()
    fcntl.flock(lock, fcntl.LOCK_EX)

    def finish() -> None:  # the other build: done after 2.5 s, then lets go of the lock
        time.sleep(2.5)
        away.rename(root)
        lock.close()

    other = threading.Thread(target=finish)
    t = task("FROM tiny:1\nRUN true\n").model_copy(update={"limits": Limits(build_timeout_s=2)})
    runner = RecordingRunner()
    started = time.monotonic()  # before the other build's clock starts (it waits 2.5 s)
    other.start()
    build_image(t, runner)
    other.join()
    assert time.monotonic() - started >= 2.5  # it did wait for the other build
    (call,) = runner.calls
    assert call["timeout_s"] > 1.5  # the RUN step got (nearly) the whole budget


def test_a_base_waited_for_is_said_through_the_callers_log(state: Path) -> None:
    """Regression: a base image another process was building left `t1 synth` and the Dagster
    synthesis step silent for minutes (the builds ran in workers, with no log). Here another
    holder of the recipe's lock finishes the base; `prepare_bases` says it waited, once per
    base however many tasks start from it."""
    import fcntl
    import threading
    import time

    from sandbox.build import prepare_bases

    root = bases.base_dir(bases.lookup("tiny:1").recipe)
    away = root.with_name(f"{root.name}.building")
    root.rename(away)
    lock = open(root.parent / f"{root.name}.lock", "w")  # noqa: SIM115 - closed by finish()
    fcntl.flock(lock, fcntl.LOCK_EX)

    lines: list[str] = []

    def finish() -> None:  # done once waited on (or after 60 s), then lets go of the lock
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        away.rename(root)
        lock.close()

    other = threading.Thread(target=finish)
    other.start()
    prepare_bases([task("FROM tiny:1\n", tid="a"), task("FROM tiny:1\nRUN x\n", tid="b")],
                  log=lines.append)  # fmt: skip
    other.join()
    assert lines == [
        "waiting for base image tiny: another process is building it",
        lines[1],
    ], lines
    assert lines[1].startswith("base image tiny ready (waited ")
    assert root.is_dir()


def test_a_base_built_is_said_through_the_callers_log(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first use of a base on a fresh cache says it is building and when it is built.
    mmdebstrap is replaced by a `mkdir` of the target (the builder's bookkeeping is real)."""
    from sandbox.build import prepare_bases

    root = bases.base_dir(bases.lookup("tiny:1").recipe)
    import shutil

    shutil.rmtree(root)
    monkeypatch.setattr(bases, "mmdebstrap_argv", lambda _r, t: ["mkdir", "-p", f"{t}/etc"])
    lines: list[str] = []
    prepare_bases([task("FROM tiny:1\n")], log=lines.append)
    assert root.is_dir()
    assert len(lines) == 2, lines
    assert lines[0].startswith("building base image tiny (tiny-test-root) with mmdebstrap")
    assert lines[1].startswith("base image tiny built in ")
    lines.clear()
    prepare_bases([task("FROM tiny:1\n")], log=lines.append)
    assert lines == []  # had already: nothing to say
