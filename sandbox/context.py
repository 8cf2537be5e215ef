"""COPY and ADD: which build-context files a step takes, and writing them into a layer.

The build context is the task's `environment/` files (minus the Dockerfile, minus what
`.dockerignore` excludes). Docker's rules kept: a directory source copies its contents; a
wildcard matches per path segment; several sources (or a destination ending in '/') need a
directory destination; a single file goes to `dest/basename` when the destination is a
directory of the image; parent directories are created; files and directories are owned by
root unless `--chown`; `--chmod` sets the mode; ADD extracts local tar archives (plain, gzip,
bzip2, xz). The task bundle keeps bytes, not modes, so a file is executable (0755) when it
starts with `#!` or ends in `.sh` and 0644 otherwise (documented in docs/images.md).
Destinations resolve through the image's symlinks (COPY x /bin/ lands in /usr/bin on a
merged-/usr root), never through the host's.

What a step writes lands in the host's layer cache, so it is bounded as a trial's disk is:
archive members and files of another stage are streamed a chunk at a time (never a whole
member in memory: a 1.2 MB gzip holding 1.2 GiB of zeros took the runner to 1.26 GB), zeros
left as holes, and every byte and entry is taken from the build's `LayerBudget` as written.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zlib
from pathlib import Path

from sandbox.layerfs import (
    ImageView,
    LayerBudget,
    LinkInLayer,
    OverBudget,
    copy_meta,
    ensure_dirs,
    host_path,
    write_stream,
)
from sandbox.stages import Copy


class ContextError(ValueError):
    """A COPY/ADD source that is not in the build context (or not in the source stage)."""


def file_mode(rel: str, data: bytes) -> int:
    return 0o755 if data.startswith(b"#!") or rel.endswith(".sh") else 0o644


# -- .dockerignore ---------------------------------------------------------------------------
def apply_dockerignore(files: dict[str, bytes]) -> dict[str, bytes]:
    """`files` without what the context's `.dockerignore` excludes (`!` re-includes)."""
    raw = files.get(".dockerignore")
    if raw is None:
        return files
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = posixpath.normpath(line.lstrip("!").strip().strip("/"))
        rules.append((negate, _ignore_regex(pattern)))

    def ignored(path: str) -> bool:
        out = False
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        for negate, rx in rules:
            if any(rx.fullmatch(p) for p in prefixes):
                out = not negate
        return out

    return {p: b for p, b in files.items() if not ignored(p)}


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


# -- source matching ------------------------------------------------------------------------
def _match(files: dict[str, bytes], src: str) -> list[tuple[str, bool]]:
    """(context path, is_dir) pairs a source names; '' is the whole context."""
    pattern = posixpath.normpath("/" + src).lstrip("/")
    if pattern == "":
        return [("", True)]
    if not any(c in pattern for c in "*?["):
        if pattern in files:
            return [(pattern, False)]
        if any(p.startswith(pattern + "/") for p in files):
            return [(pattern, True)]
        return []
    depth = pattern.count("/") + 1
    seen: dict[str, bool] = {}
    for path in sorted(files):
        parts = path.split("/")
        if len(parts) < depth:
            continue
        prefix = "/".join(parts[:depth])
        if all(
            fnmatch.fnmatchcase(a, b)
            for a, b in zip(parts[:depth], pattern.split("/"), strict=True)
        ):
            seen[prefix] = len(parts) > depth
    return sorted(seen.items())


def _tree(files: dict[str, bytes], root: str) -> dict[str, bytes]:
    """Files under context dir `root`, relative to it."""
    if not root:
        return dict(files)
    return {p[len(root) + 1 :]: b for p, b in files.items() if p.startswith(root + "/")}


def digest_sources(files: dict[str, bytes], step: Copy) -> str:
    """sha256 over the context files the step copies (its cache key's content part)."""
    if step.inline:
        return ""
    files = apply_dockerignore(files)
    h = hashlib.sha256()
    for src in step.sources:
        matches = _match(files, src)
        if not matches:
            raise ContextError(f"{src}: not found in the build context (environment/)")
        for path, is_dir in matches:
            chosen = _tree(files, path) if is_dir else {"": files[path]}
            for rel in sorted(chosen):
                h.update(f"{src}\0{path}\0{rel}\0{len(chosen[rel])}\0".encode())
                h.update(chosen[rel])
    return h.hexdigest()


# -- writing into a layer ---------------------------------------------------------------------
class LayerTooLarge(ContextError):
    """What a COPY/ADD writes exceeds the task's disk (its LayerBudget)."""


