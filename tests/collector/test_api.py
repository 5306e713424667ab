"""The query API through a real collector (uvicorn on 127.0.0.1) over a seeded store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from agentwatch_api.client import CollectorClient
from agentwatch_api.schemas import TIMESERIES_METRICS
from tests.collector.factories import seed_known_runs
from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.support import local_http

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}
GETS = [
    "/api/runs",
    "/api/overview",
    "/api/timeseries?metric=runs",
    "/api/timeseries/set?metric=runs",
    "/api/cost",
    "/api/engines",
    "/api/engine/metrics?engine=e1",
    "/api/filters",
]


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def get(self, path: str, **params: object) -> httpx.Response:
        return self.client.get(path, params={k: v for k, v in params.items() if v is not None})


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, dict]]:
    data_dir: Path = tmp_path_factory.mktemp("api")
    settings = settings_for(data_dir, scrape_targets="cfg=http://127.0.0.1:9@q1", scrape_interval_s=3600.0)
    with serve(settings) as running:
        runs = seed_known_runs(running.app.state.store, "q1", T)
        yield running, runs


@pytest.fixture(scope="module")
def q1(collector: tuple[Running, dict]) -> Api:
    return Api(collector[0].url, collector[0].key("q1"))


@pytest.fixture(scope="module")
def q2(collector: tuple[Running, dict]) -> Api:
    return Api(collector[0].url, collector[0].key("q2"))


@pytest.mark.parametrize("path", GETS)
def test_every_endpoint_needs_a_key(collector: tuple[Running, dict], path: str) -> None:
    response = local_http.get(collector[0].url + path, timeout=30)
    assert response.status_code == 401 and "API key" in response.json()["detail"]
    bad = local_http.get(collector[0].url + path, headers={"Authorization": "Bearer aw_nope_nope"}, timeout=30)
    assert bad.status_code == 401


def test_runs_list_with_filters_sort_and_pages(q1: Api, collector: tuple[Running, dict]) -> None:
    runs = collector[1]
    body = q1.get("/api/runs", **W, sort="-cost_usd", limit=2).json()
    assert body["total"] == 5 and body["limit"] == 2 and body["items"][0]["trace_id"] == runs["B"][0].trace_id
    iso = {"start": datetime.fromtimestamp(T, UTC).isoformat().replace("+00:00", "Z"), "end": str(T + 3600)}
    alpha = q1.get("/api/runs", **iso, agent="alpha", status="error").json()
    assert [r["trace_id"] for r in alpha["items"]] == [runs["B"][0].trace_id]
    assert alpha["items"][0]["models"] == ["sim-large"]


def test_runs_list_searches_filters_and_sorts_in_the_store(q1: Api, collector: tuple[Running, dict]) -> None:
    ids = {name: rows[0].trace_id for name, rows in collector[1].items()}

    def found(**params: object) -> list[str]:
        return [r["trace_id"] for r in q1.get("/api/runs", **W, sort="start_time", **params).json()["items"]]

    assert found(tool_failed="true") == [ids["B"], ids["C"]]  # a failed tool (B) and a timed-out one (C)
    assert found(tool_failed="false", search="BET") == [ids["D"]]  # agent beta, any case
    assert found(search=ids["F"][:10]) == [ids["F"]]
    assert found(user_id="nobody") == [] and found(session_id="") == found()
    by_agent = q1.get("/api/runs", **W, sort="-agent").json()["items"]
    assert [r["agent"] for r in by_agent] == ["gamma", "beta", "beta", "alpha", "alpha"]


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"sort": "colour"}, "sort"),
        ({"limit": 1000}, "limit"),
        ({"start": "yesterday"}, "start"),
        ({"status": "weird"}, "status"),
        ({"start": T + 10, "end": T}, "after start"),
        ({"min_cost": -1}, "min_cost"),
        ({"min_cost": "inf"}, "min_cost"),
        ({"tool_failed": "maybe"}, "tool_failed"),
        ({"search": "x" * 257}, "search"),
    ],
)
def test_runs_list_rejects_bad_parameters_with_a_message(q1: Api, params: dict, needle: str) -> None:
    response = q1.get("/api/runs", **{**W, **params})
    assert response.status_code == 422
    assert needle in str(response.json()["detail"])


def test_run_detail_and_project_isolation(q1: Api, q2: Api, collector: tuple[Running, dict]) -> None:
    trace_id = collector[1]["B"][0].trace_id
    detail = q1.get(f"/api/runs/{trace_id}").json()
    assert detail["run"]["status"] == "error" and len(detail["spans"]) == len(collector[1]["B"])
    assert [f["comment"] for f in detail["feedback"]] == ["wrong answer"]
    assert q2.get(f"/api/runs/{trace_id}").status_code == 404
    assert q1.get(f"/api/runs/{'0' * 32}").status_code == 404
    assert q1.get("/api/runs/xyz").status_code == 422


def test_feedback_round_trip_stays_in_its_project(q1: Api, q2: Api, collector: tuple[Running, dict]) -> None:
    trace_id = collector[1]["D"][0].trace_id
    created = q1.client.post(f"/api/runs/{trace_id}/feedback", json={"score": 0.25, "label": "meh", "source": "eval"})
    assert created.status_code == 201 and created.json()["trace_id"] == trace_id
    assert q2.client.post(f"/api/runs/{trace_id}/feedback", json={"score": 0.0}).status_code == 404  # not q2's run
    feedback = q1.get(f"/api/runs/{trace_id}").json()["feedback"]
    assert [(f["score"], f["label"], f["source"]) for f in feedback] == [(0.25, "meh", "eval")]
    bad = q1.client.post(f"/api/runs/{trace_id}/feedback", json={"score": 1, "source": "robot"})
    assert bad.status_code == 422


def test_feedback_on_an_unknown_run_is_404_and_an_empty_one_422(q1: Api, collector: tuple[Running, dict]) -> None:
    unknown = q1.client.post(f"/api/runs/{'ab' * 16}/feedback", json={"score": 1.0})
    assert unknown.status_code == 404 and "not found" in unknown.json()["detail"]
    trace_id = collector[1]["D"][0].trace_id
    before = q1.get(f"/api/runs/{trace_id}").json()["feedback"]
    for empty in ({}, {"label": "", "comment": ""}, {"source": "eval"}):
        answer = q1.client.post(f"/api/runs/{trace_id}/feedback", json=empty)
        assert answer.status_code == 422 and "at least one of score, label or comment" in answer.text
    assert q1.get(f"/api/runs/{trace_id}").json()["feedback"] == before  # nothing stored


def test_overview_and_timeseries(q1: Api) -> None:
    figures = q1.get("/api/overview", **W).json()["figures"]
    assert set(figures) == set(TIMESERIES_METRICS) | {"runs_per_min", "cost_per_hour_usd"}
    assert figures["runs"]["value"] == 5 and figures["runs"]["previous"] == 2
    series = q1.get("/api/timeseries", **W, metric="runs", step_s=600).json()
    assert [p["value"] for p in series["points"]] == [1, 1, 1, 1, 1, 0]
    default_step = q1.get("/api/timeseries", **W, metric="cost_usd", group_by="agent").json()
    assert default_step["step_s"] == 30 and {p["group"] for p in default_step["points"]} == {"alpha", "beta", "gamma"}
    bad = q1.get("/api/timeseries", **W, metric="bogus")
    assert bad.status_code == 422 and "metric" in bad.json()["detail"]


def test_timeseries_set_answers_many_series_in_one_request(q1: Api, collector: tuple[Running, dict]) -> None:
    with CollectorClient(collector[0].url, collector[0].key("q1")) as client:
        got = client.timeseries_set(["cost_usd", "runs", "ttft_p95"], step_s=600, group_by="model", **W)
    assert list(got) == ["cost_usd", "runs", "ttft_p95"]
    one = q1.get("/api/timeseries", **W, metric="runs", step_s=600, group_by="model").json()
    assert got["runs"].model_dump(exclude={"complete_until"}) == {k: v for k, v in one.items() if k != "complete_until"}
    bad = q1.client.get("/api/timeseries/set", params={"metric": ["runs", "bogus"], **W})
    assert bad.status_code == 422 and "bogus" in bad.json()["detail"]
    assert q1.client.get("/api/timeseries/set", params=W).status_code == 422  # no metric
    assert (
        q1.client.get(
            "/api/timeseries/set", params={"metric": ["runs"] * (len(TIMESERIES_METRICS) + 1), **W}
        ).status_code
        == 422
    )


def test_cost_filters_and_engines(q1: Api, q2: Api) -> None:
    cost = q1.get("/api/cost", **W, gpu_hour_usd=3.6).json()
    assert cost["total_usd"] == pytest.approx(0.20) and cost["self_hosted"]["gpu_seconds"] == pytest.approx(60)
    assert q1.get("/api/filters", **W).json()["agents"] == ["alpha", "beta", "gamma"]
    assert (q1.get("/api/filters").json()["project"], q2.get("/api/filters").json()["project"]) == (
        "q1",
        "q2",
    )  # what the dashboard names
    assert [e["engine"] for e in q1.get("/api/engines").json()] == ["cfg", "e1"]
    assert [e["engine"] for e in q2.get("/api/engines").json()] == ["e2"]
    points = q1.get("/api/engine/metrics", engine="e1", start=T, end=T + 600, step_s=60).json()["points"]
    assert {p["metric"] for p in points} == {
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "gpu:utilization",
    }


def test_engines_register_at_runtime_under_the_callers_project(
    collector: tuple[Running, dict], q1: Api, q2: Api
) -> None:
    """Registering needs the admin scope (a read/ingest key gets 403); the engine is the admin key's project's."""
    assert q2.client.post("/api/engines", json={"name": "late", "url": "http://127.0.0.1:9"}).status_code == 403
    admin = Api(collector[0].url, collector[0].app.state.keyring.create("q2", scopes="admin").key)
    created = admin.client.post("/api/engines", json={"name": "late", "url": "http://127.0.0.1:9"})
    assert created.status_code == 201 and created.json()["url"] == "http://127.0.0.1:9"
    assert [(e["engine"], e["url"]) for e in q2.get("/api/engines").json()] == [
        ("e2", ""),
        ("late", "http://127.0.0.1:9/metrics"),
    ]
    assert "late" not in [e["engine"] for e in q1.get("/api/engines").json()]
    assert admin.client.post("/api/engines", json={"name": "x y", "url": "ftp://nope"}).status_code == 422


def test_openapi_lists_the_query_endpoints(collector: tuple[Running, dict]) -> None:
    paths = local_http.get(collector[0].url + "/openapi.json", timeout=30).json()["paths"]
    for path in (
        "/api/runs",
        "/api/runs/{trace_id}",
        "/api/runs/{trace_id}/feedback",
        "/api/overview",
        "/api/timeseries",
        "/api/cost",
        "/api/engines",
        "/api/engine/metrics",
        "/api/filters",
    ):
        assert path in paths
