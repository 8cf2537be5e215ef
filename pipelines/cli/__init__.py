"""The `t1` command. Each stage's commands live in their own module and register on
`pipelines.cli.root.app`; `main` imports them all, then runs it."""

from __future__ import annotations

import typer

from pipelines.cli.root import app


def _register() -> None:
    """Import the command modules; each adds its commands to `app` on import."""
    import pipelines.cli.audit_cmds  # noqa: F401
    import pipelines.cli.sandbox_cmds  # noqa: F401
    import pipelines.cli.synth_cmds  # noqa: F401
    import pipelines.cli.train_cmds  # noqa: F401
    import pipelines.cli.warehouse_cmds  # noqa: F401
    from pipelines.cli import demo_cmds, task_cmds, ui_cmds  # noqa: F401


def main() -> None:
    """Run `t1`; user errors end in one line on stderr (exit codes: pipelines.cli.output)."""
    import sys

    from pydantic import ValidationError

    from pipelines.cli.output import (
        READ_ONLY_ERRNOS,
        ExitCode,
        fail,
        user_error_types,
        validation_message,
        write_error_message,
    )

    _register()
    try:
        code = app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        code = fail("interrupted", ExitCode.INTERRUPTED).exit_code
    except typer.TyperException as e:  # a bad option or argument value (click's UsageError)
        message, ctx = e.format_message(), getattr(e, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        code = fail(message + hint).exit_code if message else ExitCode.USAGE  # help shown
    except user_error_types() as e:
        code = fail(str(e)).exit_code
    except ValidationError as e:  # an option value a config model refuses
        code = fail(validation_message(e)).exit_code
    except OSError as e:
        if e.errno not in READ_ONLY_ERRNOS:
            raise
        code = fail(write_error_message(e)).exit_code
    sys.exit(code if isinstance(code, int) else 0)
