"""Docker backend through the Docker API (Docker, or Podman's compatible service).

The task's Dockerfile is built as written (`sandbox.docker_build`). Each trial runs in a fresh
container from that image, with the image's WORKDIR, ENV and USER and the task's limits. The
agent types into one long-lived shell (`sandbox.docker_session`); the verifier runs in a
second container made from a snapshot of the agent's, so no agent process can touch its tests
or its report directory. docs/sandbox.md ("The Docker backend") states what is and is not
guaranteed. Imported lazily; raises SandboxUnavailable where no engine answers.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import io
import math
import os
import select
import shutil
import socket
import stat
import tarfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox import idmap, safefs, seccomp, trusted
from sandbox.base import (
    AgentSabotage,
    DiskFull,
    ExecResult,
    NetworkMode,
    NetworkPolicy,
    SandboxError,
    SandboxUnavailable,
    VerifierRun,
    normalize_dest,
)
from sandbox.cgroups import oom_file_of, oom_kill_count
from sandbox.docker_api import docker_client, endpoint, exec_exit_code, is_podman
from sandbox.docker_build import build_image, image_config, tar_bytes
from sandbox.docker_hosts import answers, configured_pool
from sandbox.docker_session import DockerSession
from sandbox.git_guards import driver_sections, guard_env
from sandbox.image import DEFAULT_PATH, ImageConfig
from sandbox.podman import CONTAINER_LABEL, ENDPOINT_LABEL
from sandbox.tamper import ROOT_CONFIG, STARTUP_MODULES, Change, ChangeKind
from sandbox.tamper import tampered_paths as find_tampering
from sandbox.verifier_view import PROTECTED_ETC, PROTECTED_TOP
from tasks.model import Limits, Task

IDLE_INIT = "/run/t1-init"  # where the host's catatonit is mounted (local Podman)
PODMAN_API = "4.0.0"  # the libpod API (container mounts)
# Top-level entries of the agent's root the verifier's view never takes (beside the system
# directories and test-discovery files): the kernel's and the runtime's, and the tests' own.
VIEW_SKIP = ("proc", "sys", "dev", "run", "tests")
TESTS_DIR = "/tests"
REPORT_DIR = "/logs/verifier"
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
# Capabilities dropped from the engine's default set (as in the local backend).
CAP_DROP = ["MKNOD", "NET_RAW"]
# Podman's user namespace for every sandbox container: the local backend's id map (the
# explicit mapping needs no /etc/subuid entry for rootful Podman). The explicit size keeps
# Podman 4.3 from sizing the namespace from the image's layers, a lock-order deadlock with a
# concurrent container start (measured: a test session hung in inspect_image for 35 min).
PODMAN_USERNS = (
    f"auto:size={idmap.SIZE},"
    f"uidmapping=0:{idmap.BASE}:{idmap.SIZE},gidmapping=0:{idmap.BASE}:{idmap.SIZE}"
)
TOOLCHAIN_PROBE = (
    "bash sh dash env timeout sleep python python3 pytest py.test pip pip3 uv uvx "
    + " ".join(f"python3.{i} pip3.{i}" for i in range(6, 15))
)


# -- engine ------------------------------------------------------------------------------
# -- the sandbox -------------------------------------------------------------------------
def _dirs_tar(dirs: dict[str, int]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, mode in dirs.items():
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
            tar.addfile(info)
    return buf.getvalue()


_LOG_DIRS = _dirs_tar({"logs": 0o755, "logs/agent": 0o777, "logs/verifier": 0o777})
# Image id -> the toolchain commands it has on PATH (for the shadowing rule of sandbox.tamper).
_TOOLCHAIN: dict[str, frozenset[str]] = {}
# Engine -> whether its storage driver enforces a container size (overlay on xfs with pquota).
_DISK_QUOTA: dict[str, bool] = {}


class DockerSandbox:
    """One container per trial (plus one for its verifier). See the module docstring."""

    def __init__(
        self,
        client: Any,
        image: str,
        limits: Limits,
        policy: NetworkPolicy,
        config: ImageConfig,
        *,
        env: dict[str, str] | None = None,
        user: str | None = None,
        trusted_paths: tuple[str, ...] = (),
    ) -> None:
        """`env` is added to the image's ENV for the agent's shell and harness commands;
        `user` runs the agent's shell (the image's USER when None, root when "");
        `trusted_paths` are system paths whose agent-made content the verifier sees."""
        self.id = "t1-" + uuid.uuid4().hex[:12]
        self.client = client
        self.image = image
        self.limits = limits
        self.policy = policy
        self.config = config
        self.workdir = config.workdir
        self.env = dict(env or {})
        self.user = config.user if user is None else user
        self.trusted_paths = trusted_paths
        self._podman = is_podman(client)
        self._container: Any = None
        self._session: DockerSession | None = None
        self._baseline: set[tuple[str, int]] = set()
        self._toolchain: frozenset[str] = frozenset()
        self._cleanup: list[Any] = []  # verifier containers and snapshot images
        self._oom_files: dict[str, str] = {}  # container id -> its memory.oom_control
        self.on_stop: Callable[[], None] | None = None  # called once by stop()

    @property
    def container_id(self) -> str:
        if self._container is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        return str(self._container.id)

    def _start_container(self, image: str, options: dict[str, Any]) -> Any:
        """`containers.run(image, **options)` (detached), in a user namespace of its own on a
        Podman engine: root of the container is host uid idmap.BASE, as on the local backend
        (the SDK takes no user-namespace mode but "host", so the request is made here). A
        Docker engine maps ids as its daemon is configured (`userns-remap`, docs/sandbox.md)."""
        if not self._podman:
            return self.client.containers.run(image, **options)
        from docker.models.containers import _create_container_args

        create = {k: v for k, v in options.items() if k != "detach"}
        args = _create_container_args(
            {**create, "image": image, "version": self.client.api._version}
        )
        # A container that joins another's network joins its user namespace too: the network
        # namespace belongs to that one (sysfs cannot be mounted from another's).
        network = str(options.get("network_mode") or "")
        args["host_config"]["UsernsMode"] = (
            network if network.startswith("container:") else PODMAN_USERNS
        )
        container_id = self.client.api.create_container(**args)["Id"]
        try:
            self.client.api.start(container_id)
        except BaseException:
            self.client.api.remove_container(container_id, force=True)
            raise
        return self.client.containers.get(container_id)

    def _network_mode(self, policy: NetworkPolicy) -> str:
        if policy.mode == NetworkMode.NONE:
            return "none"
        return "slirp4netns:allow_host_loopback=false" if self._podman else "bridge"

    def _run_container(
        self,
        image: str,
        name: str,
        policy: NetworkPolicy | str,
        volumes: dict[str, str] | None = None,
        mounts: list[Any] | None = None,
    ) -> Any:
        """A started container that idles until removed.

        Its only process is an init that reaps orphans. On a local Podman that init is this
        host's static catatonit in pause mode, mounted read-only: no program of the image (or
        of the agent's snapshot, for the verifier) runs beside the commands. Elsewhere it is
        the engine's init running the image's `sleep` (then a toolchain command, tamper.py).
        `policy` is a network policy, or "container:<id>" to share that container's network.
        """
        network_mode = policy if isinstance(policy, str) else self._network_mode(policy)
        binds: dict[str, dict[str, str]] = {
            v: {"bind": p, "mode": "rw,nocopy"} for v, p in (volumes or {}).items()
        }
        host_init = shutil.which("catatonit") if self._podman else None
        if host_init:
            binds[os.path.realpath(host_init)] = {"bind": IDLE_INIT, "mode": "ro"}
            idle: dict[str, Any] = dict(entrypoint=[IDLE_INIT, "-P"], command=[], init=False)
        else:
            idle = dict(entrypoint=["sleep", "infinity"], command=[], init=True)
        options: dict[str, Any] = dict(
            **idle,
            name=name,
            detach=True,
            hostname="sandbox",
            labels={CONTAINER_LABEL: self.id, ENDPOINT_LABEL: endpoint(self.client)},
            mem_limit=f"{self.limits.memory_mb}m",
            memswap_limit=f"{self.limits.memory_mb}m",
            pids_limit=self.limits.pids,
            nano_cpus=int(self.limits.cpus * 1e9),
            network_mode=network_mode,
            cap_drop=CAP_DROP,
            # the local backend's refusals on top of the engine's default (sandbox.seccomp)
            security_opt=[f"seccomp={_seccomp_option(self._podman)}"],
            extra_hosts=_allowlist_hosts(policy),
            # nocopy: a new volume starts empty, whatever the image has at its mountpoint.
            volumes=binds,
            mounts=mounts or [],
        )
        engine = endpoint(self.client)
        if _DISK_QUOTA.get(engine, True):
            options["storage_opt"] = {"size": f"{self.limits.disk_mb}M"}
        try:
            try:
                container = self._start_container(image, options)
            except Exception as e:  # noqa: BLE001 - the storage driver may have no quotas
                if "storage-opt" not in str(e) or "storage_opt" not in options:
                    raise
                _DISK_QUOTA[engine] = False
                del options["storage_opt"]
                container = self._start_container(image, options)
        except Exception as e:  # noqa: BLE001 - APIError, ImageNotFound
            raise SandboxError(f"container start failed: {e}") from e
        try:
            if not isinstance(policy, str):
                self._apply_network(container, policy)
        except BaseException:
            container.remove(force=True)
            raise
        return container

    def _apply_network(self, container: Any, policy: NetworkPolicy) -> None:
        if policy.mode == NetworkMode.NONE:
            return
        from sandbox import egress

        container.reload()
        pid = int(container.attrs.get("State", {}).get("Pid") or 0)
        if pid <= 0 or not os.path.exists(f"/proc/{pid}/ns/net"):
            raise SandboxError(
                "the network policy needs the engine on this host (its container processes "
                "visible here) to keep the host unreachable"
            )
        egress.apply(pid, policy)

    def start(self) -> None:
        self._container = self._run_container(self.image, self.id, self.policy)
        try:
            self._container.put_archive("/", _LOG_DIRS)
            root = self._mount_path(self._container.id)
            if root is not None:
                adopt_engine_dirs(root, self.config.workdir or "/")
            image_id = str(self._container.image.id)
            if image_id not in _TOOLCHAIN:  # which toolchain commands the image has, once
                r = self.exec(
                    f"for c in {TOOLCHAIN_PROBE}; do command -v $c >/dev/null && echo $c; done;"
                    " true",
                    timeout_s=30,
                    cwd="/",
                )
                if r.exit_code != 0:
                    raise SandboxError(f"sandbox {self.id} setup failed: {r.stdout}{r.stderr}")
                _TOOLCHAIN[image_id] = frozenset(r.stdout.split())
            self._toolchain = _TOOLCHAIN[image_id]
            self._baseline = {(c.path, c.kind) for c in self._changes()}
        except BaseException:
            self.stop()
            raise

    def _changes(self, container: Any = None) -> list[Change]:
        diff = (container or self._container).diff() or []
        return [Change(d["Path"], ChangeKind(int(d["Kind"]))) for d in diff]

    def _create(self, make: Any) -> Any:
        """Make an engine object (container, volume, image) that `stop` removes."""
        try:
            obj = make()
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - APIError: e.g. disk full
            raise SandboxError(f"sandbox {self.id}: {e}") from e
        self._cleanup.append(obj)
        return obj

    def stop(self) -> None:
        if self._session is not None:
            self._session.detach()
            self._session = None
        # Containers first (they use the volumes and images), newest first.
        objs = [self._container, *reversed(self._cleanup)]
        for obj in sorted((o for o in objs if o is not None), key=lambda o: not _is_container(o)):
            try:
                if _is_container(obj):
                    obj.remove(force=True)
                elif hasattr(obj, "tags"):
                    self.client.images.remove(obj.id, force=True)
                else:
                    obj.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._cleanup = []
        self._container = None
        on_stop, self.on_stop = self.on_stop, None
        if on_stop is not None:
            on_stop()  # once: the engine pool's slot

    def __enter__(self) -> DockerSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands ----------------------------------------------------------------------
    def oom_kills(self, container: Any = None) -> int:
        """OOM kills in the container's memory cgroup so far (0 where it cannot be read)."""
        container = container or self._container
        try:
            path = self._oom_files.get(container.id)
            if path is None:
                container.reload()
                path = oom_file_of(int(container.attrs["State"]["Pid"]))  # cgroup v1 or v2
                if path is None:
                    return 0
                self._oom_files[container.id] = path
            with open(path) as f:
                return oom_kill_count(f.read())
        except (OSError, KeyError, ValueError):
            pass
        return 0

    def exec(
        self, command: str, *, timeout_s: float | None = None, cwd: str | None = None
    ) -> ExecResult:
        """A one-off `bash -c` as root in the image's environment (harness and verifier use)."""
        timeout = timeout_s if timeout_s is not None else self.limits.agent_timeout_s
        return self._exec(
            self._container, command, timeout=timeout, cwd=cwd or self.workdir, env=self.env
        )

    def _exec(
        self,
        container: Any,
        command: str,
        *,
        timeout: float,
        cwd: str,
        env: dict[str, str] | None = None,
        user: str = "0",
    ) -> ExecResult:
        if container is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        api = self.client.api
        # The command waits for a line on stdin, sent once the output stream is attached
        # (Podman loses what an exec prints before its attach is live), then runs with stdin
        # from /dev/null. Its first line out is the pid of `timeout`, which leads the
        # command's process group.
        wrapper = (
            'read -r _; exec </dev/null; echo "$$"; sh=$(command -v bash || echo /bin/sh); '
            'exec timeout -s KILL "$1" "$sh" -c "$2"'
        )
        argv = ["/bin/sh", "-c", wrapper, "t1", str(math.ceil(timeout) + 1), command]
        cap = self.limits.output_bytes
        oom_before = self.oom_kills(container)
        t0 = time.monotonic()
        try:
            ex = api.exec_create(
                container.id, argv, user=user, workdir=cwd, environment=env, stdin=True
            )
            io_ = api.exec_start(ex["Id"], socket=True)
            sock = getattr(io_, "_sock", io_)
            sock.sendall(b"go\n")
        except Exception as e:  # noqa: BLE001 - the container is gone
            raise SandboxError(f"sandbox {self.id}: exec failed: {e}") from e
        out, err, pid, timed_out, truncated = _read_frames(sock, t0 + timeout, cap)
        if (timed_out or truncated) and pid:
            self._kill_group(container, pid)
            _discard(sock, time.monotonic() + 5)  # the engine reports the exit once drained
        for stream in (sock, io_):
            try:
                stream.close()
            except OSError:
                pass
        code = exec_exit_code(api, ex["Id"])
        return ExecResult(
            exit_code=code,
            stdout=bytes(out[:cap]).decode("utf-8", "replace"),
            stderr=bytes(err[: max(0, cap - len(out))]).decode("utf-8", "replace"),
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            oom_killed=self.oom_kills(container) > oom_before,
            output_truncated=truncated,
        )

    def _kill_group(self, container: Any, pid: int) -> None:
        try:
            container.exec_run(["/bin/sh", "-c", f"kill -9 -{pid}"], user="0")
        except Exception:  # noqa: BLE001 - the container went away meanwhile
            pass

    def session(self) -> DockerSession:
        if self._session is None:
            self._session = DockerSession(self)
        return self._session

    # -- files -------------------------------------------------------------------------
    def upload(self, files: dict[str, bytes], dest_dir: str, *, mode: int = 0o644) -> None:
        self._upload(self._container, files, dest_dir, mode)

    def _upload(self, container: Any, files: dict[str, bytes], dest_dir: str, mode: int) -> None:
        if not files:
            return
        if container is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        rels = {normalize_dest(dest_dir, r).lstrip("/"): b for r, b in files.items()}
        try:
            container.put_archive("/", tar_bytes(rels, mode))
        except Exception as e:  # noqa: BLE001 - APIError (e.g. no space left)
            raise SandboxError(f"sandbox {self.id}: upload to {dest_dir} failed: {e}") from e

    def download(self, path: str) -> dict[str, bytes]:
        return self._download(self._container, path)

    def _download(self, container: Any, path: str) -> dict[str, bytes]:
        """A file ({name: bytes}) or a directory's regular files, MAX_DOWNLOAD_BYTES in all,
        read from the engine's archive stream as it comes (never the whole archive in
        memory: a 512 MiB file in the report directory cost 1 GB of the runner's RSS)."""
        api = self.client.api
        try:
            res = api._get(
                api._url("/containers/{0}/archive", container.id),
                params={"path": path},
                stream=True,
            )
        except Exception:  # noqa: BLE001 - the engine or the container is gone
            return {}
        try:
            if res.status_code != 200:  # 404: no such path
                return {}
            return read_archive(res.raw, MAX_DOWNLOAD_BYTES)
        finally:
            res.close()

    # -- the verifier ------------------------------------------------------------------
    def verify(
        self,
        tests: dict[str, bytes],
        command: str,
        *,
        timeout_s: float,
        cwd: str,
        env: dict[str, str],
        user: str = "",
        network: NetworkPolicy | None = None,
        keep_agent_processes: bool = False,
    ) -> VerifierRun:
        """Run the verifier in a container of its own (never the agent's).

        The agent's processes are not in it (killed first, or left running in their own
        container, reachable over the shared network when `keep_agent_processes`). On a local
        Podman it starts from the image as built with the agent's root filesystem laid over
        it by the project's rule (`_view_over_image`: system directories and the loader's
        and Python's /etc entries stay the image's, top-level test-discovery files hidden,
        `trusted_paths` the agent's); elsewhere from a snapshot of the agent's container.
        /tests and /logs/verifier are fresh volumes. Changes that target the verifier's run
        are reported as tampering either way.
        """
        agent = self._container
        if agent is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        if self._session is not None:
            self._session.detach()
            self._session = None
        changes = [c for c in self._changes() if (c.path, c.kind) not in self._baseline]
        if not keep_agent_processes:
            try:
                agent.kill()
            except Exception:  # noqa: BLE001 - already stopped
                pass
        run_id = f"{self.id}-v{uuid.uuid4().hex[:6]}"
        agent_root = self._mount_path(agent.id)
        # Fresh, empty volumes: made by the engine, no command of the snapshot runs to make them.
        volumes: dict[str, str] = {}
        for path, suffix in ((TESTS_DIR, "tests"), (REPORT_DIR, "report")):
            volume = self._create(lambda n=f"{run_id}-{suffix}": self.client.volumes.create(n))
            volumes[volume.name] = path
        policy: NetworkPolicy | str = (
            f"container:{agent.id}" if keep_agent_processes else (network or self.policy)
        )
        if agent_root is not None:
            check_engine_reads(agent_root)
            fix_verifier_places(agent_root)
            # The trusted paths' descriptors stay open until the engine has made its mounts.
            root_fd = safefs.open_root(agent_root)
            try:
                with trusted.opened(root_fd, self.trusted_paths) as held:
                    mounts = self._view_over_image(agent_root, run_id, held)
                    verifier = self._create(
                        lambda: self._run_container(self.image, run_id, policy, volumes, mounts)
                    )
                    if held:
                        verifier.reload()
                        pid = int(verifier.attrs.get("State", {}).get("Pid") or 0)
                        trusted.check_bound(f"/proc/{pid}/root", held)
            finally:
                os.close(root_fd)
        else:
            snapshot = self._create(
                lambda: agent.commit(repository="t1-forge-verify", tag=run_id, pause=False)
            )
            verifier = self._create(
                lambda: self._run_container(snapshot.id, run_id, policy, volumes, [])
            )
        self._upload(verifier, tests, TESTS_DIR, 0o644)
        if user not in ("", "0", "root"):  # whatever the verifier's user, it writes its report
            self._open_report_dir(verifier)
        entry_points = {  # read from the agent's (stopped) container: the view hides them
            c.path: self._download(agent, c.path)
            .get(c.path.rsplit("/", 1)[-1], b"")
            .decode("utf-8", "replace")
            for c in changes
            if c.path.endswith(".dist-info/entry_points.txt") and c.kind != ChangeKind.DELETED
        }
        tampered = find_tampering(
            changes,
            path_dirs=self.config.env.get("PATH", DEFAULT_PATH).split(":"),
            image_commands=self._toolchain,
            entry_points=entry_points,
            workdir=cwd,
        )
        git_drivers = driver_sections(  # read from the agent's (stopped) container, like above
            [c.path for c in changes if c.kind != ChangeKind.DELETED],
            lambda p: self._download(agent, p).get(p.rsplit("/", 1)[-1]),
        )
        env = guard_env({**self.config.env, **env}, git_drivers)
        result = self._exec(
            verifier, command, timeout=timeout_s, cwd=cwd, env=env, user=user or "0"
        )
        files = self._download(verifier, REPORT_DIR)
        return VerifierRun(result=result, files=files, tampered=tampered)

    def _open_report_dir(self, container: Any) -> None:
        """The report volume writable by any user (as the local backend's): only the
        verifier's container mounts it."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(REPORT_DIR.strip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o777, int(time.time())
            tar.addfile(info)
        try:
            container.put_archive("/", buf.getvalue())
        except Exception as e:  # noqa: BLE001 - APIError
            raise SandboxError(f"sandbox {self.id}: the report directory: {e}") from e

    def _mount_path(self, container_id: str) -> Path | None:
        """Where a local Podman has a container's root filesystem mounted (None elsewhere)."""
        if not self._podman:
            return None
        api = self.client.api
        try:
            r = api.post(f"{api.base_url}/v{PODMAN_API}/libpod/containers/{container_id}/mount")
        except Exception:  # noqa: BLE001 - not a local Podman
            return None
        path = Path(r.text.strip().strip('"')) if r.status_code == 200 else None
        return path if path is not None and path.is_dir() else None

    def _view_over_image(
        self, agent_root: Path, run_id: str, held: list[tuple[str, int]]
    ) -> list[Any]:
        """Mounts that lay the agent's root filesystem (mounted here at `agent_root`) over a
        container of the image, by sandbox.verifier_view's rule: every top-level directory
        and file of the agent's except the system directories, /proc, /sys, /dev, /run,
        /tests and the test-discovery files; in the agent's /etc, the loader's and Python's
        entries bound back read-only from the image; the task's `trusted_paths` the agent's,
        through the descriptors in `held` (sandbox.trusted: no link in any component, never
        above the agent's root). Writes land in the agent's own layer, so its hard links stay
        links. Symbolic links at the top are left out (a bind would resolve them on this host).
        """
        import docker

        def bind(source: Path | str, target: str, read_only: bool = False) -> Any:
            return docker.types.Mount(target, str(source), type="bind", read_only=read_only)

        hidden = {*PROTECTED_TOP, *VIEW_SKIP, *ROOT_CONFIG, *(f"{m}.py" for m in STARTUP_MODULES)}
        mounts = []
        for entry in sorted(os.scandir(agent_root), key=lambda e: e.name):
            if entry.name not in hidden and not entry.is_symlink():
                mounts.append(bind(entry.path, "/" + entry.name))
        if (agent_root / "etc").is_dir() and not (agent_root / "etc").is_symlink():
            pristine = self._create(
                lambda: self.client.containers.create(
                    self.image,
                    ["true"],
                    name=f"{run_id}-image",
                    labels={CONTAINER_LABEL: self.id, ENDPOINT_LABEL: endpoint(self.client)},
                )
            )
            image_root = self._mount_path(pristine.id)
            if image_root is None:
                raise SandboxError(f"sandbox {self.id}: the image's root could not be mounted")
            names = set(PROTECTED_ETC)
            for base in (image_root / "etc", agent_root / "etc"):
                if base.is_dir():
                    names.update(n for n in os.listdir(base) if n.startswith("python3"))
            for name in sorted(names):
                src, mine = image_root / "etc" / name, agent_root / "etc" / name
                if src.is_symlink() or mine.is_symlink():
                    continue  # a link would resolve on this host; the tamper scan covers it
                if src.exists():
                    mounts.append(bind(src, "/etc/" + name, read_only=True))
                elif mine.is_dir():
                    mounts.append(docker.types.Mount("/etc/" + name, "", type="tmpfs"))
                elif mine.exists():
                    mounts.append(bind("/dev/null", "/etc/" + name, read_only=True))
        for path, fd in held:
            mounts.append(bind(trusted.engine_source(fd), path))
        return mounts


