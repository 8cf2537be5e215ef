"""`t1 ui`: the Dagster webserver and daemon, the Prefect server and the campaign deployment
in one command.

Every Prefect setting the servers and the Prefect UI need (API URL, UI API URL, home) is
derived from this command's flags, so `--prefect-port N` serves a UI that talks to port N.
Ports are checked before anything starts; if a server fails to start or stops, the others
are stopped and the command exits 1. The servers log to a file (`--log-file`), so the
terminal keeps the banner (the URLs, the warehouse served, the log file) and the errors.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import typer

from pipelines.campaign_deployment import DAGSTER_URL_ENV, DEPLOYMENT
from pipelines.cli.root import app
from pipelines.defs.resources import REPORTS_DIR_ENV
from pipelines.host import RUNS_DIR_ENV
from pipelines.main_job import dagster_home
from pipelines.services import (
    DAGSTER_PORT,
    PREFECT_PORT,
    DagsterHomeInUseError,
    PrefectDatabaseInUseError,
    ServiceError,
    Services,
    dagster_home_lock,
    dagster_services,
    port_in_use,
    prefect_database,
    prefect_env,
    prefect_services,
)
from warehouse.store import ENV_VAR, resolve_store_path


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
    store: Path | None = typer.Option(
        None, help="the warehouse the pipelines read and write (default: $T1_WAREHOUSE)"
    ),
    log_file: Path | None = typer.Option(
        None,
        help="the servers' logs (default: $DAGSTER_HOME/t1-ui.log); this terminal "
        "shows only the banner and errors",
    ),
) -> None:
    """Start the Dagster UI (and the Prefect UI with the campaign deployment); Ctrl-C stops
    everything. The servers log to --log-file; the banner (URLs, warehouse, log file) is
    printed last, once every server answers. Exit codes: 0 stopped by Ctrl-C, 1 a server
    failed, 2 a port is taken or a Prefect server already runs on the Prefect home."""
    wanted = {"--port": port, **({"--prefect-port": prefect_port} if prefect else {})}
    if prefect and port == prefect_port:
        raise _fail(f"--port and --prefect-port are both {port}; choose two ports", 2)
    dagster_url = f"http://{host}:{port}"
    # Before the ports (a second `t1 ui` on this home is named, whatever its ports), and
    # without creating anything: a home a `t1 ui` ever ran on has its lock file already.
    _refuse_a_home_in_use(Path(os.environ.get("DAGSTER_HOME", ".dagster")), dagster_url)
    for flag, p in wanted.items():
        if port_in_use(host, p):
            raise _fail(f"port {p} on {host} is in use; pass {flag} with a free port", 2)
    home = dagster_home()
    database = ExitStack()  # the homes this command holds while its servers run
    try:
        database.enter_context(dagster_home_lock(home, dagster_url))
    except DagsterHomeInUseError as e:
        raise _fail(str(e), 2) from None
    phome = (prefect_home or Path(os.environ.get("PREFECT_HOME", ".prefect"))).resolve()
    warehouse = resolve_store_path(store).resolve()
    logs = (log_file or home / "t1-ui.log").resolve()
    logs.parent.mkdir(parents=True, exist_ok=True)
    env = {"DAGSTER_HOME": str(home), DAGSTER_URL_ENV: dagster_url, ENV_VAR: str(warehouse)}
    if store is not None:  # a named store keeps its campaign runs and reports beside it
        env |= beside_store(warehouse)
    if prefect:
        env |= prefect_env(host, prefect_port, phome)
    # Ctrl-C and a plain `kill` both shut everything down (SIGINT may arrive ignored when
    # started in the background, so install the handler explicitly).
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    note = "; Prefect" if prefect else ""
    if prefect:
        try:
            database.enter_context(prefect_database(phome, env["PREFECT_API_URL"]))
        except PrefectDatabaseInUseError as e:
            database.close()
            raise _fail(str(e), 2) from None
    typer.echo(f"starting Dagster{note} (server logs: {logs}) ...", err=True)
    with database, open(logs, "ab") as log, Services(env, log=log) as servers:
        try:
            dagster = dagster_services(host, port)
            if prefect:
                pserver, deployment = prefect_services(host, prefect_port)
                servers.start(pserver, wait=False)
            for s in dagster:
                servers.start(s, wait=False)
            if prefect:
                servers.wait_healthy(pserver.name)
                _recover(env)  # before the deployment's runner starts: none of its runs runs
                servers.start(deployment)
            servers.wait_healthy(dagster[0].name)
        except ServiceError as e:
            raise _fail(f"{e} (server logs: {logs}); stopping the other servers", 1) from None
        except KeyboardInterrupt:
            typer.echo("stopped.", err=True)
            return
        typer.echo(banner(dagster_url, prefect_port if prefect else None, host, warehouse, logs))
        try:
            while True:
                servers.supervise(RESTARTED, MAX_RESTARTS, lambda s: typer.echo(s, err=True))
                time.sleep(0.5)
        except ServiceError as e:
            raise _fail(f"{e} (server logs: {logs}); stopping the other servers", 1) from None
        except KeyboardInterrupt:
            typer.echo("stopped.", err=True)


def _refuse_a_home_in_use(home: Path, url: str) -> None:
    """Exit 2 naming the `t1 ui` that serves `home`, if one does (nothing is created)."""
    from warehouse.locks import LOCK_DIR

    if not (home.resolve() / LOCK_DIR).is_dir():
        return
    try:
        with dagster_home_lock(home.resolve(), url):
            pass
    except DagsterHomeInUseError as e:
        raise _fail(str(e), 2) from None


# Servers `t1 ui` starts again when they stop, instead of stopping everything: the Prefect
# server (a flow run in flight survives a restart: its API calls are retried, see
# `pipelines.services.prefect_env`) and the deployment's runner.
RESTARTED = ("prefect server", "campaign deployment")
MAX_RESTARTS = 5


def _recover(env: dict[str, str]) -> None:
    """Make the three records of every campaign run agree after a kill
    (`pipelines.campaign_recovery`): crash the flow runs left running by a runner that is
    gone (freeing the deployment's slot), end their `campaigns` rows, fail the Dagster runs
    that followed them. Best effort: a failure is said and `t1 ui` goes on."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.campaign_recovery import fail_orphaned_followers, reconcile_campaign_runs

    def say(line: str) -> None:
        typer.echo(line, err=True)

    try:
        with (
            temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}),
            get_client(sync_client=True) as client,
        ):
            reconcile_campaign_runs(  # the deployment's runner is not started yet
                client, runner_started=datetime.now(UTC), default_store=env[ENV_VAR], say=say
            )

            def final_state(flow_run_id: str) -> str | None:
                run = client.read_flow_run(UUID(flow_run_id))
                return run.state.name if run.state is not None and run.state.is_final() else None

            import dagster as dg

            with dg.DagsterInstance.get() as instance:
                fail_orphaned_followers(instance, final_state, say=say)
    except Exception as e:  # noqa: BLE001 - recovery is a courtesy; the UIs still start
        say(f"warning: could not check for campaign runs a kill left behind: {e}")


def beside_store(warehouse: Path) -> dict[str, str]:
    """Where runs and reports of a named store go: `runs/` and `artifacts/reports/` next to
    it (they followed the directory `t1 ui` was started in, so two teams' UIs on two stores
    from one checkout mixed their runs)."""
    return {
        RUNS_DIR_ENV: str(warehouse.parent / "runs"),
        REPORTS_DIR_ENV: str(warehouse.parent / "artifacts" / "reports"),
    }


def banner(
    dagster_url: str, prefect_port: int | None, host: str, warehouse: Path, logs: Path
) -> str:
    """What `t1 ui` serves, printed once everything answers (so it is the last thing shown)."""
    lines = [f"Dagster UI:   {dagster_url}"]
    if prefect_port is not None:
        lines.append(
            f"Prefect UI:   http://{host}:{prefect_port}   (deployment {DEPLOYMENT}; for "
            f"`t1 train`: PREFECT_API_URL=http://{host}:{prefect_port}/api)"
        )
    lines += [f"warehouse:    {warehouse}", f"server logs:  {logs}", "Ctrl-C to stop."]
    return "\n".join(lines)
