"""`t1 ui`: the Dagster webserver and daemon (optionally the Prefect server) in one command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from pipelines.cli import app
from pipelines.main_job import dagster_home


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def ui_commands(host: str, port: int, prefect: bool, prefect_port: int) -> list[list[str]]:
    cmds = [
        [_bin("dagster-webserver"), "-m", "pipelines.definitions", "-h", host, "-p", str(port)],
        [_bin("dagster-daemon"), "run", "-m", "pipelines.definitions"],
    ]
    if prefect:
        cmds.append(
            [_bin("prefect"), "server", "start", "--host", host, "--port", str(prefect_port)]
        )
    return cmds


@app.command("ui")
def ui(
    host: str = typer.Option("127.0.0.1", help="address to bind"),
    port: int = typer.Option(3000, help="Dagster webserver port"),
    prefect: bool = typer.Option(True, help="also start the Prefect server (training flows)"),
    prefect_port: int = typer.Option(4200),
) -> None:
    """Start the Dagster webserver and daemon; Ctrl-C stops everything."""
    home = dagster_home()

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and a plain `kill` both shut everything down (SIGINT may arrive ignored when
    # started in the background, so install the handler explicitly).
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    procs = [
        subprocess.Popen(c, start_new_session=True, env=env)
        for c in ui_commands(host, port, prefect, prefect_port)
    ]
    typer.echo(f"Dagster UI:      http://{host}:{port}   (DAGSTER_HOME={home})")
    if prefect:
        typer.echo(
            f"Prefect server:  http://{host}:{prefect_port}   (for `t1 train`: "
            f"PREFECT_API_URL=http://{host}:{prefect_port}/api)"
        )
    typer.echo("Ctrl-C to stop.")
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
        failed = [p.args[0] for p in procs if p.poll() not in (None, 0)]
        if failed:
            typer.echo(f"stopped: {', '.join(map(str, failed))} exited", err=True)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        typer.echo("stopped.")