def read_archive(stream: Any, budget: int) -> dict[str, bytes]:
    """The regular files of the tar `stream` (a file object read in order, never sought)
    the engine sends for a path: {name: bytes} for a file, names below it for a directory;
    `budget` bytes in all, reading stops there. A damaged or cut stream gives what was
    read before it."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for m in tar:
                if budget <= 0:
                    break
                if not m.isfile():
                    continue
                f = tar.extractfile(m)
                blob = _read_into(f, min(budget, m.size)) if f else b""
                budget -= len(blob)
                # the path itself has no "/" in its name; what is below it is dir/name
                out[m.name.split("/", 1)[1] if "/" in m.name else m.name] = blob
    except (tarfile.TarError, OSError, EOFError):
        pass
    return out


def _read_into(f: Any, n: int) -> bytes:
    """At most `n` bytes of `f`, read a MiB at a time into one buffer (reading them in one
    call held several copies of the whole: 255 MiB of peak RSS for a 64 MiB read)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got : min(n, got + (1 << 20))])
        if not k:
            break
        got += k
    view.release()
    del buf[got:]
    return bytes(buf)


# Files of the container's root the engine itself reads on this host when it starts one (the
# user's identity); the agent must not be able to make that read hang or run away.
ENGINE_READS = ("etc/passwd", "etc/group")


