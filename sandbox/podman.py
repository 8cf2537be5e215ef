"""A private Podman engine serving the Docker API, for the docker backend where no daemon runs.

Everything lives under `$T1_SANDBOX_STATE/podman/` (configuration, image storage, sockets) and
a tmpfs run directory, so nothing global is changed and any number of services can share the
storage. `PodmanService` starts `podman system service` on its own socket; `docker_host()`
is the DOCKER_HOST value that points the docker backend at it. Base root filesystems
(`sandbox.bases`) are imported as images under the names Dockerfiles use (`import_base`).

Measured choices (Debian 12, cgroup v1, root without CAP_SYS_RESOURCE): the OCI runtime is
runc (crun refuses a cgroup v1 layout), cgroups are managed directly (no systemd), and the
default ulimits are set to the hard limits this process has (Podman's defaults are above them,
and raising a hard limit needs CAP_SYS_RESOURCE).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox import idmap, userns_runtime
from sandbox.docker_api import force_remove
from sandbox.idmap import unshift_map
from sandbox.image import ImageConfig
from sandbox.local import STATE_DIR

PODMAN_DIR = STATE_DIR / "podman"
# Labels on every container the docker backend creates, so a cleanup finds leftovers: the
# sandbox id, and the engine endpoint it was created through (services share the storage).
CONTAINER_LABEL = "t1-forge.sandbox"
ENDPOINT_LABEL = "t1-forge.endpoint"
BASE_LABEL = "t1-forge.base"
# A scratch directory younger than this may still be taking its lock: the sweep leaves it.
SCRATCH_GRACE_S = 60.0
REQUIRED_TOOLS = ("podman", "runc", "conmon", "catatonit", "slirp4netns", "nsenter", "ip")


def podman_problem() -> str | None:
    """Why a private Podman engine cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "the private Podman engine runs as root (rootless Podman needs subuid ranges)"
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        return (
            f"{', '.join(missing)} not found: apt-get install podman runc conmon catatonit "
            "slirp4netns uidmap iproute2 util-linux"
        )
    return None


@dataclass(frozen=True)
class PodmanConfig:
    """Files that make one private Podman installation (see `write_config`)."""

    root: Path
    run_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.root / "registries.conf"),
        }


def _hard_limit(which: int, cap: int) -> int:
    hard = resource.getrlimit(which)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def write_config(root: Path = PODMAN_DIR) -> PodmanConfig:
    """Write (idempotently) the private containers.conf, storage.conf and registries.conf.

    Run state goes to a tmpfs (/dev/shm) so a reboot cannot leave stale container state
    behind; the directory name is derived from `root`, so two state dirs never share it.
    """
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10]
    run_dir = Path("/dev/shm/t1-forge") / f"podman-{tag}"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime = install_runtime(root)
    nofile = _hard_limit(resource.RLIMIT_NOFILE, 1 << 20)
    # The service lowers its own process limit to 32768 at start; above that runc fails.
    nproc = _hard_limit(resource.RLIMIT_NPROC, 32768)
    files = {
        "containers.conf": f"""\
[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]
log_driver = "k8s-file"
netns = "none"

[engine]
# An exec session's conmon waits this long for its exit code to be read (default 300 s).
exit_command_delay = 10
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{run_dir}/events.log"
tmp_dir = "{run_dir}/tmp"
volume_path = "{root}/volumes"
static_dir = "{root}/storage/libpod"

[engine.runtimes]
# runc behind sandbox.userns_runtime: each container's user namespace owned by a uid of its own
runc = ["{runtime}"]

[network]
network_config_dir = "{root}/net"
""",
        "storage.conf": f"""\
[storage]
driver = "overlay"
graphroot = "{root}/storage"
runroot = "{run_dir}/storage"
""",
        "registries.conf": """\
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
""",
    }
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in files.items():
        path = root / name
        if not path.exists() or path.read_text() != text:
            _replace(path, text)
    return PodmanConfig(root=root, run_dir=run_dir)


def _replace(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `path` whole or not at all (a reader never sees half a file)."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)


def install_runtime(root: Path, runc: str | None = None) -> Path:
    """The OCI runtime (sandbox.userns_runtime in front of `runc`, default this host's) under
    `root/bin`, named by content: services of other checkouts sharing `root` keep theirs."""
    runc = runc or shutil.which("runc") or "/usr/bin/runc"
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True, mode=0o700)
    source = Path(userns_runtime.__file__).read_text()
    made_by = f"{source}{sys.executable} {idmap.OWNER_BASE} {runc}"
    key = hashlib.sha256(made_by.encode()).hexdigest()[:12]
    module, front = bindir / f"t1_runc_{key}.py", bindir / f"t1-runc-{key}"
    text = userns_runtime.front_text(sys.executable, idmap.OWNER_BASE, runc, module)
    for path, content, mode in ((module, source, 0o644), (front, text, 0o755)):
        if not path.exists():  # the module first: a front never names a missing module
            _replace(path, content, mode)
    return front


