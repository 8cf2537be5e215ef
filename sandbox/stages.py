"""What a Dockerfile means: its stages as typed build steps, variables already substituted.

Pure (no file system): `resolve(text)` parses the Dockerfile, applies ARG/ENV scoping the way
Docker does, and returns the stages the final image needs. Each stage starts FROM a base name
(or an earlier stage) and lists `Step`s: `Run`, `Copy` (COPY and ADD) and `Config` (every
instruction that only changes the image config: ENV, WORKDIR, USER, SHELL, CMD, ENTRYPOINT).

Semantics kept from Docker (see docs/images.md for the full table):
- ARG before the first FROM is global and usable in FROM lines; a stage sees it only after
  re-declaring `ARG NAME`. ARG values are environment variables of later RUN steps (never of
  the image); ENV overrides an ARG of the same name.
- RUN, CMD and ENTRYPOINT are not substituted (the shell does it); the shell form runs as
  SHELL (default `/bin/sh -c`). A RUN with heredocs runs its whole text, bodies included.
- WORKDIR is relative to the previous one; LABEL, EXPOSE, VOLUME, STOPSIGNAL, HEALTHCHECK,
  MAINTAINER and ONBUILD are accepted and ignored (they do not change what a trial sees).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sandbox.image import ImageConfig
from tasks.dockerfile import (
    HEREDOC,
    DockerfileError,
    ExpansionError,
    Instruction,
    expand,
    expand_words,
    parse,
)

# Build-time args BuildKit predefines (usable after `ARG NAME` in a stage).
PREDEFINED_ARGS = {
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
}
IGNORED = frozenset({"LABEL", "EXPOSE", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER"})


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # the image env plus ARGs in scope, for this step only
    line: int
    text: str  # the instruction as written (for errors and logs)


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]  # context-relative (or stage-relative with from_stage) patterns
    dest: str  # absolute; ends with "/" when the destination is a directory
    line: int
    text: str
    add: bool = False  # ADD: local tar archives are extracted
    from_stage: int | None = None
    chown: str | None = None
    chmod: int | None = None
    inline: tuple[tuple[str, str], ...] = ()  # COPY <<EOF heredocs: (name, content)


@dataclass(frozen=True)
class Config:
    """A metadata-only instruction: the image config after it (no layer)."""

    config: ImageConfig
    line: int
    text: str
    keyword: str = ""


Step = Run | Copy | Config


@dataclass
class Stage:
    base: str  # a base image name, or "" when `base_stage` is set
    index: int
    name: str | None
    line: int
    base_stage: int | None = None
    steps: list[Step] = field(default_factory=list)


def resolve(
    text: str,
    path: str = "Dockerfile",
    build_args: dict[str, str] | None = None,
    base_config: Callable[[str], ImageConfig] | None = None,
) -> list[Stage]:
    """The stages the last stage depends on (itself last). Raises DockerfileError.

    `base_config(name)` is the config a FROM image starts with (its ENV, WORKDIR, USER...);
    without it, Docker's defaults.
    """
    dockerfile = parse(text, path)
    resolver = _Resolver(path, dockerfile.escape, build_args or {}, base_config)
    return resolver.run(dockerfile.instructions)


class _Resolver:
    def __init__(
        self,
        path: str,
        escape: str,
        build_args: dict[str, str],
        base_config: Callable[[str], ImageConfig] | None,
    ) -> None:
        self.path, self.escape, self.build_args = path, escape, build_args
        self.base_config = base_config or (lambda _name: ImageConfig())
        self.global_args: dict[str, str] = {}
        self.stages: list[Stage] = []

    def error(self, ins: Instruction, message: str) -> DockerfileError:
        return DockerfileError(self.path, ins.line, ins.keyword, message)

    def word(self, ins: Instruction, text: str, env: dict[str, str]) -> str:
        try:
            return expand(text, env, self.escape)
        except ExpansionError as e:
            raise self.error(ins, str(e)) from e

    def words(self, ins: Instruction, text: str, env: dict[str, str]) -> list[str]:
        try:
            return expand_words(text, env, self.escape)
        except ExpansionError as e:
            raise self.error(ins, str(e)) from e

    def run(self, instructions: tuple[Instruction, ...]) -> list[Stage]:
        stage: Stage | None = None
        config = ImageConfig()
        args: dict[str, str] = {}
        for ins in instructions:
            if ins.keyword == "ARG" and stage is None:
                for name, value in self.arg_decls(ins, dict(self.global_args)):
                    self.global_args[name] = self.build_args.get(name, value or "")
                continue
            if ins.keyword == "FROM":
                stage = self.from_(ins)
                args = {}
                if stage.base_stage is not None:
                    config = self.final_config(self.stages[stage.base_stage])
                else:
                    config = self.base_config(stage.base)
                self.stages.append(stage)
                continue
            if stage is None:
                raise self.error(ins, "comes before the first FROM")
            scope = {**args, **config.env}
            if ins.keyword == "ARG":
                for name, value in self.arg_decls(ins, scope):
                    if name in self.build_args:
                        value = self.build_args[name]
                    elif value is None:
                        value = self.global_args.get(name, PREDEFINED_ARGS.get(name, ""))
                    args[name] = value
            elif ins.keyword == "RUN":
                stage.steps.append(self.run_step(ins, config, args))
            elif ins.keyword in ("COPY", "ADD"):
                stage.steps.append(self.copy(ins, config, scope))
            elif ins.keyword in IGNORED or ins.keyword == "ONBUILD":
                continue
            else:
                config = self.config(ins, config, scope)
                stage.steps.append(Config(config, ins.line, ins.original, ins.keyword))
        if not self.stages:
            raise DockerfileError(self.path, 1, "FROM", "no FROM instruction")
        return self.needed()

    def arg_decls(self, ins: Instruction, scope: dict[str, str]) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for word in _split_raw_words(ins.args, self.escape):
            name, eq, raw = word.partition("=")
            if not name.replace("_", "a").isalnum():
                raise self.error(ins, f"bad ARG name {name!r}")
            out.append((name, self.word(ins, raw, scope) if eq else None))
        if not out:
            raise self.error(ins, "ARG needs a name")
        return out

    def from_(self, ins: Instruction) -> Stage:
        words = self.words(ins, ins.args, self.global_args)
        name: str | None = None
        if len(words) == 3 and words[1].lower() == "as":
            name = words[2].lower()
        elif len(words) != 1:
            raise self.error(ins, "expected 'FROM image [AS name]'")
        base = words[0]
        index = len(self.stages)
        for earlier in self.stages:
            if earlier.name and earlier.name == base.lower():
                return Stage("", index, name, ins.line, base_stage=earlier.index)
        return Stage(base, index, name, ins.line)

    def shell_argv(self, ins: Instruction, config: ImageConfig) -> tuple[str, ...]:
        if ins.exec_form is not None:
            if not ins.exec_form:
                raise self.error(ins, "empty exec form")
            return ins.exec_form
        command = ins.args
        for doc in ins.heredocs:
            command += "\n" + doc.body + doc.name
        if len(ins.heredocs) == 1 and HEREDOC.fullmatch(ins.args.strip()):
            command = ins.heredocs[0].body  # `RUN <<EOF`: the body is the script
            if command.startswith("#!"):
                raise self.error(
                    ins,
                    "a heredoc script with '#!' is not supported; write "
                    "RUN interpreter <<EOF instead",
                )
        if not command.strip():
            raise self.error(ins, "empty command")
        return (*config.shell, command)

    def run_step(self, ins: Instruction, config: ImageConfig, args: dict[str, str]) -> Run:
        unsupported = set(ins.flags) - {"network"}
        if unsupported:
            raise self.error(ins, f"unsupported flag --{sorted(unsupported)[0]}")
        env = {**args, **config.env}
        return Run(self.shell_argv(ins, config), tuple(sorted(env.items())), ins.line, ins.original)

    def copy(self, ins: Instruction, config: ImageConfig, scope: dict[str, str]) -> Copy:
        allowed = {"from", "chown", "chmod", "link", "parents", "exclude"} - (
            {"from"} if ins.keyword == "ADD" else set()
        )
        allowed |= {"checksum", "keep-git-dir"} if ins.keyword == "ADD" else set()
        unsupported = set(ins.flags) - allowed
        if unsupported:
            raise self.error(ins, f"unsupported flag --{sorted(unsupported)[0]}")
        if ins.heredocs:
            words = self.words(ins, _without_heredocs(ins.args), scope)
            if len(words) != 1:
                raise self.error(ins, "expected one destination after the heredocs")
            inline = tuple(
                (d.name, self.word(ins, d.body, scope) if d.expand else d.body)
                for d in ins.heredocs
            )
            dest = self.dest(ins, words[0], config, is_dir=len(inline) > 1)
            return Copy((), dest, ins.line, ins.original, inline=inline, **self.copy_opts(ins))
        if ins.exec_form is not None:
            words = [self.word(ins, w, scope) for w in ins.exec_form]
        else:
            words = self.words(ins, ins.args, scope)
        if len(words) < 2:
            raise self.error(ins, f"{ins.keyword} needs a source and a destination")
        sources = tuple(words[:-1])
        for src in sources:
            if "://" in src:
                raise self.error(
                    ins, f"ADD of a URL ({src}) is not supported offline; use RUN curl"
                )
            if posixpath.normpath(src).startswith("../"):
                raise self.error(ins, f"source {src!r} is outside the build context")
        dest = self.dest(ins, words[-1], config, is_dir=len(sources) > 1)
        from_stage = None
        if "from" in ins.flags:
            from_stage = self.stage_ref(ins, self.word(ins, ins.flags["from"], scope))
        opts = self.copy_opts(ins)
        return Copy(sources, dest, ins.line, ins.original, ins.keyword == "ADD", from_stage, **opts)

    def copy_opts(self, ins: Instruction) -> dict[str, Any]:
        chmod: int | None = None
        if "chmod" in ins.flags:
            try:
                chmod = int(ins.flags["chmod"], 8)
            except ValueError as e:
                raise self.error(ins, f"--chmod must be octal, got {ins.flags['chmod']!r}") from e
        return {"chown": ins.flags.get("chown"), "chmod": chmod}

    def dest(self, ins: Instruction, raw: str, config: ImageConfig, *, is_dir: bool) -> str:
        dest = raw if raw.startswith("/") else posixpath.join(config.workdir, raw)
        trailing = raw.endswith("/") or raw in (".", "..") or raw.endswith(("/.", "/.."))
        if is_dir and not trailing:
            raise self.error(ins, f"with several sources the destination must end in '/': {raw}")
        dest = posixpath.normpath(dest)
        if dest.startswith("//"):
            dest = dest[1:]
        return dest.rstrip("/") + "/" if (trailing or is_dir) and dest != "/" else dest

    def stage_ref(self, ins: Instruction, ref: str) -> int:
        for stage in self.stages:
            if stage.name == ref.lower() or str(stage.index) == ref:
                return stage.index
        raise self.error(ins, f"--from={ref}: no earlier stage of that name (images: unsupported)")

    def config(self, ins: Instruction, config: ImageConfig, scope: dict[str, str]) -> ImageConfig:
        kw = ins.keyword
        if kw == "ENV":
            env = dict(config.env)
            for name, value in self.env_pairs(ins, scope):
                env[name] = value
                scope[name] = value
            return replace(config, env=env)
        if kw == "WORKDIR":
            path = self.word(ins, ins.args, scope)
            if not path:
                raise self.error(ins, "WORKDIR needs a path")
            path = posixpath.normpath(posixpath.join(config.workdir, path))
            return replace(config, workdir="/" + path.lstrip("/"))
        if kw == "USER":
            user = self.word(ins, ins.args, scope)
            if not user:
                raise self.error(ins, "USER needs a name or uid")
            return replace(config, user=user)
        if kw == "SHELL":
            if not ins.exec_form:
                raise self.error(ins, 'SHELL takes the JSON form, e.g. ["/bin/bash", "-c"]')
            return replace(config, shell=ins.exec_form)
        if kw == "CMD":
            return replace(config, cmd=self.shell_argv(ins, config))
        if kw == "ENTRYPOINT":
            return replace(config, entrypoint=self.shell_argv(ins, config), cmd=None)
        raise self.error(ins, "unsupported instruction")

    def env_pairs(self, ins: Instruction, scope: dict[str, str]) -> list[tuple[str, str]]:
        first = ins.args.split(None, 1)
        if not first:
            raise self.error(ins, "ENV needs NAME=value")
        if "=" not in first[0]:  # legacy `ENV NAME value with spaces`
            if len(first) < 2:
                raise self.error(ins, f"ENV {first[0]} has no value")
            return [(first[0], self.word(ins, first[1], scope))]
        pairs = []
        local = dict(scope)
        for raw in _split_raw_words(ins.args, self.escape):
            name, eq, value = raw.partition("=")
            if not eq or not name:
                raise self.error(ins, f"expected NAME=value, got {raw!r}")
            pairs.append((name, self.word(ins, value, local)))
        return pairs

    def final_config(self, stage: Stage) -> ImageConfig:
        for step in reversed(stage.steps):
            if isinstance(step, Config):
                return step.config
        if stage.base_stage is not None:
            return self.final_config(self.stages[stage.base_stage])
        return self.base_config(stage.base)

    def needed(self) -> list[Stage]:
        want = {len(self.stages) - 1}
        for stage in reversed(self.stages):
            if stage.index not in want:
                continue
            if stage.base_stage is not None:
                want.add(stage.base_stage)
            for step in stage.steps:
                if isinstance(step, Copy) and step.from_stage is not None:
                    want.add(step.from_stage)
        return [s for s in self.stages if s.index in want]


def _without_heredocs(args: str) -> str:
    return HEREDOC.sub(" ", args)


def _split_raw_words(text: str, escape: str) -> list[str]:
    """Split on unquoted whitespace, keeping quotes and escapes for a later `expand`."""
    words: list[str] = []
    cur: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == escape and i + 1 < len(text) and quote != "'":
            cur.append(text[i : i + 2])
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in " \t":
            if cur:
                words.append("".join(cur))
                cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if cur:
        words.append("".join(cur))
    return words
