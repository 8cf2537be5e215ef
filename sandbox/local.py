"""The daemonless default backend: an image's layers under a writable layer on a disk of its
own, in namespaces held by one `holder` process per sandbox (see sandbox/helper.c).

    NS/image    read-only view of the image's layers (what its Dockerfile built)
    NS/disk     an ext4 image of `disk_mb` on a loop device: the writable layer lives here
    NS/root     overlay(image layers, NS/disk/upper): the sandbox's root filesystem
    NS/v        the verifier's tests and report directory (never in the agent's view)

Nothing of the host's filesystem is visible: the root is the image. Every command runs as
`helper exec` (join a child cgroup, CPU limit, enter the holder's mount and network
namespaces) then `bwrap --bind NS/root /` with fresh PID/IPC/UTS namespaces, a reduced
capability set (no CAP_SYS_ADMIN, no CAP_NET_ADMIN) and the image's environment. The agent
types into one long-lived shell (`session`), the harness runs one-off commands (`exec`), and
the verifier runs in a fresh root of its own (`verify`, sandbox.judge's rules). The holder
dies when its runner does, killing the sandbox's processes; `t1 sandbox gc` removes what a
killed holder leaves (cgroups, lease files). docs/sandbox.md has the whole picture.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import posixpath
import select
import selectors
import shutil
import signal
import stat
import subprocess
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox import disk as sandbox_disk
from sandbox import idmap, network, safefs, seccomp
from sandbox.base import (
    DiskFull,
    ExecResult,
    NetworkMode,
    NetworkPolicy,
    SandboxError,
    SandboxUnavailable,
    VerifierRun,
    VerifierSpec,
    normalize_dest,
)
from sandbox.carry import Moved, carry, give_back, make_dir
from sandbox.cgroups import SandboxCgroup, cgroup_problem
from sandbox.git_guards import MAX_CONFIG_BYTES, driver_sections, guard_env, is_config_file
from sandbox.image import Image
from sandbox.judge import tests_group, tests_layout
from sandbox.launcher import helper_path
from sandbox.layerfs import is_opaque
from sandbox.session import PtySession
from tasks.model import Limits

STATE_DIR = Path(os.environ.get("T1_SANDBOX_STATE", "/var/cache/t1-forge"))
# Traversable, not listable: a rootful Podman's user-namespaced runtime walks to its storage
# below (sandbox.podman); what is ours below is private (PRIVATE_DIRS).
STATE_MODE = 0o711
# Layer caches (task images' setuid files, even if id-shifted), the helper, leases: no other
# host user gets in.
PRIVATE_DIRS = ("l", "bases", "pulled", "bin", "run", "disks")
RUN_DIR = STATE_DIR / "run"  # per sandbox: a lease file (for gc) and, briefly, its disk image
DISKS_DIR = STATE_DIR / "disks"  # formatted empty disk images, one per size (sandbox.disk)
NS_DIR = "/run/t1-forge/ns"  # a mountpoint that only exists populated inside holders
# Where the image may have setpriv (util-linux), which switches a command to a user other than
# root: looked up in the image's own view, so a `setpriv` the agent put on PATH never runs.
SETPRIV_DIRS = ("usr/bin", "bin", "usr/sbin", "sbin")
# Docker's default capability set without MKNOD and NET_RAW; never SYS_ADMIN or NET_ADMIN.
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
# Kernel knobs stay the host's and read-only (as Docker's /proc): sysctls, the SysRq trigger;
# files that describe the host's kernel and keys are masked.
PROC_READ_ONLY = [
    *[a for p in ("/proc/sys", "/proc/sysrq-trigger") if os.path.exists(p)
      for a in ("--ro-bind", p, p)],
    *[a for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list") if os.path.exists(p)
      for a in ("--ro-bind", "/dev/null", p)],
]  # fmt: skip
BASE_ENV = {"HOME": "/root", "LANG": "C.UTF-8", "USER": "root"}
HOSTS = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"
# Files the runtime provides over the image's (as Docker does); never written into a layer.
ETC_FILES = ("resolv.conf", "hosts", "hostname")
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
MAX_ETC_BYTES = 4 * 1024 * 1024  # /etc/passwd, /etc/group as the runner reads them

_LIVE: weakref.WeakSet[LocalSandbox] = weakref.WeakSet()


def private_state_dir() -> Path:
    """STATE_DIR (mode STATE_MODE) with its PRIVATE_DIRS created (or narrowed) to mode 0700:
    the image layers keep the setuid bits their Dockerfiles set, so no other user of this
    host may reach them. Checked on every call (a few stats; an image lookup calls it several
    times), made or narrowed only when a check fails."""
    if not _state_dir_ready(str(STATE_DIR)):
        _make_state_dir()
    return STATE_DIR


def _state_dir_ready(top: str) -> bool:
    try:
        if stat.S_IMODE(os.stat(top).st_mode) != STATE_MODE:
            return False
        for name in PRIVATE_DIRS:
            st = os.stat(os.path.join(top, name))
            if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o077:
                return False
    except OSError:
        return False
    return True


def _make_state_dir() -> None:
    STATE_DIR.mkdir(mode=STATE_MODE, parents=True, exist_ok=True)
    if stat.S_IMODE(STATE_DIR.stat().st_mode) != STATE_MODE:
        STATE_DIR.chmod(STATE_MODE)
    for name in PRIVATE_DIRS:
        d = STATE_DIR / name
        d.mkdir(mode=0o700, exist_ok=True)
        if d.stat().st_mode & 0o077:
            d.chmod(0o700)


def local_backend_problem() -> str | None:
    """Why the local backend cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the local sandbox needs root (namespaces, loop devices, cgroups); run as root"
    for tool in ("bwrap", "mkfs.ext4", "nsenter"):
        if shutil.which(tool) is None:
            return f"'{tool}' not found: apt-get install bubblewrap e2fsprogs util-linux"
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control: the sandbox's disk needs loop devices"
    return cgroup_problem()