class _Writer:
    def __init__(
        self, step: Copy, view: ImageView, up: Path, budget: LayerBudget | None = None
    ) -> None:
        self.step, self.view, self.up = step, view, up
        self.uid, self.gid = view.ids(step.chown) if step.chown else (0, 0)
        self.budget = budget or LayerBudget(1 << 62, 1 << 62)

    def take(self, nbytes: int = 0, inodes: int = 0) -> None:
        try:
            self.budget.take(nbytes, inodes)
        except OverBudget as e:
            raise LayerTooLarge(f"line {self.step.line}: {e}") from e

    def host(self, path: str) -> Path:
        try:
            return host_path(self.up, path)
        except LinkInLayer as e:
            raise ContextError(f"line {self.step.line}: refused: {e}") from e

    def parent_dirs(self, path: str) -> None:
        """Create the directories leading to `path` (resolved), keeping existing attributes."""
        try:
            ensure_dirs(self.view, self.up, posixpath.dirname(path) or "/")
        except LinkInLayer as e:
            raise ContextError(f"line {self.step.line}: refused: {e}") from e

    def mkdir(self, path: str) -> None:
        self.parent_dirs(path)
        target = self.host(path)
        if target.is_dir() and not target.is_symlink():
            return
        if os.path.lexists(target):
            target.unlink()
        self.take(inodes=1)
        existing = self.view.lstat(path)
        target.mkdir()
        if existing is not None and stat.S_ISDIR(existing.st_mode) and not self.step.chown:
            copy_meta(existing, target)
            return
        os.chown(target, self.uid, self.gid)
        target.chmod(self.step.chmod if self.step.chmod is not None else 0o755)

    def write(self, path: str, data: bytes, mode: int) -> None:
        self.write_from(path, io.BytesIO(data), mode)

    def write_from(self, path: str, src: object, mode: int) -> None:
        """A regular file at `path` with what the file object `src` reads (streamed)."""
        self.parent_dirs(path)
        target = self.host(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()
        self.take(inodes=1)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            write_stream(fd, src, self.budget)
        except OverBudget as e:
            raise LayerTooLarge(f"line {self.step.line}: {e}") from e
        finally:
            os.close(fd)
        os.chown(target, self.uid, self.gid)
        target.chmod(self.step.chmod if self.step.chmod is not None else mode)

    def copy_file(self, path: str, src: Path, mode: int) -> None:
        """A copy of the layer file `src` (another stage's) at `path`: its apparent size
        taken from the budget, its holes kept holes."""
        from sandbox.disk import copy_extents

        fi = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fi).st_mode):
                return
            self.take(os.fstat(fi).st_size)
            self.parent_dirs(path)
            target = self.host(path)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif os.path.lexists(target):
                target.unlink()
            self.take(inodes=1)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fo = os.open(target, flags, 0o600)
            try:
                copy_extents(fi, fo)
            finally:
                os.close(fo)
        finally:
            os.close(fi)
        os.chown(target, self.uid, self.gid)
        target.chmod(self.step.chmod if self.step.chmod is not None else mode)

    def symlink(self, path: str, link: str) -> None:
        self.parent_dirs(path)
        target = self.host(path)
        if os.path.lexists(target):
            target.unlink()
        self.take(inodes=1)
        os.symlink(link, target)
        os.chown(target, self.uid, self.gid, follow_symlinks=False)

    def hardlink(self, path: str, existing: str) -> None:
        """A hard link at `path` to `existing`, a regular file this step wrote into the layer
        (an archive's earlier member); anything else (a file of a lower layer, a path of
        this host) is not linked. Neither path passes through a link."""
        source = self.host(existing)
        try:
            st = os.lstat(source)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            return
        self.parent_dirs(path)
        target = self.host(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()
        os.link(source, target, follow_symlinks=False)


def copy_into_layer(
    files: dict[str, bytes],
    step: Copy,
    view: ImageView,
    up: Path,
    src_view: ImageView | None = None,
    budget: LayerBudget | None = None,
) -> None:
    """Write what `step` copies into the empty layer directory `up` (the image is `view`),
    taking what it writes from `budget` (LayerTooLarge past it)."""
    w = _Writer(step, view, up, budget)
    if step.inline:
        for name, content in step.inline:
            dest = step.dest + name if step.dest.endswith("/") else step.dest
            w.write(_resolve_dest(view, dest), content.encode(), 0o644)
        return
    if src_view is not None:
        _copy_from_image(w, step, src_view)
        return
    files = apply_dockerignore(files)
    dest_is_dir = step.dest.endswith("/") or len(step.sources) > 1
    for src in step.sources:
        matches = _match(files, src)
        if not matches:
            raise ContextError(f"{src}: not found in the build context (environment/)")
        several = dest_is_dir or len(matches) > 1
        for path, is_dir in matches:
            if is_dir:
                root = _resolve_dest(view, step.dest.rstrip("/") or "/", is_dir=True)
                if root != "/":
                    w.mkdir(root)
                for rel, data in sorted(_tree(files, path).items()):
                    for d in _dirs_of(rel):
                        w.mkdir(posixpath.join(root, d))
                    w.write(posixpath.join(root, rel), data, file_mode(rel, data))
                continue
            data = files[path]
            if step.add and _extract(w, step, view, data):
                continue
            dest = step.dest.rstrip("/") or "/"
            if several or step.dest.endswith("/") or view.is_dir(dest):
                root = _resolve_dest(view, dest, is_dir=True)
                if root != "/":
                    w.mkdir(root)
                target = posixpath.join(root, posixpath.basename(path))
            else:
                target = _resolve_dest(view, dest)
            w.write(target, data, file_mode(path, data))


def _dirs_of(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _resolve_dest(view: ImageView, dest: str, *, is_dir: bool = False) -> str:
    """Resolve the destination's directory through the image's symlinks."""
    if is_dir:
        return view.resolve(dest)
    parent, name = posixpath.split(dest)
    return posixpath.join(view.resolve(parent or "/"), name)


def _member_path(root: str, name: str) -> str | None:
    """Where an archive member named `name` goes below `root`; None for `.` and for a name
    that climbs out (`../x`). A leading `/` is dropped (Docker extracts it below root)."""
    norm = posixpath.normpath(name.lstrip("/"))
    if norm in (".", "..") or norm.startswith("../"):
        return None
    return posixpath.join(root, norm)


def _extract(w: _Writer, step: Copy, view: ImageView, data: bytes) -> bool:
    """ADD of a local tar archive: extract it into the destination. False if not a tar.

    Members are read in order, each file streamed into the layer (no member is ever held in
    memory whole, and the archive is decompressed once). Directories, files, symbolic links
    and hard links to an earlier member are made; devices and FIFOs are not (a sandbox
    could not make them either), a hard link to anything else links nothing."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, EOFError, OSError):
        return False
    root = _resolve_dest(view, step.dest.rstrip("/") or "/", is_dir=True)
    with tar:
        try:
            for member in tar:  # in order: one pass over the decompressed stream
                path = _member_path(root, member.name)
                if path is None:
                    continue
                if member.isdir():
                    w.mkdir(path)
                elif member.issym():
                    w.symlink(path, member.linkname)
                elif member.islnk():
                    existing = _member_path(root, member.linkname)
                    if existing is not None:
                        w.hardlink(path, existing)
                elif member.isfile():
                    fobj = tar.extractfile(member)
                    w.write_from(path, fobj or io.BytesIO(), member.mode & 0o7777 & ~0o6000)
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
            raise ContextError(f"line {step.line}: a damaged archive: {e}") from e
    return True


def _copy_from_image(w: _Writer, step: Copy, src: ImageView) -> None:
    """COPY --from=<stage>: paths of another stage's merged tree (no wildcards)."""
    for s in step.sources:
        path = src.resolve(s if s.startswith("/") else "/" + s)
        host = src.entry(path)
        if host is None:
            raise ContextError(f"{s}: not found in the source stage")
        dest = step.dest.rstrip("/") or "/"
        if host.is_dir():
            root = _resolve_dest(w.view, dest, is_dir=True)
            if root != "/":
                w.mkdir(root)
            _copy_tree(w, src, path, root)
        else:
            if step.dest.endswith("/") or len(step.sources) > 1 or w.view.is_dir(dest):
                root = _resolve_dest(w.view, dest, is_dir=True)
                if root != "/":
                    w.mkdir(root)
                target = posixpath.join(root, posixpath.basename(path))
            else:
                target = _resolve_dest(w.view, dest)
            _copy_entry(w, host, target)


def _copy_tree(w: _Writer, src: ImageView, path: str, dest: str) -> None:
    for name in src.listdir(path):
        host = src.entry(posixpath.join(path, name))
        if host is None:
            continue
        target = posixpath.join(dest, name)
        if host.is_dir() and not host.is_symlink():
            w.mkdir(target)
            _copy_tree(w, src, posixpath.join(path, name), target)
        else:
            _copy_entry(w, host, target)


def _copy_entry(w: _Writer, host: Path, target: str) -> None:
    st = os.lstat(host)
    if stat.S_ISLNK(st.st_mode):
        w.symlink(target, os.readlink(host))
    elif stat.S_ISREG(st.st_mode):
        w.copy_file(target, host, stat.S_IMODE(st.st_mode))
