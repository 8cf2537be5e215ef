"""Wiring only: the `t1` CLI, Dagster definitions and Prefect flows over the stage packages."""

import warnings

# Dagster's notices about its own beta and preview APIs (a sensor's `owners`, concurrency
# pools) name nothing a user of this project can act on; they cluttered `make demo`'s output.
warnings.filterwarnings("ignore", message=r".* (is|are) currently in (beta|preview)")
