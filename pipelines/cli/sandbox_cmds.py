"""`t1 sandbox`: housekeeping of the local sandbox backend."""

from __future__ import annotations

import typer

from pipelines.cli.root import app

sandbox_app = typer.Typer(help="Local sandbox housekeeping.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("gc")
def gc() -> None:
    """Reclaim what sandboxes of killed runners left behind (processes, cgroups, leases)."""
    from sandbox.gc import collect_garbage

    r = collect_garbage()
    typer.echo(
        f"reclaimed {len(r.sandboxes)} sandbox(es) of dead runners "
        f"({r.processes_killed} process(es) killed), removed {len(r.empty_groups_removed)} "
        f"empty cgroup(s); {len(r.live)} live sandbox(es) untouched"
    )
