"""The Docker API client as the docker backend uses it: a connected client, whether the
engine is Podman, an exec's exit code. A leaf: the backend, its shell and the Podman service
all use it."""

from __future__ import annotations

import os
import time
from typing import Any

from sandbox.base import SandboxUnavailable

API_VERSION = "1.41"  # Docker 20.10+, Podman 4+


def docker_client(url: str | None = None) -> Any:
    """A connected Docker client for `url` (`unix://`, `tcp://` with the usual DOCKER_TLS_VERIFY
    and DOCKER_CERT_PATH, `ssh://`), else DOCKER_HOST, else the default socket; or
    SandboxUnavailable."""
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable("the 'docker' package is not installed") from e
    env = dict(os.environ) if url is None else {**os.environ, "DOCKER_HOST": url}
    where = env.get("DOCKER_HOST", "default")
    try:
        # A fixed API version: negotiating it costs a /version call (0.5-1 s on Podman).
        client = docker.from_env(
            timeout=600,
            version=API_VERSION,
            environment=env,
            use_ssh_client=where.startswith("ssh://"),
        )
        client.ping()
        client._t1_endpoint = where
    except Exception as e:  # noqa: BLE001 - any failure here means "no engine"
        raise SandboxUnavailable(f"no Docker daemon answers at {where}: {e}") from e
    return client


def endpoint(client: Any) -> str:
    """The DOCKER_HOST a client was made for."""
    return str(getattr(client, "_t1_endpoint", "default"))


def docker_problem() -> str | None:
    try:
        docker_client().close()
    except SandboxUnavailable as e:
        return str(e)
    return None


def is_podman(client: Any) -> bool:
    """Whether the engine is Podman (asked once per client)."""
    cached = getattr(client, "_t1_is_podman", None)
    if cached is None:
        api = client.api
        headers = api.get(f"{api.base_url}/_ping", timeout=10).headers
        cached = "Libpod-API-Version" in headers  # /version would cost 0.5-1 s
        client._t1_is_podman = cached
    return bool(cached)


def exec_exit_code(api: Any, exec_id: str) -> int:
    deadline = time.monotonic() + 5
    while True:
        info = api.exec_inspect(exec_id)
        if not info.get("Running") or time.monotonic() > deadline:
            code = info.get("ExitCode")
            return int(code) if code is not None else -1
        time.sleep(0.02)
