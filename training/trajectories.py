"""Tool-call trajectories for the supervised warm start, rendered from reference solutions.

A seed task's `solution/solve.sh` is split into shell commands (heredocs, line continuations and
compound statements kept whole); each command becomes one assistant turn: a short reasoning block
(the comment above the command when there is one), then a `shell` tool call. Observations are
synthetic (`exit_code: 0`) because the warm start only teaches the *format* of an agent turn; the
RL rollouts later see real sandbox output. When no seed tasks exist, a handful of built-in tasks
stand in.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from training.chat_format import (
    IM_END,
    SHELL_TOOL,
    Message,
    ToolCall,
    format_observation,
    render_assistant_text,
)

SYSTEM_PROMPT = (
    "You are a terminal agent. Solve the task by running shell commands with the shell tool, "
    "one command per turn. When the task is complete, answer without a tool call."
)
FINAL_REASONING = "The task is complete."
FINAL_CONTENT = "Done."
TOOL_CALL_STYLES = ("template", "compact", "loose")


@dataclass(frozen=True)
class Step:
    """One agent turn of a reference trajectory; `output` is the command's stdout as the
    observation shows it (empty: the synthetic `exit_code: 0` observation); no reasoning
    (None) renders the turn without a think block."""

    reasoning: str | None
    command: str
    output: str = ""


@dataclass(frozen=True)
class Trajectory:
    """A task instruction and the reference steps that solve it."""

    task_id: str
    instruction: str
    steps: tuple[Step, ...]


_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _parses(script: str) -> bool:
    """True when bash can parse `script` (an open `if`/`for`/quote makes it False)."""
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    return proc.returncode == 0


def solution_steps(solve_sh: str, *, max_command_chars: int = 400) -> list[Step]:
    """Split a solve.sh into steps; comments become the reasoning of the next command.

    Shebang, `set -e...` lines and blank lines are dropped. A command longer than
    `max_command_chars` is dropped too (it would dominate the warm start's token budget).
    """
    lines = solve_sh.splitlines()
    steps: list[Step] = []
    comment: list[str] = []
    buf: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        i += 1
        if not buf:
            if not stripped or stripped.startswith("#!") or re.match(r"^set -[euxo]", stripped):
                continue
            if stripped.startswith("#"):
                comment.append(stripped.lstrip("#").strip())
                continue
        buf.append(line)
        heredoc = _HEREDOC_RE.search(line)
        if heredoc:
            delim = heredoc.group(2)
            while i < len(lines):
                buf.append(lines[i])
                i += 1
                if lines[i - 1].strip() == delim:
                    break
        if stripped.endswith("\\"):
            continue
        command = "\n".join(buf)
        if not _parses(command) and i < len(lines):
            continue
        buf = []
        reasoning = " ".join(comment) if comment else _default_reasoning(command)
        comment = []
        if len(command) <= max_command_chars:
            steps.append(Step(reasoning=reasoning, command=command.strip()))
    return steps


def _default_reasoning(command: str) -> str:
    words = command.split()
    head = words[0] if words else "the command"
    return f"Next I run {head}."


def seed_trajectories(seed_dir: Path) -> list[Trajectory]:
    """Trajectories from every `<seed_dir>/<name>/{instruction.md, solution/solve.sh}`."""
    out: list[Trajectory] = []
    if not seed_dir.is_dir():
        return out
    for task_dir in sorted(p for p in seed_dir.iterdir() if p.is_dir()):
        instruction = task_dir / "instruction.md"
        solve = task_dir / "solution" / "solve.sh"
        if not (instruction.is_file() and solve.is_file()):
            continue
        steps = solution_steps(solve.read_text())
        if steps:
            out.append(Trajectory(task_dir.name, instruction.read_text().strip(), tuple(steps)))
    return out


BUILTIN_TRAJECTORIES: tuple[Trajectory, ...] = (
    Trajectory(
        "builtin-hello-file",
        "Create the file /app/hello.txt containing the single line `hello world`.",
        (
            Step("I will write the file with echo.", "echo 'hello world' > /app/hello.txt"),
            Step("Check the content.", "cat /app/hello.txt"),
        ),
    ),
    Trajectory(
        "builtin-count-lines",
        "Write the number of lines of /app/data.txt to /app/count.txt.",
        (
            Step("Look at the input first.", "ls -la /app"),
            Step("Count the lines with wc.", "wc -l < /app/data.txt > /app/count.txt"),
            Step("Verify the result.", "cat /app/count.txt"),
        ),
    ),
    Trajectory(
        "builtin-make-dir",
        "Create the directory /app/out/reports and an empty file /app/out/reports/.keep.",
        (
            Step("Make the directory tree.", "mkdir -p /app/out/reports"),
            Step("Create the marker file.", "touch /app/out/reports/.keep"),
        ),
    ),
    Trajectory(
        "builtin-sort-unique",
        "Write the unique lines of /app/words.txt, sorted, to /app/unique.txt.",
        (
            Step("Sort and deduplicate.", "sort -u /app/words.txt > /app/unique.txt"),
            Step("Show the first lines.", "head -n 5 /app/unique.txt"),
        ),
    ),
    Trajectory(
        "builtin-git-init",
        "Initialize a git repository in /app/repo and commit a README.md saying `# demo`.",
        (
            Step("Create the repository.", "git init -q /app/repo"),
            Step("Write the README.", "printf '# demo\\n' > /app/repo/README.md"),
            Step(
                "Commit it.",
                "cd /app/repo && git add README.md && git -c user.name=a -c user.email=a@b "
                "commit -qm init",
            ),
        ),
    ),
    Trajectory(
        "builtin-python-sum",
        "Write the sum of the integers in /app/nums.txt (one per line) to /app/sum.txt.",
        (
            Step(
                "Use python to add the numbers.",
                "python3 -c \"print(sum(int(x) for x in open('/app/nums.txt')))\" > /app/sum.txt",
            ),
            Step("Check it.", "cat /app/sum.txt"),
        ),
    ),
)


def training_trajectories(seed_dir: Path) -> list[Trajectory]:
    """Seed trajectories plus the built-in ones (the built-ins alone when there are no seeds)."""
    return [*seed_trajectories(seed_dir), *BUILTIN_TRAJECTORIES]


@dataclass(frozen=True)
class RenderedExample:
    """A warm-start example: token ids and the loss mask over the assistant's sampled text."""

    token_ids: list[int]
    loss_mask: list[bool]


def render_example(
    tokenizer: object,
    traj: Trajectory,
    rng: random.Random,
    *,
    styles: Sequence[str] = TOOL_CALL_STYLES,
    final_reasoning: str | None = FINAL_REASONING,
) -> RenderedExample:
    """Render `traj` as one token stream the way the TITO harness builds it.

    The opening (system + user + generation prompt) comes from the chat template; each assistant
    turn is the raw text a model would sample (tool-call whitespace style drawn from `rng`, so
    the re-serialization drift of real rollouts is present) followed by `<|im_end|>`, with loss;
    each observation is the template's rendering of the tool message, without loss.
    """
    from training.chat_tokenizer import encode_text

    messages: list[Message] = [
        Message(role="system", content=SYSTEM_PROMPT),
        Message(role="user", content=traj.instruction),
    ]
    head = tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        [m.as_dict() for m in messages],
        tools=[SHELL_TOOL],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = encode_text(tokenizer, head)  # type: ignore[arg-type]
    mask = [False] * len(ids)
    for step in [*traj.steps, None]:
        if step is None:
            text = render_assistant_text(reasoning=final_reasoning, content=FINAL_CONTENT, calls=[])
        else:
            call = ToolCall("shell", {"command": step.command})
            style = rng.choice(list(styles))
            text = render_assistant_text(
                reasoning=step.reasoning, content="", calls=[call], style=style
            )
        out = encode_text(tokenizer, text + IM_END)  # type: ignore[arg-type]
        ids += out
        mask += [True] * len(out)
        if step is None:
            break
        obs = format_observation(exit_code=0, stdout=step.output, stderr="")
        glue = f"\n<|im_start|>tool\n<tool_response>\n{obs}\n</tool_response>{IM_END}\n"
        glue += "<|im_start|>assistant\n"
        g = encode_text(tokenizer, glue)  # type: ignore[arg-type]
        ids += g
        mask += [False] * len(g)
    return RenderedExample(ids, mask)


def tokenizer_corpus(trajectories: Sequence[Trajectory]) -> list[str]:
    """Texts the BPE is trained on: instructions, every rendered turn style, observations.

    Only trajectory content goes in (not every file of a seed), so an unrelated edit to a seed's
    environment or tests does not invalidate the cached checkpoint.
    """
    texts: list[str] = [SYSTEM_PROMPT, FINAL_REASONING, FINAL_CONTENT]
    for traj in trajectories:
        texts.append(traj.instruction)
        for step in traj.steps:
            for style in TOOL_CALL_STYLES:
                call = ToolCall("shell", {"command": step.command})
                texts.append(
                    render_assistant_text(
                        reasoning=step.reasoning, content="", calls=[call], style=style
                    )
                )
    texts.append(format_observation(exit_code=1, stdout="ok\n", stderr="error: no such file"))
    texts.append(json.dumps(SHELL_TOOL))
    return texts
