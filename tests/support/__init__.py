"""Helpers that test files across the suite import: plain modules, no fixtures collected from here
unless a ``conftest.py`` imports them. Nothing here imports the platform, so ``tests/sdk`` runs
with the SDK alone installed."""
