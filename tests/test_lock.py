"""``.ci/requirements-dev.lock`` pins the development environment: every declared dependency, within its range."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
OURS = {"agentwatch", "agentwatch-platform"}  # installed editable, never pinned


def _declared() -> list[Requirement]:
    platform = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    sdk = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    names = (
        platform["dependencies"]
        + platform["optional-dependencies"]["dev"]
        + platform["optional-dependencies"]["dashboard"]
        + platform["optional-dependencies"]["reference"]
        + sdk["dependencies"]
        + sdk["optional-dependencies"]["api"]
    )
    return [
        r
        for r in map(Requirement, names)
        if canonicalize_name(r.name) not in OURS and (r.marker is None or r.marker.evaluate())
    ]


def _pinned() -> dict[str, Version]:
    lines = [line.strip() for line in (ROOT / ".ci" / "requirements-dev.lock").read_text().splitlines()]
    pairs = [line.split("==", 1) for line in lines if line and not line.startswith("#")]
    assert all(len(p) == 2 for p in pairs), "every line of the lock is name==version"
    return {canonicalize_name(name): Version(version) for name, version in pairs}


def test_the_lock_pins_every_declared_dependency_within_its_range() -> None:
    pinned = _pinned()
    missing = [str(r) for r in _declared() if canonicalize_name(r.name) not in pinned]
    assert not missing, f"not in requirements-dev.lock (run `make lock`): {missing}"
    outside = [
        f"{r} (locked {pinned[canonicalize_name(r.name)]})"
        for r in _declared()
        if not r.specifier.contains(pinned[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not outside, f"requirements-dev.lock is outside the declared range (run `make lock`): {outside}"
