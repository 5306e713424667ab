"""Continuous vs static batching, with the simulated engine's own scheduler.

Part 1 reproduces the classic teaching example in step units: requests needing
[10, 3, 8, 2, 9, 4, 7, 5] decode steps on 4 slots take 19 steps at 63 % slot utilisation
under static batching and 14 steps at 86 % under continuous batching (utilisation = busy
slot-steps / (slots x steps) = 48 / 76 and 48 / 56). The figures are asserted.

Part 2 runs the live server (``agentwatch engine --sim`` in its own process, real time) under
a burst of streamed requests with output lengths spread over a range, once per policy, and
reports throughput, TTFT and end-to-end p50/p99 as the client sees them.

    .venv/bin/python bench/batching.py [--requests 200] [--slots 32] [--speed 1]

Writes ``bench/results/batching.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentwatch_platform.reference_agent.engine.scheduler import Request, Scheduler  # noqa: E402
from bench.ports import free_port  # noqa: E402

CLASSIC = [10, 3, 8, 2, 9, 4, 7, 5]
EXPECTED = {"static": (19, 63), "continuous": (14, 86)}


def classic_example() -> dict[str, dict[str, float]]:
    """Both policies on the classic example, in step units."""
    figures = {}
    for policy, (steps, percent) in EXPECTED.items():
        scheduler = Scheduler(slots=4, kv_tokens=10_000, policy=policy)
        for index, length in enumerate(CLASSIC):
            scheduler.add(Request(f"r{index}", prompt_tokens=1, output_tokens=length))
        while scheduler.has_work():
            scheduler.step()
        figures[policy] = {"steps": scheduler.steps, "utilisation": round(scheduler.utilisation, 4)}
        assert scheduler.steps == steps and round(scheduler.utilisation * 100) == percent, (policy, figures[policy])
        print(f"classic example, {policy:>10}: {scheduler.steps} steps, {scheduler.utilisation:.0%} slot utilisation")
    return figures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def one_request(client: httpx.AsyncClient, url: str, body: dict) -> tuple[float, float, int]:
    """(ttft_s, e2e_s, completion_tokens) of one streamed request."""
    started = time.perf_counter()
    first = None
    tokens = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0]["delta"].get("content") and first is None:
                first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started, tokens


async def load(url: str, requests: int, model: str, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    bodies = [
        {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "max_tokens": rng.randint(16, 256),
            "messages": [{"role": "user", "content": f"Request {i}: " + "explain batching " * rng.randint(5, 60)}],
        }
        for i in range(requests)
    ]
    limits = httpx.Limits(max_connections=requests, max_keepalive_connections=requests)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(one_request(client, url, body) for body in bodies))
        wall = time.perf_counter() - started
    ttft = [r[0] for r in results]
    e2e = [r[1] for r in results]
    tokens = sum(r[2] for r in results)
    return {
        "requests": requests,
        "wall_s": round(wall, 3),
        "output_tokens": tokens,
        "throughput_tok_s": round(tokens / wall, 1),
        "requests_per_s": round(requests / wall, 2),
        "ttft_p50_s": round(percentile(ttft, 50), 3),
        "ttft_p99_s": round(percentile(ttft, 99), 3),
        "e2e_p50_s": round(percentile(e2e, 50), 3),
        "e2e_p99_s": round(percentile(e2e, 99), 3),
        "e2e_mean_s": round(statistics.fmean(e2e), 3),
    }


def live(policy: str, args: argparse.Namespace) -> dict[str, float]:
    """Start ``agentwatch engine --sim`` in its own process and load it."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentwatch",
            "engine",
            "--sim",
            "--port",
            str(port),
            "--policy",
            policy,
            "--slots",
            str(args.slots),
            "--speed",
            str(args.speed),
            "--models",
            args.model,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the simulated engine did not start") from None
                time.sleep(0.1)
        figures = asyncio.run(load(url, args.requests, args.model, args.seed))
    finally:
        process.terminate()
        process.wait(15)
    print(
        f"live server, {policy:>10}: {figures['throughput_tok_s']:.0f} tok/s, "
        f"TTFT p50 {figures['ttft_p50_s']:.3f} s p99 {figures['ttft_p99_s']:.3f} s, "
        f"e2e p50 {figures['e2e_p50_s']:.2f} s p99 {figures['e2e_p99_s']:.2f} s"
    )
    return figures


def write_results(results: dict) -> None:
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "batching.json").write_text(json.dumps(results, indent=2) + "\n")
    setup = results["live_setup"]
    lines = [
        "# Continuous vs static batching (simulated engine)",
        "",
        "## Classic example, step units (4 slots, [10, 3, 8, 2, 9, 4, 7, 5])",
        "",
        "| policy | steps | slot utilisation |",
        "|---|---|---|",
        *(f"| {p} | {f['steps']} | {f['utilisation']:.0%} |" for p, f in results["classic"].items()),
        "",
        f"## Live server: {setup['requests']} streamed requests at once, {setup['slots']} slots, "
        f"{setup['model']}, max_tokens 16-256, speed x{setup['speed']}",
        "",
        "| policy | tok/s | req/s | TTFT p50 | TTFT p99 | e2e p50 | e2e p99 |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {p} | {f['throughput_tok_s']:.0f} | {f['requests_per_s']:.2f} | {f['ttft_p50_s']:.3f} s | "
            f"{f['ttft_p99_s']:.3f} s | {f['e2e_p50_s']:.2f} s | {f['e2e_p99_s']:.2f} s |"
            for p, f in results["live"].items()
        ),
        "",
        f"Measured {results['measured_at']} on this machine (wall-clock, client side).",
        "",
    ]
    (out / "batching.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--model", default="sim-small")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-live", action="store_true", help="only the classic example")
    args = parser.parse_args()
    results: dict = {"classic": classic_example()}
    if not args.skip_live:
        results["live_setup"] = {
            "requests": args.requests,
            "slots": args.slots,
            "speed": args.speed,
            "model": args.model,
        }
        results["live"] = {policy: live(policy, args) for policy in ("continuous", "static")}
        results["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_results(results)


if __name__ == "__main__":
    main()
