"""SQL of the leases table (``collector.storage.lease``): one row per term of a named lease.

A term is taken by inserting its row with ``insert_deduplication_token = '<name>:<term>'``:
ClickHouse keeps the first block with a token and drops the others (``MergeTree`` with
``non_replicated_deduplication_window``; on a cluster the replicated table decides it through
Keeper), so of all collectors that try the same term exactly one row is stored, and reading the
term back says who won. Times are the server's (``now64``), so collectors' clocks do not matter.
Reads ask for sequential consistency (a replicated table answers with every quorum insert).
"""

LATEST_TERM = """
SELECT term, holder, toUnixTimestamp64Milli(expires_at) AS expires_ms, toUnixTimestamp64Milli(now64(3)) AS now_ms
FROM leases WHERE name = {name:String}
ORDER BY term DESC LIMIT 1
SETTINGS select_sequential_consistency = 1"""

# A term and any later one: the term is held by its row's holder only while no later term exists
# (a contender that read an old latest term, or guessed, must not win a term already passed).
TERMS_FROM = """
SELECT term, holder, toUnixTimestamp64Milli(expires_at) AS expires_ms, toUnixTimestamp64Milli(now64(3)) AS now_ms
FROM leases WHERE name = {name:String} AND term >= {term:UInt64}
ORDER BY term LIMIT 2
SETTINGS select_sequential_consistency = 1"""

# ``ttl_ms`` 0 writes a term that is already over: how a holder hands the lease back.
TAKE_TERM = """
INSERT INTO leases (name, term, holder, expires_at, taken_at)
SELECT {name:String}, {term:UInt64}, {holder:String}, now64(3) + toIntervalMillisecond({ttl_ms:UInt32}), now64(3)
SETTINGS insert_deduplication_token = {token:String}, insert_quorum = 'auto'"""

# Old terms are dropped now and then by the holder; the latest ones stay, so terms only grow.
FORGET_TERMS = """
DELETE FROM leases WHERE name = {name:String} AND term < {below:UInt64}"""
