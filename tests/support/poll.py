"""Waiting for something to happen in a test: poll its condition up to a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float, message: str, *, interval: float = 0.05) -> None:
    """Return once ``predicate()`` is truthy; ``AssertionError(message)`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(interval)
