"""The daemonless default backend: bubblewrap over an overlay of the host root filesystem.

Layout inside a private mount namespace held by one `holder` process per sandbox:

    <NS>/mask    whiteouts hiding what is not the sandbox's (secrets, home dirs, other
                 tasks' files, this project's state), on a tmpfs sized to the disk limit
    <NS>/host    read-only overlay  mask : /
    <NS>/root    the sandbox root   upper (tmpfs, or a layer being built) : env layer : host

Every command runs as `nsenter (holder's mount ns) bwrap --bind <NS>/root / ...` with fresh
PID/IPC/UTS (and network, unless the task allows it) namespaces, a reduced capability set (no
CAP_SYS_ADMIN, so masks cannot be unmounted), and inside the sandbox's cgroups. The holder is
chrooted into the sandbox root, so file transfers through /proc/<holder>/root resolve every
symlink inside the sandbox, never on the host.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from sandbox.base import ExecResult, SandboxError, SandboxUnavailable, normalize_dest
from sandbox.cgroups import SandboxCgroup, cgroups_available
from sandbox.exec_session import ExecSession
from sandbox.launcher import helper_path
from tasks.model import Limits

STATE_DIR = Path(os.environ.get("T1_SANDBOX_STATE", "/var/cache/t1-forge"))
# This project's own files (seed verifiers and solutions among them) are never visible.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
NS_DIR = "/run/t1-forge/ns"  # a mountpoint that only exists populated inside holders
ALLOWED_TOP = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var"})
HIDDEN = (
    "etc/shadow",
    "etc/shadow-",
    "etc/gshadow",
    "etc/gshadow-",
    "etc/ssh",
    "etc/sudoers.d",
    "var/cache",
    "var/lib/t1-forge",
    "var/lib/docker",
    "var/tmp",
    "var/log",
    "var/mail",
    "var/spool",
    "var/backups",
)
EMPTY_DIRS = {
    "tmp": 0o1777,
    "root": 0o700,
    "home": 0o755,
    "run": 0o755,
    "mnt": 0o755,
    "srv": 0o755,
    "opt": 0o755,
    "var/tmp": 0o1777,
    "var/log": 0o755,
    "var/cache": 0o755,
    "logs": 0o755,
    "logs/agent": 0o777,
    "logs/verifier": 0o777,
}
# Docker's default capability set without MKNOD and NET_RAW; never SYS_ADMIN.
CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "xterm",
    "USER": "root",
}
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024

MASK_DIR = Path("/dev/shm/t1-forge/masks")  # tmpfs: a lower layer beside / must not be on /

_HOLDER = r"""
set -e
NS=$1; SIZE=$2; MASK=$3; ENV_LAYER=$4; UPPER=$5; WORK=$6
mount -t tmpfs -o "size=${SIZE}m,mode=0755" t1-sandbox "$NS"
mkdir "$NS/host" "$NS/root"
mount -t overlay t1-host -o "lowerdir=$MASK:/" "$NS/host"
if [ -z "$UPPER" ]; then UPPER=$NS/up; WORK=$NS/work; mkdir "$UPPER" "$WORK"; fi
LOWER=$NS/host; [ -n "$ENV_LAYER" ] && LOWER=$ENV_LAYER:$NS/host
mount -t overlay t1-root -o "lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK" "$NS/root"
echo ready
exec chroot "$NS/root" /bin/sleep infinity
"""

_JOIN = 'for f in "$1" "$2" "$3"; do echo $$ > "$f"; done; ulimit -t "$4"; shift 4; exec "$@"'


def local_backend_problem() -> str | None:
    """Why the local backend cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the local sandbox needs root (overlay mounts, cgroups); run as root"
    for tool in ("bwrap", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"'{tool}' not found: apt-get install bubblewrap util-linux"
    if not cgroups_available():
        return "cgroup v1 memory/pids/cpu controllers are not mounted writable under /sys/fs/cgroup"
    return None


def hidden_paths(extra_hidden: list[str] | None = None) -> list[str]:
    """Paths (relative to /) the sandbox must not see.

    Every top-level entry of / outside ALLOWED_TOP, the HIDDEN paths, this process's working
    directory and home, the sandbox state dir, $T1_SANDBOX_HIDE and `extra_hidden` (e.g. the
    task's own source directory) when they sit under an allowed top-level dir.
    """
    hidden: set[str] = {e for e in os.listdir("/") if e not in ALLOWED_TOP}
    hidden.update(HIDDEN)
    env_extra = [p for p in os.environ.get("T1_SANDBOX_HIDE", "").split(":") if p]
    own = [os.getcwd(), str(Path.home()), str(STATE_DIR), str(PROJECT_ROOT)]
    for p in [*own, *env_extra, *(extra_hidden or [])]:
        rel = os.path.realpath(p).lstrip("/")
        if rel and rel.split("/")[0] in ALLOWED_TOP and os.path.lexists("/" + rel):
            hidden.add(rel)
    # A path inside another hidden path is already gone; an empty dir replaces some of them.
    return sorted(h for h in hidden if not any(h.startswith(o + "/") for o in hidden))


def mask_layer(workdir: str, extra_hidden: list[str] | None = None) -> Path:
    """A lower layer of whiteouts (hidden paths) and opaque empty dirs (EMPTY_DIRS, workdir).

    Built once per distinct spec on a tmpfs and reused by every sandbox with that spec.
    """
    empty = dict(EMPTY_DIRS) | {workdir.strip("/"): 0o755}
    hidden = [h for h in hidden_paths(extra_hidden) if h not in empty]
    key = hashlib.sha256(repr((hidden, sorted(empty.items()))).encode()).hexdigest()[:16]
    layer = MASK_DIR / key
    if layer.is_dir():
        return layer
    MASK_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(dir=MASK_DIR))
    for rel in hidden:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mknod(tmp / rel, stat.S_IFCHR | 0o600, os.makedev(0, 0))
    for rel, mode in sorted(empty.items()):
        d = tmp / rel
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(mode)
        os.setxattr(d, "trusted.overlay.opaque", b"y")
    tmp.chmod(0o755)
    try:
        tmp.rename(layer)
    except OSError:  # another process built the same layer first
        shutil.rmtree(tmp)
    return layer


