"""Project API keys: random, shown once, stored as salted hashes, revocable.

A key reads ``aw_<key_id>_<secret>``: ``key_id`` is public (it names the key in listings
and finds its row), the secret is 256 random bits of which only ``sha256(salt + secret)``
is stored. Hashes are compared in constant time. Keys are high-entropy, so a fast hash is
enough (no password-stretching KDF on the ingestion hot path).

Each key carries scopes (``collector.auth.scopes``): what its holder may do in its project. A key
created before scopes existed has none stored and keeps the rights it had then,
``LEGACY_SCOPES`` (ingest and read), listed as such with ``legacy: true``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from agentwatch_platform.collector.auth.scopes import LEGACY_SCOPES, format_scopes, parse_scopes
from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import keys as keys_sql

_KEY_RE = re.compile(r"^aw_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
_PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class KeyAdminError(CollectorError, ValueError):
    """A key operation got bad input (unknown key id, invalid project name)."""


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    project: str
    name: str
    created_at: float
    revoked_at: float | None
    scopes: tuple[str, ...] = LEGACY_SCOPES
    legacy: bool = False  # created before scopes: shown with the rights it keeps

    def as_dict(self) -> dict[str, object]:
        return {
            "key_id": self.key_id,
            "project": self.project,
            "name": self.name,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "scopes": list(self.scopes),
            "legacy": self.legacy,
        }


@dataclass(frozen=True)
class Grant:
    """What a verified key may do: its project and scopes."""

    key_id: str
    project: str
    scopes: frozenset[str]


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


def _stored_scopes(text: str) -> tuple[tuple[str, ...], bool]:
    """(scopes, legacy) of a stored ``scopes`` column; empty means a key from before scopes."""
    return (LEGACY_SCOPES, True) if not text else (parse_scopes(text), False)


def _info(row: dict[str, Any], key_id: str | None = None) -> KeyInfo:
    scopes, legacy = _stored_scopes(str(row.get("scopes") or ""))
    revoked = row["revoked_ms"]
    return KeyInfo(
        str(key_id or row["key_id"]),
        str(row["project"]),
        str(row["name"]),
        int(row["created_ms"]) / 1000,
        None if revoked is None else int(revoked) / 1000,
        scopes,
        legacy,
    )


def check_project(project: str) -> str:
    if not _PROJECT_RE.match(project or ""):
        raise KeyAdminError(
            f"invalid project name {project!r}: use 1-64 letters, digits, '_', '.', '-', starting with a letter or digit"
        )
    return project


class KeyRing:
    """Creates, verifies, lists and revokes keys in the store's ``api_keys`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, project: str, *, name: str = "", scopes: tuple[str, ...] | str = LEGACY_SCOPES) -> NewKey:
        """A new key of ``project`` with ``scopes`` (default: ingest and read, the rights a key
        had before scopes; ``agentwatch keys create`` defaults to ``ingest`` alone)."""
        check_project(project)
        granted = parse_scopes(scopes)
        key_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_hex(16)
        now_ms = int(time.time() * 1000)
        self._write(project, key_id, salt, _hash(salt, secret), name, now_ms, 0, format_scopes(granted))
        info = KeyInfo(key_id, project, name, now_ms / 1000, None, granted)
        return NewKey(info, f"aw_{key_id}_{secret}")

    def grant(self, token: str) -> Grant | None:
        """Project and scopes of a valid, unrevoked key; None otherwise."""
        parts = split_key(token)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self.store.query(keys_sql.KEY_BY_ID, {"key_id": key_id})
        if not rows or rows[0]["revoked_ms"] is not None:
            return None
        row = rows[0]
        if not hmac.compare_digest(_hash(row["salt"], secret), row["key_hash"]):
            return None
        return Grant(key_id, row["project"], frozenset(_stored_scopes(row.get("scopes") or "")[0]))

    def get(self, key_id: str) -> KeyInfo:
        rows = self.store.query(keys_sql.KEY_BY_ID, {"key_id": key_id})
        if not rows:
            raise KeyAdminError(f"no API key with id {key_id!r} (see 'agentwatch keys list')")
        return _info(rows[0], key_id)

    def revoke(self, key_id: str) -> KeyInfo:
        rows = self.store.query(keys_sql.KEY_BY_ID, {"key_id": key_id})
        if not rows:
            raise KeyAdminError(f"no API key with id {key_id!r} (see 'agentwatch keys list')")
        row = rows[0]
        now_ms = int(time.time() * 1000)
        if row["revoked_ms"] is None:
            self._write(
                row["project"],
                key_id,
                row["salt"],
                row["key_hash"],
                row["name"],
                now_ms,
                now_ms,
                row.get("scopes") or "",
            )
        return _info({**row, "revoked_ms": row["revoked_ms"] or now_ms}, key_id)

    def list(self, *, project: str | None = None) -> list[KeyInfo]:
        """Every key, or those of ``project``."""
        return [_info(r) for r in self.store.query(keys_sql.LIST_KEYS) if project is None or r["project"] == project]

    def _write(
        self,
        project: str,
        key_id: str,
        salt: str,
        key_hash: str,
        name: str,
        created_ms: int,
        revoked_ms: int,
        scopes: str,
    ) -> None:
        self.store.command(
            keys_sql.INSERT_KEY,
            {
                "project": project,
                "key_id": key_id,
                "salt": salt,
                "key_hash": key_hash,
                "name": name,
                "created_ms": created_ms,
                "revoked_ms": revoked_ms,
                "scopes": scopes,
            },
        )
