"""Base images offline: FROM names map to mmdebstrap recipes, each built once into a root.

The table ships as `sandbox/bases.toml` (documented there and in docs/images.md); a user file
named by `$T1_BASE_IMAGES` adds or overrides entries. `lookup(name)` gives the recipe for a
FROM name or raises `UnknownBaseImage` (never a fall-back to the host's root); `ensure_base`
builds the recipe's root filesystem under `$T1_SANDBOX_STATE/bases/<recipe hash>/` once,
under a file lock, published by an atomic rename.
"""

from __future__ import annotations

import fcntl
import fnmatch
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.base import EnvironmentBuildError
from sandbox.idmap import STORAGE_TAG, shift_tree
from sandbox.image import DEFAULT_PATH, ImageConfig

DEFAULT_TABLE = Path(__file__).with_name("bases.toml")
USER_TABLE_ENV = "T1_BASE_IMAGES"


class Recipe(BaseModel):
    """How to make one base root filesystem with mmdebstrap."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    variant: str = "minbase"
    components: list[str] = Field(default_factory=lambda: ["main"])
    packages: list[str] = Field(default_factory=list)
    tool_packages: bool = False  # add every package tasks/environment.py TOOL_PACKAGES names
    setup: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    cmd: list[str] = Field(default_factory=lambda: ["bash"])
    approximates: str | None = None

    def all_packages(self) -> list[str]:
        pkgs = set(self.packages)
        if self.tool_packages:
            from tasks.environment import TOOL_PACKAGES

            pkgs |= set(TOOL_PACKAGES.values())
        return sorted(pkgs)

    @property
    def key(self) -> str:
        """Content hash of what determines the root filesystem (not the config)."""
        spec = [self.suite, self.variant, self.components, self.all_packages(), self.setup]
        return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]

    def config(self) -> ImageConfig:
        env = {"PATH": DEFAULT_PATH, **self.env}
        return ImageConfig(env=env, workdir=self.workdir, user=self.user, cmd=tuple(self.cmd))


class ImageEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    recipe: str


class BaseTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipes: dict[str, Recipe] = Field(default_factory=dict)
    images: list[ImageEntry] = Field(default_factory=list)


class UnknownBaseImage(EnvironmentBuildError):
    """A FROM name no table entry maps to a recipe (a task error: the task is rejected)."""

    def __init__(self, name: str, recipes: list[str] | None = None) -> None:
        self.name = name
        choose = f"one of {', '.join(recipes)}" if recipes else "a recipe"
        super().__init__(
            f"FROM {name}: no offline base image for this name; map it in the TOML file "
            f'${USER_TABLE_ENV} names: [[images]] pattern = "{normalize(name)}" '
            f'recipe = "<{choose}>" (docs/images.md, "Base images offline")'
        )


class BaseTableError(ValueError):
    """The shipped or user base-image table is malformed (names the file and field)."""


def _read_table(path: Path) -> BaseTable:
    """The table in `path`, parsed once per version of the file (every image lookup reads
    it; parsing the shipped table took a millisecond). Callers do not change it."""
    try:
        st = os.stat(path)
        return _parse_table(str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError as e:
        raise BaseTableError(f"{path}: {e}") from e


@functools.lru_cache(maxsize=16)
def _parse_table(path: str, ino: int, size: int, mtime_ns: int) -> BaseTable:
    try:
        return BaseTable.model_validate(tomllib.loads(Path(path).read_text()))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BaseTableError(f"{path}: {e}") from e
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise BaseTableError(f"{path} [{field}]: {err['msg']}") from e


def load_table(user_path: str | None = None) -> BaseTable:
    """The shipped table with the user's table (if any) in front of it."""
    table = _read_table(DEFAULT_TABLE)
    user_path = user_path if user_path is not None else os.environ.get(USER_TABLE_ENV)
    if user_path:
        user = _read_table(Path(user_path))
        table = BaseTable(
            recipes={**table.recipes, **user.recipes}, images=[*user.images, *table.images]
        )
    for entry in table.images:
        if entry.recipe not in table.recipes:
            raise BaseTableError(f"image pattern {entry.pattern!r}: no recipe {entry.recipe!r}")
    return table


