"""The long-running servers `t1 ui` (and the demo's loop) start: Dagster webserver and daemon,
the Prefect server, and the process serving the campaign deployment.

`Services` starts them in order (each waits for the previous one's health URL), watches them
and stops them all; `ServiceError` says which one failed and why, in one line, so the
command can exit non-zero instead of running on with a server missing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from warehouse.locks import LockHeldError, current_command, exclusive

DAGSTER_PORT, PREFECT_PORT = 3000, 4200  # the UIs' default ports (`t1 ui`)
# The lock a process holds under PREFECT_HOME while a Prefect server it started runs there.
PREFECT_SERVER_JOB = "prefect server"


CLIENT_MAX_RETRIES = 8
LEASE_STORAGE = "prefect.server.concurrency.lease_storage.filesystem"


class ServiceError(RuntimeError):
    """A server could not start, or stopped."""


# The readiness wait of a server this process starts: START_BASE_S on an idle machine,
# stretched by the load per core (a Prefect server took 26 s to answer at load 11 on 2 cores;
# Prefect's own temporary server gives up after 20 s), or exactly $T1_SERVER_START_TIMEOUT_S.
START_TIMEOUT_ENV = "T1_SERVER_START_TIMEOUT_S"
START_BASE_S, START_MAX_S = 60.0, 900.0


def fitted_timeout(
    base_s: float = START_BASE_S, load: float | None = None, cores: int | None = None
) -> float:
    """How long to wait for a server to answer: $T1_SERVER_START_TIMEOUT_S when set, else
    `base_s` times the 1-minute load per core (at least 1, the result at most START_MAX_S)."""
    given = os.environ.get(START_TIMEOUT_ENV)
    if given:
        try:
            return float(given)
        except ValueError:
            raise ServiceError(
                f"{START_TIMEOUT_ENV}={given!r} is not a number of seconds"
            ) from None
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    return min(START_MAX_S, base_s * max(1.0, load / max(1, cores)))


@dataclass(frozen=True)
class Service:
    name: str
    argv: list[str]
    health_url: str | None = None  # GET returns 200 once it serves
    start_timeout_s: float | None = None  # None: fitted to the machine's load when started


def venv_bin(name: str) -> str:
    """A console script installed beside this Python."""
    return str(Path(sys.executable).parent / name)


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def prefect_env(host: str, port: int, home: Path) -> dict[str, str]:
    """Settings that point every Prefect client and the Prefect UI at one server."""
    api = f"http://{host}:{port}/api"
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_UI_URL": f"http://{host}:{port}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_API_HOST": host,
        "PREFECT_SERVER_API_PORT": str(port),
        # A flow run retries an API call that cannot connect for about 8.5 minutes (2 s, 4 s,
        # ... 256 s; Prefect's default of 5 retries gives up after about a minute): long
        # enough for `t1 ui` to restart a Prefect server that died, on a busy machine.
        "PREFECT_CLIENT_MAX_RETRIES": str(CLIENT_MAX_RETRIES),
        # Deployment concurrency leases on disk under PREFECT_HOME, not in the server's
        # memory: after a restart the running campaign's lease is still there (its renewal
        # failed and the engine stopped the run: "slots are no longer reserved"), and a
        # dead run's slot can still be released.
        "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": LEASE_STORAGE,
    }


class PrefectDatabaseInUseError(RuntimeError):
    """Another process runs a Prefect server on this Prefect home's database."""


@contextmanager
def prefect_database(home: Path, api_url: str | None) -> Iterator[None]:
    """Hold `home`'s server lock while a Prefect server started here runs on its database.

    Two servers on one SQLite database (a `t1 ui` and `t1 train`'s temporary server, two
    `t1 ui`s on other ports) fail mid-run with "database is locked"; the second is refused
    instead, with `PrefectDatabaseInUseError` naming the holder and its API URL, if any.
    """
    label = f"API {api_url}" if api_url else "a temporary server"
    with ExitStack() as stack:
        try:
            stack.enter_context(
                exclusive(home, PREFECT_SERVER_JOB, command=f"{current_command()}; {label}")
            )
        except LockHeldError as e:
            who = e.holder.describe() if e.holder else "another process"
            raise PrefectDatabaseInUseError(
                f"a Prefect server already runs on the database in {home}: {who}; a second "
                "one there fails with 'database is locked': set PREFECT_API_URL to that "
                "server's API (`t1 ui` prints it), or use another PREFECT_HOME"
            ) from None
        yield


# The lock a `t1 ui` holds under DAGSTER_HOME while its webserver and daemon run there.
DAGSTER_UI_JOB = "t1 ui"


class DagsterHomeInUseError(RuntimeError):
    """Another `t1 ui` serves this DAGSTER_HOME (its daemon would run sensors twice)."""


