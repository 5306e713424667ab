"""Engine: per scraped engine, load (running, waiting, KV cache), throughput, latency distributions, GPU.

Metric names are vLLM's (the simulated engine exports the same); counters become per-second
rates between scrapes, histograms become distributions over the chosen range. Percentiles of
queue time and TTFT come from the calls' own engine spans where stored (``engine_figures``).
"""

from __future__ import annotations

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import EngineInfo, EngineSeries
from agentwatch_platform.dashboard import analysis, engine_figures, svg_charts, ui

RUNNING = ["vllm:num_requests_running"]
WAITING = ["vllm:num_requests_waiting"]
KV_CACHE = ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"]
PREFIX_HITS, PREFIX_QUERIES = (
    ["vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"],
    ["vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"],
)
PREFIX_HIT_RATE_GAUGE = ["vllm:gpu_prefix_cache_hit_rate"]
PREEMPTIONS = ["vllm:num_preemptions"]
PROMPT_TOKENS, GENERATION_TOKENS = ["vllm:prompt_tokens"], ["vllm:generation_tokens"]
TTFT_HIST, QUEUE_HIST = "vllm:time_to_first_token_seconds", "vllm:request_queue_time_seconds"


def render() -> None:
    st.title("Engine")
    win = ui.window()
    with ui.guarded("the engines"):
        engines: list[EngineInfo] = ui.fetch(Api.engines)
        if not engines:
            ui.empty(
                "No engine is scraped.",
                "Start the collector with `AGENTWATCH_SCRAPE_TARGETS=sim=http://127.0.0.1:8000/metrics` (the simulated engine: `agentwatch engine`), or run `agentwatch demo`.",
            )
            return
        names = [e.engine for e in engines]
        engine = (
            engines[names.index(st.selectbox("Engine", names, key="engine_name"))] if len(names) > 1 else engines[0]
        )
        _describe(engine)
        series: EngineSeries = ui.fetch(Api.engine_metrics, engine=engine.engine, start=win.start, end=win.end)
        if not series.points:
            ui.empty(
                f"No metrics from {engine.engine} in the {win.label.lower()}.",
                "Is the engine up and its /metrics reachable from the collector?",
            )
            return
        _headlines(series)
        _charts(series)
        _gpu(series)


def _describe(engine: EngineInfo) -> None:
    scraped = "never" if engine.last_scrape is None else ui.fmt_time(engine.last_scrape)
    st.caption(
        f"**{engine.engine}** · {engine.url} · models: {', '.join(engine.model_names) or 'unknown'} · last scrape {scraped}"
    )


def _latest(values: dict[float, float]) -> float | None:
    return values[max(values)] if values else None


