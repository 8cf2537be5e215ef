"""Dagster definitions, one module per group; loaded by pipelines/definitions.py."""
