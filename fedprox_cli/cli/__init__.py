"""The command line: ``fedrun`` (Hydra entry point, dry runs, help), ``fedrun-report``,
``fedrun-plot`` and ``fedrun-table``."""
