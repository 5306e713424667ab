"""Fixtures of the collector tests: stores over every back end (see ``store_fixtures``)."""

from tests.collector.store_fixtures import module_store, store  # noqa: F401
