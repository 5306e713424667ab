"""The span explorer's HTTP API through a real collector on 127.0.0.1: read scope, the caller's
project only, the typed client, and 422s that say what was wrong."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agentwatch_api.client import ApiError, CollectorClient
from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.collector.span_fixture import Generated, generate
from tests.support import local_http

T = (int(time.time()) // 3600 - 3) * 3600
W = {"start": T, "end": T + 3600}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, Generated, Generated]]:
    settings = settings_for(tmp_path_factory.mktemp("spans_api"), scrape_interval_s=3600.0)
    with serve(settings) as running:
        a, b = generate("pa", T, runs=30, seed=1), generate("pb", T, runs=20, seed=2)
        running.app.state.store.insert_spans(a.spans)
        running.app.state.store.insert_spans(b.spans)
        yield running, a, b


@pytest.fixture(scope="module")
def client_a(collector: tuple[Running, Generated, Generated]) -> Iterator[CollectorClient]:
    with CollectorClient(collector[0].url, collector[0].key("pa", ["read"])) as client:
        yield client


def test_a_project_key_never_sees_another_projects_spans(
    collector: tuple[Running, Generated, Generated], client_a: CollectorClient
) -> None:
    _, a, b = collector
    page = client_a.spans(**W, limit=500)
    assert page.total == len(a.spans) and {h.span_id for h in page.items} == {s.span_id for s in a.spans}
    groups = client_a.span_groups(**W, by="user")
    assert sum(g.spans for g in groups.groups) == len(a.spans)
    assert sum(g.cost_usd for g in groups.groups) == pytest.approx(sum(s.cost_usd for s in a.spans))
    foreign = b.spans[0]
    assert client_a.spans(**W, trace_id=foreign.trace_id).total == 0
    assert client_a.span_groups(**W, by="session", trace_id=foreign.trace_id).groups == []


def test_failures_by_tool_through_the_client(
    collector: tuple[Running, Generated, Generated], client_a: CollectorClient
) -> None:
    _, a, _ = collector
    got = client_a.span_groups(**W, by="tool", sort="-failures")
    expected = {
        tool: sum(1 for s in a.spans if s.tool_name == tool and (s.status_code == "error" or s.is_timeout))
        for tool in ("search", "fetch")
    }
    assert {g.key: g.failures for g in got.groups} == expected
    assert [g.failures for g in got.groups] == sorted(expected.values(), reverse=True)
    listed = client_a.spans(**W, tool="fetch", failed=True, attribute=["http.status_code=502"], limit=500)
    assert {h.span_id for h in listed.items} == {
        s.span_id for s in a.spans if s.tool_name == "fetch" and s.attributes.get("http.status_code") == "502"
    }


def test_cursor_over_http(client_a: CollectorClient, collector: tuple[Running, Generated, Generated]) -> None:
    seen, cursor = [], None
    while True:
        page = client_a.spans(**W, sort="-duration_s", limit=40, cursor=cursor)
        seen += [h.span_id for h in page.items]
        if (cursor := page.next_cursor) is None:
            break
    assert sorted(seen) == sorted(s.span_id for s in collector[1].spans)


def test_spans_need_the_read_scope(collector: tuple[Running, Generated, Generated]) -> None:
    running = collector[0]
    ingest_only = running.key("pa", ["ingest"])
    for path in ("/api/spans", "/api/spans/groups"):
        assert local_http.get(running.url + path, params=W, timeout=30).status_code == 401
        denied = local_http.get(
            running.url + path, params=W, headers={"Authorization": f"Bearer {ingest_only}"}, timeout=30
        )
        assert denied.status_code == 403


@pytest.mark.parametrize(
    ("path", "params", "needle"),
    [
        ("/api/spans", {"status": "weird"}, "status"),
        ("/api/spans", {"sort": "colour"}, "sort must be one of"),
        ("/api/spans", {"min_cost": -1}, "min_cost"),
        ("/api/spans", {"min_duration_s": "nan"}, "min_duration_s"),
        ("/api/spans", {"limit": 501}, "limit"),
        ("/api/spans", {"attribute": "nokey"}, "key=value"),
        ("/api/spans", {"cursor": "garbage"}, "cursor"),
        ("/api/spans", {"start": "yesterday"}, "start"),
        ("/api/spans/groups", {"by": "colour"}, "by must be one of"),
        ("/api/spans/groups", {"by": "attribute:"}, "needs a key"),
        ("/api/spans/groups", {"failed": "maybe"}, "failed"),
    ],
)
def test_bad_filter_values_are_422_with_a_message(
    collector: tuple[Running, Generated, Generated], client_a: CollectorClient, path: str, params: dict, needle: str
) -> None:
    response = client_a._http.get(path, params={**W, **params})
    assert response.status_code == 422
    assert needle in str(response.json()["detail"])
    call = client_a.spans if path == "/api/spans" else client_a.span_groups
    with pytest.raises(ApiError, match="422"):
        call(**{**W, **params})
