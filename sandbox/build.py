"""The layer builder: a task's Dockerfile becomes an `Image` of cached, read-only layers.

Each COPY/ADD/RUN (and a WORKDIR that must create its directory) is one layer keyed by
sha256(parent key + the instruction as resolved + the content of the files it copies); config
instructions (ENV, USER, CMD ...) change the config without a layer. A layer lives in
`$T1_SANDBOX_STATE/l/<key[:16]>/` (short: the runtime mounts the stack as one overlay
`lowerdir=` option, one page long) and is published by an atomic rename under a file lock,
so tasks sharing a Dockerfile prefix share its layers and concurrent builds of one layer
build it once. Stacks deeper than MAX_LAYERS are flattened into one layer above the base.

COPY/ADD write straight into the new layer directory. RUN goes through a `StepRunner` (the
runtime): the step sees the layers read-only, writes on a disk of its own (`step_disk_mb`:
the task's `disk_mb` plus scratch room) and what it left becomes the layer, with network to
the package registries only (NetworkMode.BUILD) and the host's CA bundle visible at BUILD_CA
for the step alone (its env points pip, curl, requests and git at it; neither the file nor
the variables reach the image).

Everything a build writes into the host's layer cache is bounded by the task's disk: a
`LayerBudget` of `disk_mb` and the disk's inode count for all the build's layers together,
reused ones counted at what they cost when built (so the outcome never depends on the cache).
Past it the build fails as the task's `disk_limit`, before the host's disk fills.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from sandbox import disk as sandbox_disk
from sandbox.base import EnvironmentBuildError, ExecResult, NetworkMode, NetworkPolicy
from sandbox.bases import Base, ensure_base, lookup, state_dir
from sandbox.context import ContextError, LayerTooLarge, copy_into_layer, digest_sources
from sandbox.idmap import STORAGE_TAG, shift_tree
from sandbox.image import Image, ImageConfig
from sandbox.layer_cache import KEY_CHARS, layer_root, stamp
from sandbox.layerfs import ImageView, LayerBudget, OverBudget, ensure_dirs, flatten, layer_usage
from sandbox.stages import Config, Copy, Run, Stage, resolve
from tasks.dockerfile import DockerfileError
from tasks.model import VERIFIER_VENV, Task

MAX_LAYERS = 30  # above the base; beyond it the stack is flattened into one layer
BUILD_CA = "/.t1-build/ca-certificates.crt"
CA_ENV = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
          "NODE_EXTRA_CA_CERTS")  # fmt: skip
HOST_CA_BUNDLE = os.environ.get("T1_BUILD_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
OUTPUT_TAIL = 2000
BUILD_SCRATCH_MB = 512  # at least this much room, beyond the task's disk, while a RUN runs
# A RUN step that failed because it reached for the internet beyond the package registries.
_OFFLINE = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Name or service not known|"
    r"Failed to establish a new connection|Network is unreachable|Connection refused|"
    r"unable to access 'https?://|Failed to connect to|getaddrinfo|ENOTFOUND|EAI_AGAIN"
)
# A RUN step that failed because it filled its disk (the task's disk_mb).
_DISK_FULL = re.compile(r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded")


class StepRunner(Protocol):
    """Runs one RUN step (the runtime implements it, e.g. sandbox.local.LocalStepRunner).

    `layers` (bottom first) are mounted read-only, with what `upper` (the new layer's
    directory) already holds above them; what the step writes, on a writable layer of at
    most `disk_mb`, ends up in `upper` (files, links, whiteouts) when it succeeds; the runner
    may create siblings of `upper` inside `upper.parent`. The step runs `argv` in fresh
    namespaces as `user` (a name or uid[:gid] of the image) in `cwd`, with exactly `env`,
    the network `network` allows, and /etc/hosts and /etc/resolv.conf provided by the
    runtime (never written into `upper`). A step that fails or times out still returns its
    ExecResult.
    """

    def run(
        self,
        layers: Sequence[Path],
        upper: Path,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        user: str,
        network: NetworkPolicy,
        timeout_s: float,
        disk_mb: int,
    ) -> ExecResult: ...


class BuildFailure(StrEnum):
    """Why an environment did not build (the reject reason of `t1 task build`)."""

    DOCKERFILE = "dockerfile"  # the Dockerfile is malformed or uses something unsupported
    UNKNOWN_BASE = "unknown_base"  # FROM names no offline base image
    BASE_BUILD = "base_build"  # the base recipe failed to build (mmdebstrap)
    COPY = "copy"  # a COPY/ADD source is missing or unreadable
    STEP_FAILED = "step_failed"  # a RUN step exited non-zero
    NEEDS_INTERNET = "needs_internet"  # a RUN step reached beyond the package registries
    TIMEOUT = "timeout"  # the build exceeded the task's build_timeout_s
    DISK_LIMIT = "disk_limit"  # the build wrote more than the task's disk (disk_mb) holds


class ImageBuildError(EnvironmentBuildError):
    """A task's image could not be built: the kind, the instruction and the step's output."""

    def __init__(
        self,
        kind: BuildFailure,
        message: str,
        *,
        line: int | None = None,
        instruction: str = "",
        output_tail: str = "",
    ) -> None:
        self.kind, self.line, self.instruction = kind, line, instruction
        self.output_tail = output_tail
        self.message = message
        where = f"line {line}: " if line else ""
        tail = f"\n{output_tail}" if output_tail else ""
        super().__init__(f"{kind.value}: {where}{message}{tail}")


@dataclass
class BuildStats:
    """What one build did: layers reused from the cache and layers built."""

    reused: int = 0
    built: int = 0
    seconds: float = 0.0


Log = Callable[[str], None]


def dockerfile_of(task: Task) -> str:
    """The Dockerfile to build: the one the task ships, as written — except a rendered one
    (`tasks.environment.is_rendered`, made by `t1 task fmt` from the [t1] spec), which is
    rendered again from the spec as it is now, so a synthesized task whose setup, requires
    or files changed builds its own environment even when its file was not re-rendered."""
    from tasks.environment import is_rendered, render_dockerfile

    data = task.environment.files.get("Dockerfile")
    text = data.decode("utf-8", "replace") if data is not None else None
    if text is None or is_rendered(text):
        return render_dockerfile(task)
    return text


def build_image(
    task: Task,
    runner: StepRunner,
    *,
    log: Log | None = None,
    stats: BuildStats | None = None,
) -> Image:
    """Build (or reuse) every layer of the task's image. Raises ImageBuildError."""
    t0 = time.monotonic()
    stats = stats if stats is not None else BuildStats()
    try:
        stages = resolve(
            dockerfile_of(task),
            path=f"{task.id}/environment/Dockerfile",
            base_config=lambda name: _base_config(name, log),
        )
    except DockerfileError as e:
        raise ImageBuildError(
            BuildFailure.DOCKERFILE, e.message, line=e.line, instruction=e.instruction
        ) from e
    # The task's build_timeout_s starts now: obtaining the FROM images above (building a base
    # once, or waiting on the lock of another process building it) is not the task's build.
    builder = _Builder(task, runner, log or (lambda _m: None), stats, time.monotonic())
    images: dict[int, Image] = {}
    for stage in stages:
        images[stage.index] = builder.stage(stage, images)
    image = images[stages[-1].index]
    if task.environment.verifier_packages:
        image = builder.verifier_toolchain(image, task.environment.verifier_packages)
    stats.seconds = time.monotonic() - t0
    return image


