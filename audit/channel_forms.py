"""Writers of the non-text channels `audit.channels` reads: archives, git repositories,
other encodings and serialized files, as bytes. The planted-defect generator
(`audit.planted`) hides answers with them; the tests build attacks with them. Pure except
`git_history`, which runs the host's `git` in a private temporary directory.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import marshal
import os
import pickle
import sqlite3
import subprocess
import tarfile
import tempfile
import zipfile

_FIXED_TIME = 1_700_000_000


def archive(kind: str, members: dict[str, bytes]) -> bytes:
    """A tar, tar.gz, tar.xz or zip archive of `members` ({name: bytes})."""
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(zipfile.ZipInfo(name, (2023, 11, 14, 22, 13, 20)), data)
        return buf.getvalue()
    mode = {"tar": "w", "tar.gz": "w:gz", "tgz": "w:gz", "tar.xz": "w:xz"}[kind]
    with tarfile.open(fileobj=buf, mode=mode) as tf:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), _FIXED_TIME, 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def encoded(form: str, text: str) -> bytes:
    """`text` as UTF-16 (with a BOM), Latin-1, or a base64 line inside a UTF-8 note."""
    if form == "utf-16":
        return text.encode("utf-16")
    if form == "latin-1":
        return text.encode("latin-1", "replace")
    blob = base64.b64encode(text.encode()).decode()
    return f"# state of the last run\ncache_blob: {blob}\n".encode()


def serialized(form: str, record: dict[str, str]) -> bytes:
    """`record` pickled, as an SQLite table `cache(key, value)`, or as the constants of a
    compiled Python module (this interpreter's magic number)."""
    if form == "pickle":
        return pickle.dumps(record, protocol=4)
    if form == "sqlite":
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE cache (key TEXT, value TEXT)")
        con.executemany("INSERT INTO cache VALUES (?, ?)", sorted(record.items()))
        con.commit()
        data = con.serialize()
        con.close()
        return bytes(data)
    src = "".join(f"{'V' + str(i)} = {v!r}\n" for i, v in enumerate(record.values()))
    code = compile(src, "cache.py", "exec")
    head = importlib.util.MAGIC_NUMBER + b"\0\0\0\0" + b"\0" * 8
    return head + marshal.dumps(code)


def _git(cwd: str, *args: str, stdin: bytes | None = None) -> bytes:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": cwd,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "GIT_AUTHOR_DATE": f"@{_FIXED_TIME} +0000",
        "GIT_COMMITTER_DATE": f"@{_FIXED_TIME} +0000",
    }
    r = subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True,
                       check=True, timeout=60)  # fmt: skip
    return r.stdout


def git_history(files: dict[str, bytes], how: str, packed: bool = False) -> dict[str, bytes]:
    """A `.git` directory ({".git/...": bytes}) whose history holds `files` although its
    last commit does not: `deleted` (committed, then removed), `dangling` (objects written,
    never committed) or `message` (their content in a commit message). `packed`: objects
    in a pack instead of loose."""
    with tempfile.TemporaryDirectory(prefix="t1-plant-git-") as tmp:
        _git(tmp, "init", "-q", "-b", "main")
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("project notes\n")
        _git(tmp, "add", "README.md")
        _git(tmp, "commit", "-q", "-m", "initial import")
        if how == "deleted":
            for name, data in files.items():
                path = os.path.join(tmp, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            _git(tmp, "add", "-A")
            _git(tmp, "commit", "-q", "-m", "add fixtures")
            _git(tmp, "rm", "-q", "-r", *sorted(files))
            _git(tmp, "commit", "-q", "-m", "remove fixtures")
        elif how == "dangling":
            for data in files.values():
                _git(tmp, "hash-object", "-w", "--stdin", stdin=data)
        else:
            body = "\n".join(d.decode("utf-8", "replace") for d in files.values())
            _git(tmp, "commit", "-q", "--allow-empty", "-m", f"record the run\n\n{body}")
        if packed:
            _git(tmp, "repack", "-q", "-a", "-d")
        out = {}
        root = os.path.join(tmp, ".git")
        for dirpath, _, names in os.walk(root):
            for n in names:
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, tmp)
                if "/hooks/" in f"/{rel}" or rel.endswith(("index", "COMMIT_EDITMSG")):
                    continue
                with open(full, "rb") as f:
                    out[rel] = f.read()
        return out
