"""Where ingestion time goes, stage by stage, on the agent-like workload of ``reference_agent/workload.py``.

1. decode + normalise (+ price, redact) in one thread, to one Arrow table per request: the
   collector's per-span Python cost;
2. store: the requests' tables concatenated into the writer's batches of 20k, then
   ``ChdbStore.insert_spans`` (deduplication look-up, insert, materialized views);
3. spool: append + group-committed fsync of the request bodies (4 concurrent writers);
4. end to end: a real collector process, 4 concurrent OTLP/HTTP senders, from the first send
   until ``/api/ingest`` counts every span as stored (spans/s acknowledged and queryable).

Stages 1 and 2 also report CPU microseconds per span (``time.process_time``, all threads of
this process): on a shared machine wall-clock rates swing with the load, CPU cost much less,
and CPU per span is what bounds spans/s on 2 cores.

    .venv/bin/python bench/ingest_pipeline.py [--spans 100000] [--batch 1000]

Writes ``bench/results/ingest_pipeline.json`` and ``.md``. ``bench/ingest.py`` (storage) is the
headline 1M-span figure; this one says which stage to work on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentwatch_platform.collector.ingest.normalize import Normalizer, sdk_pricer  # noqa: E402
from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF, convert  # noqa: E402
from agentwatch_platform.collector.ingest.redact import Redactor  # noqa: E402
from agentwatch_platform.collector.ingest.spool import Spool  # noqa: E402
from agentwatch_platform.collector.storage.chdb_store import ChdbStore  # noqa: E402
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector  # noqa: E402
from agentwatch_platform.reference_agent.workload import Workload  # noqa: E402
from bench.ports import free_port  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _rates(spans: int, seconds: float, cpu_s: float) -> dict[str, float]:
    return {
        "spans": spans,
        "seconds": round(seconds, 3),
        "spans_per_s": round(spans / seconds),
        "cpu_us_per_span": round(cpu_s / spans * 1e6, 1),
    }


def decode_stage(bodies: list[bytes]) -> tuple[dict[str, float], list[pa.Table]]:
    normalizer = Normalizer(redactor=Redactor.from_setting("default"), pricer=sdk_pricer())
    started, cpu = time.perf_counter(), time.process_time()
    tables = [convert(body, PROTOBUF, "bench", normalizer, max_spans=1 << 30).table for body in bodies]
    spans = sum(t.num_rows for t in tables)
    return _rates(spans, time.perf_counter() - started, time.process_time() - cpu), tables


def writer_batches(tables: list[pa.Table], batch: int) -> list[pa.Table]:
    """Request tables grouped into batches of at most ``batch`` spans, concatenated as the writer does."""
    batches: list[list[pa.Table]] = [[]]
    for table in tables:
        if batches[-1] and sum(t.num_rows for t in batches[-1]) + table.num_rows > batch:
            batches.append([])
        batches[-1].append(table)
    return [pa.concat_tables(group) for group in batches]


def store_stage(tables: list[pa.Table], directory: Path, batch: int = 20_000) -> dict[str, dict[str, float]]:
    spans = sum(t.num_rows for t in tables)
    store = ChdbStore(directory)
    try:
        store.migrate()
        started, cpu = time.perf_counter(), time.process_time()
        for i, table in enumerate(writer_batches(tables, batch)):
            store.insert_spans(table, dedup_token=f"bench:{i}")
        insert = _rates(spans, time.perf_counter() - started, time.process_time() - cpu)
    finally:
        store.close()
    return {"insert": insert}


async def spool_stage(bodies: list[bytes], directory: Path) -> dict[str, float]:
    spool = Spool(directory, max_bytes=1 << 40)
    spool.open()
    queue = list(bodies)
    started = time.perf_counter()

    async def writer() -> None:
        while queue:
            await spool.append("bench", PROTOBUF, queue.pop())

    await asyncio.gather(*(writer() for _ in range(4)))
    seconds = time.perf_counter() - started
    spool.close()
    size = sum(len(b) for b in bodies)
    return {
        "requests": len(bodies),
        "seconds": round(seconds, 3),
        "requests_per_s": round(len(bodies) / seconds),
        "mb_per_s": round(size / seconds / 1e6, 1),
    }


async def end_to_end(bodies: list[bytes], spans: int, data_dir: Path) -> dict[str, float]:
    group = ProcessGroup(data_dir.parent / "logs", log=print)
    url = start_collector(
        group,
        data_dir,
        port=free_port(),
        grpc_port=0,
        env={"AGENTWATCH_REQUIRE_AUTH": "false", "AGENTWATCH_ALERT_INTERVAL_S": "0"},
    )
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            queue = list(reversed(bodies))
            codes: dict[int, int] = {}

            async def sender() -> None:
                while queue:
                    body = queue.pop()
                    while True:
                        response = await client.post(
                            url + "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
                        )
                        codes[response.status_code] = codes.get(response.status_code, 0) + 1
                        if response.status_code == 200:
                            break
                        await asyncio.sleep(float(response.headers.get("Retry-After", "0.1")))

            started = time.perf_counter()
            await asyncio.gather(*(sender() for _ in range(4)))
            acked = time.perf_counter() - started
            while (status := (await client.get(url + "/api/ingest")).json())["stored_spans"] < spans:
                await asyncio.sleep(0.05)
            stored = time.perf_counter() - started
    finally:
        group.stop()
    return {
        "spans": spans,
        "acked_s": round(acked, 2),
        "acked_spans_per_s": round(spans / acked),
        "queryable_s": round(stored, 2),
        "queryable_spans_per_s": round(spans / stored),
        "lag_p50_s": status["lag_p50_s"],
        "lag_p95_s": status["lag_p95_s"],
        "responses": codes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="spans per export request")
    args = parser.parse_args()
    workload = Workload(args.spans, batch_spans=args.batch, end_time_ns=time.time_ns())
    bodies = list(workload.batches())
    with tempfile.TemporaryDirectory(prefix="agentwatch-bench-") as tmp:
        decoded, tables = decode_stage(bodies)
        results = {
            "spans": args.spans,
            "batch_spans": args.batch,
            "bytes_per_span_on_wire": round(sum(map(len, bodies)) / args.spans, 1),
            "decode_normalize": decoded,
            "store": store_stage(tables, Path(tmp) / "store"),
            "spool": asyncio.run(spool_stage(bodies, Path(tmp) / "spool")),
            "end_to_end": asyncio.run(end_to_end(bodies, args.spans, Path(tmp) / "data")),
        }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ingest_pipeline.json").write_text(json.dumps(results, indent=2) + "\n")
    e2e, dec, spool, store = results["end_to_end"], results["decode_normalize"], results["spool"], results["store"]
    lines = [
        "# Ingestion pipeline, stage by stage",
        "",
        f"{args.spans} agent-like spans ({results['bytes_per_span_on_wire']} bytes/span on the wire), {args.batch} per request, this machine (2 cores, shared).",
        "",
        "| stage | figure |",
        "|---|---|",
        f"| decode + normalise to Arrow (1 thread) | {dec['spans_per_s']:,} spans/s, {dec['cpu_us_per_span']} µs CPU/span |",
        f"| `insert_spans` (chDB, 20k batches) | {store['insert']['spans_per_s']:,} spans/s, {store['insert']['cpu_us_per_span']} µs CPU/span (all threads) |",
        f"| spool append + fsync (4 writers) | {spool['requests_per_s']:,} requests/s, {spool['mb_per_s']} MB/s |",
        f"| end to end, acknowledged | {e2e['acked_spans_per_s']:,} spans/s |",
        f"| end to end, queryable | {e2e['queryable_spans_per_s']:,} spans/s |",
        f"| ingestion lag p50 / p95 | {e2e['lag_p50_s']:.0f} s / {e2e['lag_p95_s']:.0f} s (the workload's spans are dated up to 40 minutes before the run, so this is not the collector's lag) |",
    ]
    (RESULTS / "ingest_pipeline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
