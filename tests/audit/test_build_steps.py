"""The other starting states of a task's own build (`audit.build_steps`): the Dockerfile
without each RUN step of its final stage, last first, the rest kept as written."""

from __future__ import annotations

from audit.build_steps import dropped_steps, without_step
from tasks.environment import RENDERED_MARK
from tasks.model import Category, EnvironmentSpec, Task

DOCKERFILE = """\
FROM debian:bookworm-slim AS tools
RUN make-tools

FROM debian:bookworm-slim
RUN apt-get update && \\
    apt-get install -y python3
# the account
RUN useradd -m deploy
COPY app/ /app/
RUN <<EOF
printf 'x\\n' > /app/seed
EOF
WORKDIR /app
"""


def test_each_run_step_of_the_final_stage_is_dropped_alone_last_first():
    steps = dropped_steps(DOCKERFILE)
    assert [s.line for s in steps] == [10, 8, 5]  # not line 2: another stage's step
    heredoc, account, apt = steps
    assert "printf" not in heredoc.dockerfile and "EOF" not in heredoc.dockerfile
    assert heredoc.dockerfile.count("RUN") == 3 and "WORKDIR /app\n" in heredoc.dockerfile
    assert "useradd" not in account.dockerfile and "printf 'x" in account.dockerfile
    assert "apt-get" not in apt.dockerfile and "python3" not in apt.dockerfile
    assert apt.dockerfile.count("\n") == DOCKERFILE.count("\n") - 2
    assert "# the account\nRUN useradd" in apt.dockerfile
    assert account.mode == "built without line 8 (RUN useradd -m deploy)"


def test_at_most_the_limit_and_none_for_a_dockerfile_that_does_not_parse():
    assert [s.line for s in dropped_steps(DOCKERFILE, limit=1)] == [10]
    assert dropped_steps("FROM x\nBOGUS y\n") == []
    assert dropped_steps("FROM x\nCOPY a /a\n") == []


def test_a_rendered_dockerfile_is_built_as_the_variant_writes_it():
    from sandbox.build import dockerfile_of

    text = f"{RENDERED_MARK}\nFROM t1-forge/base:bookworm\nRUN useradd deploy\nRUN true\n"
    env = EnvironmentSpec(files={"Dockerfile": text.encode()})
    task = Task(id="t", name="t", instruction="do it", category=Category.SCRIPTING_AUTOMATION,
                environment=env)  # fmt: skip
    variant = without_step(task, dropped_steps(text)[1])
    assert dockerfile_of(variant) == "FROM t1-forge/base:bookworm\nRUN true\n"
    assert variant.environment_hash != task.environment_hash