def _allowlist_hosts(policy: NetworkPolicy | str) -> dict[str, str]:
    """/etc/hosts entries for an allowlist's names (its DNS is closed, sandbox.egress)."""
    if isinstance(policy, str) or policy.mode != NetworkMode.ALLOWLIST:
        return {}
    from sandbox.network import resolved_names

    return {name: addr for addr, name in resolved_names(policy.allowed_hosts)}


@functools.lru_cache(maxsize=2)
def _seccomp_option(podman: bool) -> str:
    """The profile as the engine takes it: Docker's API wants the JSON itself, Podman's
    compatible API a path on its host (a file in the private state directory)."""
    profile = seccomp.docker_profile()
    if not podman:
        return profile
    from sandbox.local import private_state_dir

    digest = hashlib.sha256(profile.encode()).hexdigest()[:16]
    path = private_state_dir() / f"seccomp-{digest}.json"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(profile)
        os.replace(tmp, path)
    return str(path)


def check_engine_reads(agent_root: Path) -> None:
    """Raise AgentSabotage when the agent made a file the engine reads at container start
    (ENGINE_READS) something other than a regular file (a FIFO hangs the engine, a link to
    /dev/zero never ends); resolved inside the agent's root, never opened here."""
    fd = safefs.open_root(agent_root)
    try:
        for rel in ENGINE_READS:
            st = safefs.stat_in_root(fd, rel)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise AgentSabotage(
                    f"the agent made /{rel} a {stat.filemode(st.st_mode)[0]!r}-type file: "
                    "the verifier's container cannot start"
                )
    finally:
        os.close(fd)


