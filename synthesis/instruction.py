"""The instruction of a synthesized task, written last, as one statement of the whole workflow.

A task grown by k rewrites is one job in k + 1 stages: the seed's task (stage 1, its text kept
verbatim because it defines the core work exactly), then one stage per rewrite. Each rewrite
contributes a `Stage`: its family's phrasing of the new requirement, and the paths it reads
(`consumes`) and writes (`produces`). `compose_instruction` rewrites the WHOLE instruction from
the core and every stage each time a stage is added: a goal line naming every stage, the core,
then the later stages in order, each path an earlier stage produced marked with that stage, so
the text reads as one workflow whose steps build on each other (not as appended chores).

The LLM operator writes its own whole instruction instead (`Extension.instruction`, kept as
`Stage.instruction`); stages added after it compose on top of that text.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field


class Stage(BaseModel):
    """One rewrite's contribution to the workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    round: int = Field(ge=1)
    operator: str
    family: str
    title: str  # a short imperative phrase: "package the results"
    text: str  # the full requirement, one paragraph (may hold a fenced block), no heading
    consumes: tuple[str, ...] = ()  # absolute paths of earlier state the steps read or change
    produces: tuple[str, ...] = ()  # absolute paths the steps create
    # The whole instruction, when the rewrite wrote it itself (the LLM operator): later stages
    # compose on top of it as their core.
    instruction: str | None = None


def stages_to_json(stages: tuple[Stage, ...] | list[Stage]) -> str:
    return json.dumps([s.model_dump() for s in stages])


def stages_from_json(text: str | None) -> tuple[Stage, ...]:
    if not text:
        return ()
    return tuple(Stage.model_validate(s) for s in json.loads(text))


def dependency_depth(core_outputs: list[str], stages: list[Stage]) -> int:
    """Longest chain of stages each consuming what an earlier one produced (the core is 1).

    A stage that consumes nothing produced earlier starts a chain of its own (depth 1).
    """
    depth = {1: 1}
    made = {p: 1 for p in core_outputs}
    for i, s in enumerate(stages, start=2):
        before = [depth[k] for p in s.consumes if (k := _producer(p, made)) is not None] + [0]
        depth[i] = max(before) + 1
        for p in s.produces:
            made[p] = i
    return max(depth.values())


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text


def _producer(path: str, made: dict[str, int]) -> int | None:
    """The stage that made `path` or a directory above it."""
    while path and path != "/":
        if path in made:
            return made[path]
        path = path.rsplit("/", 1)[0]
    return None


def _mark_sources(
    text: str, stage_no: int, consumes: tuple[str, ...], made: dict[str, int], workdir: str
) -> str:
    """`path` -> `path` (from stage k) at its first mention (absolute, or relative to the
    workdir), for each consumed path an earlier stage made."""
    wd = workdir.rstrip("/") + "/"
    for p in consumes:
        k = _producer(p, made)
        if k is None or k >= stage_no:
            continue
        names = [p] + ([p[len(wd) :]] if p.startswith(wd) else [])
        for name in names:
            quoted = f"`{name}`"
            i = text.find(quoted)
            if i >= 0:
                j = i + len(quoted)
                text = f"{text[:j]} (from stage {k}){text[j:]}"
                break
    return text


_TITLE_END = re.compile(r"[.\s]+$")


def compose_instruction(
    core: str, core_title: str, core_outputs: list[str], stages: list[Stage], workdir: str = "/app"
) -> str:
    """The whole instruction of a task made of the core task and `stages` (see the module doc).

    With no stages the core instruction is returned unchanged. A stage that wrote the whole
    instruction itself becomes the core of the stages after it.
    """
    for i in range(len(stages) - 1, -1, -1):
        if stages[i].instruction:
            core, core_title = stages[i].instruction or core, stages[i].title
            core_outputs = [*core_outputs, *(p for s in stages[: i + 1] for p in s.produces)]
            stages = stages[i + 1 :]
            break
    if not stages:
        return core
    made: dict[str, int] = {p: 1 for p in core_outputs}
    titles = [_TITLE_END.sub("", core_title).strip() or "the core task"]
    body: list[str] = []
    for i, s in enumerate(stages, start=2):
        titles.append(s.title)
        text = _mark_sources(s.text.strip(), i, s.consumes, made, workdir)
        body.append(f"### Stage {i}: {_upper_first(s.title)}\n\n{text}")
        for p in s.produces:
            made[p] = i
    goal = ", then ".join(_lower_first(t) for t in titles)
    n = len(stages) + 1
    return (
        f"This job has {n} stages, each building on the results of the ones before it: "
        f"{goal}. Do them in order. The results of earlier stages must still meet their own "
        f"requirements when you finish: later stages read them, and they are checked.\n\n"
        f"### Stage 1: {_upper_first(titles[0])}\n\n{core.strip()}\n\n" + "\n\n".join(body) + "\n"
    )
