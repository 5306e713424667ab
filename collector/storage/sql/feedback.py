"""SQL of feedback: a run's feedback, mean scores of a page, and the scores per run as constant
arrays that run totals and levers look up without a join.
"""

from __future__ import annotations

FEEDBACK_SCORES = """
SELECT trace_id, avg(score) AS mean_score FROM feedback
WHERE project = {project:String} AND trace_id IN {trace_ids:Array(String)} AND score IS NOT NULL
GROUP BY trace_id"""

FEEDBACK_OF_TRACE = """
SELECT feedback_id, trace_id, score, label, comment, source, toUnixTimestamp64Milli(feedback.created_at) / 1e3 AS created_at
FROM feedback
WHERE project = {project:String} AND trace_id = {trace_id:String}
ORDER BY feedback.created_at, feedback_id
LIMIT 1000"""

# Feedback per run without a join: the project's scored traces as constant arrays, looked up
# per run with transform() (a hash lookup; a JOIN against every run in range cost more than
# the runs themselves).
FEEDBACK = """
WITH (
    SELECT (groupArray(trace_id), groupArray(fb_sum), groupArray(fb_n)) FROM (
        SELECT trace_id, toFloat64(ifNull(sum(score), 0)) AS fb_sum, count(score) AS fb_n
        FROM feedback WHERE project = {project:String} AND score IS NOT NULL GROUP BY trace_id)
) AS fb"""

FEEDBACK_SCORE = (
    "if(transform(trace_id, fb.1, fb.3, toUInt64(0)) = 0, NULL, "
    "transform(trace_id, fb.1, fb.2, toFloat64(0)) / transform(trace_id, fb.1, fb.3, toUInt64(0)))"
)

FEEDBACK_SUM = "sum(transform(trace_id, fb.1, fb.2, toFloat64(0)))"

FEEDBACK_COUNT = "sum(transform(trace_id, fb.1, fb.3, toUInt64(0)))"

FEEDBACK_FIGURES = f"""
    {FEEDBACK_SUM} AS fb_sum, {FEEDBACK_COUNT} AS fb_n"""

TRACE_EXISTS = """
SELECT count() AS n FROM spans
WHERE project = {project:String} AND trace_id = {trace_id:String}"""
