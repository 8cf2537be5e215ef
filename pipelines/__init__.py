"""Wiring only: the `t1` CLI, Dagster definitions and Prefect flows over the stage packages."""
