"""The Docker API client as the docker backend uses it: a connected client, whether the
engine is Podman, an exec's exit code. A leaf: the backend, its shell and the Podman service
all use it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from sandbox.base import SandboxUnavailable

API_VERSION = "1.41"  # Docker 20.10+, Podman 4+
TLS_FILES = ("ca.pem", "cert.pem", "key.pem")  # Docker's layout of a DOCKER_CERT_PATH


@dataclass(frozen=True)
class EngineTLS:
    """One engine's own TLS material: `TLS_FILES` in `cert_path` (the CA that signed the
    engine's certificate, and this client's certificate and key); `verify` checks the engine's
    certificate against that CA (off: encrypted, but the engine is not authenticated)."""

    cert_path: str
    verify: bool = True

    @property
    def env(self) -> dict[str, str]:
        """The variables docker-py reads for it (DOCKER_TLS_VERIFY empty means no checking)."""
        return {"DOCKER_CERT_PATH": self.cert_path, "DOCKER_TLS_VERIFY": "1" if self.verify else ""}


def docker_client(url: str | None = None, tls: EngineTLS | None = None) -> Any:
    """A connected Docker client for `url` (`unix://`, `tcp://`, `ssh://`), else DOCKER_HOST,
    else the default socket; or SandboxUnavailable. A `tcp://` engine uses `tls`, else the
    usual DOCKER_TLS_VERIFY and DOCKER_CERT_PATH."""
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable("the 'docker' package is not installed") from e
    env = dict(os.environ) if url is None else {**os.environ, "DOCKER_HOST": url}
    where = env.get("DOCKER_HOST", "default")
    if tls is not None:
        missing = [n for n in TLS_FILES if not os.path.isfile(os.path.join(tls.cert_path, n))]
        if missing:
            raise SandboxUnavailable(
                f"{where}: cert_path {tls.cert_path} lacks {', '.join(missing)}"
            )
        env |= tls.env
    try:
        # A fixed API version: negotiating it costs a /version call (0.5-1 s on Podman).
        client = docker.from_env(
            timeout=600,
            version=API_VERSION,
            environment=env,
            use_ssh_client=where.startswith("ssh://"),
        )
        if client.api.base_url.startswith("https://"):
            # requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE replace the engine's CA (and
            # turn checking back on under tls_verify=0): a TLS engine is checked with its own
            # material only (and reached without the environment's proxies).
            client.api.trust_env = False
        client.ping()
        client._t1_endpoint = where
    except Exception as e:  # noqa: BLE001 - any failure here means "no engine"
        raise SandboxUnavailable(f"no Docker daemon answers at {where}: {e}") from e
    return client


def endpoint(client: Any) -> str:
    """The DOCKER_HOST a client was made for."""
    return str(getattr(client, "_t1_endpoint", "default"))


def force_remove(container: Any, tries: int = 5, pause: float = 0.5) -> bool:
    """Force-remove a container: True once removed, False if it was gone before. Podman
    under load removes the container but answers 500 because its /dev/shm is still mounted
    ("device or resource busy"; the storage goes a moment later): an engine error is retried,
    and a container gone after a try of ours was removed by it. The last error is raised."""
    from docker.errors import NotFound

    for attempt in range(tries):
        try:
            container.remove(force=True)
            return True
        except NotFound:
            return attempt > 0
        except Exception:  # noqa: BLE001 - APIError, a timeout: retried, then raised
            if attempt == tries - 1:
                raise
            time.sleep(pause * (attempt + 1))
    return False


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
