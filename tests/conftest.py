"""Fixtures for every directory: a free loopback port, one ClickHouse HTTP interface a session;
and how the files run on xdist's workers: the longest first, the dashboard's on one worker
(``tests.support.schedule``).

Helpers that test files import live in ``tests.support``; this file imports nothing of the
platform, so ``tests/sdk`` runs with the SDK alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import schedule
from tests.support.clickhouse import clickhouse_url  # noqa: F401 (one ClickHouse HTTP interface a session, for every directory)
from tests.support.ports import free_port

_seconds: list[tuple[str, float]] = []  # this session's (test, phase's seconds), for pytest_sessionfinish


def pytest_configure(config: pytest.Config) -> None:
    """xdist's ``--dist loadfile`` hands out files by their test count unless told not to: the
    order ``tests.support.schedule`` gives them stands instead."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Each xdist worker orders the files by the seconds the controller read, so both collect
    the same order even if another session rewrites the cache meanwhile."""
    node.workerinput[schedule.CACHE_KEY] = _known_seconds(node.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the folders of ``schedule.SHARED`` handed out whole, like a file."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFolders(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return schedule.unit_of_work(nodeid)

    return SharedFolders(config, log)


def _known_seconds(config: pytest.Config) -> dict[str, float]:
    if hasattr(config, "workerinput"):
        return dict(config.workerinput.get(schedule.CACHE_KEY, {}))
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    return dict(cache.get(schedule.CACHE_KEY, {})) if cache is not None else {}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """A test on the ClickHouse HTTP interface is marked ``clickhouse_server`` (the store fixtures'
    server back end marks its own parameter): ``make quick`` leaves them out, ``make test`` runs them.
    Once every plugin has deselected what ``-m`` and ``-k`` leave out, the longest files go first
    (``tests.support.schedule``)."""
    for item in items:
        if "clickhouse_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.clickhouse_server)
    yield
    schedule.longest_files_first(items, _known_seconds(config))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds.append((report.nodeid, report.duration))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The seconds each test took, for the next run's order; written by the process that saw
    every report (xdist's controller, or the only process), never by a worker."""
    cache = getattr(session.config, "cache", None)  # None under -p no:cacheprovider
    if cache is None or hasattr(session.config, "workerinput") or not _seconds:
        return
    cache.set(schedule.CACHE_KEY, schedule.record(_known_seconds(session.config), _seconds))


@pytest.fixture
def port() -> int:
    return free_port()
