"""Run proposed solution steps in a sandbox and observe the state they leave.

The solution-first LLM operator proposes new steps before it writes any test: the steps are
appended to the parent's solution in a draft child (with a placeholder test), the draft's
solution runs in a fresh sandbox under the profiling oracle, and the files the new steps
created or changed (compared with the parent's profile) are read back with their first bytes.
Tests are then written against that observed state, not against what the model expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox import run_trial
from synthesis.operators.extension import Extension, Parent, build_child
from synthesis.profile import OutputFile, ProfilingOracle

PREVIEW_CHARS = 1500


@dataclass(frozen=True)
class ObservedFile:
    path: str
    size: int
    mode: int
    created: bool  # False: an existing file the steps changed
    preview: str  # the first bytes as text ("" for binary files)


@dataclass
class Observation:
    """What the draft's solution did: its exit status, output tail, and the new state."""

    ok: bool  # the whole solution (parent's steps, then the new ones) exited 0
    exit_code: int | None
    output: str  # stdout + stderr tail
    files: list[ObservedFile] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"exit status: {self.exit_code}", "output (tail):", self.output[-1500:] or "-"]
        lines.append("files the new steps created or changed:")
        for f in self.files:
            kind = "created" if f.created else "changed"
            lines.append(f"--- {f.path} ({kind}, {f.size} bytes, mode {f.mode:04o})")
            lines.append(f.preview or "(binary)")
        if not self.files:
            lines.append("(none)")
        return "\n".join(lines)


def _preview(data: bytes) -> str:
    if b"\0" in data[:PREVIEW_CHARS]:
        return ""
    return data[:PREVIEW_CHARS].decode("utf-8", "replace")


def observe_steps(parent: Parent, draft: Extension, round_: int, backend: str) -> Observation:
    """Run the parent's solution plus `draft.steps` in a fresh sandbox and observe the result.

    `draft.tests` may be a placeholder: the draft's verifier result is not used."""
    task = build_child(parent, "llm_rewrite", "llm", round_, draft)
    agent = ProfilingOracle()
    result = run_trial(task, agent, backend)
    if not result.rewardable:
        return Observation(False, None, f"sandbox failure: {result.failure_detail[:800]}")
    profile = agent.profile(task, result)
    before = {f.path: f.sha256 for f in parent.profile.outputs}
    wd = task.environment.workdir.rstrip("/")
    new: list[OutputFile] = [f for f in profile.outputs if before.get(f.path) != f.sha256]
    files = [
        ObservedFile(
            f.path, f.size, f.mode, f.path not in before, _preview(agent.sniffed.get(f.rel, b""))
        )
        for f in new
        if f.path.startswith(wd + "/")
    ]
    outcome = agent.outcome
    code = outcome.exit_code if outcome else None
    return Observation(code == 0, code, outcome.detail if outcome else "", files)
