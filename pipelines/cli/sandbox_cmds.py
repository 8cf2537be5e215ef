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


@sandbox_app.command("prune")
def prune(
    unused_days: float = typer.Option(
        7.0, "--unused-days", help="Remove layers no build has used for this many days."
    ),
) -> None:
    """Remove layers of the local layer cache no build has used lately (with the layers built
    on them); refuses while any process uses the cache."""
    from sandbox.layer_cache import cache_dir
    from sandbox.layer_cache import prune as prune_layers

    if unused_days < 0:
        raise typer.BadParameter("must be at least 0", param_hint="--unused-days")
    r = prune_layers(unused_days * 86400)
    if r.holders:
        typer.echo(
            f"{cache_dir()}: in use by pid(s) {', '.join(map(str, r.holders))}; "
            "nothing removed (prune when they have ended)",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(
        f"removed {len(r.removed)} layer(s) ({r.freed_bytes / 2**20:.0f} MiB) and "
        f"{r.leftovers} leftover(s) of killed builds; {r.kept} layer(s) kept"
    )
