"""Benchmarks run after a plain ``pip install .``: without pytest or the tests' helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Python refuses to import a module whose sys.modules entry is None.
_WITHOUT_TESTS = "import runpy, sys; sys.modules.update(pytest=None, tests=None); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


@pytest.mark.parametrize("script", ["bench/batching.py", "bench/ingest_pipeline.py", "bench/soak.py"])
def test_benchmark_starts_without_pytest_or_tests(script: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TESTS, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
