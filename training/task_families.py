"""Generated task families for measuring learning: varied parameters, several assertions each.

`fileops`: a few file operations to carry out in /app (make a directory, create a marker file,
delete a scratch file, make a script executable, copy a data file, count its lines), announced
one at a time by `. ./todo`, which prints the first operation not done yet and exports its name
as $ITEM; the agent does it with one command and sources the list again until it prints
`all done`. The agent must map each announcement to the right command (six kinds), keep the
alternation going through real shell state (the exported $ITEM persists in the trial's session)
and stop at the end. Names come from a word list split in two by hash: held-out tasks use only
words that never occur in a training task, and every task draws its own operations and order,
so replaying a training trajectory does not solve a held-out task. Each operation has its own
assertion, plus a guard that files the task did not name survive, so the dense reward moves
with every operation done right and deleting everything is not a shortcut.

`countdown`: a long-horizon family: run ./tick once per command until it prints done (n >= 100
times); assertions check how far it got (quarter marks) and that it stopped. It exists to run
PPO over trajectories of 100+ tool calls.

Both verifiers are plain bash (no interpreter to install) writing CTRF JSON, one entry per
assertion; the environment is a rendered Dockerfile with the app files COPY'd in. A note on the
design, measured: the tiny policy (2 layers, width 64) did not learn to copy an arbitrary name
from the instruction or an observation into a command within 400-1500 SFT steps (greedy command
accuracy 0 on held-out names), so names reach commands through $ITEM instead of being retyped.
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
    """One operation: what ./todo says, the reference command, the test ./todo uses to know it
    is done (run in /app), and the verifier's assertions (name, bash test)."""

    line: str
    command: str
    done: str
    checks: tuple[tuple[str, str], ...]
    category: Category


OP_KINDS = ("mkdir", "touch", "delete", "chmod", "copy", "count")


def _op(kind: str, w: str, rng: random.Random, app: dict[str, bytes]) -> Op:
    """Operation `kind` on the word `w`; adds the files it needs to `app`."""
    if kind == "mkdir":
        return Op(
            f"create the directory {w}",
            "mkdir -p $ITEM",
            f"[ -d {w} ]",
            ((f"dir_{w}_exists", f"[ -d /app/{w} ]"),),
            Category.SCRIPTING_AUTOMATION,
        )
    if kind == "touch":
        return Op(
            f"create the empty file {w}.done",
            "touch $ITEM.done",
            f"[ -f {w}.done ]",
            ((f"{w}_done_exists", f"[ -f /app/{w}.done ]"),),
            Category.SCRIPTING_AUTOMATION,
        )
    if kind == "delete":
        app[f"{w}.tmp"] = b"scratch\n"
        return Op(
            f"delete the file {w}.tmp",
            "rm -f $ITEM.tmp",
            f"[ ! -e {w}.tmp ]",
            ((f"{w}_tmp_gone", f"[ ! -e /app/{w}.tmp ]"),),
            Category.SYSTEM_ADMINISTRATION,
        )
    if kind == "chmod":
        app[f"tools/{w}"] = f"#!/bin/sh\necho {w}\n".encode()
        return Op(
            f"make tools/{w} executable",
            "chmod +x tools/$ITEM",
            f"[ -x tools/{w} ]",
            ((f"tools_{w}_executable", f"[ -x /app/tools/{w} ] && [ -f /app/tools/{w} ]"),),
            Category.SYSTEM_ADMINISTRATION,
        )
    if kind == "copy":
        app[f"data/{w}.txt"] = f"{w} {rng.randint(100, 999)}\n".encode()
        app["out/README"] = b"outputs\n"
        return Op(
            f"copy data/{w}.txt into out",
            "cp data/$ITEM.txt out/",
            f"cmp -s data/{w}.txt out/{w}.txt",
            ((f"out_has_{w}", f"cmp -s /app/data/{w}.txt /app/out/{w}.txt"),),
            Category.DATA_PROCESSING,
        )
    if kind == "count":
        lines = rng.randint(3, 40)
        app[f"data/{w}.log"] = "".join(f"{w} {i}\n" for i in range(lines)).encode()
        return Op(
            f"write the line count of data/{w}.log into {w}.count",
            "wc -l < data/$ITEM.log > $ITEM.count",
            f'[ -f {w}.count ] && [ "$(tr -d " \\n" < {w}.count)" = "{lines}" ]',
            ((f"{w}_count_is_{lines}", f'[ "$(tr -d " \\n" < /app/{w}.count)" = "{lines}" ]'),),
            Category.DATA_PROCESSING,
        )
    raise ValueError(f"unknown operation {kind!r}")


