"""Agents that probe a candidate in validation: what does partial or no work earn?

- `ParentSolutionAgent`: the parent's reference solution, run on the child. Every new
  assertion must fail (else the extension asks for nothing the parent did not already do).
- `ParentThenCommandAgent`: the parent's reference solution, then a command (a scripted
  hack): what the new assertions pay for the parent's work plus no work of their own.
- `ExtensionOnlyAgent`: only the extension's steps, on the untouched environment, with every
  consumed file that does not exist yet replaced by a stub (what an agent skipping the core work
  would do). Every dependent new assertion must fail, and what it earns beyond the
  independent new assertions (the steps' own work) is free reward.
- `WipeAgent`: deletes everything under the working directory. A new assertion that passes
  both after nop and after a wipe checks nothing the task is about (vacuous).
- `DataFlowAgent`: the parent's solution, then every consumed file perturbed (a line
  prepended and one appended, every letter and digit between them rotated: content, line
  count, first and last line, size, digest and every value change), then the extension's
  steps, then the consumed files restored exactly (bytes, mode,
  owner, times) before the verifier runs. The parent's checks (the guards) pass again, so a
  new assertion that passed for the oracle and fails here checks something the steps derived
  from, or did to, the parent's output: the data flowed (`dependency_ok`).

Each is an ordinary `sandbox.Agent`: it acts through the sandbox's long-lived session.
"""

from __future__ import annotations

import shlex
import time

from sandbox import AgentOutcome, Sandbox
from sandbox.trial import run_solution
from tasks.model import Task

STUB = "t1 stub: the earlier stage was not done\n"
PROBE_DIR = "/.t1-probe"


class ParentSolutionAgent:
    """Runs the PARENT's reference solution on the child task (the load-bearing probe)."""

    name = "parent-solution"

    def __init__(self, parent_solution: dict[str, bytes]) -> None:
        self.solution = parent_solution

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        return run_solution(sandbox, task, self.solution, deadline)


class ParentThenCommandAgent:
    """Runs the PARENT's reference solution, then `command` in the same session."""

    def __init__(self, parent_solution: dict[str, bytes], command: str, name: str) -> None:
        self.solution = parent_solution
        self.command = command
        self.name = name

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        first = run_solution(sandbox, task, self.solution, deadline)
        if first.timed_out:
            return first
        r = sandbox.session().run(self.command, timeout_s=max(0.1, deadline - time.monotonic()))
        return AgentOutcome.from_exec(r)


def extension_script(block: str, consumes: list[str], workdir: str) -> str:
    """The extension's steps alone: stub missing consumed files, then the steps, without -e
    (a failing step does not stop the rest: the probe asks what the steps CAN earn)."""
    stubs = [
        f"[ -e {q} ] || {{ mkdir -p {shlex.quote(p.rsplit('/', 1)[0] or '/')}; "
        f"printf %s {shlex.quote(STUB)} > {q}; }}"
        for p in consumes
        for q in [shlex.quote(p)]
    ]
    return "\n".join(["#!/bin/bash", f"cd {shlex.quote(workdir)}", *stubs, block]) + "\n"


class ExtensionOnlyAgent:
    """Runs only the extension's steps (see `extension_script`)."""

    name = "extension-only"

    def __init__(self, block: str, consumes: list[str]) -> None:
        self.block = block
        self.consumes = consumes

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        script = extension_script(self.block, self.consumes, task.environment.workdir)
        sandbox.upload({"extension.sh": script.encode()}, PROBE_DIR)
        r = sandbox.session().run(
            f"bash {PROBE_DIR}/extension.sh; rm -rf {PROBE_DIR}",
            timeout_s=max(0.1, deadline - time.monotonic()),
        )
        return AgentOutcome.from_exec(r)


