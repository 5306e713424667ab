"""The collector's one exception root, ``CollectorError``, and the map of the tree below it.

Every exception class in ``collector/`` derives from ``CollectorError``
(``tests/test_architecture.py`` fails on one that does not), so a caller that must not fail
catches one type, and ``collector.api.errors`` turns any of them that escapes a route into an
HTTP answer in one place: ``status`` (500 unless a class says otherwise), ``answer`` as the
message, ``Retry-After`` from ``retry_after``. A library's exception is translated at the
boundary (``raise StoreUnavailable(...) from exc``). Each class lives with the code that raises
it; this is where they are, and what the client sees when one escapes::

    CollectorError                      500   collector.errors
    ├── IngestError                     400   ingest.otlp.errors: an export refused
    │   ├── BadRequest                  400     not a valid export request
    │   ├── Forbidden                   403     gRPC: the admin token, or no ingest scope
    │   ├── PayloadTooLarge             413
    │   ├── UnsupportedMediaType        415
    │   ├── RateLimited                 429   + Retry-After
    │   └── Unavailable                 503   + Retry-After: starting, stopping, spool full
    │       └── SpoolError              503     ingest.spool: the disk refuses the request
    ├── StoreError                      500   storage.base: a back end failed
    │   ├── StoreUnavailable            503   + Retry-After: cannot be reached or opened now
    │   └── QueryError                  500     a query was rejected
    │       └── InvalidQuery            422     query.ranges: a caller's parameter is wrong
    ├── TextStoreError                  500   storage.texts: a text file write or read failed
    ├── BlockError                      500   storage.text_blocks: a damaged or replaced block
    ├── ClusterDDLError                 500   storage.cluster_ddl (also a ValueError)
    ├── DeletionError                   500   storage.deletion (also a ValueError)
    ├── NotAuthenticated                401   auth.caller: no key, or one that does not verify
    ├── ScopeError                      500   auth.scopes: not a scope (also a ValueError)
    ├── KeyAdminError                   500   auth.keys: bad key input (also a ValueError)
    ├── TargetRefused                   500   engines.scrape_guard (also a ValueError)
    ├── EngineLimit                     500   engines.registry: too many engines
    ├── BadValue                        500   ingest.bounds: a field out of bounds, dropped
    ├── BodyStalled                     408   api.body_timeout (also Starlette's HTTPException)
    └── _PythonRule                     -     ingest.otlp.native: a span the C decoder declines

A 500 in this table is a class whose callers translate it themselves (a router answers 400,
404 or 409 with its own words); escaping, it is a bug and answers 500.
"""

from __future__ import annotations


class CollectorError(Exception):
    """Base of every error the collector raises; ``status`` is the HTTP answer if one escapes."""

    status = 500
    retry_after: float | None = None

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retry_after is not None:
            self.retry_after = retry_after

    @property
    def answer(self) -> str:
        """What the client is told: the message (a subclass may say more)."""
        return self.message
