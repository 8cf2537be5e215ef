"""`t1 ui`: the Dagster webserver and daemon, the Prefect server and the campaign deployment
in one command.

Every Prefect setting the servers and the Prefect UI need (API URL, UI API URL, home) is
derived from this command's flags, so `--prefect-port N` serves a UI that talks to port N.
Ports are checked before anything starts; if a server fails to start or stops, the others
are stopped and the command exits 1.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import typer

from pipelines.campaign_deployment import DAGSTER_URL_ENV, DEPLOYMENT
from pipelines.cli.root import app
from pipelines.main_job import dagster_home
from pipelines.services import (
    DAGSTER_PORT,
    PREFECT_PORT,
    ServiceError,
    Services,
    dagster_services,
    port_in_use,
    prefect_env,
    prefect_services,
)


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@app.command("ui")
def ui(
    host: str = typer.Option("127.0.0.1", help="address to bind"),
    port: int = typer.Option(DAGSTER_PORT, help="Dagster webserver port"),
    prefect: bool = typer.Option(
        True, help="also start the Prefect server and serve the campaign deployment"
    ),
    prefect_port: int = typer.Option(PREFECT_PORT, help="Prefect server (API and UI) port"),
    prefect_home: Path | None = typer.Option(
        None, help="Prefect's database and settings (default: $PREFECT_HOME, else ./.prefect)"
    ),
) -> None:
    """Start the Dagster UI (and the Prefect UI with the campaign deployment); Ctrl-C stops
    everything. Exit codes: 0 stopped by Ctrl-C, 1 a server failed, 2 a port is taken."""
    wanted = {"--port": port, **({"--prefect-port": prefect_port} if prefect else {})}
    if prefect and port == prefect_port:
        raise _fail(f"--port and --prefect-port are both {port}; choose two ports", 2)
    for flag, p in wanted.items():
        if port_in_use(host, p):
            raise _fail(f"port {p} on {host} is in use; pass {flag} with a free port", 2)
    home = dagster_home()
    phome = (prefect_home or Path(os.environ.get("PREFECT_HOME", ".prefect"))).resolve()
    dagster_url = f"http://{host}:{port}"
    env = {"DAGSTER_HOME": str(home), DAGSTER_URL_ENV: dagster_url}
    if prefect:
        env |= prefect_env(host, prefect_port, phome)
    # Ctrl-C and a plain `kill` both shut everything down (SIGINT may arrive ignored when
    # started in the background, so install the handler explicitly).
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    typer.echo(f"starting (DAGSTER_HOME={home}" + (f", PREFECT_HOME={phome})" if prefect else ")"))
    with Services(env) as servers:
        try:
            dagster = dagster_services(host, port)
            if prefect:
                pserver, deployment = prefect_services(host, prefect_port)
                servers.start(pserver, wait=False)
            for s in dagster:
                servers.start(s, wait=False)
            if prefect:
                servers.wait_healthy(pserver.name)
                servers.start(deployment)
            servers.wait_healthy(dagster[0].name)
        except ServiceError as e:
            raise _fail(f"{e}; stopping the other servers", 1) from None
        except KeyboardInterrupt:
            typer.echo("stopped.")
            return
        typer.echo(f"Dagster UI:   {dagster_url}")
        if prefect:
            typer.echo(
                f"Prefect UI:   http://{host}:{prefect_port}   (deployment {DEPLOYMENT}; "
                f"for `t1 train`: PREFECT_API_URL=http://{host}:{prefect_port}/api)"
            )
        typer.echo("Ctrl-C to stop.")
        try:
            while True:
                servers.check()
                time.sleep(0.5)
        except ServiceError as e:
            raise _fail(f"{e}; stopping the other servers", 1) from None
        except KeyboardInterrupt:
            typer.echo("stopped.")
