"""SQL of the admin side: removing registered engines, the ``audit_log`` table (DDL in ``schema``), embedded chDB's allocator,
the health checks' probes."""

from __future__ import annotations

# A lightweight delete: the rows are gone for every read at once (the scraper's next cycle included).
DELETE_ENGINE = """
DELETE FROM engines WHERE project = {project:String} AND engine = {engine:String}"""

COUNT_ENGINES = """
SELECT uniqExact(engine) AS n FROM engines
WHERE project = {project:String} AND engine != {engine:String}"""

ENGINE_EXISTS = """
SELECT count() AS n FROM engines WHERE project = {project:String} AND engine = {engine:String}"""

INSERT_AUDIT = """
INSERT INTO audit_log (project, at, actor, action, target, detail)
SELECT {project:String}, fromUnixTimestamp64Milli({at_ms:Int64}), {actor:String}, {action:String}, {target:String}, {detail:String}"""

LIST_AUDIT = """
SELECT toString(project) AS project, toUnixTimestamp64Milli(at) / 1e3 AS at, actor, toString(action) AS action, target, detail
FROM audit_log
WHERE ({project:String} = '' OR project = {project:String})
ORDER BY at DESC
LIMIT {limit:UInt32}"""

# Embedded chDB: give the pages its jemalloc holds freed back to the OS now. It keeps them
# AGENTWATCH_CHDB_DIRTY_DECAY_MS (1 s), which spares queries faulting their memory in again, but
# in a burst inserts come faster than that: 350-430 MB resident for 50-110 MB allocated (a
# 600k-span burst with captured text). ~1 ms; run after each spans insert (ChdbStore).
PURGE_ALLOCATOR = "SYSTEM JEMALLOC PURGE"

# Embedded chDB: the spans table's background merges wait while the writer has a backlog
# (``Writer``: a burst), and catch up once it is drained. Merging text-heavy parts while inserting
# added ~60-90 MB to the collector's peak in a 600k-span burst with captured text (64 MiB queue
# bound: 424 vs 512 MB, bench/results/scale.md). Only this table's merges; not kept across a restart.
HOLD_MERGES = "SYSTEM STOP MERGES spans"
RESUME_MERGES = "SYSTEM START MERGES spans"

# A project's spans (``/api/ingest``); ``project`` leads the sort key, so this reads the index only.
PROJECT_SPANS = "SELECT count() AS n FROM spans WHERE project = {project:String}"

# /ready: the store answers and has the spans table (no data read).
STORE_READY = "SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'spans'"
