"""Docker backend through the Docker SDK: builds the task's Dockerfile (cached by environment
hash, like the local layer cache) and runs each trial in a fresh container with the task's
limits. Imported lazily; raises SandboxUnavailable where no daemon answers."""

from __future__ import annotations

import io
import tarfile
import uuid
from typing import Any

from sandbox.base import ExecResult, SandboxError, SandboxUnavailable, normalize_dest
from sandbox.exec_session import ExecSession
from tasks.environment import render_dockerfile
from tasks.model import Limits, Task

IMAGE_PREFIX = "t1-forge-env"


def docker_client() -> Any:
    """A connected Docker client, or SandboxUnavailable saying why not."""
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable("the 'docker' package is not installed") from e
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure here means "no daemon"
        raise SandboxUnavailable(f"no Docker daemon answers: {e}") from e
    return client


def docker_problem() -> str | None:
    try:
        docker_client()
    except SandboxUnavailable as e:
        return str(e)
    return None


def _tar(files: dict[str, bytes], prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(prefix + rel)
            info.size = len(data)
            info.mode = 0o755 if rel.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_image(client: Any, task: Task) -> str:
    """Tag of the task's environment image, building it when absent."""
    tag = f"{IMAGE_PREFIX}:{task.environment_hash[:20]}"
    try:
        client.images.get(tag)
        return tag
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        pass
    files = dict(task.environment.files)
    files.setdefault("Dockerfile", render_dockerfile(task).encode())
    context = io.BytesIO(_tar(files))
    try:
        client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            rm=True,
            timeout=int(task.limits.build_timeout_s),
        )
    except Exception as e:  # noqa: BLE001 - BuildError / APIError
        from sandbox.base import EnvironmentBuildError

        raise EnvironmentBuildError(f"task {task.id}: docker build failed: {e}") from e
    return tag


class DockerSandbox:
    """One container per trial. Commands run with `timeout -s KILL` inside the container."""

    def __init__(
        self, client: Any, image: str, limits: Limits, *, allow_network: bool, workdir: str
    ) -> None:
        self.id = "t1-" + uuid.uuid4().hex[:12]
        self.client = client
        self.image = image
        self.limits = limits
        self.allow_network = allow_network
        self.workdir = workdir
        self._session: ExecSession | None = None
        self._container: Any = None

    def start(self) -> None:
        try:
            self._container = self.client.containers.run(
                self.image,
                command=["sleep", "infinity"],
                name=self.id,
                detach=True,
                working_dir=self.workdir,
                mem_limit=f"{self.limits.memory_mb}m",
                memswap_limit=f"{self.limits.memory_mb}m",
                pids_limit=self.limits.pids,
                nano_cpus=int(self.limits.cpus * 1e9),
                network_disabled=not self.allow_network,
                cap_drop=["MKNOD", "NET_RAW", "SYS_ADMIN"],
            )
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"container start failed: {e}") from e
        self.exec("mkdir -p /logs/agent /logs/verifier", timeout_s=30, cwd="/")

    def exec(
        self, command: str, *, timeout_s: float | None = None, cwd: str | None = None
    ) -> ExecResult:
        import time

        if self._container is None:
            raise SandboxError(f"sandbox {self.id} is not running")
        timeout = timeout_s if timeout_s is not None else self.limits.agent_timeout_s
        t0 = time.monotonic()
        wrapped = ["timeout", "-s", "KILL", str(max(1, int(timeout))), "bash", "-c", command]
        res = self._container.exec_run(wrapped, workdir=cwd or self.workdir, demux=True)
        out, err = res.output if isinstance(res.output, tuple) else (res.output, b"")
        out, err = out or b"", err or b""
        cap = self.limits.output_bytes
        truncated = len(out) + len(err) > cap
        self._container.reload()
        oom = bool(self._container.attrs.get("State", {}).get("OOMKilled"))
        return ExecResult(
            exit_code=res.exit_code,
            stdout=out[:cap].decode("utf-8", "replace"),
            stderr=err[: max(0, cap - len(out))].decode("utf-8", "replace"),
            duration_s=time.monotonic() - t0,
            timed_out=res.exit_code == 137 and time.monotonic() - t0 >= timeout,
            oom_killed=oom or (res.exit_code == 137 and time.monotonic() - t0 < timeout),
            output_truncated=truncated,
        )

    def session(self) -> ExecSession:
        if self._session is None:
            self._session = ExecSession(self, self.workdir)
        return self._session

    def upload(self, files: dict[str, bytes], dest_dir: str, *, mode: int = 0o644) -> None:
        if not files:
            return
        rels = {normalize_dest(dest_dir, r).lstrip("/"): b for r, b in files.items()}
        self._container.put_archive("/", _tar(rels))

    def download(self, path: str) -> dict[str, bytes]:
        try:
            stream, _ = self._container.get_archive(path)
        except Exception:  # noqa: BLE001 - docker.errors.NotFound
            return {}
        buf = io.BytesIO(b"".join(stream))
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=buf) as tar:
            base = path.rstrip("/").rsplit("/", 1)[-1]
            for m in tar.getmembers():
                if m.isfile():
                    f = tar.extractfile(m)
                    rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
                    out[rel if m.name.startswith(base + "/") else m.name] = f.read() if f else b""
        return out

    def stop(self) -> None:
        if self._container is not None:
            try:
                self._container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._container = None


class DockerBackend:
    name = "docker"

    def open(self, task: Task) -> DockerSandbox:
        client = docker_client()
        image = build_image(client, task)
        sb = DockerSandbox(
            client,
            image,
            task.limits,
            allow_network=task.environment.allow_network,
            workdir=task.environment.workdir,
        )
        sb.start()
        return sb