@contextmanager
def dagster_home_lock(home: Path, url: str) -> Iterator[None]:
    """Hold `home`'s `t1 ui` lock while a webserver and daemon started here run on it.

    Two daemons on one instance both run its sensors and schedules (a campaign could start
    twice), and only the second's log said so; the second `t1 ui` is refused instead, with
    `DagsterHomeInUseError` naming the holder and its URL.
    """
    with ExitStack() as stack:
        try:
            stack.enter_context(
                exclusive(home, DAGSTER_UI_JOB, command=f"{current_command()}; {url}")
            )
        except LockHeldError as e:
            who = e.holder.describe() if e.holder else "another process"
            raise DagsterHomeInUseError(
                f"a t1 ui already serves DAGSTER_HOME {home}: {who}; a second daemon there "
                "would run its sensors twice: open that one, or stop it, or set DAGSTER_HOME "
                "to another directory"
            ) from None
        yield


def dagster_services(host: str, port: int) -> list[Service]:
    module = ["-m", "pipelines.definitions"]
    return [
        Service(
            "dagster webserver",
            [venv_bin("dagster-webserver"), *module, "-h", host, "-p", str(port)],
            f"http://{host}:{port}/server_info",
        ),
        Service("dagster daemon", [venv_bin("dagster-daemon"), "run", *module]),
    ]


def prefect_services(host: str, port: int) -> list[Service]:
    return [
        Service(
            "prefect server",
            [venv_bin("prefect"), "server", "start", "--host", host, "--port", str(port)],
            f"http://{host}:{port}/api/health",
        ),
        Service(
            "campaign deployment",
            [sys.executable, "-m", "pipelines.serve_campaign"],
            f"http://{host}:{port}/api/deployments/name/ppo_campaign/t1",
        ),
    ]


@dataclass
class Services:
    """Started servers; use as a context manager (everything stops on exit)."""

    env: Mapping[str, str]
    log: IO[bytes] | None = None  # None: the servers write to this terminal
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    restarts: int = 0

    def start(self, service: Service, *, wait: bool = True) -> None:
        """Start `service`; with `wait`, return once its health URL answers."""
        proc = subprocess.Popen(
            service.argv,
            env={**os.environ, **self.env},
            stdout=self.log,
            stderr=subprocess.STDOUT if self.log else None,
            start_new_session=True,
        )
        self.procs[service.name] = proc
        self.services[service.name] = service
        if wait:
            self.wait_healthy(service.name)

    def wait_healthy(self, name: str) -> None:
        """Return once the started service `name` answers its health URL (ServiceError if it
        exits or does not answer in time)."""
        service, proc = self.services[name], self.procs[name]
        if not service.health_url:
            return
        timeout = service.start_timeout_s or fitted_timeout()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ServiceError(f"{service.name} exited with code {proc.returncode}")
            try:
                if httpx.get(service.health_url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        load = os.getloadavg()[0]
        raise ServiceError(
            f"{service.name} did not answer {service.health_url} in {timeout:.4g} s (load "
            f"average {load:.1f} on {os.cpu_count()} cores); set {START_TIMEOUT_ENV} to wait "
            "longer"
        )

    def check(self) -> None:
        """ServiceError if any server has stopped."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ServiceError(f"{name} stopped (exit code {proc.returncode})")

    def stopped(self) -> list[str]:
        """The servers that have stopped."""
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def supervise(
        self, restartable: tuple[str, ...], max_restarts: int, say: Callable[[str], None]
    ) -> None:
        """One look at the servers: start again those of `restartable` that stopped (at most
        `max_restarts` in all), saying so; ServiceError for any other that stopped, or one
        past the budget."""
        for name in self.stopped():
            if name not in restartable or self.restarts >= max_restarts:
                self.check()  # raises, naming it
            code = self.procs[name].returncode
            self.restarts += 1
            say(
                f"{name} stopped (exit code {code}); restarting it ({self.restarts} of "
                f"{max_restarts}); a campaign in flight retries its calls meanwhile"
            )
            self.restart(name)

    def restart(self, name: str) -> None:
        """Start a stopped server again (what it left of its process group is ended first)
        and wait for it to answer."""
        proc = self.procs[name]
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # e.g. uvicorn under `prefect server start`
        proc.wait()
        self.start(self.services[name])

    def stop(self, grace_s: float = 15.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def temporary_prefect_server(home: Path, log_path: Path) -> Iterator[str]:
    """A Prefect server of this command's own on `home`'s database and a free port, for as
    long as the block runs; yields its API URL. Holds `home`'s server lock
    (`PrefectDatabaseInUseError` when another server runs there) and waits for it as long as
    the machine's load asks (`fitted_timeout`; `ServiceError` names the setting). Prefect's
    own temporary server gave up after 20 s on a busy machine with a 100-line traceback."""
    host = "127.0.0.1"
    port = free_port(host)
    env = prefect_env(host, port, home)
    env.pop("PREFECT_UI_URL")  # no UI outlives the command: no links to it are recorded
    env.pop("PREFECT_UI_API_URL")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        prefect_database(home, None),
        open(log_path, "ab") as log,
        Services(env, log=log) as servers,
    ):
        server = prefect_services(host, port)[0]
        try:
            servers.start(server)
        except ServiceError:
            servers.stop(grace_s=2)  # a server still starting may not heed SIGTERM yet
            raise
        yield env["PREFECT_API_URL"]
