"""Docker backend through the Docker API (Docker, or Podman's compatible service).

The task's Dockerfile is built as written (`sandbox.docker_build`). Each trial runs in a fresh
container from that image, with the image's WORKDIR, ENV and USER and the task's limits. The
agent types into one long-lived shell (`sandbox.docker_session`); the verifier runs in a
second container made from the image, the agent's outputs copied in as data (sandbox.judge).
docs/sandbox.md ("The Docker backend") states what is and is not
guaranteed. Imported lazily; raises SandboxUnavailable where no engine answers.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import os
import posixpath
import select
import shutil
import socket
import stat
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from sandbox import idmap, safefs, seccomp
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
from sandbox.cgroups import oom_file_of, oom_kill_count
from sandbox.docker_api import docker_client, endpoint, exec_exit_code, force_remove
from sandbox.docker_build import build_image, image_config, tar_bytes
from sandbox.docker_hosts import (
    HOSTS_ENV,
    answers,
    configured_pool,
    egress_problem,
    engine_site,
)
from sandbox.docker_session import DockerSession
from sandbox.git_guards import MAX_CONFIG_BYTES, driver_sections, guard_env, is_config_file
from sandbox.image import ImageConfig
from sandbox.judge import (
    carried_link,
    carried_mode,
    carried_path,
    holds_verifier_venv,
    tests_group,
    tests_layout,
    within,
)
from sandbox.podman import CONTAINER_LABEL, ENDPOINT_LABEL
from tasks.model import Limits, Task

_T = TypeVar("_T")
IDLE_INIT = "/run/t1-init"  # where the host's catatonit is mounted (local Podman)
PODMAN_API = "4.0.0"  # the libpod API (container mounts)
PROFILE_VOLUME = "t1-forge-seccomp"  # a remote Podman's copies of the seccomp profiles
# Top-level entries of the agent's root the verifier's view never takes (beside the system
# directories and test-discovery files): the kernel's and the runtime's, and the tests' own.
VIEW_SKIP = ("proc", "sys", "dev", "run", "tests")
TESTS_DIR = "/tests"
REPORT_DIR = "/logs/verifier"
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
Outputs = tuple[dict[str, bytes], dict[str, bytes]]  # each output's tar, the git config files
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


_LOG_DIRS = _dirs_tar({"logs": 0o755, "logs/agent": 0o777})
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
    ) -> None:
        """`env` is added to the image's ENV for the agent's shell and harness commands;
        `user` runs the agent's shell (the image's USER when None, root when "")."""
        self.id = "t1-" + uuid.uuid4().hex[:12]
        self.client = client
        self.image = image
        self.limits = limits
        self.policy = policy
        self.config = config
        self.workdir = config.workdir
        self.env = dict(env or {})
        self.user = config.user if user is None else user
        self._site = engine_site(client)
        self._podman = self._site.podman
        self._container: Any = None
        self._session: DockerSession | None = None
        self._baseline: set[str] = set()  # paths changed at start (the engine's, not the agent's)
        # the agent's outputs as the first verifier run of a killed agent read them, for the
        # runs after it: (what was asked, the answer)
        self._outputs: tuple[tuple[Any, ...], Outputs] | None = None
        self._cleanup: list[Any] = []  # verifier containers and snapshot images
        self._oom_files: dict[str, str] = {}  # container id -> its memory.oom_control
        self.on_stop: Callable[[], None] | None = None  # called once by stop()

    @property
    def container_id(self) -> str:
        if self._container is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        return str(self._container.id)

    def _start_container(self, image: str, options: dict[str, Any], agent: bool = True) -> Any:
        """`containers.run(image, **options)` (detached), in a user namespace of its own on a
        Podman engine: root of the container is host uid idmap.BASE, as on the local backend
        (the SDK takes no user-namespace mode but "host", so the request is made here). A
        Docker engine maps ids as its daemon is configured (`userns-remap`, docs/sandbox.md).
        The `agent`'s container on a Podman on another machine gets its WORKDIR first."""
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
            if agent and not self._site.here:
                self._make_workdir(container_id)
            self.client.api.start(container_id)
        except BaseException:
            self.client.api.remove_container(container_id, force=True)
            raise
        return self.client.containers.get(container_id)

    def _make_workdir(self, container_id: str) -> None:
        """Make the directories of the image's WORKDIR that a created (not started) container
        lacks, owned by its root, through the engine's archive API: Podman would make them at
        start as root of its machine, where the container's root may not write (on this
        machine `adopt_engine_dirs` gives them back through the mount instead)."""
        api, missing, path = self.client.api, dict[str, int](), ""
        for name in (self.config.workdir or "/").strip("/").split("/"):
            if name in ("", "."):
                continue
            path = f"{path}/{name}"
            res = api._get(
                api._url("/containers/{0}/archive", container_id),
                params={"path": path},
                stream=True,
            )
            res.close()
            if res.status_code == 404:
                missing[path.lstrip("/")] = 0o755
        if missing:
            tar = _dirs_tar(missing)
            archive_retried(lambda: self.client.api.put_archive(container_id, "/", tar))

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
        entry: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> Any:
        """A started container that idles until removed.

        Its only process is an init that reaps orphans. On a local Podman that init is this
        host's static catatonit in pause mode, mounted read-only: no program of the image runs
        beside the commands. Elsewhere (a Docker engine, or Podman on another machine) it is
        the engine's init running the image's `sleep`.
        With `entry` (the verifier, sandbox.judge) that command is the container's first
        process instead, with stdin open (it waits for a line before it runs anything), under
        the verifier phase's system-call filter: when it exits, the container and everything
        in it end. `policy` is a network policy, or "container:<id>" to share that
        container's network.
        """
        network_mode = policy if isinstance(policy, str) else self._network_mode(policy)
        binds: dict[str, dict[str, str]] = {
            v: {"bind": p, "mode": "rw,nocopy"} for v, p in (volumes or {}).items()
        }
        host_init = shutil.which("catatonit") if self._site.local_podman else None
        if entry is not None:
            idle: dict[str, Any] = dict(
                entrypoint=entry, command=[], init=False, stdin_open=True, user="0",
                environment=env or {},
            )  # fmt: skip
        elif host_init:
            binds[os.path.realpath(host_init)] = {"bind": IDLE_INIT, "mode": "ro"}
            idle = dict(entrypoint=[IDLE_INIT, "-P"], command=[], init=False)
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
            security_opt=[f"seccomp={self._seccomp(image, entry is not None)}"],
            extra_hosts=_allowlist_hosts(policy),
            # nocopy: a new volume starts empty, whatever the image has at its mountpoint.
            volumes=binds,
        )
        engine = endpoint(self.client)
        if _DISK_QUOTA.get(engine, True):
            options["storage_opt"] = {"size": f"{self.limits.disk_mb}M"}
        try:
            try:
                container = self._start_container(image, options, entry is None)
            except Exception as e:  # noqa: BLE001 - the storage driver may have no quotas
                if "storage-opt" not in str(e) or "storage_opt" not in options:
                    raise
                _DISK_QUOTA[engine] = False
                del options["storage_opt"]
                container = self._start_container(image, options, entry is None)
        except Exception as e:  # noqa: BLE001 - APIError, ImageNotFound
            raise SandboxError(f"container start failed: {e}") from e
        try:
            if not isinstance(policy, str):
                self._apply_network(container, policy)
        except BaseException:
            force_remove(container)
            raise
        return container

    def _seccomp(self, image: str, verifier: bool) -> str:
        """The `seccomp=` value of a container (the verifier phase's profile with `verifier`):
        the profile itself for Docker, a path on its machine for Podman (`_seccomp_option`
        here, `_engine_profile` on another machine)."""
        option = _seccomp_option(self._site.local_podman, verifier)
        if self._podman and not self._site.here:
            return _engine_profile(self.client, image, option)
        return option

    def _apply_network(self, container: Any, policy: NetworkPolicy) -> None:
        if policy.mode == NetworkMode.NONE:
            return
        from sandbox import egress

        container.reload()
        pid = int(container.attrs.get("State", {}).get("Pid") or 0)
        if not self._site.here or pid <= 0 or not os.path.exists(f"/proc/{pid}/ns/net"):
            raise SandboxError(
                "the network policy needs the engine on this host (its container processes "
                "visible here) to keep the host unreachable"
            )
        egress.apply(pid, policy)

    def start(self) -> None:
        self._container = self._run_container(self.image, self.id, self.policy)
        try:
            container = self._container
            archive_retried(lambda: container.put_archive("/", _LOG_DIRS))
            root = self._mount_path(self._container.id)
            if root is not None:
                adopt_engine_dirs(root, self.config.workdir or "/")
            self._baseline = self._changed_paths()
        except BaseException:
            self.stop()
            raise

    def _changed_paths(self) -> set[str]:
        """Paths the engine's diff of the agent's container lists (added, changed, deleted)."""
        return {str(d["Path"]) for d in self._container.diff() or []}

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
                    force_remove(obj)
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
        """OOM kills in the container's memory cgroup so far (0 where it cannot be read). An
        engine on another machine: 1 once its inspect says OOMKilled (its pids and cgroup
        files are not this machine's)."""
        container = container or self._container
        if not self._site.here:
            try:
                container.reload()
                return int(bool(container.attrs["State"].get("OOMKilled")))
            except Exception:  # noqa: BLE001 - APIError, KeyError: the container is gone
                return 0
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
        tar = tar_bytes(rels, mode)
        try:
            archive_retried(lambda: container.put_archive("/", tar))
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
    def _carried(self, agent: Any, spec: VerifierSpec, changed: set[str]) -> Outputs:
        """Each output's tar as `carried_tar` rewrites it, and the git configuration files in
        them. Raises SandboxError for whatever the agent's tree makes fail (names longer than a
        path, a tree deeper than the walk): the verifier then did not run, and `judge.prove`
        says whose failure that is."""
        owner = (spec.agent_uid, spec.agent_gid)
        carried: dict[str, bytes] = {}
        git_files: dict[str, bytes] = {}
        try:
            root = self._mount_path(agent.id)  # a local Podman: read here, no engine read
            for path in spec.outputs:
                if root is not None:
                    data = self._tree_tar(root, path)
                else:
                    data = self._download_tar(agent, path)
                    data = unshift_tar(data) if self._podman and data else data
                if data:
                    project = within(path, spec.cwd)
                    carried[path], found = carried_tar(
                        data, path, changed, owner if project else None
                    )
                    git_files |= found
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - OSError, RecursionError, the engine's APIError
            raise SandboxError(f"sandbox {self.id}: the agent's outputs: {e!r}"[:500]) from e
        return carried, git_files

    def verify(self, spec: VerifierSpec) -> VerifierRun:
        """The verifier as sandbox.judge says, in a container of its own made from the image
        (never the agent's): its first process becomes the entry script (the container and
        every process in it end with it); /tests, /logs/verifier (the judge's alone, mode
        0700) and each output directory are fresh volumes, the agent's outputs copied from
        its container as data (`carried_tar`) before the entry is let go."""
        agent = self._container
        if agent is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        if self._session is not None:
            self._session.detach()
            self._session = None
        carried, git_files = self._agent_outputs(agent, spec)
        run_id = f"{self.id}-v{uuid.uuid4().hex[:6]}"
        places = [(TESTS_DIR, "tests"), (REPORT_DIR, "report")]
        # a directory above the verifier's toolchain is laid over the image's (which keeps its
        # toolchain), not a fresh volume
        places += [
            (p, f"out{i}")
            for i, p in enumerate(carried)
            if _is_dir_tar(carried[p]) and not holds_verifier_venv(p)
        ]
        if spec.cwd not in carried:  # the working directory, whatever the agent left there
            places.append((spec.cwd, "cwd"))
        volumes: dict[str, str] = {}
        for path, suffix in places:
            volume = self._create(lambda n=f"{run_id}-{suffix}": self.client.volumes.create(n))
            volumes[volume.name] = path
        policy: NetworkPolicy | str = (
            f"container:{agent.id}" if spec.keep_agent_processes else (spec.network or self.policy)
        )
        env = guard_env(
            {**self.config.env, **spec.env}, driver_sections(list(git_files), git_files.get)
        )
        judge = self._create(
            lambda: self._run_container(
                self.image, run_id, policy, volumes, entry=["/bin/sh", "-c", JUDGE_ENTRY], env=env
            )
        )
        try:
            io_ = self.client.api.attach_socket(
                judge.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            ids = _user_ids(self._download(judge, "/etc/passwd").get("passwd", b""), spec.user)
            for path, tar in carried.items():
                judge.put_archive(posixpath.dirname(path) or "/", tar)
            judge.put_archive("/", _tests_tar(spec.tests, ids))
            report: dict[str, bytes | None] = {REPORT_DIR.strip("/"): None}
            report |= {f"{REPORT_DIR.strip('/')}/{n}": b for n, b in spec.report_files.items()}
            judge.put_archive("/", _owned_tar(report, ids, 0o700, 0o600))
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - APIError: the judge's container
            raise SandboxError(f"sandbox {self.id}: the verifier's container: {e}") from e
        go = "\x1f".join([spec.cwd, "" if ids == (0, 0) else f"{ids[0]}:{ids[1]}", spec.command])
        result = self._judge_run(judge, io_, go, spec.timeout_s)
        files = self._download(judge, REPORT_DIR)
        return VerifierRun(result=result, files=files)

    def _agent_outputs(self, agent: Any, spec: VerifierSpec) -> Outputs:
        """The agent's outputs for `spec` (`_carried`, from the engine's diff of the agent's
        container), its processes killed first unless the verifier keeps them. A killed
        agent's tree no longer changes: what was read stands for every later run of this
        trial (the judge's reruns) instead of the engine walking the tree again. A failure
        is not kept: the judge's start retry reads again (a read the harness lost under load
        is not the agent's failure)."""
        asked = (spec.outputs, spec.cwd, spec.agent_uid, spec.agent_gid)
        if self._outputs is not None and self._outputs[0] == asked:
            return self._outputs[1]
        try:
            changed = self._changed_paths() - self._baseline if spec.outputs else set()
        except Exception as e:  # noqa: BLE001 - the engine's diff of what the agent left
            raise SandboxError(f"sandbox {self.id}: the agent's outputs: {e}") from e
        finally:
            if not spec.keep_agent_processes:
                try:
                    agent.kill()
                except Exception:  # noqa: BLE001 - already stopped
                    pass
        found = self._carried(agent, spec, changed)
        if not spec.keep_agent_processes:
            self._outputs = (asked, found)
        return found

    def _judge_run(self, judge: Any, io_: Any, go: str, timeout: float) -> ExecResult:
        """Let the judge's entry go (its working directory, user and command on one line of
        stdin), read its output until it exits, the deadline or the output cap; the
        container is killed before its report is read, whatever is left in it."""
        sock = getattr(io_, "_sock", io_)
        cap = self.limits.output_bytes
        t0 = time.monotonic()
        try:
            sock.sendall(go.encode() + b"\n")
        except OSError as e:
            raise SandboxError(f"sandbox {self.id}: the verifier did not start: {e}") from e
        out, err, _, timed_out, truncated = _read_frames(sock, t0 + timeout, cap, pid_line=False)
        for stream in (sock, io_):
            try:
                stream.close()
            except OSError:
                pass
        try:
            judge.kill()
        except Exception:  # noqa: BLE001 - it has exited
            pass
        try:
            code = int(judge.wait(timeout=30).get("StatusCode", -1))
            judge.reload()
            oom = bool(judge.attrs.get("State", {}).get("OOMKilled"))
        except Exception as e:  # noqa: BLE001 - APIError
            raise SandboxError(f"sandbox {self.id}: the verifier's end: {e}") from e
        return ExecResult(
            exit_code=code,
            stdout=bytes(out[:cap]).decode("utf-8", "replace"),
            stderr=bytes(err[: max(0, cap - len(out))]).decode("utf-8", "replace"),
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            oom_killed=oom and not timed_out,
            output_truncated=truncated,
        )

    def _mount_path(self, container_id: str) -> Path | None:
        """Where a Podman on this machine has a container's root filesystem mounted (None
        elsewhere: a remote engine's path is another machine's)."""
        if not self._site.local_podman:
            return None
        api = self.client.api
        try:
            r = api.post(f"{api.base_url}/v{PODMAN_API}/libpod/containers/{container_id}/mount")
        except Exception:  # noqa: BLE001 - not a local Podman
            return None
        path = Path(r.text.strip().strip('"')) if r.status_code == 200 else None
        return path if path is not None and path.is_dir() else None

    def _tree_tar(self, root: Path, path: str) -> bytes:
        """The tar `get_archive` gives of `path`, read here from the container's root mounted
        at `root` without following any link (a path with a link in it is absent; regular
        files opened O_NONBLOCK, so a FIFO is never read), at most the disk size. The engine
        reads the container's /etc/passwd for an archive, which the agent may have made a
        FIFO: it would hang there."""
        budget = [self.limits.disk_mb * 1024 * 1024 + (1 << 20)]
        rel = path.strip("/")
        fd = safefs.open_root(root)
        try:
            if not rel or safefs.lstat(fd, rel) is None:
                return b""
            parent = safefs.openat2(
                fd, posixpath.dirname(rel) or ".", os.O_PATH | os.O_DIRECTORY,
                resolve=safefs.NO_LINKS,
            )  # fmt: skip
        finally:
            os.close(fd)
        buf = io.BytesIO()
        try:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                name = posixpath.basename(rel)
                _add_tree(tar, parent, name, name, budget, {})
        finally:
            os.close(parent)
        if budget[0] < 0:
            raise DiskFull(f"sandbox {self.id}: the agent's {path} exceeds the disk limit")
        return buf.getvalue()

    def _download_tar(self, container: Any, path: str) -> bytes:
        """The tar stream of `path` in `container` (empty when absent), at most the sandbox's
        disk size: more is the agent's full disk."""
        budget = self.limits.disk_mb * 1024 * 1024 + (1 << 20)
        try:
            stream, _ = container.get_archive(path)
        except Exception:  # noqa: BLE001 - docker.errors.NotFound
            return b""
        buf = bytearray()
        for chunk in stream:
            buf += chunk
            if len(buf) > budget:
                raise DiskFull(f"sandbox {self.id}: the agent's {path} exceeds the disk limit")
        return bytes(buf)


# The verifier's first process (sandbox.docker): wait for the runner's line on stdin (working
# directory, "uid:gid" or empty for root, command, separated by \x1f), then become the entry
# script, as that user (the image's setpriv keeping the right to switch to the agent's uid).
JUDGE_ENTRY = r"""IFS=$(printf '\037') read -r cwd ids command || exit 125
exec </dev/null
cd "$cwd" || exit 125
[ -z "$ids" ] && exec /bin/bash -c "$command"
for d in /usr/bin /bin /usr/sbin /sbin; do
  [ -x "$d/setpriv" ] && exec "$d/setpriv" --reuid="${ids%:*}" --regid="${ids#*:}" \
    --init-groups --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid \
    -- /bin/bash -c "$command"
done
echo "the image has no setpriv to run as $ids" >&2
exit 125
"""


def carried_tar(
    data: bytes, path: str, changed: set[str], owner: tuple[int, int] | None
) -> tuple[bytes, dict[str, bytes]]:
    """The agent's tar of `path` (as `get_archive` gives it) rewritten as sandbox.judge's rule
    1 says: directories, regular files, links (`carried_link`) and hard links within it
    only; modes by `carried_mode`, no extended attribute (no file capability); root's
    directories and what the agent changed (`changed`: paths the engine's diff lists) owned by
    `owner`, the rest as the image had it (other owners stay); with `owner` None (system state
    a task declares, outside the working directory) every owner stays. Returns the tar and the
    git configuration files in it."""
    git: dict[str, bytes] = {}
    top = posixpath.dirname(path.rstrip("/"))
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for m in src:
            mode = carried_mode(_tar_mode(m))
            if mode is None and not m.islnk():
                continue
            abs_path = posixpath.normpath(posixpath.join(top, m.name))
            if not within(abs_path, path) or not carried_path(abs_path):
                continue  # nothing else, and the verifier's toolchain stays the image's
            if m.issym() and not carried_link(abs_path, m.linkname):
                continue  # a link into the judge's places
            target = posixpath.normpath(posixpath.join(top, m.linkname))
            if m.islnk() and not (within(target, path) and carried_path(target)):
                continue  # a hard link only to what is carried with it
            info = tarfile.TarInfo(m.name)
            info.type, info.mtime, info.mode = m.type, m.mtime, mode or 0
            info.linkname = m.linkname
            ours = owner is not None and (m.isdir() or abs_path in changed)
            ids = (  # root's becomes the agent's in its project; other owners stay
                owner[0] if owner and ours and m.uid == 0 else m.uid,
                owner[1] if owner and ours and m.gid == 0 else m.gid,
            )
            info.uid, info.gid = ids
            if m.isfile():
                info.size = m.size
                body = src.extractfile(m)
                blob = body.read() if body else b""
                if is_config_file(abs_path) and len(blob) <= MAX_CONFIG_BYTES:
                    git[abs_path] = blob
                dst.addfile(info, io.BytesIO(blob))
            else:
                dst.addfile(info)
    return out.getvalue(), git


def unshift_tar(data: bytes) -> bytes:
    """The tar with its owners back to the container's: Podman's archive of a container in its
    own user namespace gives the ids of the engine's machine (root as idmap.BASE, measured on
    4.3), which its own archive upload then cannot map."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for m in src:
            m.uid = m.uid - idmap.BASE if m.uid >= idmap.BASE else m.uid
            m.gid = m.gid - idmap.BASE if m.gid >= idmap.BASE else m.gid
            m.pax_headers = {k: v for k, v in m.pax_headers.items() if k not in ("uid", "gid")}
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return out.getvalue()


def _add_tree(
    tar: tarfile.TarFile,
    dirfd: int,
    name: str,
    arcname: str,
    budget: list[int],
    seen: dict[tuple[int, int], str],
) -> None:
    """`name` below the directory `dirfd` into `tar` as `arcname`, recursively, no link
    followed; ids back to the container's (the mount shows them shifted, sandbox.idmap). A
    regular file met again (`seen`: its device and inode, the name it was added as) is a
    hard link to that name, as the engine's archive has it."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return
    info = tarfile.TarInfo(arcname)
    info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
    info.uid = st.st_uid - idmap.BASE if st.st_uid >= idmap.BASE else st.st_uid
    info.gid = st.st_gid - idmap.BASE if st.st_gid >= idmap.BASE else st.st_gid
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            sub = os.open(name, flags, dir_fd=dirfd)
        except OSError:
            return
        try:
            for child in sorted(os.listdir(sub)):
                _add_tree(tar, sub, child, f"{arcname}/{child}", budget, seen)
        finally:
            os.close(sub)
    elif stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=dirfd)
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            f = os.open(name, flags, dir_fd=dirfd)
        except OSError:
            return
        try:
            fst = os.fstat(f)
            if not stat.S_ISREG(fst.st_mode):
                return
            key = (fst.st_dev, fst.st_ino)
            if fst.st_nlink > 1 and key in seen:
                info.type, info.linkname = tarfile.LNKTYPE, seen[key]
                tar.addfile(info)
                return
            seen[key] = arcname
            chunks, left = [], max(0, budget[0]) + 1
            while left > 0 and (chunk := os.read(f, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(f)
        data = b"".join(chunks)
        budget[0] -= len(data)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    # anything else (FIFO, socket, device) is not carried: left out


def _tar_mode(m: tarfile.TarInfo) -> int:
    kind = {
        tarfile.DIRTYPE: stat.S_IFDIR,
        tarfile.SYMTYPE: stat.S_IFLNK,
        tarfile.REGTYPE: stat.S_IFREG,
        tarfile.AREGTYPE: stat.S_IFREG,
        tarfile.CONTTYPE: stat.S_IFREG,
    }.get(m.type, stat.S_IFIFO)
    return kind | m.mode


def _is_dir_tar(data: bytes) -> bool:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        first = tar.next()
    return first is not None and first.isdir()


def _tests_tar(files: Mapping[str, bytes], ids: tuple[int, int]) -> bytes:
    """The tests directory as `judge.tests_layout` lays it out: root's, held-out entries in
    `tests_group` of the verifier's user (`ids`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for e in tests_layout(dict(files)):
            info = tarfile.TarInfo(posixpath.join(TESTS_DIR.strip("/"), e.rel).rstrip("/"))
            info.uid, info.gid = 0, tests_group(ids) if e.held else 0
            info.mode, info.mtime = e.mode, int(time.time())
            if e.data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def _owned_tar(
    entries: dict[str, bytes | None], ids: tuple[int, int], dir_mode: int, file_mode: int
) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.mtime = *ids, int(time.time())
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, dir_mode
                tar.addfile(info)
            else:
                info.mode, info.size = file_mode, len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _user_ids(passwd: bytes, user: str) -> tuple[int, int]:
    """uid and gid of `user` (a name, `uid` or `uid:gid`; root when empty) in the image's
    /etc/passwd."""
    if user in ("", "root", "0"):
        return 0, 0
    name, _, group = user.partition(":")
    for line in passwd.decode("utf-8", "replace").splitlines():
        f = line.split(":")
        if len(f) >= 4 and (f[0] == name or f[2] == name) and f[2].isdigit() and f[3].isdigit():
            return int(f[2]), int(group) if group.isdigit() else int(f[3])
    if name.isdigit():
        return int(name), int(group) if group.isdigit() else int(name)
    raise SandboxError(f"user {name!r} does not exist in the image's /etc/passwd")


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


def _allowlist_hosts(policy: NetworkPolicy | str) -> dict[str, str]:
    """/etc/hosts entries for an allowlist's names (its DNS is closed, sandbox.egress)."""
    if isinstance(policy, str) or policy.mode != NetworkMode.ALLOWLIST:
        return {}
    from sandbox.network import resolved_names

    return {name: addr for addr, name in resolved_names(policy.allowed_hosts)}


@functools.lru_cache(maxsize=4)
def _seccomp_option(podman: bool, verifier: bool = False) -> str:
    """The profile (the verifier phase's with `verifier`) as the engine takes it: Docker's API
    wants the JSON itself, Podman's compatible API a path on its host (`podman`: a file in
    this machine's private state directory)."""
    refused = seccomp.verifier_refused() if verifier else None
    profile = seccomp.docker_profile(refused=refused)
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


_ENGINE_PROFILES: dict[tuple[str, str], str] = {}  # (engine, profile digest) -> path there
_ENGINE_PROFILES_LOCK = threading.Lock()


def _engine_profile(client: Any, image: str, profile: str) -> str:
    """A path on a remote Podman's machine holding `profile` (Podman's API takes a seccomp
    profile only as a path on its host; measured on 4.3, JSON is opened as a file name): a file
    in the volume PROFILE_VOLUME, written through the engine's archive API into a container of
    `image` that never starts, at the mountpoint the engine reports. One file per process
    and profile: a file shared with another writer could be read half-written."""
    digest = hashlib.sha256(profile.encode()).hexdigest()[:16]
    key = (endpoint(client), digest)
    with _ENGINE_PROFILES_LOCK:
        if key in _ENGINE_PROFILES:
            return _ENGINE_PROFILES[key]
        name = f"seccomp-{digest}-{uuid.uuid4().hex[:12]}.json"

        def upload() -> str:
            volume = client.volumes.create(PROFILE_VOLUME)
            helper = client.containers.create(
                image,
                ["true"],
                volumes={PROFILE_VOLUME: {"bind": "/profiles", "mode": "rw"}},
                labels={CONTAINER_LABEL: "seccomp", ENDPOINT_LABEL: endpoint(client)},
            )
            try:
                helper.put_archive("/profiles", tar_bytes({name: profile.encode()}))
            finally:
                force_remove(helper)
            return str(volume.attrs["Mountpoint"])

        try:
            mountpoint = archive_retried(upload)
        except Exception as e:  # noqa: BLE001 - APIError, KeyError
            raise SandboxError(f"the seccomp profile could not be put there: {e}") from e
        _ENGINE_PROFILES[key] = path = posixpath.join(mountpoint, name)
    return path


def archive_retried(upload: Callable[[], _T], attempts: int = 3, pause_s: float = 0.5) -> _T:
    """`upload()`, again after a pause while it raises, `attempts` times in all (the last
    failure is raised): Podman 4.3's archive API ends an upload in "broken pipe" now and then
    (measured: a seccomp profile's upload, and a WORKDIR's in a two-worker `make test`)."""
    for attempt in range(attempts - 1):
        try:
            return upload()
        except Exception:  # noqa: BLE001 - APIError; tried again
            time.sleep(pause_s * (attempt + 1))
    return upload()


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


def _is_container(obj: Any) -> bool:
    return hasattr(obj, "diff")


def _read_frames(
    sock: socket.socket, deadline: float, cap: int, *, pid_line: bool = True
) -> tuple[bytearray, bytearray, int, bool, bool]:
    """Read a multiplexed exec stream until EOF, the deadline or `cap` bytes of output.

    Returns stdout (without the leading pid line, when `pid_line`), stderr, that pid,
    timed_out, truncated.
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
        if pid_line and not pid and b"\n" in out:
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
        does not answer is skipped and the sandbox placed on another). A task whose network
        needs egress goes to an engine on this machine, and is refused (SandboxUnavailable)
        before anything starts where there is none."""
        from sandbox.policy import egress_mode

        egress = egress_mode(task)
        pool = configured_pool()
        urls, where = (
            ([os.environ.get("DOCKER_HOST") or "unix://"], "DOCKER_HOST")  # unset: the socket
            if pool is None
            else ([e.url for e in pool.engines], HOSTS_ENV)
        )
        problem = egress_problem(egress, urls, where)
        if problem is not None:
            raise SandboxUnavailable(f"task {task.id}: {problem}")
        if pool is None:
            return self._open_on(docker_client(), task)
        key = task.environment_hash
        failures: list[str] = []
        for _ in range(len(pool.engines)):
            engine = pool.acquire(key, local_only=egress is not None)
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
            image = build_image(client, task, engine_site(client))
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
        )
        sb.start()
        return sb