class PodmanService:
    """`podman system service` on a private socket. Use as a context manager, or start/stop.

    The service answers the Docker API; containers outlive it (each has its own conmon), so
    `stop` removes the containers this project created before ending the service.
    """

    def __init__(self, config: PodmanConfig | None = None, name: str | None = None) -> None:
        self.config = config or write_config()
        self.socket = self.config.run_dir / f"{name or uuid.uuid4().hex[:12]}.sock"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = self.config.run_dir / f"{self.socket.stem}.log"
        self._scratch: Scratch | None = None

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout_s: float = 30.0) -> None:
        problem = podman_problem()
        if problem:
            from sandbox.base import SandboxUnavailable

            raise SandboxUnavailable(problem)
        # Podman 4.3 never removes the copy of an imported tar (`api_load.tar*`, one per
        # `import_base`, hundreds of MB) from its TMPDIR: each service gets a scratch
        # directory of its own, removed when it stops (or by a later start, if it crashed).
        parent = self.config.root / "scratch"
        sweep_scratch(parent)
        self._scratch = Scratch.take(parent, self.socket.stem)
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                ["podman", "system", "service", "--time=0", self.docker_host],
                env=os.environ | self.config.env | {"TMPDIR": str(self._scratch.path)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                detail = self._log.read_text(errors="replace")[-2000:]
                self.stop()
                from sandbox.base import SandboxUnavailable

                raise SandboxUnavailable(f"podman system service did not start: {detail}")
            time.sleep(0.05)
        try:
            with contextlib.closing(self.client(timeout=60)) as client:
                remove_orphans(client, self.config.run_dir)
        except Exception:  # noqa: BLE001 - best effort: the next start tries again
            pass

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self.client().ping()
        except Exception:  # noqa: BLE001 - not up yet
            return False
        return True

    def client(self, timeout: int = 600) -> Any:
        import docker

        return docker.DockerClient(base_url=self.docker_host, timeout=timeout)

    def stop(self) -> None:
        try:
            self._stop_service()
        finally:
            if self._scratch is not None:
                self._scratch.release()
                self._scratch = None

    def _stop_service(self) -> None:
        if self._proc is None:
            return
        live: set[str] | None = None
        if self._proc.poll() is None:
            try:
                client = self.client(timeout=30)
                remove_containers(client, self.docker_host)
                live = {c.id for c in client.containers.list(all=True)}
            except Exception:  # noqa: BLE001 - best effort; the service is going away
                pass
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._proc = None
        self.socket.unlink(missing_ok=True)
        self._log.unlink(missing_ok=True)
        if live is not None:
            end_monitors(self.config, live)

    def __enter__(self) -> PodmanService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Scratch:
    """A directory held (an exclusive flock on its `.lock`) while its owner lives."""

    path: Path
    fd: int

    @classmethod
    def take(cls, parent: Path, prefix: str) -> Scratch:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=parent))
        fd = os.open(path / ".lock", os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return cls(path, fd)

    def release(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self.fd)


def sweep_scratch(parent: Path, grace_s: float = SCRATCH_GRACE_S) -> list[Path]:
    """Remove the scratch directories under `parent` whose owner is gone (their lock is free),
    leaving those younger than `grace_s` (their owner may be between making and locking)."""
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for path in parent.iterdir():
        try:
            young = time.time() - path.stat().st_mtime < grace_s
        except OSError:
            continue  # removed meanwhile
        if young or _locked(path / ".lock"):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _locked(lock: Path) -> bool:
    """Whether a live process holds `lock` (a missing lock file: nobody does)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: left alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def docker_engine() -> Iterator[str | None]:
    """For the docker backend in a script: the engine DOCKER_HOST names (or the default
    socket) when one answers, else a private Podman service exported as DOCKER_HOST for the
    duration. Yields the DOCKER_HOST in use (None: neither, the backend will say why)."""
    from sandbox.docker_api import docker_problem

    if docker_problem() is None or podman_problem() is not None:
        yield os.environ.get("DOCKER_HOST")
        return
    with PodmanService(name=f"run-{os.getpid()}") as service, docker_host_env(service.docker_host):
        yield service.docker_host


@contextlib.contextmanager
def docker_host_env(docker_host: str) -> Iterator[None]:
    """DOCKER_HOST names `docker_host` inside the block, and what it named before after it."""
    previous = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = docker_host
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = previous


def end_monitors(config: PodmanConfig, live: set[str]) -> int:
    """SIGTERM the conmon monitors of this storage whose container is not in `live` (the
    engine's containers): an exec session's monitor outlives its container by
    `exit_command_delay`, waiting for its exit code to be read."""
    ended = 0
    storage = config.root / "storage"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not args[0].endswith("conmon") or "-c" not in args[:-1]:
            continue
        container = args[args.index("-c") + 1]
        if any(str(storage) in a for a in args) and container not in live:
            try:
                os.kill(int(entry.name), signal.SIGTERM)
                ended += 1
            except ProcessLookupError:
                pass
    return ended


def remove_containers(client: Any, endpoint: str | None = None) -> int:
    """Force-remove the containers the docker backend created (a crashed run's leftovers):
    those made through `endpoint` (a DOCKER_HOST value), or all of them."""
    label = CONTAINER_LABEL if endpoint is None else f"{ENDPOINT_LABEL}={endpoint}"
    removed = 0
    for c in client.containers.list(all=True, filters={"label": label}):
        try:
            removed += force_remove(c)
        except Exception:  # noqa: BLE001 - the engine refused it: left for the next sweep
            pass
    return removed


def remove_orphans(client: Any, run_dir: Path) -> int:
    """Force-remove the containers made through a service of this installation that is gone
    (killed before its `stop` could remove them: they kept their mounts and storage): their
    endpoint is a socket under `run_dir` that nothing listens on."""
    containers = client.containers.list(all=True, filters={"label": CONTAINER_LABEL})
    endpoints = {str(c.labels.get(ENDPOINT_LABEL, "")) for c in containers}
    sockets = {e: Path(e.removeprefix("unix://")) for e in endpoints if e.startswith("unix://")}
    dead = [e for e, path in sockets.items() if path.parent == run_dir and not _listening(path)]
    return sum(remove_containers(client, e) for e in dead)


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False  # a socket file left by a killed service, or none
        except OSError:
            return True  # busy or unknown: kept
    return True


def import_base(
    client: Any, name: str, rootfs: Path, key: str, config: ImageConfig | None = None
) -> str:
    """Import a root filesystem directory as image `name` (e.g. "debian:bookworm-slim") with
    `config` (ENV, WORKDIR, USER, CMD).

    `key` identifies the root filesystem and config; an image already imported with the same
    key is kept, so this is cheap after the first call. Returns the image id.
    """
    config = config or ImageConfig(cmd=("bash",))
    repo, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "latest")
    try:
        image = client.images.get(name)
        if image.labels.get(BASE_LABEL) == key:
            return str(image.id)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        pass
    # The stored root's ids are shifted for the local sandbox (sandbox.idmap): the image
    # gets the root's own ids back.
    ids = unshift_map(Path(tempfile.mkdtemp(prefix="t1-ids-")) / "ids")
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--xattrs", f"--owner-map={ids}", f"--group-map={ids}",
         "-C", str(rootfs), "-cf", "-", "."],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert tar.stdout is not None
    changes = [f"ENV {k}={json.dumps(v)}" for k, v in config.env.items()]
    changes += [f"WORKDIR {config.workdir}", f"LABEL {BASE_LABEL}={key}"]
    if config.user:
        changes.append(f"USER {config.user}")
    if config.cmd:
        changes.append(f"CMD {json.dumps(list(config.cmd))}")
    try:
        out = client.api.import_image_from_stream(tar.stdout, changes=changes)
    finally:
        tar.stdout.close()
        code = tar.wait()
        shutil.rmtree(ids.parent, ignore_errors=True)
        if code != 0:
            raise RuntimeError(f"tar of base root filesystem {rootfs} failed")
    image_id = _imported_id(out)
    client.images.get(image_id).tag(repo, tag or "latest")
    return image_id


def _imported_id(output: Any) -> str:
    text = output.decode() if isinstance(output, bytes) else str(output)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            doc = json.loads(line)
            if doc.get("error"):
                raise RuntimeError(f"image import failed: {doc['error']}")
            if doc.get("id") or doc.get("status", "").startswith("sha256:"):
                return str(doc.get("id") or doc["status"])
    raise RuntimeError(f"image import gave no image id: {text[:500]}")
