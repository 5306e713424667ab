""".githooks/commit-msg: a subject over 72 characters is refused, saying why; `make setup` enables it.

The hook runs in a real git repository made for the test, as git runs it on `git commit`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / ".githooks"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.name", "t")
    git("config", "user.email", "t@example.com")
    git("config", "core.hooksPath", str(HOOKS))
    (tmp_path / "f").write_text("x\n")
    git("add", "f")
    return tmp_path


def _commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, capture_output=True, text=True)


def test_a_subject_of_72_characters_with_a_body_is_committed(repo: Path) -> None:
    done = _commit(repo, "é" * 72 + "\n\nThe body may be as long as it needs to be. " * 5)
    assert done.returncode == 0, done.stderr


def test_a_subject_over_72_characters_is_refused_with_the_reason(repo: Path) -> None:
    done = _commit(repo, "x" * 73 + "\n\nbody")
    assert done.returncode != 0
    assert "the subject is 73 characters; at most 72" in done.stderr
    assert "docs/commits.md" in done.stderr and (ROOT / "docs" / "commits.md").exists()


def test_make_setup_enables_the_hooks() -> None:
    recipe = subprocess.run(["make", "-n", "hooks"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "git config core.hooksPath .githooks" in recipe
    setup = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("setup:"))
    assert "hooks" in setup.split()