class LocalSandbox:
    """One bubblewrap + overlayfs sandbox. See the module docstring for the layout.

    `env_layer` is a cached, read-only environment layer (or None); `upper_dir`, when given,
    makes the writable layer a directory on disk (used to build environment layers) instead
    of a tmpfs sized to the disk limit.
    """

    def __init__(
        self,
        limits: Limits,
        *,
        env_layer: Path | None = None,
        allow_network: bool = False,
        workdir: str = "/app",
        upper_dir: Path | None = None,
        hide: list[str] | None = None,
    ) -> None:
        self.id = "t1-" + uuid.uuid4().hex[:12]
        self.limits = limits
        self.env_layer = env_layer
        self.allow_network = allow_network
        self.workdir = workdir
        self.upper_dir = upper_dir
        self.hide = hide or []
        self._holder: subprocess.Popen[bytes] | None = None
        self._helper: str | None = None
        self._cgroup = SandboxCgroup(self.id)
        self._session: ExecSession | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        problem = local_backend_problem()
        if problem:
            raise SandboxUnavailable(problem)
        Path(NS_DIR).mkdir(parents=True, exist_ok=True)
        upper = work = ""
        if self.upper_dir is not None:
            (self.upper_dir / "up").mkdir(parents=True, exist_ok=True)
            (self.upper_dir / "work").mkdir(parents=True, exist_ok=True)
            upper, work = str(self.upper_dir / "up"), str(self.upper_dir / "work")
        self._cgroup.create(
            memory_mb=self.limits.memory_mb, pids=self.limits.pids, cpus=self.limits.cpus
        )
        params = [
            NS_DIR, str(self.limits.disk_mb), str(mask_layer(self.workdir, self.hide)),
            str(self.env_layer or ""), upper, work,
        ]  # fmt: skip
        self._helper = helper_path(str(STATE_DIR))
        if self._helper:
            args = [self._helper, "holder", *params]
        else:
            args = ["unshare", "--mount", "--propagation", "private",
                    "/bin/sh", "-c", _HOLDER, "holder", *params]  # fmt: skip
        self._holder = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._holder.stdout is not None
        line = self._holder.stdout.readline()
        if line.strip() != b"ready":
            err = self._holder.stderr.read().decode(errors="replace") if self._holder.stderr else ""
            self.stop()
            raise SandboxError(f"sandbox {self.id} failed to start: {err.strip() or line!r}")
        # File transfers go through /proc/<holder>/root: wait until it is the sandbox root.
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{self._holder.pid}/root") == "/":
            if time.monotonic() > deadline:
                self.stop()
                raise SandboxError(f"sandbox {self.id}: holder never entered its root")
            time.sleep(0.0005)

    def stop(self) -> None:
        self._cgroup.destroy()
        if self._holder is not None:
            if self._holder.poll() is None:
                self._holder.kill()
            self._holder.wait()
            for stream in (self._holder.stdout, self._holder.stderr):
                if stream:
                    stream.close()
            self._holder = None

    def __enter__(self) -> LocalSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands ----------------------------------------------------------------------
    def _root(self) -> str:
        if self._holder is None or self._holder.poll() is not None:
            raise SandboxError(f"sandbox {self.id} is not running")
        return f"/proc/{self._holder.pid}/root"

    def _command(self, command: str, cwd: str, cpu_s: int) -> list[str]:
        assert self._holder is not None
        net = [] if self.allow_network else ["--unshare-net"]
        caps = [a for c in CAPABILITIES for a in ("--cap-add", c)]
        if self._helper:
            enter = [self._helper, "exec", str(self._holder.pid), str(cpu_s),
                     *self._cgroup.procs_files(), "--"]  # fmt: skip
        else:
            enter = ["/bin/sh", "-c", _JOIN, "join", *self._cgroup.procs_files(), str(cpu_s),
                     "nsenter", f"--mount=/proc/{self._holder.pid}/ns/mnt", "--"]  # fmt: skip
        return [
            *enter,
            "bwrap", "--bind", f"{NS_DIR}/root", "/", "--dev", "/dev", "--proc", "/proc",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", *net,
            "--hostname", "sandbox", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", *caps, "--chdir", cwd,
            "/bin/bash", "-c", command,
        ]  # fmt: skip

    def exec(
        self, command: str, *, timeout_s: float | None = None, cwd: str | None = None
    ) -> ExecResult:
        self._root()
        timeout = timeout_s if timeout_s is not None else self.limits.agent_timeout_s
        cpu_s = max(1, int(timeout * max(1.0, self.limits.cpus)) + 1)
        oom_before = self._cgroup.oom_kills()
        t0 = time.monotonic()
        proc = subprocess.Popen(
            self._command(command, cwd or self.workdir, cpu_s),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=SANDBOX_ENV,
            start_new_session=True,
        )
        out, err, timed_out, truncated = _drain(proc, t0 + timeout, self.limits.output_bytes)
        if timed_out or truncated:
            self._cgroup.kill_all()
            proc.kill()
        code = proc.wait()
        # Anything the command left in the background died with its PID namespace when bwrap's
        # init exited; `stop` sweeps the cgroup once more.
        oom = self._cgroup.oom_kills() > oom_before
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            oom_killed=oom,
            output_truncated=truncated,
        )

    # -- files -------------------------------------------------------------------------
    def session(self) -> ExecSession:
        if self._session is None:
            self._session = ExecSession(self, self.workdir)
        return self._session

    def upload(self, files: dict[str, bytes], dest_dir: str, *, mode: int = 0o644) -> None:
        root = self._root()
        for rel, data in files.items():
            target = Path(root + normalize_dest(dest_dir, rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if rel.endswith(".sh") else mode)

    def download(self, path: str) -> dict[str, bytes]:
        root = Path(self._root() + normalize_dest(path, "."))
        if root.is_file():
            return {root.name: root.read_bytes()[:MAX_DOWNLOAD_BYTES]}
        out: dict[str, bytes] = {}
        if not root.is_dir():
            return out
        budget = MAX_DOWNLOAD_BYTES
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.is_symlink() and budget > 0:
                data = p.read_bytes()[:budget]
                budget -= len(data)
                out[p.relative_to(root).as_posix()] = data
        return out


def _drain(
    proc: subprocess.Popen[bytes], deadline: float, cap: int
) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout/stderr until EOF, the deadline, or `cap` bytes in total."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    timed_out = truncated = False
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                bufs[key.fd] += chunk
                if sum(len(b) for b in bufs.values()) > cap:
                    truncated = True
            if truncated:
                break
        if not timed_out and not truncated:
            # Pipes closed; the process may still be exiting.
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    out, err = bytes(bufs[out_fd]), bytes(bufs[err_fd])
    return out[:cap], err[: max(0, cap - len(out))], timed_out, truncated
