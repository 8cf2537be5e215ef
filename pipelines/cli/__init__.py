"""The `t1` command. Each stage's commands live in their own module and register on `app`."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="T1 Forge: verified terminal tasks, sandboxes, synthesis, audit, training.",
    no_args_is_help=True,
    add_completion=False,
)


def _register() -> None:
    """Import the command modules; each adds its commands to `app` on import."""
    import pipelines.cli.audit_cmds  # noqa: F401
    import pipelines.cli.sandbox_cmds  # noqa: F401
    import pipelines.cli.synth_cmds  # noqa: F401
    import pipelines.cli.train_cmds  # noqa: F401
    import pipelines.cli.warehouse_cmds  # noqa: F401
    from pipelines.cli import demo_cmds, task_cmds, ui_cmds  # noqa: F401


def main() -> None:
    _register()
    app()
