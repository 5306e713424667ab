"""Project API keys: random, shown once, stored as salted hashes, revocable.

A key reads ``aw_<key_id>_<secret>``: ``key_id`` is public (it names the key in listings
and finds its row), the secret is 256 random bits of which only ``sha256(salt + secret)``
is stored. Hashes are compared in constant time. Keys are high-entropy, so a fast hash is
enough (no password-stretching KDF on the ingestion hot path).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from collector.storage import queries_keys as q
from collector.storage.base import Store

_KEY_RE = re.compile(r"^aw_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class KeyAdminError(ValueError):
    """A key operation got bad input (unknown key id, invalid project name)."""


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    project: str
    name: str
    created_at: float
    revoked_at: float | None

    def as_dict(self) -> dict[str, object]:
        return {"key_id": self.key_id, "project": self.project, "name": self.name, "created_at": self.created_at, "revoked_at": self.revoked_at}


@dataclass(frozen=True)
class NewKey:
    info: KeyInfo
    key: str  # the only time the full key exists outside the client


def split_key(token: str) -> tuple[str, str] | None:
    """(key_id, secret) of a well-formed key, else None."""
    match = _KEY_RE.match(token)
    return (match.group(1), match.group(2)) if match else None


def _hash(salt: str, secret: str) -> str:
    return hashlib.sha256(salt.encode() + secret.encode()).hexdigest()


def check_project(project: str) -> str:
    if not _PROJECT_RE.match(project or ""):
        raise KeyAdminError(f"invalid project name {project!r}: use 1-64 letters, digits, '_', '.', '-', starting with a letter or digit")
    return project


class KeyRing:
    """Creates, verifies, lists and revokes keys in the store's ``api_keys`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, project: str, *, name: str = "") -> NewKey:
        check_project(project)
        key_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_hex(16)
        now_ms = int(time.time() * 1000)
        self._write(project, key_id, salt, _hash(salt, secret), name, now_ms, 0)
        info = KeyInfo(key_id, project, name, now_ms / 1000, None)
        return NewKey(info, f"aw_{key_id}_{secret}")

    def verify(self, token: str) -> tuple[str, str] | None:
        """(key_id, project) of a valid, unrevoked key; None otherwise."""
        parts = split_key(token)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self.store.query(q.KEY_BY_ID, {"key_id": key_id})
        if not rows or rows[0]["revoked_ms"] is not None:
            return None
        row = rows[0]
        if not hmac.compare_digest(_hash(row["salt"], secret), row["key_hash"]):
            return None
        return key_id, row["project"]

    def revoke(self, key_id: str) -> KeyInfo:
        rows = self.store.query(q.KEY_BY_ID, {"key_id": key_id})
        if not rows:
            raise KeyAdminError(f"no API key with id {key_id!r} (see 'agentwatch keys list')")
        row = rows[0]
        now_ms = int(time.time() * 1000)
        if row["revoked_ms"] is None:
            self._write(row["project"], key_id, row["salt"], row["key_hash"], row["name"], now_ms, now_ms)
        revoked = row["revoked_ms"] or now_ms
        return KeyInfo(key_id, row["project"], row["name"], row["created_ms"] / 1000, revoked / 1000)

    def list(self) -> list[KeyInfo]:
        return [
            KeyInfo(r["key_id"], r["project"], r["name"], r["created_ms"] / 1000, None if r["revoked_ms"] is None else r["revoked_ms"] / 1000)
            for r in self.store.query(q.LIST_KEYS)
        ]

    def _write(self, project: str, key_id: str, salt: str, key_hash: str, name: str, created_ms: int, revoked_ms: int) -> None:
        self.store.command(q.INSERT_KEY, {
            "project": project, "key_id": key_id, "salt": salt, "key_hash": key_hash, "name": name,
            "created_ms": created_ms, "revoked_ms": revoked_ms,
        })
