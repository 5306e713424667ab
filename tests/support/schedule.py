"""The longest test files start first, so that two workers end together; the files that share
a session fixture run on one worker.

``make test`` and ``make quick`` run ``pytest -n 2 --dist loadfile``: a worker takes a whole unit
of work at a time (a file, or a group of files in ``SHARED``), in the order the files are collected
(``tests/conftest.py`` turns xdist's own order, by test count, off). A long unit that starts near
the end leaves the other worker idle until it is done, so the units are ordered by their expected
seconds, longest first (the classic longest processing time first rule).

``SHARED``: the dashboard's tests share one seeded stack a session (``tests/dashboard/conftest.py``:
a collector, an engine and two load generators); split over both workers, it was seeded twice.

A test's expected seconds are those its last run took (every phase, set-up included), kept in
pytest's cache (``.pytest_cache``) under ``CACHE_KEY``. A test that has not run here yet (a fresh
clone) is guessed from its markers: ``slow`` ones take a minute or more, ``browser`` and
``clients`` ones start a browser or a whole stack; the rest are counted alike, which is xdist's
own order (by test count) among files without a marked test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest

CACHE_KEY = "agentwatch/test_seconds"
SHARED = ("tests/dashboard/",)  # folders whose files are one unit of work: a session fixture of theirs
GUESS_S = {"slow": 60.0, "browser": 15.0, "clients": 3.0}  # a test never run here: by its markers
DEFAULT_S = 0.5


def expected_seconds(item: pytest.Item, known: dict[str, float]) -> float:
    if item.nodeid in known:
        return known[item.nodeid]
    return max((GUESS_S[mark.name] for mark in item.iter_markers() if mark.name in GUESS_S), default=DEFAULT_S)


def unit_of_work(nodeid: str) -> str:
    """The file of a test, or the ``SHARED`` folder it is in: what one worker runs whole."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in SHARED if path.startswith(folder)), path)


def longest_files_first(items: list[pytest.Item], known: dict[str, float]) -> None:
    """Reorder ``items`` in place: whole units of work, the longest expected first, and in a unit its
    files the same way; within a file, as collected."""
    by_file: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_file[item.nodeid.split("::", 1)[0]].append(item)
    seconds = {path: sum(expected_seconds(item, known) for item in tests) for path, tests in by_file.items()}
    unit_seconds: dict[str, float] = defaultdict(float)  # in the order the units are first collected
    for path, file_seconds in seconds.items():
        unit_seconds[unit_of_work(path)] += file_seconds
    rank = {unit: (-total, first) for first, (unit, total) in enumerate(unit_seconds.items())}
    order = sorted(by_file, key=lambda path: (rank[unit_of_work(path)], -seconds[path]))
    items[:] = [item for path in order for item in by_file[path]]


def record(known: dict[str, float], phases: Iterable[tuple[str, float]]) -> dict[str, float]:
    """``known`` updated with the seconds of each test in ``phases`` ((test, seconds) of its set-up, call
    and tear-down)."""
    ran: dict[str, float] = defaultdict(float)
    for nodeid, seconds in phases:
        ran[nodeid] += seconds
    return {**known, **{nodeid: round(seconds, 2) for nodeid, seconds in ran.items()}}
