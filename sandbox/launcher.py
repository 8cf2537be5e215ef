"""The compiled sandbox helper (sandbox/helper.c), built on first use with the system C
compiler: the privileged steps of starting a sandbox (namespaces, loop disk, overlay mounts,
chroot) and of entering it (cgroups, CPU limit, setns, controlling terminal)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("helper.c")


def helper_path(state_dir: str) -> str | None:
    """The compiled helper, or None when there is no C compiler to build it."""
    return _built_helper(state_dir)


@lru_cache(maxsize=1)
def _built_helper(state_dir: str) -> str | None:
    """Path of the compiled helper for the current source, or None without a compiler."""
    built = compile_c(SOURCE, Path(state_dir) / "bin", "t1-sandbox-helper")
    return str(built) if built is not None else None


def compile_c(source: Path, out_dir: Path, stem: str, *flags: str) -> Path | None:
    """`source` compiled with the system C compiler (and `flags`) into `out_dir`, named
    `stem-<source hash>` so an edited source builds anew; built once, atomically. None when
    there is no compiler or the build fails."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = out_dir / f"{stem}-{digest}"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".build-")
    os.close(fd)
    try:
        subprocess.run(
            [cc, "-O2", *flags, "-o", tmp, str(source)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        Path(tmp).unlink(missing_ok=True)
        return None
    return target