def normalize(name: str) -> str:
    """docker.io/library/debian@sha256:.. -> debian:latest; ubuntu:24.04 stays."""
    name = name.split("@", 1)[0].strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name.startswith("library/"):
        name = name[len("library/") :]
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else name + ":latest"


@dataclass(frozen=True)
class Base:
    name: str  # the recipe's name in the table
    recipe: Recipe


def lookup(name: str, table: BaseTable | None = None) -> Base:
    table = table or load_table()
    norm = normalize(name)
    for entry in table.images:
        if fnmatch.fnmatchcase(norm, entry.pattern):
            return Base(entry.recipe, table.recipes[entry.recipe])
    raise UnknownBaseImage(name, sorted(table.recipes))


def state_dir() -> Path:
    from sandbox.local import private_state_dir

    return private_state_dir()


def mmdebstrap_argv(recipe: Recipe, target: Path) -> list[str]:
    argv = [
        "mmdebstrap",
        "--mode=root",
        f"--variant={recipe.variant}",
        f"--components={','.join(recipe.components)}",
        "--quiet",
    ]
    pkgs = recipe.all_packages()
    if pkgs:
        argv.append("--include=" + ",".join(pkgs))
    for step in recipe.setup:
        argv.append(f'--customize-hook=chroot "$1" /bin/sh -euc {_sh_quote(step)}')
    return [*argv, recipe.suite, str(target)]


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def base_dir(recipe: Recipe) -> Path:
    """Where the recipe's root lives, its ids shifted for the local sandbox (sandbox.idmap)."""
    return state_dir() / "bases" / f"{recipe.key}-{STORAGE_TAG}"


def ensure_base(
    base: Base, *, timeout_s: float = 1800.0, log: Callable[[str], None] | None = None
) -> Path:
    """The recipe's root filesystem directory, built on first use. Raises EnvironmentBuildError.
    `log` hears when a build starts and ends, and when this process waits on another one
    building the same base (minutes on a fresh cache, silent otherwise)."""
    final = base_dir(base.recipe)
    if final.is_dir():
        return final
    if shutil.which("mmdebstrap") is None:
        raise EnvironmentBuildError(
            f"base {base.name}: mmdebstrap not found (apt-get install mmdebstrap)"
        )
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{final.name}.lock", "w") as lock:
        t0 = time.monotonic()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if log:
                log(f"waiting for base image {base.name}: another process is building it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if final.is_dir():
            if log and time.monotonic() - t0 >= 1.0:
                log(f"base image {base.name} ready (waited {time.monotonic() - t0:.0f}s)")
            return final
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{final.name}-"))
        target = tmp / "rootfs"
        try:
            if log:
                log(
                    f"building base image {base.name} ({base.recipe.suite}) with mmdebstrap "
                    "(once per sandbox cache; minutes)"
                )
            try:
                proc = subprocess.run(
                    mmdebstrap_argv(base.recipe, target),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired as e:
                raise EnvironmentBuildError(
                    f"base {base.name}: mmdebstrap timed out after {timeout_s:.0f}s"
                ) from e
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout)[-1500:]
                raise EnvironmentBuildError(
                    f"base {base.name}: mmdebstrap exited {proc.returncode}: {tail}"
                )
            _finish_root(target)
            shift_tree(target)
            target.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if log:
            log(f"base image {base.name} built in {time.monotonic() - t0:.0f}s")
    return final


def _finish_root(root: Path) -> None:
    """What container images have and a bootstrap leaves out: empty resolv.conf/hosts files
    (the runtime provides them), and no apt lists."""
    for rel in ("etc/resolv.conf", "etc/hostname"):
        p = root / rel
        if p.is_symlink() or p.exists():
            p.unlink()
        p.write_text("")
    hosts = root / "etc/hosts"
    if not hosts.exists():
        hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    lists = root / "var/lib/apt/lists"
    if lists.is_dir():
        for p in lists.iterdir():
            if p.is_file():
                p.unlink()