def _only_paths_check(app: dict[str, bytes], kinds: Sequence[str], words: Sequence[str]) -> str:
    """A bash test that the paths under /app (lock files aside) are exactly those of the app
    after every operation is done: the app's files and directories, plus what each operation
    creates, minus what it deletes."""
    paths = {p for p in app if not p.startswith(".locks/")}
    for p in list(paths):
        parts = p.split("/")
        paths |= {"/".join(parts[:k]) for k in range(1, len(parts))}
    for kind, w in zip(kinds, words, strict=True):
        if kind == "mkdir":
            paths.add(w)
        elif kind == "touch":
            paths.add(f"{w}.done")
        elif kind == "delete":
            paths.discard(f"{w}.tmp")
        elif kind == "copy":
            paths.add(f"out/{w}.txt")
        elif kind == "count":
            paths.add(f"{w}.count")
    listing = (
        "cd /app && find . -mindepth 1 -path ./.locks -prune -o -print "
        "| sed 's|^\\./||' | LC_ALL=C sort | tr '\\n' ' ' | sed 's/ $//'"
    )
    return f'[ "$({listing})" = {shlex.quote(" ".join(sorted(paths, key=lambda x: x.encode())))} ]'


FILEOPS_INSTRUCTION = (
    "In /app, `. ./todo` prints the next thing to do and sets $ITEM to the name it is about. "
    "Do it with one command that uses $ITEM, then `. ./todo` again; repeat until it prints "
    "all done. There are {n} things to do."
)


LOCKED_LINE = "todo is locked by another job, nothing was set: run . ./todo again"
"""What /app/todo prints instead of an announcement while it is locked (ITEM left as it was)."""


