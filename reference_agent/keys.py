"""Project keys for the local stack, made through the running collector's key admin and kept.

A key is saved in the collector's data directory and reused while the collector still accepts
it, so a demo run again on the same data directory (or a benchmark, or a test) does not pile up
keys. Needs only the base install, as ``reference_agent.supervisor`` does.
"""

from __future__ import annotations

from pathlib import Path

from agentwatch_api.client import CollectorClient, CollectorError
from agentwatch_api.handshake import read_admin_token
from agentwatch_platform.reference_agent.supervisor import StackError

DEMO_PROJECT = "demo"


def project_key(
    collector: str, data_dir: Path, project: str = DEMO_PROJECT, *, scopes: tuple[str, ...] = ("ingest", "read")
) -> str:
    """A key of the project with ``scopes``, saved in ``data_dir`` and reused while the collector
    accepts it; else a new one from the running collector's key admin (``agentwatch keys create
    --scope ...`` does the same). The demo gives its agents an ``ingest`` key and its dashboard a
    ``read`` one; the default (both) serves a test that sends and reads."""
    key_path = data_dir / (
        f"{project}-project-key" if scopes == ("ingest", "read") else f"{project}-{'-'.join(scopes)}-key"
    )
    if key_path.exists():
        key = key_path.read_text().strip()
        if _key_accepted(collector, key, scopes):
            return key
    token = read_admin_token(data_dir)
    if token is None:
        raise StackError(f"no admin token in {data_dir}: is the collector there running on this data directory?")
    with CollectorClient(collector, token, timeout_s=30.0) as admin:
        try:
            key = str(admin.create_key(project, "agentwatch demo", scopes)["key"])
        except CollectorError as exc:
            raise StackError(f"creating a key for project {project!r} failed: {exc}") from None
    key_path.write_text(key + "\n")
    key_path.chmod(0o600)
    return key


def _key_accepted(collector: str, key: str, scopes: tuple[str, ...]) -> bool:
    """Whether the running collector still takes ``key`` for what it was made for."""
    with CollectorClient(collector, key, timeout_s=10.0) as client:
        try:
            if "read" in scopes:
                client.ingest()
            else:
                client.check_ingest()
        except CollectorError:
            return False
    return True
