"""A task as the files of its Harbor bundle: the canonical task.toml and every other file.

`Task.content_hash` hashes these files, and `tasks.harbor` writes them; this module needs the
task types only for annotations, so the model can import it without a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tomli_w

if TYPE_CHECKING:
    from tasks.model import EnvironmentSpec, PhaseConfig, Task


def _phase_doc(phase: PhaseConfig | EnvironmentSpec) -> dict[str, Any]:
    """The non-default Harbor 1.1 keys of a phase, or of the environment's phase fields
    (absent keys keep 1.0 files unchanged)."""
    out: dict[str, Any] = {}
    if getattr(phase, "user", None) is not None:
        out["user"] = phase.user  # type: ignore[union-attr]
    if phase.env:
        out["env"] = dict(phase.env)
    if phase.network_mode is not None:
        out["network_mode"] = phase.network_mode.value
    if phase.allowed_hosts:
        out["allowed_hosts"] = list(phase.allowed_hosts)
    return out


def render_toml(task: Task) -> str:
    """Canonical task.toml for a task (Harbor tables plus the `[t1]` table)."""
    metadata: dict[str, Any] = {"name": task.name}
    if task.author:
        metadata["author_name"] = task.author
    metadata |= {
        "difficulty": task.difficulty.value,
        "category": task.category.value,
        "tags": list(task.tags),
    }
    lim = task.limits
    lineage = {k: v for k, v in task.lineage.model_dump().items() if v is not None}
    env = task.environment
    environment: dict[str, Any] = {
        "build_timeout_sec": lim.build_timeout_s,
        "cpus": lim.cpus,
        "memory_mb": lim.memory_mb,
        "storage_mb": lim.disk_mb,
        "allow_internet": env.allow_network,
    }
    if env.docker_image is not None:
        environment["docker_image"] = env.docker_image
    if env.gpus:
        environment["gpus"] = env.gpus
    environment |= _phase_doc(env)
    if env.healthcheck is not None:
        environment["healthcheck"] = env.healthcheck.model_dump()
    harbor_11 = {
        "task": task.package.model_dump(exclude_none=True) if task.package else None,
        "solution": {"env": dict(task.solution_env)} if task.solution_env else None,
    }
    v11 = any(harbor_11.values()) or any(
        _phase_doc(p) for p in (task.agent_config, task.verifier_config)
    )
    v10_keys = {"build_timeout_sec", "cpus", "memory_mb", "storage_mb", "allow_internet"}
    v11 = v11 or bool(environment.keys() - v10_keys)
    doc: dict[str, Any] = {"schema_version": "1.1"} if v11 else {"version": "1.0"}
    if task.package is not None:
        doc["task"] = harbor_11["task"]
    doc |= {
        "metadata": metadata,
        "verifier": {"timeout_sec": lim.verifier_timeout_s, **_phase_doc(task.verifier_config)},
        "agent": {"timeout_sec": lim.agent_timeout_s, **_phase_doc(task.agent_config)},
        "environment": environment,
        "t1": {
            "id": task.id,
            "requires": list(task.environment.requires),
            "setup": list(task.environment.setup),
            "workdir": task.environment.workdir,
            "pids": lim.pids,
            "output_bytes": lim.output_bytes,
            "binary_verifier": task.binary_verifier,
            "lineage": lineage,
        },
    }
    if env.verifier_packages:
        doc["t1"]["verifier_packages"] = list(env.verifier_packages)
    if task.keep_agent_processes:
        doc["t1"]["keep_agent_processes"] = True
    if task.trusted_paths:
        doc["t1"]["trusted_paths"] = list(task.trusted_paths)
    if task.outputs:
        doc["t1"]["outputs"] = list(task.outputs)
    if task.solution_env:
        doc["solution"] = harbor_11["solution"]
    return tomli_w.dumps(doc, multiline_strings=True)


def task_files(task: Task) -> dict[str, bytes]:
    """Every file of the task's Harbor bundle: {relative path: bytes}."""
    canonical = render_toml(task)
    toml_text = canonical
    if task._source_toml is not None and task._source_toml[0] == canonical:
        toml_text = task._source_toml[1]
    files: dict[str, bytes] = {
        "task.toml": toml_text.encode(),
        "instruction.md": task.instruction.encode(),
    }
    files |= {f"environment/{p}": b for p, b in task.environment.files.items()}
    files |= {f"solution/{p}": b for p, b in (task.solution or {}).items()}
    files |= {f"tests/{p}": b for p, b in task.verifier.items()}
    return files
