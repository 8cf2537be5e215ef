"""Regression: on a pipe, `t1` progress printed nothing at all (bars only on a terminal).
Where stderr is not a terminal, progress is plain lines on stderr; stdout is untouched."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_progress_on_a_pipe_is_plain_lines_on_stderr_and_stdout_keeps_the_data() -> None:
    script = textwrap.dedent(
        """
        from pipelines.cli.output import phase_progress, progress
        with progress("checking 3 tasks", 3) as advance:
            for _ in range(3):
                advance()
        with phase_progress() as update:
            update("profile seeds", 1, 2)
            update("profile seeds", 2, 2)
        print('{"data": 1}')
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, check=True)  # fmt: skip
    assert r.stdout == '{"data": 1}\n'
    lines = r.stderr.splitlines()
    # the first line of each phase, and its end (the throttle drops what is between)
    assert lines == ["checking 3 tasks: 1/3", "checking 3 tasks: 3/3",
                     "profile seeds: 1/2", "profile seeds: 2/2"], r.stderr  # fmt: skip