PERTURB_HEAD = "t1 data-flow probe: perturbed (head)"
# Every letter and digit of the consumed content rotated (ROT13, digits + 1): a result
# computed from a subset of the lines (those with a word, the records of one category)
# changes too, not only one that reads the first or last line, the size or the digest.
ROTATE = "'A-Za-z0-9' 'N-ZA-Mn-za-m1-90'"
PERTURB_TAIL = "t1 data-flow probe: perturbed (tail)"
FLOW_DIR = "/.t1-flow"


def flow_script(parent_solve: str, block: str, consumes: list[str]) -> str:
    """The child's solve.sh with the data-flow probe between the parent's part and the new
    steps. The consumed paths that exist after the parent's part (files, or the files under a
    directory, `.git` excluded) are backed up with `cp -a`, perturbed in place (same inode and
    mode), and restored on exit whatever the steps do; the steps run without `-e`/`-u`/
    `pipefail`, so a step failing on the perturbed input does not stop the independent ones."""
    paths = " ".join(shlex.quote(p) for p in consumes)
    probe = f"""
# --- t1 data-flow probe: perturb the consumed results, restore them on exit ---
set +e +u
set +o pipefail
_t1_files=()
for _t1_p in {paths}; do
  if [ -f "$_t1_p" ]; then _t1_files+=("$_t1_p")
  elif [ -d "$_t1_p" ]; then
    while IFS= read -r -d '' _t1_f; do _t1_files+=("$_t1_f"); done \
      < <(find "$_t1_p" -name .git -prune -o -type f -print0)
  fi
done
rm -rf {FLOW_DIR}; mkdir -p {FLOW_DIR}/backup
if [ ${{#_t1_files[@]}} -gt 0 ]; then cp -a --parents -- "${{_t1_files[@]}}" {FLOW_DIR}/backup/; fi
printf '%s\n' "${{_t1_files[@]}}" > {FLOW_DIR}/perturbed
_t1_restore() {{
  local f
  for f in "${{_t1_files[@]}}"; do
    rm -rf -- "$f"; mkdir -p -- "$(dirname -- "$f")"; cp -a -- "{FLOW_DIR}/backup$f" "$f"
  done
}}
trap _t1_restore EXIT
for _t1_f in "${{_t1_files[@]}}"; do
  {{ printf '%s\n' {shlex.quote(PERTURB_HEAD)}; tr {ROTATE} < "$_t1_f"
     printf '\n%s\n' {shlex.quote(PERTURB_TAIL)}; }} > {FLOW_DIR}/tmp \
    && cat {FLOW_DIR}/tmp > "$_t1_f"
done
rm -f {FLOW_DIR}/tmp
"""
    return f"{parent_solve.rstrip(chr(10))}\n{probe}\n{block.strip(chr(10))}\n"


class DataFlowAgent:
    """Runs `flow_script` (the parent's solution, perturbation, the new steps, restoration)
    with the child's solution files. `perturbed` holds the files it perturbed (read back
    before the verifier runs)."""

    name = "data-flow"

    def __init__(self, parent_solve: str, block: str, consumes: list[str]) -> None:
        self.script = flow_script(parent_solve, block, consumes)
        self.perturbed: list[str] = []

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        solution = {**(task.solution or {}), "solve.sh": self.script.encode()}
        outcome = run_solution(sandbox, task, solution, deadline)
        r = sandbox.exec(
            f"cat {FLOW_DIR}/perturbed 2>/dev/null; rm -rf {FLOW_DIR}", timeout_s=30, cwd="/"
        )
        self.perturbed = sorted(p for p in r.stdout.splitlines() if p)
        return outcome


class WipeAgent:
    """Deletes everything under the working directory."""

    name = "wipe"

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        wd = shlex.quote(task.environment.workdir)
        r = sandbox.session().run(
            f"find {wd} -mindepth 1 -delete 2>/dev/null; true",
            timeout_s=max(0.1, deadline - time.monotonic()),
        )
        return AgentOutcome.from_exec(r)
