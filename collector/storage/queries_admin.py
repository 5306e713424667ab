"""SQL of the admin side: removing registered engines, and the ``audit_log`` table (DDL in ``schema``)."""

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
