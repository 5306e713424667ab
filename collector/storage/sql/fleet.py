"""SQL of ``collector_counters`` (DDL in ``schema``): each collector's span counters, per project,
so that any collector behind a load balancer answers ``/api/ingest`` for all of them.

A row is a collector's cumulative counts at ``updated_at`` (ReplacingMergeTree keeps the last);
a restarted collector is a new collector (its holder id has a new suffix), so a dead one's last
counts stay in the sums. Project '' holds a collector's totals over every project.
"""

WRITE_COUNTERS = """
INSERT INTO collector_counters (collector, project, received, rejected, updated_at)
SELECT {collector:String}, row.1, row.2, row.3, now64(3)
FROM (SELECT arrayJoin(arrayZip({projects:Array(String)}, {received:Array(UInt64)}, {rejected:Array(UInt64)})) AS row)"""

# The other collectors' last counts for one project ('' = collector-wide totals).
OTHERS_COUNTERS = """
SELECT toUInt64(sum(r)) AS received, toUInt64(sum(j)) AS rejected, count() AS collectors
FROM (
    SELECT collector, argMax(received, updated_at) AS r, argMax(rejected, updated_at) AS j
    FROM collector_counters
    WHERE project = {project:String} AND collector != {collector:String}
    GROUP BY collector
)"""
