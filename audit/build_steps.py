"""Other starting states from the task's own build: the image built without one RUN step.

A nop run that passes an assertion may be passing a guard (a value to keep, a service to
leave running) or collecting work the image already did (the account the task asks for,
created by the Dockerfile). Where the data is declared, perturbing it tells them apart
(`audit.behaviour.worked_for_findings`); where the state is the system's, the build itself is
the data: built without the step that made it, a nop run fails the assertion while the
reference solution, doing the work, passes it; a precondition the solution relies on fails
for the solution too. The steps tried are the final stage's RUN steps, last first (state
setup comes late; the earlier layers stay cached), at most `MAX_DROPPED_STEPS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.dockerfile import DockerfileError, parse
from tasks.model import Task

MAX_DROPPED_STEPS = 3


@dataclass(frozen=True)
class DroppedStep:
    line: int  # first line of the RUN step in the Dockerfile
    text: str  # the step as written (continuations joined), for evidence
    dockerfile: str  # the Dockerfile without it

    @property
    def mode(self) -> str:
        return f"built without line {self.line} ({' '.join(self.text.split())[:60]})"


def dropped_steps(dockerfile: str, limit: int = MAX_DROPPED_STEPS) -> list[DroppedStep]:
    """The Dockerfile without each RUN step of its final stage, last step first, at most
    `limit`. A Dockerfile that does not parse has none (the build reports it)."""
    try:
        instructions = parse(dockerfile).instructions
    except DockerfileError:
        return []
    lines = dockerfile.splitlines(keepends=True)
    starts = [i.line for i in instructions] + [len(lines) + 1]
    last_from = max((k for k, i in enumerate(instructions) if i.keyword == "FROM"), default=0)
    out = []
    for k in range(len(instructions) - 1, last_from, -1):
        step = instructions[k]
        if step.keyword != "RUN":
            continue
        first, end = step.line - 1, starts[k + 1] - 1  # 0-based, end exclusive
        while end > first + 1 and _between(lines[end - 1]):  # the next step's comments stay
            end -= 1
        text = "".join(lines[:first] + lines[end:])
        out.append(DroppedStep(step.line, step.original or step.args, text))
        if len(out) == limit:
            break
    return out


def _between(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def without_step(task: Task, step: DroppedStep) -> Task:
    """`task` whose environment is built from `step.dockerfile`, as written on either backend
    (a rendered Dockerfile's mark is dropped with the step, so the spec is not rendered
    again over it)."""
    from tasks.environment import RENDERED_MARK

    text = step.dockerfile.removeprefix(RENDERED_MARK + "\n")
    files = {**task.environment.files, "Dockerfile": text.encode()}
    env = task.environment.model_copy(update={"files": files})
    return task.model_copy(update={"environment": env})
