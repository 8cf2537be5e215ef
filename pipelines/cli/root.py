"""The `t1` Typer application every command module registers on (kept apart from
`pipelines/cli/__init__.py`, which imports those modules, so no module imports itself back)."""

import typer

app = typer.Typer(
    help="T1 Forge: verified terminal tasks, sandboxes, synthesis, audit, training.",
    no_args_is_help=True,
    add_completion=False,
)
