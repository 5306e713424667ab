"""Without AGENTWATCH_REQUIRE_AUTH an anonymous caller may ingest and read, never administer.

A module of its own: it opens its own embedded store, which a process can hold only one of at
a time (test_scopes keeps a collector open for its whole module).
"""

from __future__ import annotations

from pathlib import Path

from tests.reliability.helpers import in_process


def test_without_required_auth_an_anonymous_caller_never_administers(tmp_path: Path) -> None:
    with in_process(tmp_path / "data", require_auth=False) as running:
        assert running.client.get("/api/runs").status_code == 200
        for method, path in (
            ("POST", "/api/admin/keys"),
            ("GET", "/api/admin/keys"),
            ("POST", "/api/admin/engines"),
            ("POST", "/api/engines"),
        ):
            assert (
                running.client.request(
                    method, path, json={"project": "default", "name": "x", "url": "http://127.0.0.1:1"}
                ).status_code
                == 403
            )
