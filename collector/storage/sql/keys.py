"""SQL of the ``api_keys`` table (owned by ingestion's key management; DDL in ``schema``).

A revocation is a new row for the same ``key_id`` with ``revoked_at`` set (the table is a
ReplacingMergeTree on ``key_id``), so reads take the newest state without ``FINAL``. ``scopes`` (migration 6) is a comma-separated
list; empty for a key created before scopes (``collector.auth.keys.LEGACY_SCOPES``).
"""

from __future__ import annotations

INSERT_KEY = """
INSERT INTO api_keys (project, key_id, salt, key_hash, name, scopes, created_at, revoked_at)
SELECT {project:String}, {key_id:String}, {salt:String}, {key_hash:String}, {name:String}, {scopes:String},
       fromUnixTimestamp64Milli({created_ms:Int64}),
       if({revoked_ms:Int64} > 0, fromUnixTimestamp64Milli({revoked_ms:Int64}), NULL)
"""

KEY_BY_ID = """
SELECT any(project) AS project, any(salt) AS salt, any(key_hash) AS key_hash, any(name) AS name, any(scopes) AS scopes,
       toUnixTimestamp64Milli(min(created_at)) AS created_ms,
       toUnixTimestamp64Milli(max(revoked_at)) AS revoked_ms
FROM api_keys
WHERE key_id = {key_id:String}
GROUP BY key_id
"""

LIST_KEYS = """
SELECT key_id, any(project) AS project, any(name) AS name, any(scopes) AS scopes,
       toUnixTimestamp64Milli(min(created_at)) AS created_ms,
       toUnixTimestamp64Milli(max(revoked_at)) AS revoked_ms
FROM api_keys
GROUP BY key_id
ORDER BY created_ms, key_id
"""
