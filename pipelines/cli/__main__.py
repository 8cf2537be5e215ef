"""`python -m pipelines.cli` is `t1`."""

from pipelines.cli import main

main()
