"""Generated task families for measuring learning: varied parameters, several assertions each.

`fileops`: a short list of file operations in /app to carry out, one shell command each
(make a directory, write a word into a file, copy a data file, count its lines into a file,
delete a scratch file, make a script executable). Every name and word in an instruction is
drawn from a word list, so a policy must read the instruction and copy its parameters into
its commands: the held-out split uses words that never occur in a training instruction, so
memorizing training commands scores nothing there. Each operation has its own assertions, and
guard assertions check that files the task did not mention survive, so the dense reward (passing
assertions) moves with every operation done right, and deleting everything is not a shortcut.

`countdown`: a long-horizon family: the agent must run `./tick` until it prints `done`
(n >= 100 times, one command per turn); assertions check how far it got (quarter marks) and
that it stopped; nothing else. It exists to run PPO over trajectories of 100+ tool calls.

The verifier is plain bash (no interpreter to install) writing CTRF JSON, one entry per
assertion; the environment is a Dockerfile with the app files COPY'd in.
"""

from __future__ import annotations

import hashlib
import json
import random
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.environment import render_dockerfile
from tasks.model import Category, Difficulty, EnvironmentSpec, Limits, Task
from training.trajectories import Step, Trajectory

WORDS = (
    "act age all app art bad beat best bin build call check commit config current date dev "
    "dir dist email env example format gain git group heart here ice ignore install iron job "
    "json keep key keys lay lean lease ledger lib line lint load log logs mail main make man "
    "merge name new null one opt owner path pen per port print prod put python ran ref relay "
    "release report ring run service set shell sql stat status sum tar target test tests "
    "units usr webapp word work"
).split()
"""Words the tiny policy's tokenizer encodes as one token each: every parameter is one id to
copy from the instruction into the command."""


def word_split(word: str) -> str:
    """'train' or 'heldout' by a stable hash of the word (about one word in four held out)."""
    return "heldout" if hashlib.sha256(word.encode()).digest()[0] < 64 else "train"


@dataclass(frozen=True)
class Op:
    """One operation: its instruction line, reference command, and assertions (name, bash test)."""

    line: str
    command: str
    checks: tuple[tuple[str, str], ...]
    category: Category


OP_KINDS = ("mkdir", "touch", "delete", "chmod", "copy", "count")


def _op(kind: str, w: str, rng: random.Random, app: dict[str, bytes]) -> Op:
    """Operation `kind` on the word `w`; adds the files it needs to `app`."""
    if kind == "mkdir":
        return Op(
            f"Create the directory {w}.",
            f"mkdir -p {w}",
            ((f"dir_{w}_exists", f"[ -d /app/{w} ]"),),
            Category.SCRIPTING_AUTOMATION,
        )
    if kind == "touch":
        return Op(
            f"Create the empty file {w}.done.",
            f"touch {w}.done",
            ((f"{w}_done_exists", f"[ -f /app/{w}.done ]"),),
            Category.SCRIPTING_AUTOMATION,
        )
    if kind == "delete":
        app[f"{w}.tmp"] = b"scratch\n"
        return Op(
            f"Delete the file {w}.tmp.",
            f"rm -f {w}.tmp",
            ((f"{w}_tmp_gone", f"[ ! -e /app/{w}.tmp ]"),),
            Category.SYSTEM_ADMINISTRATION,
        )
    if kind == "chmod":
        app[f"tools/{w}"] = f"#!/bin/sh\necho {w}\n".encode()
        return Op(
            f"Make tools/{w} executable.",
            f"chmod +x tools/{w}",
            ((f"tools_{w}_executable", f"[ -x /app/tools/{w} ] && [ -f /app/tools/{w} ]"),),
            Category.SYSTEM_ADMINISTRATION,
        )
    if kind == "copy":
        app[f"data/{w}.txt"] = f"{w} {rng.randint(100, 999)}\n".encode()
        app["out/README"] = b"outputs\n"
        return Op(
            f"Copy data/{w}.txt into out.",
            f"cp data/{w}.txt out/",
            ((f"out_has_{w}", f"cmp -s /app/data/{w}.txt /app/out/{w}.txt"),),
            Category.DATA_PROCESSING,
        )
    if kind == "count":
        lines = rng.randint(3, 40)
        app[f"data/{w}.log"] = "".join(f"{w} {i}\n" for i in range(lines)).encode()
        return Op(
            f"Write the line count of data/{w}.log into {w}.count.",
            f"wc -l < data/{w}.log > {w}.count",
            ((f"{w}_count_is_{lines}", f'[ "$(tr -d " \\n" < /app/{w}.count)" = "{lines}" ]'),),
            Category.DATA_PROCESSING,
        )
    raise ValueError(f"unknown operation {kind!r}")