def fileops_task(
    index: int, split: str, seed: int, *, ops: int = 3, locks: tuple[int, ...] = ()
) -> Task:
    """One `fileops` task: `ops` operations of distinct kinds, each on a distinct word of the
    `split` side of WORDS, announced one at a time by /app/todo (the first one not done yet,
    its name exported as $ITEM), plus a guard assertion that files the task did not name
    survive.

    `locks[i]` (the `fileops-locked` family): how many times /app/todo is locked when it would
    first announce operation i: it prints LOCKED_LINE, exports nothing ($ITEM keeps the
    previous operation's name, or none) and releases one lock. With any lock the task also
    asserts that nothing but the named paths changed: a command run on the stale $ITEM (the
    previous word, or none) creates files the task never asked for."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    if len(locks) > ops or any(n < 0 for n in locks):
        raise ValueError(f"locks must be at most {ops} counts >= 0, got {locks!r}")
    rng = random.Random(f"fileops/{seed}/{split}/{index}")
    kinds = rng.sample(OP_KINDS, ops)
    words = rng.sample([w for w in WORDS if word_split(w) == split], ops)
    app: dict[str, bytes] = {"README.txt": b"workspace\n", "notes/keep.txt": b"keep me\n"}
    plan = [_op(k, w, rng, app) for k, w in zip(kinds, words, strict=True)]
    counts = list(locks) + [0] * (ops - len(locks))
    todo = ["# sourced: prints the first thing not done yet and exports ITEM (its name)"]
    for i, (op, w) in enumerate(zip(plan, words, strict=True)):
        lock = ""
        if counts[i]:
            for k in range(counts[i]):
                app[f".locks/{i}.{k}"] = b"locked\n"
            lock = (
                f'for f in /app/.locks/{i}.*; do if [ -e "$f" ]; then rm -f "$f"; '
                f"echo {shlex.quote(LOCKED_LINE)}; return 0 2>/dev/null || exit 0; fi; done; "
            )
        todo.append(
            f"if ! (cd /app && {op.done}); then {lock}export ITEM={w}; "
            f"echo {shlex.quote(op.line)}; return 0 2>/dev/null || exit 0; fi"
        )
    app["todo"] = ("\n".join([*todo, "unset ITEM; echo 'all done'"]) + "\n").encode()
    checks = [c for op in plan for c in op.checks]
    checks.append(("untouched_files_kept", "[ -f /app/README.txt ] && [ -f /app/notes/keep.txt ]"))
    if any(counts):
        checks.append(("nothing_else_created", _only_paths_check(app, kinds, words)))
    commands, outputs = [], []
    for i, op in enumerate(plan):
        commands += [". ./todo"] * counts[i] + [". ./todo", op.command]
        outputs += [LOCKED_LINE] * counts[i] + [op.line, ""]
    commands.append(". ./todo")
    outputs.append("all done")
    family = "fileops-locked" if any(counts) else "fileops"
    return _task(
        f"{family}-{split}-{index:04d}",
        f"File operations {index} ({split})",
        FILEOPS_INSTRUCTION.format(n=ops),
        plan[-1].category,
        app,
        checks,
        commands,
        tags=["generated", family, split],
        executable={"todo"},
        outputs=outputs,
    )


BUSY_LINE = "tick: resource busy (another job holds the lock), nothing was done"
"""What /app/tick prints (exit 1) instead of counting while it is busy (the `countdown-busy`
family): the count is unchanged and the next call proceeds."""


def countdown_task(index: int, ticks: int, *, busy: tuple[int, ...] = (), split: str = "") -> Task:
    """A `countdown` task: run ./tick `ticks` times (one command per turn) until it says done.

    `busy` (the `countdown-busy` family): counts at which ./tick fails once before counting
    (prints BUSY_LINE, exits 1, counts nothing): the run only gets on by calling it again."""
    if any(not 1 <= b <= ticks for b in busy):
        raise ValueError(f"busy counts must lie in 1..{ticks}, got {busy!r}")
    tick = (
        "#!/bin/sh\n"
        "n=$(cat /app/count 2>/dev/null || echo 0); n=$((n + 1))\n"
        + (
            f'if [ -e "/app/.busy/$n" ]; then rm -f "/app/.busy/$n"; '
            f"echo {shlex.quote(BUSY_LINE)}; exit 1; fi\n"
            if busy
            else ""
        )
        + "echo $n > /app/count\n"
        f'if [ "$n" -ge {ticks} ]; then echo done; else echo "$(({ticks} - n)) left"; fi\n'
    )
    app = {"tick": tick.encode(), "count": b"0\n", **{f".busy/{b}": b"busy\n" for b in busy}}
    checks = [
        (f"reached_{q}_of_4", f'[ "$(cat /app/count)" -ge {ticks * q // 4} ]') for q in (1, 2, 3)
    ]
    checks.append(("reached_done", f'[ "$(cat /app/count)" -ge {ticks} ]'))
    checks.append(("stopped_at_done", f'[ "$(cat /app/count)" -le {ticks + 2} ]'))
    instruction = (
        f"Run ./tick in /app once per command until it prints done ({ticks} times), "
        "then answer without a tool call."
    )
    outputs = []
    for n in range(1, ticks + 1):
        outputs += [BUSY_LINE] if n in busy else []
        outputs.append(f"{ticks - n} left" if n < ticks else "done")
    family = "countdown-busy" if busy else "countdown"
    return _task(
        f"{family}-{split + '-' if split else ''}{ticks}-{index:04d}",
        f"Countdown {ticks} ({index})",
        instruction,
        Category.SCRIPTING_AUTOMATION,
        app,
        checks,
        ["./tick"] * len(outputs),
        tags=["generated", family, *([split] if split else ["long-horizon"])],
        agent_timeout_s=3600.0,
        executable={"tick"},
        outputs=outputs,
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
    outputs: Sequence[str] | None = None,
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
        solution={
            "solve.sh": ("#!/bin/bash\ncd /app\n" + "\n".join(commands) + "\n").encode(),
            # what each command of solve.sh prints: the observations of the reference trajectory
            "outputs.json": json.dumps(list(outputs or [""] * len(commands))).encode(),
        },
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
    """The reference trajectory of a generated task: one turn per line of its solve.sh (no
    reasoning block), each observation what that command prints (solution/outputs.json)."""
    assert task.solution is not None
    commands = task.solution["solve.sh"].decode().splitlines()[2:]
    outputs = json.loads(task.solution["outputs.json"])
    steps = [Step(None, c, o) for c, o in zip(commands, outputs, strict=True)]
    return Trajectory(task.id, task.instruction, tuple(steps))


FAMILY_RENDER = {"styles": ("template",), "final_reasoning": None}
"""How family trajectories are rendered for SFT: one tool-call whitespace style, no reasoning
(fewer sampled tokens per turn: a tiny policy's errors compound over every sampled token)."""


@dataclass(frozen=True)
class FamilySplits:
    """The fileops family split three ways; held-out words never occur in sft or rl tasks."""

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


def lock_plan(index: int, split: str, seed: int, *, ops: int = 3) -> tuple[int, ...]:
    """Locks of a `fileops-locked` task: per operation 0, 1 or 2, at least 1 and at most 3 in
    all, drawn per task (so the held-out tasks differ in where and how often todo is locked)."""
    rng = random.Random(f"fileops-locks/{seed}/{split}/{index}")
    while True:
        plan = tuple(rng.choice((0, 1, 2)) for _ in range(ops))
        if 1 <= sum(plan) <= 3:
            return plan


def busy_plan(index: int, split: str, seed: int) -> tuple[int, tuple[int, ...]]:
    """Length and busy counts of a `countdown-busy` task: `train` tasks run an even number of
    ticks (6-16), `heldout` tasks an odd one (7-15), so held-out lengths never occur in
    training; ./tick is busy once at 1 or 2 distinct counts drawn per task."""
    rng = random.Random(f"countdown-busy/{seed}/{split}/{index}")
    ticks = rng.choice(range(6, 17, 2) if split == "train" else range(7, 16, 2))
    return ticks, tuple(sorted(rng.sample(range(1, ticks + 1), rng.choice((1, 2)))))


FAMILIES = ("fileops", "fileops-locked", "countdown-busy")


def family_splits(family: str, *, sft: int, rl: int, heldout: int, seed: int = 0) -> FamilySplits:
    """The splits of a family.

    `fileops-locked`: its sft split is the `fileops` sft split, unchanged (reference
    trajectories that never meet a lock, so the SFT checkpoint is the `fileops` one); its rl
    and held-out tasks are the `fileops` tasks of the same index with todo locked before some
    operations (`lock_plan`): recovering from a lock (sourcing todo again instead of acting on
    a stale $ITEM) is something only RL can teach here.

    `countdown-busy`: short countdowns (6-16 ticks, `busy_plan`); the sft split never meets a
    busy ./tick, the rl and held-out tasks meet it once or twice: calling ./tick again after a
    failure instead of giving up (the recovery SFT data without errors does not teach) is what
    RL has to teach; the tiny policy is competent at the rest (one command, a stop at done)."""
    if family == "fileops":
        return fileops_splits(sft=sft, rl=rl, heldout=heldout, seed=seed)
    if family == "countdown-busy":

        def countdown(i: int, split: str, *, busy: bool) -> Task:
            ticks, counts = busy_plan(i, split, seed)
            return countdown_task(i, ticks, busy=counts if busy else (), split=split)

        return FamilySplits(
            sft=[countdown(i, "train", busy=False) for i in range(sft)],
            rl=[countdown(i, "train", busy=True) for i in range(sft, sft + rl)],
            heldout=[countdown(i, "heldout", busy=True) for i in range(heldout)],
        )
    if family != "fileops-locked":
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")

    def locked(i: int, split: str) -> Task:
        return fileops_task(i, split, seed, locks=lock_plan(i, split, seed))

    return FamilySplits(
        sft=[fileops_task(i, "train", seed) for i in range(sft)],
        rl=[locked(i, "train") for i in range(sft, sft + rl)],
        heldout=[locked(i, "heldout") for i in range(heldout)],
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