def _base_config(name: str, log: Log | None) -> ImageConfig:
    """The config a FROM image starts with; Docker's defaults when it cannot be had (the
    stage's own build then reports why, with its line)."""
    try:
        return base_image(name, log=log).config
    except ImageBuildError:
        return ImageConfig()


def base_image(name: str, *, log: Log | None = None) -> Image:
    """The image a FROM name starts from: the real image where an engine has it or can pull
    it (sandbox.pull), else its offline recipe (built on first use)."""
    from sandbox.pull import pulled_base

    pulled = pulled_base(name, state_dir())
    if pulled is not None:
        root, config, image_id = pulled
        return Image((root,), config, f"pulled-{image_id}-{STORAGE_TAG}")
    try:
        base: Base = lookup(name)
    except EnvironmentBuildError as e:
        raise ImageBuildError(BuildFailure.UNKNOWN_BASE, str(e), instruction="FROM") from e
    try:
        root = ensure_base(base, log=log)
    except EnvironmentBuildError as e:
        raise ImageBuildError(BuildFailure.BASE_BUILD, str(e), instruction="FROM") from e
    return Image((root,), base.recipe.config(), f"base-{base.recipe.key}-{STORAGE_TAG}")


def prepare_bases(tasks: Iterable[Task], *, log: Log) -> None:
    """Have every FROM image the tasks' Dockerfiles start from, in this process, telling `log`
    when one is being built or waited for. Called by a stage before it hands the tasks to
    workers (whose builds cannot report to the caller's log), so the minutes a fresh sandbox
    cache spends on a base image show in the CLI and Dagster's logs instead of a silent step.
    A Dockerfile or base that fails here is left for the task's own build to report as its row."""
    seen: set[str] = set()
    for task in tasks:
        try:
            stages = resolve(dockerfile_of(task), path=f"{task.id}/environment/Dockerfile")
        except DockerfileError:
            continue
        for stage in stages:
            if stage.base_stage is None and stage.base not in seen:
                seen.add(stage.base)
                try:
                    base_image(stage.base, log=log)
                except ImageBuildError:
                    continue