class LocalSandbox:
    """One sandbox of `image`. `env`, `workdir` and `user` are the agent's (default: the
    image's config). With `layer_step` it runs an image build's step: the runtime's
    directories (/logs, the workdir) are not made, and `export_layer` copies what the step
    wrote into the new layer. Either way the writable layer is a disk of `limits.disk_mb`."""

    def __init__(
        self,
        image: Image,
        limits: Limits,
        *,
        network_policy: NetworkPolicy | None = None,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        layer_step: bool = False,
    ) -> None:
        self.id = "t1-" + uuid.uuid4().hex[:12]
        self.image = image
        self.limits = limits
        self.network_policy = network_policy or NetworkPolicy()
        self.workdir = workdir or image.config.workdir or "/"
        self.env = {**BASE_ENV, **image.config.env, **(env or {})}
        self.user = image.config.user if user is None else user
        self.layer_step = layer_step
        self._holder: subprocess.Popen[bytes] | None = None
        self._helper = ""
        self._bwrap = ""
        self._cgroup = SandboxCgroup(self.id)
        self._net = network.Attachment(None)
        self._session: PtySession | None = None
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._reclaim_queued = False
        self._lease = RUN_DIR / f"{self.id}.json"
        self._judges = 0  # verifier roots made so far (NS/j0, NS/j1, ...)
        self._moved: list[Moved] = []  # files carried out of the agent's layer

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        problem = local_backend_problem()
        if problem:
            raise SandboxUnavailable(problem)
        helper = helper_path(str(private_state_dir()))
        if helper is None:
            raise SandboxUnavailable(
                "no C compiler to build the sandbox helper: apt-get install gcc"
            )
        self._helper = helper
        # Looked up here, in the runner's PATH: the helper execs it after entering the
        # sandbox's user namespace but still in the host's file system view, with the
        # sandbox's environment, whose PATH the task's image sets.
        self._bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
        Path(NS_DIR).mkdir(parents=True, exist_ok=True)
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        _install_signal_handlers()
        _LIVE.add(self)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        lim = self.limits
        self._write_lease(holder=-1)  # before any resource exists, so gc never races a start
        self._cgroup.create(memory_mb=lim.memory_mb, pids=lim.pids, cpus=lim.cpus)
        for child in ("session", "exec", "verify"):
            self._cgroup.child(child).create()
        # The writable layer is a disk of disk_mb, for a trial as for an image build's step
        # (a RUN that writes 1.5 GB fills its disk, not the host's layer cache).
        upper = work = "-"
        disk = str(RUN_DIR / f"{self.id}.img")
        sandbox_disk.copy_sparse(sandbox_disk.template(DISKS_DIR, lim.disk_mb), Path(disk))
        layers = ":".join(str(p) for p in reversed(self.image.layers))
        self._holder = subprocess.Popen(
            [self._helper, "holder", NS_DIR, disk, layers, upper, work,
             str(self._cgroup.path("pids")), idmap.uid_map_line().strip(),
             str(idmap.OWNER_BASE), self._bwrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        assert self._holder.stdout is not None
        line = self._holder.stdout.readline()
        os.unlink(disk)  # the loop device holds it; it is freed with the holder
        if line.strip() != b"ready":
            err = self._holder.stderr.read().decode(errors="replace") if self._holder.stderr else ""
            raise SandboxError(f"sandbox {self.id} failed to start: {err.strip() or line!r}")
        self._write_lease(holder=self._holder.pid)
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{self._holder.pid}/root") == "/":
            if time.monotonic() > deadline:
                raise SandboxError(f"sandbox {self.id}: holder never entered its root")
            time.sleep(0.0005)
        self._net = network.attach(self._holder.pid, self.network_policy)
        etc = self._ns() / "etc"  # a small tmpfs of its own (sandbox/helper.c)
        (etc / "resolv.conf").write_text(_resolv_conf(self.network_policy))
        (etc / "hosts").write_text(HOSTS + _allowed_hosts_lines(self.network_policy))
        (etc / "hostname").write_text("sandbox\n")
        for name in ETC_FILES:
            os.chown(etc / name, *idmap.ROOT)  # the sandbox's root may edit them, as in Docker
        if not self.layer_step:
            # Resolved in the sandbox: a link the image ships at these paths stays inside it.
            with self._root_fd() as root:
                for d, mode in (("logs/agent", 0o777), ("logs/verifier", 0o755)):
                    os.close(safefs.makedirs(root, d, owner=idmap.ROOT))
                    safefs.chmod_dir(root, d, mode)
                os.close(safefs.makedirs(root, self.workdir, owner=idmap.ROOT))

    def _write_lease(self, *, holder: int) -> None:
        info = {"runner": os.getpid(), "holder": holder, "started": time.time()}
        self._lease.write_text(json.dumps(info))

    def stop(self) -> None:
        """Idempotent and thread-safe: another thread may stop a sandbox in use (cancel)."""
        with self._stop_lock:
            self._stop()

    def _stop(self) -> None:
        _LIVE.discard(self)
        holder, self._holder = self._holder, None
        exiting = None  # a holder whose sandbox's processes are gone, still exiting
        if holder is not None:
            if holder.stdin:
                holder.stdin.close()  # the holder kills the sandbox's processes and exits
            # Once it says so, nothing of the sandbox runs; its own exit (the kernel drops
            # the mounts, the loop disk, the namespaces: a few ms) is waited for off the
            # caller's path. An image build's step waits for it (its disk and loop device
            # are freed before the next step takes its own).
            if self.layer_step or self._reclaim_queued:
                _finish_holder(holder, 10)
            elif _says_stopped(holder, 10):
                exiting = holder
            else:  # silent for 10 s, or gone without a word: killed and reaped now
                _finish_holder(holder, 0)
        if self._session is not None:
            self._session.close(kill=False)  # the holder killed it with everything else
            self._session = None
        self._net.close()
        (RUN_DIR / f"{self.id}.img").unlink(missing_ok=True)
        # Killed processes may take a few ms more to exit (the last one tears down mounts);
        # their groups and the lease go when they have, off the caller's path.
        if not self._reclaim_queued:
            self._reclaim_queued = True
            _REAPER.submit(_Remains(self._cgroup, self._lease, exiting))

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

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        """A directory fd of the sandbox's root, for sandbox.safefs (never a host path)."""
        fd = safefs.open_root(self._root())
        try:
            yield fd
        finally:
            os.close(fd)

    def _ns(self) -> Path:
        """NS as this process reaches it (the holder's fd 3)."""
        self._root()
        assert self._holder is not None
        return Path(f"/proc/{self._holder.pid}/fd/3")

    def _argv(
        self,
        group: str,
        argv: Sequence[str],
        *,
        cwd: str,
        user: str,
        cpu_s: int,
        tty: bool = False,
        binds: Sequence[str] = (),
        seccomp_fd: int | None = None,
        root: str = "",
        judge_caps: bool = False,
    ) -> list[str]:
        """The command line of one process tree in the sandbox; `seccomp_fd` (from
        `sandbox.seccomp.profile_fd`, passed to the child) carries the system-call filter.
        With `root` (NS/<name>, sandbox.judge) the tree runs in that fresh root instead of
        the agent's, its command the first process of its PID namespace (the whole tree ends
        with it), and a non-root `user` keeps the right to switch to the agent's uid
        (`judge_caps`)."""
        assert self._holder is not None
        caps = [a for c in CAPABILITIES for a in ("--cap-add", c)]
        # Every process tree dies with the process that started it (bwrap's init would
        # otherwise outlive the command while anything it left runs); a one-off command also
        # gets a new session, while the agent's shell keeps its own terminal as controlling
        # one. (The parent is the calling thread: a session must be started by a thread
        # that outlives it.)
        detach = ["--die-with-parent"] if tty else ["--new-session", "--die-with-parent"]
        if root:
            detach.append("--as-pid-1")
        filt = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        top = root or NS_DIR
        return [
            self._helper, "exec", str(self._holder.pid), str(cpu_s), "1" if tty else "0",
            *self._cgroup.child(group).tasks_files(), "--",
            self._bwrap, "--bind", f"{top}/root", "/", "--dev", "/dev", "--proc", "/proc",
            *PROC_READ_ONLY,
            *[a for f in ETC_FILES for a in ("--bind", f"{top}/etc/{f}", f"/etc/{f}")],
            *binds,
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", *detach, "--cap-drop", "ALL", *caps, *filt, "--chdir", cwd,
            *self._as_user(user, judge_caps=judge_caps), *argv,
        ]  # fmt: skip

    def _as_user(self, user: str, *, judge_caps: bool = False) -> list[str]:
        """The image's setpriv (by its path in the image) switching to `user`, looked up in the
        image's own /etc/passwd (the agent's /etc cannot change who runs, nor keep the
        verifier from starting)."""
        if user in ("", "root", "0"):
            return []
        fd = safefs.open_root(self._ns() / "image")
        try:
            uid, gid = _lookup_user(fd, user)
            setpriv = next((d for d in SETPRIV_DIRS if _is_file(fd, f"{d}/setpriv")), None)
        finally:
            os.close(fd)
        if setpriv is None:
            raise SandboxError(f"the image has no setpriv to run as user {user!r}")
        caps = (
            ["--inh-caps=+setuid,+setgid", "--ambient-caps=+setuid,+setgid"] if judge_caps else []
        )
        return [f"/{setpriv}/setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups",
                *caps, "--"]  # fmt: skip

    def _cpu_seconds(self, timeout: float) -> int:
        """A per-process CPU-time backstop. The wall clock and the cgroup's CPU quota are the
        real limits; this one only stops a runaway process the wall clock missed, so it is
        generous (a multi-threaded step accrues CPU time faster than wall time)."""
        return int(timeout * max(1.0, self.limits.cpus) * 2) + 10

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """A one-off command (`bash -c` for a string, else an argv) in a fresh PID namespace."""
        self._root()
        argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
        timeout = timeout_s if timeout_s is not None else self.limits.agent_timeout_s
        with self._lock:  # one-off commands share the `exec` group: one at a time
            return self._run(
                "exec", argv, timeout=timeout, cwd=cwd or self.workdir,
                env=self.env if env is None else dict(env),
                user=self.user if user is None else user,
            )  # fmt: skip

    def _run(
        self,
        group: str,
        argv: Sequence[str],
        *,
        timeout: float,
        cwd: str,
        env: Mapping[str, str],
        user: str,
        binds: Sequence[str] = (),
        root: str = "",
    ) -> ExecResult:
        """One process tree in the sandbox's `group` (in the judge's fresh `root` when given,
        under the verifier phase's system-call filter)."""
        oom_before = self._cgroup.oom_kills()
        t0 = time.monotonic()
        fd = seccomp.verifier_profile_fd() if root else seccomp.profile_fd()
        try:
            full = self._argv(
                group, argv, cwd=cwd, user=user, cpu_s=self._cpu_seconds(timeout), binds=binds,
                seccomp_fd=fd, root=root, judge_caps=bool(root),
            )  # fmt: skip
            proc = subprocess.Popen(
                full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=dict(env), start_new_session=True, pass_fds=() if fd is None else (fd,),
            )  # fmt: skip
        finally:
            if fd is not None:
                os.close(fd)
        out, err, timed_out, truncated = _drain(proc, t0 + timeout, self.limits.output_bytes)
        if timed_out or truncated:
            self._cgroup.child(group).kill_all()
            proc.kill()
        code = proc.wait()
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            oom_killed=self._cgroup.oom_kills() > oom_before,
            output_truncated=truncated,
        )

    def session(self) -> PtySession:
        if self._session is None:
            self._root()
            group = self._cgroup.child("session")
            cpu_s = self._cpu_seconds(self.limits.agent_timeout_s)
            env = {**self.env, "TERM": "xterm"}

            def spawn(slave: int) -> subprocess.Popen[bytes]:
                fd = seccomp.profile_fd()
                try:
                    argv = self._argv(
                        "session", ["/bin/bash", "--noprofile", "--norc", "--noediting", "-i"],
                        cwd=self.workdir, user=self.user, tty=True, cpu_s=cpu_s, seccomp_fd=fd,
                    )  # fmt: skip
                    return subprocess.Popen(
                        argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                        pass_fds=() if fd is None else (fd,),
                    )  # fmt: skip
                finally:
                    if fd is not None:
                        os.close(fd)

            self._session = PtySession(
                spawn,
                output_cap=self.limits.output_bytes,
                on_close=group.kill_all,
                oom_kills=self._cgroup.oom_kills,
            )
        return self._session

    def verify(self, spec: VerifierSpec) -> VerifierRun:
        """The verifier as sandbox.judge says: in a fresh root made from the image's layers
        (NS/jN, mounted by the holder's helper) whose writable layer the runner prepares
        first, on the sandbox's disk: the agent's outputs carried in as data
        (sandbox.carry), /tests, and /logs/verifier, the judge's alone."""
        self._root()
        if not spec.keep_agent_processes:
            # Killed, not waited for: a SIGKILLed process runs no more code of its own, and
            # its namespaces' teardown need not delay the verifier.
            self._cgroup.child("session").kill_all(wait=False)
            self._cgroup.child("exec").kill_all(wait=False)
            if self._session is not None:
                self._session.close(kill=False)
                self._session = None
        if spec.network is not None and spec.network != self.network_policy:
            self._set_network(spec.network)
        ns = self._ns()
        disk_full = _disk_full(ns / "disk")
        name = f"j{self._judges}"
        self._judges += 1
        layer = ns / "disk" / name
        try:
            git_files = self._prepare_judge(spec, layer)
            git_drivers = driver_sections(
                git_files, lambda p: _read_layer(layer / "upper", p, MAX_CONFIG_BYTES)
            )
            done = subprocess.run(
                [self._helper, "judge", str(self._holder.pid if self._holder else 0), NS_DIR,
                 ":".join(str(p) for p in reversed(self.image.layers)), name],
                capture_output=True, timeout=30,
            )  # fmt: skip
            if done.returncode != 0:
                raise SandboxError(f"sandbox {self.id}: the verifier's root: {done.stderr!r}")
            etc = ns / name / "etc"
            policy = spec.network or self.network_policy
            (etc / "resolv.conf").write_text(_resolv_conf(policy))
            (etc / "hosts").write_text(HOSTS + _allowed_hosts_lines(policy))
            (etc / "hostname").write_text("sandbox\n")
            for f in ETC_FILES:
                os.chown(etc / f, *idmap.ROOT)
            result = self._run(
                "verify", ["/bin/bash", "-c", spec.command], timeout=spec.timeout_s, cwd=spec.cwd,
                env=guard_env({**BASE_ENV, **self.image.config.env, **spec.env}, git_drivers),
                user=spec.user, root=f"{NS_DIR}/{name}",
            )  # fmt: skip
        finally:
            self._cgroup.child("verify").kill_all()  # nothing of the verifier runs on
            changed = give_back(self._moved)  # the agent's layer whole again, as far as the
            self._moved.clear()  # verifier left its files as they were
        files = _read_report(layer / "upper")
        return VerifierRun(
            result=result, files=files, disk_full=disk_full, outputs_changed=bool(changed)
        )

    def _prepare_judge(self, spec: VerifierSpec, layer: Path) -> list[str]:
        """The writable layer of the judge's root, before it is mounted: the agent's outputs
        (none for the pristine image), the working directory a directory, /tests, and
        /logs/verifier owned by the judge's user, mode 0700, with the report files. Returns
        the git configuration files carried (for sandbox.git_guards)."""
        ns = self._ns()
        upper, image = layer / "upper", ns / "image"
        agent = (idmap.host_id(spec.agent_uid), idmap.host_id(spec.agent_gid))
        fd = safefs.open_root(image)
        try:
            judge_ids = (0, 0) if spec.user in ("", "root", "0") else _lookup_user(fd, spec.user)
        finally:
            os.close(fd)
        judge = (idmap.host_id(judge_ids[0]), idmap.host_id(judge_ids[1]))
        try:
            (layer / "work").mkdir(parents=True)
            upper.mkdir()
            os.chown(upper, *idmap.ROOT)
            carried: list[str] = []
            if spec.outputs:
                carried = carry(
                    ns / "disk" / "upper", image, upper, spec.outputs, agent,
                    copy=spec.keep_agent_processes, project=spec.cwd, moved=self._moved,
                )  # fmt: skip
            _ensure_workdir(upper, image, spec.cwd, agent if _under(spec.cwd, spec.outputs)
                            else idmap.ROOT)  # fmt: skip
            _stage_tests(upper / "tests", spec.tests, judge_ids)
            if not (upper / "logs").is_dir():
                make_dir(upper / "logs", 0o755, idmap.ROOT)
            make_dir(upper / "logs" / "verifier", 0o700, judge, opaque=True)
            _write_layer_files(upper / "logs" / "verifier", spec.report_files, judge, mode=0o600)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull(
                    f"sandbox {self.id}: no room to carry the agent's outputs: {e}"
                ) from e
            raise SandboxError(f"sandbox {self.id}: the verifier's root: {e}") from e
        except RecursionError as e:  # the agent's tree deeper than the walk: did not run
            raise SandboxError(f"sandbox {self.id}: the agent's outputs nest too deep") from e
        return [p for p in carried if is_config_file(p)]

    def _set_network(self, policy: NetworkPolicy) -> None:
        """Give the (shared) network namespace another policy: from none, the NAT is
        attached; routes set for the previous policy are not undone, so a policy can only
        widen from `none`."""
        if self.network_policy.mode != NetworkMode.NONE:
            return
        assert self._holder is not None
        self._net = network.attach(self._holder.pid, policy)
        self.network_policy = policy
        (self._ns() / "etc" / "resolv.conf").write_text(_resolv_conf(policy))
        (self._ns() / "etc" / "hosts").write_text(HOSTS + _allowed_hosts_lines(policy))

    # -- files -------------------------------------------------------------------------
    def upload(self, files: dict[str, bytes], dest_dir: str, *, mode: int = 0o644) -> None:
        """Write `files` below `dest_dir`, resolved in the sandbox (sandbox.safefs)."""
        try:
            with self._root_fd() as root:
                for rel, data in files.items():
                    dest = normalize_dest(dest_dir, rel)
                    safefs.write_file(
                        root, dest, data, 0o755 if rel.endswith(".sh") else mode,
                        owner=idmap.ROOT,
                    )  # fmt: skip
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull(f"sandbox {self.id}: disk full while uploading to {dest_dir}") from e
            raise SandboxError(f"sandbox {self.id}: upload to {dest_dir} failed: {e}") from e

    def download(self, path: str) -> dict[str, bytes]:
        """A file ({name: bytes}) or a directory's regular files, resolved in the sandbox and
        read at most MAX_DOWNLOAD_BYTES in all; links below a directory are not followed."""
        dest = normalize_dest(path, ".")
        with self._root_fd() as root:
            data = safefs.read_file(root, dest, MAX_DOWNLOAD_BYTES)
            if data is not None:
                return {posixpath.basename(dest): data}
            return safefs.read_tree(root, dest, MAX_DOWNLOAD_BYTES)

    def export_layer(self, dest: Path) -> None:
        """Copy what an image build's step wrote (its writable layer on its disk: files,
        links, whiteouts, opaque directories, xattrs, hard links; zeros as holes) into the
        layer directory `dest`, over the directories the builder put there first (the
        step's lower layer) that the step did not delete or make opaque."""
        src = self._ns() / "disk" / "upper"
        _clear_shadowed(src, dest)
        r = subprocess.run(
            ["cp", "-a", "--sparse=always", f"{src}/.", f"{dest}/"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            raise SandboxError(f"sandbox {self.id}: the step's layer could not be stored: "
                               f"{r.stderr.strip()[-300:]}")  # fmt: skip

    def disk_free_bytes(self) -> int:
        st = os.statvfs(self._ns() / "disk")
        return st.f_bavail * st.f_frsize


class LocalStepRunner:
    """Runs one Dockerfile RUN step: `layers` read-only (and what the builder already put in
    `upper`, the new layer's directory, above them), the step's writes on a disk of
    `disk_mb` like a trial's, copied into `upper` when the step succeeds; fresh namespaces,
    network per `network`."""

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
        disk_mb: int = Limits().disk_mb,
        limits: Limits | None = None,
    ) -> ExecResult:
        from sandbox.image import Image, ImageConfig

        upper.mkdir(parents=True, exist_ok=True)
        below = list(layers)
        if any(upper.iterdir()):  # the step's working directory, made by the builder
            idmap.shift_tree(upper)
            below.append(upper)
        image = Image(layers=tuple(below), config=ImageConfig(env=dict(env)), key="build")
        lim = limits or Limits(
            memory_mb=4096, pids=4096, cpus=2, output_bytes=4_000_000, disk_mb=disk_mb
        )
        sb = LocalSandbox(image, lim, network_policy=network, workdir=cwd, user=user,
                          layer_step=True)  # fmt: skip
        with sb:
            r = sb.exec(argv, timeout_s=timeout_s, cwd=cwd, env=env, user=user)
            if r.ok:
                sb.export_layer(upper)
            return r


# -- helpers -------------------------------------------------------------------------------
def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Reap `proc` if it exits within `timeout_s`, woken by its pidfd (Popen.wait with a
    timeout polls with sleeps of up to 50 ms)."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout_s * 1000):
            return False
    finally:
        os.close(fd)
    proc.wait()
    return True


def _says_stopped(holder: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the holder, its pipe closed, reports within `timeout_s` that it killed every
    process of the sandbox's cgroups and saw them gone (sandbox/helper.c)."""
    if holder.stdout is None:
        return False
    poller = select.poll()
    poller.register(holder.stdout.fileno(), select.POLLIN)
    if not poller.poll(timeout_s * 1000):
        return False
    return holder.stdout.readline().strip() == b"stopped"


def _finish_holder(holder: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Reap the holder (SIGKILLed if it has not exited within `timeout_s`), close its pipes."""
    if not wait_exit(holder, timeout_s):
        holder.kill()
        holder.wait()
    for stream in (holder.stdout, holder.stderr):
        if stream:
            stream.close()


def _etc_lines(root: int, name: str) -> list[str]:
    """Lines of the sandbox's /etc/NAME (read in the sandbox, a regular file, capped)."""
    data = safefs.read_file(root, "etc/" + name, MAX_ETC_BYTES) or b""
    return data.decode("utf-8", "replace").splitlines()


def _lookup_user(root: int, user: str) -> tuple[int, int]:
    """uid and gid of `user` (a name, `uid` or `uid:gid`) in the sandbox's /etc/passwd."""
    name, _, group = user.partition(":")
    uid = gid = None
    for line in _etc_lines(root, "passwd"):
        f = line.split(":")
        if len(f) >= 4 and (f[0] == name or f[2] == name) and f[2].isdigit() and f[3].isdigit():
            uid, gid = int(f[2]), int(f[3])
            break
    if uid is None:
        if not name.isdigit():
            raise SandboxError(f"user {name!r} does not exist in the sandbox's /etc/passwd")
        uid = gid = int(name)
    if group:
        gid = int(group) if group.isdigit() else _lookup_group(root, group)
    assert gid is not None
    return uid, gid


def _lookup_group(root: int, group: str) -> int:
    for line in _etc_lines(root, "group"):
        f = line.split(":")
        if len(f) >= 3 and f[0] == group and f[2].isdigit():
            return int(f[2])
    raise SandboxError(f"group {group!r} does not exist in the sandbox's /etc/group")


def _resolv_conf(policy: NetworkPolicy) -> str:
    """The NAT's DNS forwarder for `internet` and `build`; none offline or under an allowlist
    (whose names are in /etc/hosts, resolved on the host)."""
    if policy.mode in (NetworkMode.INTERNET, NetworkMode.BUILD):
        return f"nameserver {network.DNS}\n"
    return ""


def _allowed_hosts_lines(policy: NetworkPolicy) -> str:
    if policy.mode != NetworkMode.ALLOWLIST:
        return ""
    return "".join(
        f"{addr}\t{name}\n" for addr, name in network.resolved_names(policy.allowed_hosts)
    )


def _disk_full(disk: Path) -> bool:
    """Nearly no room left for an unprivileged writer (available blocks, not free ones: ext4
    refuses writes with a few blocks still free), or no inode left."""
    try:
        st = os.statvfs(disk)
    except OSError:
        return False
    free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return free < max(4 * 1024 * 1024, size // 200) or (st.f_files > 0 and st.f_favail < 16)


def _is_file(fd: int, path: str) -> bool:
    st = safefs.lstat(fd, path)
    return st is not None and stat.S_ISREG(st.st_mode)


def _clear_shadowed(src: Path, dest: Path) -> None:
    """Before a step's layer `src` is copied over `dest` (directories the builder made, the
    step's lower layer): remove from `dest` what the step deleted (a whiteout or another
    file at its name) and empty the directories the step made opaque."""
    for dirpath, dirnames, filenames in os.walk(dest, topdown=True):
        rel = os.path.relpath(dirpath, dest)
        for name in list(dirnames) + filenames:
            mine = os.path.join(src, rel, name)
            try:
                st = os.lstat(mine)
            except FileNotFoundError:
                continue
            there = os.path.join(dirpath, name)
            if not stat.S_ISDIR(st.st_mode):
                if os.path.isdir(there) and not os.path.islink(there):
                    shutil.rmtree(there)
                else:
                    os.unlink(there)
                if name in dirnames:
                    dirnames.remove(name)
            elif is_opaque(Path(mine)):
                for child in os.listdir(there):
                    c = os.path.join(there, child)
                    if os.path.isdir(c) and not os.path.islink(c):
                        shutil.rmtree(c)
                    else:
                        os.unlink(c)
                dirnames.remove(name)


def _under(path: str, tops: Sequence[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def _ensure_workdir(upper: Path, image: Path, cwd: str, owner: tuple[int, int]) -> None:
    """The verifier's working directory a directory of the judge's root, whatever the agent
    left at its place (an empty one then: its work there is gone)."""
    rel = cwd.strip("/")
    if not rel:
        return
    mine = upper / rel
    if mine.is_dir() and not mine.is_symlink():
        return
    if not os.path.lexists(mine) and (image / rel).is_dir() and not (image / rel).is_symlink():
        return
    parts = rel.split("/")
    for i in range(1, len(parts)):
        sub = upper / "/".join(parts[:i])
        if not (sub.is_dir() and not sub.is_symlink()):
            make_dir(sub, 0o755, idmap.ROOT)
    make_dir(mine, 0o755, owner, opaque=True)


def _stage_tests(dest: Path, files: Mapping[str, bytes], judge_ids: tuple[int, int]) -> None:
    """The tests directory as `judge.tests_layout` lays it out: root's, held-out entries in
    `tests_group` of the verifier's user (`judge_ids`: the sandbox's ids)."""
    held = (idmap.ROOT[0], idmap.host_id(tests_group(judge_ids)))
    for e in tests_layout(dict(files)):
        path, owner = dest / e.rel if e.rel else dest, held if e.held else idmap.ROOT
        if e.data is None:
            make_dir(path, e.mode, owner, opaque=not e.rel)
        else:
            path.write_bytes(e.data)
            os.chown(path, *owner)
            path.chmod(e.mode)


def _write_layer_files(
    dest: Path, files: Mapping[str, bytes], owner: tuple[int, int], mode: int | None = None
) -> None:
    """Files staged by the runner into a layer directory it made (no link in it)."""
    for rel, data in files.items():
        target = Path(normalize_dest(str(dest), rel))
        for parent in reversed(target.relative_to(dest).parents[:-1]):
            if not (dest / parent).is_dir():
                make_dir(dest / parent, 0o755, owner)
        target.write_bytes(data)
        os.chown(target, *owner)
        target.chmod(mode if mode is not None else (0o755 if rel.endswith(".sh") else 0o644))


def _read_layer(upper: Path, path: str, cap: int) -> bytes | None:
    fd = safefs.open_root(upper)
    try:
        return safefs.read_file(fd, path, cap, resolve=safefs.NO_LINKS)
    finally:
        os.close(fd)


def _read_report(upper: Path) -> dict[str, bytes]:
    """What the verifier left in /logs/verifier, from the judge's writable layer (its report
    directory lives there whole), no link followed, capped."""
    fd = safefs.open_root(upper)
    try:
        return safefs.read_tree(fd, "logs/verifier", MAX_DOWNLOAD_BYTES, resolve=safefs.NO_LINKS)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Remains:
    """What a stopped sandbox leaves to reclaim: its cgroups and lease, and the holder when
    it is still exiting (its sandbox's processes already gone)."""

    group: SandboxCgroup
    lease: Path
    holder: subprocess.Popen[bytes] | None = None


class _Reaper:
    """Reaps stopped sandboxes' holders and removes their cgroups (and then their leases) in
    the background; what is still queued when the process exits is done then, or left to
    `t1 sandbox gc`."""

    def __init__(self) -> None:
        self._queue: list[_Remains] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = 0  # removals the thread has taken from the queue and not finished

    def submit(self, remains: _Remains) -> None:
        with self._cond:
            self._queue.append(remains)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="reaper")
                self._thread.start()
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    if not self._cond.wait(timeout=5):
                        self._thread = None
                        return
                remains = self._queue.pop(0)
                self._busy += 1
            try:
                _reclaim(remains)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def drain(self, timeout_s: float = 30.0) -> None:
        """Finish every queued removal now, and wait for the one the thread is doing (tests,
        interpreter exit: a daemon thread stopped mid-removal would leave the lease behind)."""
        while True:
            with self._cond:
                if not self._queue:
                    break
                remains = self._queue.pop(0)
            _reclaim(remains)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._busy and time.monotonic() < deadline:
                self._cond.wait(timeout=0.1)


def _reclaim(remains: _Remains) -> None:
    if remains.holder is not None:
        _finish_holder(remains.holder, 10)
    try:
        remains.group.destroy()
    except OSError:  # best effort: what is left is `t1 sandbox gc`'s
        return
    remains.lease.unlink(missing_ok=True)


_REAPER = _Reaper()
atexit.register(_REAPER.drain)
reap_stopped = _REAPER.drain  # wait until stopped sandboxes' holders and cgroups are gone
_HANDLED = False


def _install_signal_handlers() -> None:
    """On SIGTERM or SIGINT, stop every live sandbox (processes, mounts, cgroups), then let
    the signal do what it would have done. Installed once, from the main thread."""
    global _HANDLED
    if _HANDLED or threading.current_thread() is not threading.main_thread():
        return
    _HANDLED = True
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)

        def handler(sig: int, frame: object, previous: object = previous) -> None:
            for sb in list(_LIVE):
                try:
                    sb.stop()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
            if callable(previous):
                previous(sig, frame)
            elif sig == signal.SIGINT:
                raise KeyboardInterrupt
            else:
                raise SystemExit(128 + sig)

        signal.signal(signum, handler)


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
