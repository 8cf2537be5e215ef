"""Agents that probe a candidate in validation: what does partial or no work earn?

- `ParentSolutionAgent`: the parent's reference solution, run on the child. Every new
  assertion must fail (else the extension asks for nothing the parent did not already do).
- `ExtensionOnlyAgent`: only the extension's steps, on the untouched environment, with every
  consumed file that does not exist yet replaced by a stub (what an agent skipping the core work
  would do). Every new assertion must fail (`dependency_ok`), and what it earns is free reward.
- `WipeAgent`: deletes everything under the working directory. A new assertion that passes
  both after nop and after a wipe checks nothing the task is about (vacuous).

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
