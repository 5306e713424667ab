"""Two (or more) versions of the dashboard in a real browser, interleaved (``python -m bench.dashboard_ab``).

On a machine shared with others, the load changes by a factor of two between two runs of
``bench.dashboard_render`` minutes apart, and a page's figures with it. This compares versions of
the dashboard code under the same load: one store (``--spans`` spans plus the 10,000-span run, kept
in ``--data-dir`` for the next comparison), one collector, one dashboard per version (a source tree,
e.g. ``git archive main | tar -x -C /tmp/base``), and each page measured cold and warm on each
version in turn, the order reversed every round. Prints each measurement and the median per page
and version; writes nothing else (the figures of record are ``bench.dashboard_render``'s).

    python -m bench.dashboard_ab --version base=/tmp/base --version new=. --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.dashboard_render import BROWSER_PAGES, _chromium, _free_port, _load_to_idle, prepare
from bench.ingest import Collector

PARTS = ("collector", "dashboard", "alerts", "reference_agent")


def namespace_tree(code: Path, into: Path) -> Path:
    """A folder whose ``agentwatch_platform/<part>`` links to ``code/<part>``: first on the path, it
    makes ``agentwatch_platform.dashboard`` (and the other parts) that tree's code, not the
    installed one (the parts install under that namespace through pyproject's package-dir)."""
    root = into / "agentwatch_platform"
    root.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        link = root / part
        if link.is_symlink():
            link.unlink()
        link.symlink_to(code / part, target_is_directory=True)
    return into


def serve(code: Path, env: dict[str, str], logs: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The dashboard of the source tree ``code`` (its own modules first on the path), as
    ``agentwatch dashboard`` serves it; returns the process and its URL once healthy."""
    port = _free_port()
    ns = namespace_tree(code, logs / f"ns-{port}")
    command = [sys.executable, "-m", "agentwatch", "dashboard", "--port", str(port), "--open"]
    with open(logs / f"dashboard-{port}.log", "wb") as log:
        proc = subprocess.Popen(
            command,
            cwd=code,
            env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(map(str, (ns, code, code / "sdk")))},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"the dashboard of {code} did not start (log in {logs})")


def _main_thread_ms(driver: Any) -> float:
    """The page's main-thread busy time so far (Chrome's ``TaskDuration``), in ms."""
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return 1000 * next(m["value"] for m in metrics if m["name"] == "TaskDuration")


def _timed(driver: Any, url: str, selector: str, count: int) -> tuple[float, float]:
    """Wall ms to idle and the main-thread ms it took: the CPU figure reads the same on a busy
    machine, where the wall figure also counts waiting for a core."""
    driver.get("about:blank")
    driver.execute_cdp_cmd("Performance.enable", {})
    before = _main_thread_ms(driver)
    wall, _ = _load_to_idle(driver, url, selector, count)
    return wall, _main_thread_ms(driver) - before


def measure(url: str, selector: str, count: int, warm: int, data_dir: Path) -> tuple[float, float, float, float]:
    """Cold (a new browser session) and the median of ``warm`` loads after it: wall and
    main-thread ms of each."""
    driver = _chromium(data_dir)
    try:
        cold = _timed(driver, url, selector, count)
        warms = [_timed(driver, url, selector, count) for _ in range(warm)]
        return (*cold, statistics.median(w[0] for w in warms), statistics.median(w[1] for w in warms))
    finally:
        driver.quit()


def compare(
    versions: dict[str, Path], pages: list[str], data_dir: Path, *, spans: int, rounds: int, warm: int
) -> dict[str, Any]:
    if not (data_dir / "big_trace.txt").exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "big_trace.txt").write_text(prepare(data_dir, spans)[0])
    big = (data_dir / "big_trace.txt").read_text()
    found: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    with Collector(data_dir) as collector:
        env = {"AGENTWATCH_COLLECTOR_URL": collector.url, "AGENTWATCH_API_KEY": collector.key("bench")}
        served = {name: serve(code, env, data_dir) for name, code in versions.items()}
        try:
            for r in range(rounds):
                for page in pages:
                    path, selector, count = BROWSER_PAGES[page]
                    order = list(served.items())
                    for name, (_, base) in order if r % 2 == 0 else reversed(order):
                        load = os.getloadavg()[0]
                        cold, cold_cpu, warm_ms, warm_cpu = measure(
                            base + path.format(big=big), selector, count, warm, data_dir
                        )
                        found.setdefault((page, name), []).append((cold, warm_ms, load, cold_cpu, warm_cpu))
                        print(
                            f"round {r} {page:22} {name:10} cold {cold:6.0f} warm {warm_ms:6.0f} "
                            f"(main thread {cold_cpu:5.0f} / {warm_cpu:5.0f}) load {load:.1f}"
                        )
        finally:
            for proc, _ in served.values():
                proc.terminate()
                proc.wait(timeout=30)
    return {
        f"{page} {name}": {
            "cold_ms": round(statistics.median(m[0] for m in got)),
            "warm_ms": round(statistics.median(m[1] for m in got)),
            "load": round(statistics.mean(m[2] for m in got), 1),
            "cold_main_thread_ms": round(statistics.median(m[3] for m in got)),
            "warm_main_thread_ms": round(statistics.median(m[4] for m in got)),
        }
        for (page, name), got in found.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="append", required=True, help="name=source tree (two or more)")
    parser.add_argument("--page", action="append", choices=list(BROWSER_PAGES), help="default: every page")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warm", type=int, default=3, help="warm loads per cold one")
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/agentwatch-dashboard-ab"))
    args = parser.parse_args(argv)
    versions = {name: Path(code).resolve() for name, _, code in (v.partition("=") for v in args.version)}
    result = compare(
        versions, args.page or list(BROWSER_PAGES), args.data_dir, spans=args.spans, rounds=args.rounds, warm=args.warm
    )
    print("median over rounds:")
    for case, r in result.items():
        print(
            f"  {case:34} cold {r['cold_ms']:6} warm {r['warm_ms']:6} "
            f"main thread {r['cold_main_thread_ms']:6} / {r['warm_main_thread_ms']:6} load {r['load']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