def fileops_task(index: int, split: str, seed: int, *, ops: int = 3) -> Task:
    """One `fileops` task: `ops` operations of distinct kinds, each on a distinct word of the
    `split` half of WORDS, plus a guard assertion that files the task did not name survive."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    rng = random.Random(f"fileops/{seed}/{split}/{index}")
    words = rng.sample([w for w in WORDS if word_split(w) == split], ops)
    app: dict[str, bytes] = {"README.txt": b"workspace\n", "notes/keep.txt": b"keep me\n"}
    plan = [_op(k, w, rng, app) for k, w in zip(rng.sample(OP_KINDS, ops), words, strict=True)]
    checks = [c for op in plan for c in op.checks]
    checks.append(("untouched_files_kept", "[ -f /app/README.txt ] && [ -f /app/notes/keep.txt ]"))
    lines = "\n".join(f"{i + 1}. {op.line}" for i, op in enumerate(plan))
    return _task(
        f"fileops-{split}-{index:04d}",
        f"File operations {index} ({split})",
        f"In /app:\n{lines}",
        plan[-1].category,
        app,
        checks,
        [op.command for op in plan],
        tags=["generated", "fileops", split],
    )


def countdown_task(index: int, ticks: int, seed: int) -> Task:
    """A `countdown` task: run ./tick `ticks` times (one command per turn) until it says done."""
    rng = random.Random(f"countdown/{seed}/{index}")
    name = rng.choice(WORDS)
    tick = (
        "#!/bin/sh\n"
        "n=$(cat /app/count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > /app/count\n"
        f'if [ "$n" -ge {ticks} ]; then echo done; else echo "{name} $(({ticks} - n)) left"; fi\n'
    )
    app = {"tick": tick.encode(), "count": b"0\n"}
    checks = [
        (f"reached_{q}_of_4", f'[ "$(cat /app/count)" -ge {ticks * q // 4} ]') for q in (1, 2, 3)
    ]
    checks.append(("reached_done", f'[ "$(cat /app/count)" -ge {ticks} ]'))
    checks.append(("stopped_at_done", f'[ "$(cat /app/count)" -le {ticks + 2} ]'))
    instruction = (
        f"Run ./tick in /app once per command until it prints done ({ticks} times), "
        "then answer without a tool call."
    )
    return _task(
        f"countdown-{ticks}-{index:04d}",
        f"Countdown {ticks} ({index})",
        instruction,
        Category.SCRIPTING_AUTOMATION,
        app,
        checks,
        ["./tick"] * ticks,
        tags=["generated", "countdown", "long-horizon"],
        agent_timeout_s=3600.0,
        executable={"tick"},
    )


def _task(
    task_id: str,
    name: str,
    instruction: str,
    category: Category,
    app: dict[str, bytes],
    checks: Sequence[tuple[str, str]],
    commands: Sequence[str],
    *,
    tags: list[str],
    agent_timeout_s: float = 300.0,
    executable: set[str] | None = None,
) -> Task:
    files = {f"app/{p}": b for p, b in app.items()}
    setup = [f"chmod +x /app/{p}" for p in sorted(executable or ()) if p in app]
    task = Task(
        id=task_id,
        name=name,
        instruction=instruction,
        category=category,
        difficulty=Difficulty.EASY,
        tags=tags,
        author="T1 Forge (generated)",
        limits=Limits(
            agent_timeout_s=agent_timeout_s, verifier_timeout_s=60.0, memory_mb=256, disk_mb=64
        ),
        environment=EnvironmentSpec(setup=setup, files=files, workdir="/app"),
        solution={"solve.sh": ("#!/bin/bash\ncd /app\n" + "\n".join(commands) + "\n").encode()},
        verifier={"test.sh": _verifier(checks).encode()},
    )
    dockerfile = render_dockerfile(task).encode()
    return task.model_copy(
        update={
            "environment": task.environment.model_copy(
                update={"files": {**files, "Dockerfile": dockerfile}}
            )
        }
    )


def _verifier(checks: Sequence[tuple[str, str]]) -> str:
    """A bash verifier: runs each check on its own, writes CTRF JSON and reward.txt."""
    body = [
        "#!/bin/bash",
        "# Generated verifier: one CTRF entry per assertion, no interpreter needed.",
        "out=/logs/verifier; mkdir -p $out; results=''; passed=0; total=0",
        "check() {",
        '  local name="$1"; shift; total=$((total + 1))',
        '  if ( eval "$1" ) >/dev/null 2>&1; then st=passed; passed=$((passed + 1)); '
        "else st=failed; fi",
        '  results="$results${results:+,}{\\"name\\": \\"$name\\", \\"status\\": \\"$st\\", '
        '\\"duration\\": 0}"',
        "}",
    ]
    body += [f"check {shlex.quote(n)} {shlex.quote(t)}" for n, t in checks]
    body += [
        'printf \'{"results": {"tool": {"name": "t1-bash"}, "summary": {"tests": %d, '
        '"passed": %d}, "tests": [%s]}}\\n\' $total $passed "$results" > $out/ctrf.json',
        "r=0; [ $passed -eq $total ] && r=1; echo $r > $out/reward.txt",
        'echo "$passed/$total assertions passed"',
    ]
    return "\n".join(body) + "\n"


def task_trajectory(task: Task) -> Trajectory:
    """The reference trajectory of a generated task: one turn per line of its solve.sh, with
    the reasoning 'Step i.' (which instruction line the turn carries out)."""
    assert task.solution is not None
    commands = task.solution["solve.sh"].decode().splitlines()[2:]
    return Trajectory(
        task.id,
        task.instruction,
        tuple(Step(reasoning=f"Step {i + 1}.", command=c) for i, c in enumerate(commands)),
    )


@dataclass(frozen=True)
class FamilySplits:
    """The fileops family split three ways; held-out words never appear in sft or rl."""

    sft: list[Task]
    rl: list[Task]
    heldout: list[Task]


def fileops_splits(*, sft: int, rl: int, heldout: int, seed: int = 0) -> FamilySplits:
    """Generate the splits: `sft` and `rl` tasks over training words, `heldout` over held-out
    words (disjoint from both)."""
    train = [fileops_task(i, "train", seed) for i in range(sft + rl)]
    return FamilySplits(
        sft=train[:sft],
        rl=train[sft:],
        heldout=[fileops_task(i, "heldout", seed) for i in range(heldout)],
    )


def write_tasks(tasks: Sequence[Task], directory: Path) -> Path:
    """Write each task as a Harbor directory under `directory` (a task directory to train or
    evaluate on with `train_dir` / `eval_dir`)."""
    from tasks.harbor import write_harbor

    directory.mkdir(parents=True, exist_ok=True)
    for t in tasks:
        write_harbor(t, directory / t.id)
    (directory / "_family.json").write_text(json.dumps([t.id for t in tasks]))
    return directory