class _Builder:
    def __init__(self, task: Task, runner: StepRunner, log: Log, stats: BuildStats, t0: float):
        self.task, self.runner, self.log, self.stats = task, runner, log, stats
        self.deadline = t0 + task.limits.build_timeout_s
        self.context = dict(task.environment.files)
        self.context.pop("Dockerfile", None)
        mb = task.limits.disk_mb
        self.budget = LayerBudget(mb << 20, sandbox_disk.inodes(state_dir() / "disks", mb))

    def stage(self, stage: Stage, images: dict[int, Image]) -> Image:
        if stage.base_stage is not None:
            image = images[stage.base_stage]
        else:
            t_base = time.monotonic()
            try:
                image = base_image(stage.base, log=self.log)
            except ImageBuildError as e:
                e.line = stage.line
                raise
            self.deadline += time.monotonic() - t_base  # not the task's build either
        for step in stage.steps:
            if isinstance(step, Config):
                image = Image(image.layers, step.config, image.key)
                if step.keyword == "WORKDIR":
                    image = self.workdir(image, step)
            elif isinstance(step, Copy):
                image = self.copy(image, step, images)
            elif isinstance(step, Run):
                image = self.run(image, step)
        return image

    # -- layers ---------------------------------------------------------------------------
    def layer(
        self,
        image: Image,
        spec: object,
        make: Callable[[Path], None],
        text: str,
        line: int,
        *,
        measure: bool = False,
    ) -> Image:
        """`image` plus the layer for `spec`: reused when cached, else made by `make(dir)`.
        A made layer's cost is taken from the budget: measured once made (`measure`: what a
        RUN step allocated) or taken by `make` as it writes (COPY/ADD)."""
        key = hashlib.sha256(json.dumps([image.key, spec], default=str).encode()).hexdigest()
        root = layer_root()
        final = root / key[:KEY_CHARS]
        if final.is_dir():
            self.stats.reused += 1
            self.log(f"cached  {text[:100]}")
            self.take_cost(final, line, text)
            stamp(final)
        else:
            root.mkdir(parents=True, exist_ok=True)
            with open(root / f"{key[:KEY_CHARS]}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if final.is_dir():
                    self.stats.reused += 1
                    self.take_cost(final, line, text)
                else:
                    self.log(f"build   {text[:100]}")
                    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".b-"))
                    try:
                        (tmp / "up").mkdir(mode=0o755)
                        before = (self.budget.bytes_left, self.budget.inodes_left)
                        make(tmp / "up")
                        shift_tree(tmp / "up")  # what the runner wrote (COPY, WORKDIR)
                        if measure:
                            self.take(*layer_usage(tmp / "up"), line=line, text=text)
                        cost = [before[0] - self.budget.bytes_left,
                                before[1] - self.budget.inodes_left]  # fmt: skip
                        (tmp / "up").rename(final)
                        (root / f"{key[:KEY_CHARS]}.json").write_text(
                            json.dumps(
                                {
                                    "key": key,
                                    "parent": image.key,
                                    "line": line,
                                    "instruction": text[:2000],
                                    "cost": cost,
                                }
                            )  # fmt: skip
                        )
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
                    self.stats.built += 1
        return self.capped(Image((*image.layers, final), image.config, key))

    def take(self, nbytes: int, inodes: int, *, line: int, text: str) -> None:
        try:
            self.budget.take(nbytes, inodes)
        except OverBudget as e:
            raise ImageBuildError(
                BuildFailure.DISK_LIMIT, str(e), line=line, instruction=text
            ) from e

    def take_cost(self, final: Path, line: int, text: str) -> None:
        """Take a reused layer's cost (recorded when it was built; measured now for a layer
        cached before costs were recorded), so a build's outcome never depends on what
        other builds left in the cache."""
        try:
            meta = json.loads((final.parent / f"{final.name}.json").read_text())
            nbytes, inodes = (int(x) for x in meta["cost"])
        except (OSError, ValueError, KeyError, TypeError):
            nbytes, inodes = layer_usage(final)
        self.take(nbytes, inodes, line=line, text=text)

    def capped(self, image: Image) -> Image:
        """Flatten everything above the base into one layer once the stack is too deep."""
        if len(image.layers) - 1 <= MAX_LAYERS:
            return image
        base, above = image.layers[0], image.layers[1:]
        key = hashlib.sha256(f"flat:{image.key}".encode()).hexdigest()
        final = layer_root() / key[:KEY_CHARS]
        if final.is_dir():
            stamp(final)
        else:
            with open(layer_root() / f"{key[:KEY_CHARS]}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not final.is_dir():
                    tmp = Path(tempfile.mkdtemp(dir=layer_root(), prefix=".f-"))
                    try:
                        (tmp / "up").mkdir(mode=0o755)
                        flatten(above, tmp / "up")
                        shift_tree(tmp / "up")
                        (tmp / "up").rename(final)
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
        return Image((base, final), image.config, key)

    def remaining(self, step_line: int, text: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ImageBuildError(
                BuildFailure.TIMEOUT,
                f"build exceeded build_timeout_s={self.task.limits.build_timeout_s:g}",
                line=step_line,
                instruction=text,
            )
        return left

    # -- instructions -----------------------------------------------------------------------
    def workdir(self, image: Image, step: Config) -> Image:
        view = ImageView(image.layers)
        path = view.resolve(step.config.workdir)
        if view.is_dir(path):
            return image

        def make(up: Path) -> None:
            ensure_dirs(view, up, path)

        return self.layer(image, ["WORKDIR", path], make, step.text, step.line, measure=True)

    def copy(self, image: Image, step: Copy, images: dict[int, Image]) -> Image:
        view = ImageView(image.layers)
        try:
            if step.from_stage is not None:
                src_view: ImageView | None = ImageView(images[step.from_stage].layers)
                spec_src: object = ["stage", images[step.from_stage].key]
            else:
                src_view = None
                spec_src = digest_sources(self.context, step)
        except ContextError as e:
            raise ImageBuildError(
                BuildFailure.COPY, str(e), line=step.line, instruction=step.text
            ) from e
        spec = ["COPY", step.add, step.sources, step.dest, step.chown, step.chmod,
                step.inline, spec_src]  # fmt: skip

        def make(up: Path) -> None:
            try:
                copy_into_layer(self.context, step, view, up, src_view, self.budget)
            except LayerTooLarge as e:
                raise ImageBuildError(
                    BuildFailure.DISK_LIMIT, str(e), line=step.line, instruction=step.text
                ) from e
            except (ContextError, KeyError) as e:
                what = f"unknown user/group {e}" if isinstance(e, KeyError) else str(e)
                raise ImageBuildError(
                    BuildFailure.COPY, what, line=step.line, instruction=step.text
                ) from e

        return self.layer(image, spec, make, step.text, step.line)

    def verifier_toolchain(self, image: Image, packages: list[str]) -> Image:
        """A last layer: a venv at VERIFIER_VENV with the verifier's pip packages (as root)."""
        step = Run(
            ("/bin/sh", "-c", verifier_toolchain_script(packages)),
            tuple(sorted(image.config.env.items())),
            0,
            f"(verifier toolchain) pip install {' '.join(packages)}",
        )
        root = Image(image.layers, replace(image.config, user="0"), image.key)
        built = self.run(root, step)
        return Image(built.layers, image.config, built.key)

    def run(self, image: Image, step: Run) -> Image:
        config = image.config
        view = ImageView(image.layers)
        env = dict(step.env)
        env.setdefault("HOME", view.home(config.user))
        network = NetworkPolicy(NetworkMode.BUILD)
        cwd = config.workdir
        spec = ["RUN", step.argv, sorted(env.items()), cwd, config.user, network.mode.value]
        runner_env = env | dict.fromkeys(CA_ENV, BUILD_CA)
        ca_layer = build_ca_layer()

        def make(up: Path) -> None:
            if not view.is_dir(cwd):
                ensure_dirs(view, up, view.resolve(cwd))
            timeout = self.remaining(step.line, step.text)
            layers = [*image.layers, ca_layer] if ca_layer else list(image.layers)
            r = self.runner.run(
                layers, up, step.argv, env=runner_env, cwd=cwd, user=config.user,
                network=network, timeout_s=timeout,
                disk_mb=step_disk_mb(self.task.limits.disk_mb),
            )  # fmt: skip
            if r.ok:
                return
            tail = (r.stdout + r.stderr)[-OUTPUT_TAIL:]
            if r.timed_out:
                raise ImageBuildError(
                    BuildFailure.TIMEOUT,
                    f"RUN timed out (build_timeout_s={self.task.limits.build_timeout_s:g})",
                    line=step.line, instruction=step.text, output_tail=tail,
                )  # fmt: skip
            if _DISK_FULL.search(tail):
                kind = BuildFailure.DISK_LIMIT
            elif _OFFLINE.search(tail):
                kind = BuildFailure.NEEDS_INTERNET
            else:
                kind = BuildFailure.STEP_FAILED
            raise ImageBuildError(
                kind, f"RUN exited {r.exit_code}", line=step.line, instruction=step.text,
                output_tail=tail,
            )  # fmt: skip

        return self.layer(image, spec, make, step.text, step.line, measure=True)


def step_disk_mb(disk_mb: int) -> int:
    """The disk a RUN step writes on: the task's disk plus as much again (at least
    BUILD_SCRATCH_MB), for what a step downloads and deletes before it ends (apt's lists, pip's
    cache: `apt-get update && apt-get install ... && rm -rf /var/lib/apt/lists/*` peaks at
    about 70 MB above what it leaves). What it leaves must fit the task's disk with the rest
    of the image (the LayerBudget)."""
    return disk_mb + max(disk_mb, BUILD_SCRATCH_MB)


def verifier_toolchain_script(packages: Sequence[str]) -> str:
    """The shell script that makes the verifier's venv at VERIFIER_VENV with `packages`, run
    as root as the image's last step by both backends (the layer builder and the engine).

    VERIFIER_VENV lies under /usr, which the verifier's view takes from the image: the venv's
    pytest, interpreter and site-packages are the image's whatever the agent wrote there.
    """
    return (
        "set -e\n"
        "if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null;"
        " then apt-get update -qq && apt-get install -y -qq --no-install-recommends"
        " python3 python3-venv >/dev/null && rm -rf /var/lib/apt/lists/*; fi\n"
        f"python3 -m venv {VERIFIER_VENV}\n"
        f"{VERIFIER_VENV}/bin/pip install -q --no-cache-dir {shlex.join(packages)}\n"
    )


def build_ca_layer() -> Path | None:
    """A one-file layer holding the host's CA bundle at BUILD_CA (None when there is none)."""
    src = Path(HOST_CA_BUNDLE)
    if not src.is_file():
        return None
    data = src.read_bytes()
    key = hashlib.sha256(data).hexdigest()[:KEY_CHARS]
    final = layer_root() / f"ca-{key}-{STORAGE_TAG}"
    if final.is_dir():
        return final
    layer_root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=layer_root(), prefix=".ca-"))
    target = tmp / BUILD_CA.lstrip("/")
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    target.chmod(0o444)
    tmp.chmod(0o755)
    shift_tree(tmp)
    try:
        tmp.rename(final)
    except OSError:  # built concurrently
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def default_runner() -> StepRunner:
    """The local runtime's step runner (sandbox.local.LocalStepRunner)."""
    from sandbox.local import LocalStepRunner

    return LocalStepRunner()


@dataclass(frozen=True)
class BuildRow:
    """One task's build outcome, as a row (`t1 task build`, `t1 task import --build`)."""

    task_id: str
    built: bool
    failure: BuildFailure | None = None
    line: int | None = None
    instruction: str = ""
    reason: str = ""  # one line
    seconds: float = 0.0
    layers_built: int = 0
    layers_reused: int = 0


def build_row(task: Task, runner: StepRunner, *, log: Log | None = None) -> BuildRow:
    """Build one task's image and say how it went; never raises for the task's failures."""
    stats = BuildStats()
    t0 = time.monotonic()
    try:
        build_image(task, runner, log=log, stats=stats)
    except ImageBuildError as e:
        first = e.message.splitlines()[0] if e.message else ""
        tail = [ln for ln in e.output_tail.splitlines() if ln.strip()][-1:] or [""]
        reason = f"{first}: {tail[0]}" if tail[0] else first
        return BuildRow(task.id, False, e.kind, e.line, e.instruction[:200], reason[:300],
                        time.monotonic() - t0, stats.built, stats.reused)  # fmt: skip
    return BuildRow(task.id, True, seconds=time.monotonic() - t0, layers_built=stats.built,
                    layers_reused=stats.reused)  # fmt: skip
