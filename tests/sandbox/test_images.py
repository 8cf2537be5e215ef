"""Real builds: the offline seed base (mmdebstrap) and RUN steps through the runtime's
StepRunner. Each Dockerfile instruction's semantics is pinned by a small task whose RUN steps
check it from inside the image: the build fails unless the instruction did what Docker does.

Needs root, mmdebstrap and the package registries (the base is built once per state dir);
skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import shutil
import uuid

import pytest

from sandbox.build import BuildStats, ImageBuildError, build_image
from tasks.environment import BASE_IMAGE
from tasks.model import EnvironmentSpec, Limits, Task

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


@pytest.fixture(scope="module")
def runner():
    from sandbox.local import LocalStepRunner

    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap not installed (make system-deps installs it)")
    return LocalStepRunner()


def task(dockerfile: str, files: dict[str, bytes] | None = None, tid: str = "img") -> Task:
    return Task(
        id=tid,
        name=tid,
        instruction="x\n",
        environment=EnvironmentSpec(files={"Dockerfile": dockerfile.encode(), **(files or {})}),
        verifier={"test.sh": b"#!/bin/bash\n"},
        limits=Limits(build_timeout_s=300),
    )


SEMANTICS = {
    "env_and_arg": 'ARG A=1\nENV B=two C=$A\nRUN test "$A" = 1 && test "$B" = two && '
    'test "$C" = 1\n',
    "workdir": 'WORKDIR /w\nWORKDIR sub\nRUN test "$(pwd)" = /w/sub\n',
    "user": 'RUN useradd -m app\nUSER app\nRUN test "$(id -un)" = app && test "$HOME" = '
    "/home/app\n",
    "shell": 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\nRUN [[ -n "$BASH_VERSION" ]]\n',
    "exec_form": 'RUN ["/bin/sh", "-c", "test \\"$0\\" = /bin/sh"]\n',
    "heredoc": "RUN cat > /tmp/h <<'EOF'\n$HOME\nEOF\nRUN test \"$(cat /tmp/h)\" = '$HOME'\n",
    "copy": 'COPY f /opt/\nCOPY d/ /data/\nRUN test "$(cat /opt/f)" = one && test -f /data/g '
    '&& test "$(stat -c %U /opt/f)" = root\n',
    "copy_chown": 'RUN useradd app\nCOPY --chown=app --chmod=600 f /o/f\nRUN test "$(stat -c '
    "'%U %a' /o/f)\" = 'app 600'\n",
    "rm_in_later_layer": "RUN echo x > /tmp/gone\nRUN rm /tmp/gone\nRUN test ! -e /tmp/gone\n",
    "build_only_ca": 'RUN test -n "$PIP_CERT"\n',
}


@pytest.mark.parametrize("name", sorted(SEMANTICS))
def test_instruction_semantics_hold_inside_the_image(runner, name: str) -> None:
    files = {"f": b"one", "d/g": b"g"}
    image = build_image(task(f"FROM {BASE_IMAGE}\n" + SEMANTICS[name], files, name), runner)
    assert "PIP_CERT" not in image.config.env


def test_failing_step_names_its_line_and_output(runner) -> None:
    with pytest.raises(ImageBuildError) as e:
        build_image(task(f"FROM {BASE_IMAGE}\nRUN true\nRUN echo boom >&2; exit 3\n"), runner)
    assert e.value.line == 3 and "boom" in e.value.output_tail


def test_second_build_of_a_shared_prefix_reuses_every_layer(runner) -> None:
    text = f"FROM {BASE_IMAGE}\nRUN echo $RANDOM > /r\nCOPY f /f\n"
    files = {"f": uuid.uuid4().hex.encode()}  # a prefix no earlier run has cached
    first, second = BuildStats(), BuildStats()
    build_image(task(text, files, "a"), runner, stats=first)
    build_image(task(text + "RUN test -s /r\n", files, "b"), runner, stats=second)
    assert second.reused == 2 and second.built == 1