def _mean(values: dict[float, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def prefix_hit_rate(points) -> float | None:
    """Hits over queries across the range; older vLLM exports a ready-made gauge instead."""
    queries = analysis.counter_increase(points, PREFIX_QUERIES)
    if queries > 0:
        return analysis.counter_increase(points, PREFIX_HITS) / queries
    return _latest(analysis.gauge_series(points, PREFIX_HIT_RATE_GAUGE, how="mean"))


def _headlines(series: EngineSeries) -> None:
    pts = series.points
    c = [*st.columns(4), *st.columns(3)]  # two rows: seven boxes in one cut "1.13k tok/s" off
    c[0].metric("Running requests", ui.fmt(_latest(analysis.gauge_series(pts, RUNNING)), ""))
    c[1].metric("Waiting requests", ui.fmt(_latest(analysis.gauge_series(pts, WAITING)), ""))
    c[2].metric("KV-cache use", ui.fmt(_latest(analysis.gauge_series(pts, KV_CACHE, how="mean")), "ratio"))
    c[3].metric("Prefix-cache hit rate", ui.fmt(prefix_hit_rate(pts), "ratio"))
    c[4].metric("Preemptions (in range)", f"{analysis.counter_increase(pts, PREEMPTIONS):,.0f}")
    c[5].metric("Prompt tokens/s (mean)", ui.fmt(_mean(analysis.counter_rate(pts, PROMPT_TOKENS)), "tokens/s"))
    c[6].metric("Generation tokens/s (mean)", ui.fmt(_mean(analysis.counter_rate(pts, GENERATION_TOKENS)), "tokens/s"))


def _charts(series: EngineSeries) -> None:
    pts = series.points
    drawn = [
        _readings(
            {"running": analysis.gauge_series(pts, RUNNING), "waiting": analysis.gauge_series(pts, WAITING)},
            "Requests running and waiting",
            "requests",
        ),
        _readings({"KV-cache use": analysis.gauge_series(pts, KV_CACHE, how="mean")}, "KV-cache use", "ratio"),
        _readings(
            {
                "prompt": analysis.counter_rate(pts, PROMPT_TOKENS),
                "generation": analysis.counter_rate(pts, GENERATION_TOKENS),
            },
            "Token throughput",
            "tokens/s",
        ),
        _readings({"preemptions": analysis.counter_rate(pts, PREEMPTIONS)}, "Preemptions", "per s"),
    ]
    missing = []
    calls = series.calls
    for name, title, exact in (
        (TTFT_HIST, "Time to first token (engine)", (calls.ttft_p50, calls.ttft_p95, calls.ttft_calls)),
        (QUEUE_HIST, "Queue time", (calls.queue_p50, calls.queue_p95, calls.queue_calls)),
    ):
        dist = analysis.histogram_distribution(pts, name)
        if dist.total > 0:
            q = " · " + engine_figures.percentiles(dist, *exact)
            drawn.append(
                svg_charts.bar_chart(
                    bucket_labels(dist), dist.counts, f"{title}: {dist.total:,.0f} requests{q}", "requests", ui.fmt
                )
            )
        else:
            missing.append(f"{title}: no observations of `{name}` in range.")
    st.html(svg_charts.html_block(drawn, columns=2))
    _ttft_note(series)
    for line in missing:
        st.caption(line)


def _ttft_note(series: EngineSeries) -> None:
    """Which TTFT is which: the engine's (here) and the client's (the Overview's) differ by design."""
    calls = series.calls
    engine = f"p50 {ui.fmt(calls.ttft_p50, 's')}" if calls.ttft_calls else "no engine spans in range"
    client = f"p50 {ui.fmt(calls.client_ttft_p50, 's')}" if calls.client_calls else "no client TTFT in range"
    st.caption(f"Two TTFTs: {engine_figures.ENGINE_TTFT} ({engine}); {engine_figures.CLIENT_TTFT} ({client}).")


def _readings(series: dict[str, dict[float, float]], title: str, unit: str, *, width: float = 640) -> str:
    return svg_charts.time_chart(svg_charts.from_readings(series), title, unit, ui.fmt, width=width)


def bucket_labels(dist: analysis.Distribution) -> list[str]:
    """A histogram's buckets by their upper bound in seconds ("≤ 0.5"); the last, "> " the one before it."""
    bounds = dist.upper_bounds
    return [f"≤ {b:g} s" if b != float("inf") else f"> {bounds[-2]:g} s" if len(bounds) > 1 else "all" for b in bounds]


def gpu_metrics(points) -> dict[str, dict[str, dict[float, float]]]:
    """GPU sampler readings (names starting ``gpu``) as metric -> GPU label -> series."""
    out: dict[str, dict[str, dict[float, float]]] = {}
    for p in points:
        if p.metric.startswith("gpu"):
            label = p.labels.get("gpu", p.labels.get("index", "0"))
            out.setdefault(p.metric, {}).setdefault(f"GPU {label}", {})[p.t] = p.value
    return out


def _gpu(series: EngineSeries) -> None:
    gpus = gpu_metrics(series.points)
    st.subheader("GPU")
    if not gpus:
        st.caption("No GPU readings for this engine (no NVIDIA GPU, or the sampler is off).")
        return
    cols = st.columns(min(3, len(gpus)))
    for i, (metric, per_gpu) in enumerate(sorted(gpus.items())):
        unit = _gpu_unit(metric)
        latest = [values[max(values)] for values in per_gpu.values() if values]
        shown = sum(latest) / len(latest) if latest else None
        if unit == "bytes" and shown is not None:
            cols[i % len(cols)].metric(f"{metric} (now, mean of {len(latest)} GPU)", f"{shown / 2**30:,.1f} GiB")
        else:
            cols[i % len(cols)].metric(f"{metric} (now, mean of {len(latest)} GPU)", ui.fmt(shown, unit))
        cols[i % len(cols)].html(svg_charts.html_block([_readings(per_gpu, metric, unit, width=1100 / len(cols))]))


def _gpu_unit(metric: str) -> str:
    if "util" in metric:
        return "%"
    if "power" in metric:
        return "W"
    return "bytes" if "mem" in metric else ""


render()