def adopt_engine_dirs(root: Path, workdir: str) -> None:
    """Give the container's root the directories of `workdir` that the engine made as host
    root at container start (Podman 4 makes a missing WORKDIR so, outside the container's
    user namespace, where its root may not write in it). Every id of the image is mapped, so
    a host-root owner can only be the engine's; resolved in `root`, never followed out."""
    fd = safefs.open_root(root)
    try:
        path = ""
        for name in safefs.relpath(workdir).split("/"):
            if name in ("", "."):
                continue
            path = f"{path}/{name}"
            st = safefs.stat_in_root(fd, path)
            if st is None or not stat.S_ISDIR(st.st_mode):
                return
            if st.st_uid == 0 or st.st_gid == 0:
                sub = safefs.openat2(fd, safefs.relpath(path), os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fchown(sub, *idmap.ROOT)
                finally:
                    os.close(sub)
    finally:
        os.close(fd)


def fix_verifier_places(agent_root: Path) -> None:
    """/logs/verifier (and /logs) real directories again in the agent's root, whatever the
    agent left there (removed, never followed), so the report volume can be mounted; what
    is made is the container's root's (its user namespace, PODMAN_USERNS)."""
    fd = safefs.open_root(agent_root)
    try:
        safefs.ensure_real_dir(fd, "logs/verifier", owner=idmap.ROOT)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(f"the agent filled the disk: {e}") from e
        raise AgentSabotage(f"the verifier's places could not be restored: {e}") from e
    finally:
        os.close(fd)


def _is_container(obj: Any) -> bool:
    return hasattr(obj, "diff")


def _read_frames(
    sock: socket.socket, deadline: float, cap: int
) -> tuple[bytearray, bytearray, int, bool, bool]:
    """Read a multiplexed exec stream until EOF, the deadline or `cap` bytes of output.

    Returns stdout (without the leading pid line), stderr, that pid, timed_out, truncated.
    """
    sock.setblocking(False)
    buf, out, err = bytearray(), bytearray(), bytearray()
    pid = 0
    timed_out = truncated = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([sock], [], [], min(remaining, 0.5))
        if not ready:
            continue
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            continue
        except OSError:
            break
        if not data:
            break
        buf += data
        while len(buf) >= 8:
            size = int.from_bytes(buf[4:8], "big")
            if len(buf) < 8 + size:
                break
            (out if buf[0] == 1 else err).extend(buf[8 : 8 + size])
            del buf[: 8 + size]
        if not pid and b"\n" in out:
            line, _, rest = bytes(out).partition(b"\n")
            pid = int(line) if line.strip().isdigit() else -1
            out[:] = rest
        if len(out) + len(err) > cap:
            truncated = True
            break
    return out, err, max(pid, 0), timed_out, truncated


def _discard(sock: socket.socket, deadline: float) -> None:
    """Read and drop a stream until EOF or the deadline."""
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([sock], [], [], min(remaining, 0.5))
        if not ready:
            continue
        try:
            if not sock.recv(1 << 16):
                return
        except BlockingIOError:
            continue
        except OSError:
            return


class DockerBackend:
    name = "docker"

    def open(self, task: Task) -> DockerSandbox:
        """Build (or reuse) the task's image and start its sandbox (Harbor 1.1: the agent
        phase's network, env and user), on DOCKER_HOST, or on one of T1_DOCKER_HOSTS
        (sandbox.docker_hosts: placement by free slots and image affinity; an engine that
        does not answer is skipped and the sandbox placed on another)."""
        pool = configured_pool()
        if pool is None:
            return self._open_on(docker_client(), task)
        key = task.environment_hash
        failures: list[str] = []
        for _ in range(len(pool.engines)):
            engine = pool.acquire(key)
            try:
                client = pool.client(engine)
                sb = self._open_on(client, task)
            except SandboxError as e:
                pool.release(engine)
                if isinstance(e, SandboxUnavailable) or not answers(engine.client):
                    pool.mark_down(engine, str(e))
                    failures.append(f"{engine.url}: {e}")
                    continue
                raise
            except BaseException:
                pool.release(engine)
                raise
            engine.images.add(key)
            sb.on_stop = functools.partial(pool.release, engine)
            return sb
        raise SandboxError(
            "no engine of T1_DOCKER_HOSTS started the sandbox: " + "; ".join(failures)
        )

    def _open_on(self, client: Any, task: Task) -> DockerSandbox:
        from sandbox.policy import network_policy

        try:
            image = build_image(client, task, podman=is_podman(client))
            config = image_config(client, image)
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - an engine error is the harness's failure
            raise SandboxError(f"task {task.id}: docker engine error: {e}") from e
        sb = DockerSandbox(
            client,
            image,
            task.limits,
            network_policy(task, task.agent_config),
            config,
            env={**task.environment.env, **task.agent_config.env},
            user=task.agent_config.user,
            trusted_paths=tuple(task.trusted_paths),
        )
        sb.start()
        return sb
