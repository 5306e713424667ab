"""The Overview's cost-rate card read in real Chromium during ``agentwatch demo``'s cost spike.

Runs the demo (its own data directory and ports), reads the "Cost / hour" card of the dashboard's
Overview every few seconds from 30 s into the spike to its end, and afterwards compares each
reading with what the complete one-minute buckets hold once every span has arrived: a reading
passes when it shows no decrease against the baseline, and is within 25 % of the settled bucket
it names or says the bucket is still filling. Then the 24 h, 7 d and 30 d views are read for the
demo's spend per day. Issue #33's acceptance; figures to ``bench/results/demo_spike.json``.

    python -m bench.demo_spike --duration 420
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agentwatch_api.client import CollectorClient
from bench import report
from bench.dashboard_render import _chromium

_CARD = """
return Array.from(document.querySelectorAll('.aw-card')).map(c => ({
  label: (c.querySelector('.aw-card-label') || {}).textContent || '',
  value: (c.querySelector('.aw-card-value') || {}).textContent || '',
  delta: (c.querySelector('.aw-card-delta') || {}).textContent || '',
  help: (c.querySelector('.aw-card-help') || {}).title || ''}));
"""
_MONEY = re.compile(r"\$([0-9][0-9,]*\.?[0-9]*)")


def _money(text: str) -> float | None:
    found = _MONEY.search(text)
    return float(found.group(1).replace(",", "")) if found else None


class Demo:
    """``agentwatch demo`` in a subprocess; its log lines are kept and watched."""

    def __init__(self, data_dir: Path, duration: int, offset: int) -> None:
        cmd = [sys.executable, "-m", "agentwatch", "demo", "--duration", str(duration), "--data-dir", str(data_dir)]
        cmd += ["--no-browser", "--port-offset", str(offset)]  # keeps serving: the figures are read after
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip()))

    def wait_for(self, text: str, timeout_s: float) -> float:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for t, line in self.lines:
                if text in line:
                    return t
            time.sleep(0.5)
        raise RuntimeError(f"the demo never said {text!r}; its log:\n" + "\n".join(line for _, line in self.lines))


def _read_card(driver: Any, url: str, label: str) -> dict[str, str] | None:
    driver.get(url)
    deadline = time.time() + 60
    while time.time() < deadline:
        cards = {c["label"]: c for c in driver.execute_script(_CARD)}
        if label in cards and cards[label]["value"]:
            return cards[label]
        time.sleep(0.5)
    return None


def _read_key(data_dir: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "agentwatch", "keys", "create", "--project", "demo", "--scope", "read"]
        + ["--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


_RANGE = """
const [label] = arguments;
const box = Array.from(document.querySelectorAll('[data-testid="stSelectbox"]'))
  .find(b => b.textContent.includes('Time range'));
box.querySelector('[role="combobox"], input, div[data-baseweb="select"]').click();
return true;
"""
_OPTION = """
const [label] = arguments;
const li = Array.from(document.querySelectorAll('li[role="option"]')).find(o => o.textContent.trim() === label);
if (li) { li.click(); return true; } return false;
"""


def _spike_readings(driver: Any, demo: Demo, client: CollectorClient, url: str, every_s: float) -> list[dict[str, Any]]:
    """The Cost / hour card from 30 s into the spike until its traffic ends, with the watermark then."""
    spike_at = demo.wait_for("phase 2/2: cost spike", 900)
    while time.time() < spike_at + 30:
        time.sleep(0.5)
    readings = []
    while not any("after the spike" in line for _, line in demo.lines):
        started = time.time()
        card = _read_card(driver, url, "Cost / hour")
        fresh = client.freshness()
        readings.append({"at": started, "complete_until": fresh.complete_until, "card": card})
        time.sleep(max(0.0, every_s - (time.time() - started)))
    return readings


def _judge(readings: list[dict[str, Any]], client: CollectorClient) -> list[dict[str, Any]]:
    """Each reading against the minute bucket it named, as that bucket holds once settled."""
    lo = min(r["at"] for r in readings) - 3600
    series = client.timeseries("cost_usd", start=lo // 60 * 60, end=time.time() // 60 * 60 + 60, step_s=60)
    settled = {p.t: p.value or 0.0 for p in series.points}
    out = []
    for r in readings:
        card = r["card"] or {}
        bucket = (r["complete_until"] // 60) * 60 - 60  # the last bucket ending before the watermark
        truth = settled.get(bucket, 0.0) * 60
        shown = _money(card.get("value", ""))
        decrease = card.get("delta", "").lstrip().startswith(("-", "−"))
        partial_said = "still filling" in card.get("help", "")
        within = shown is not None and truth > 0 and abs(shown - truth) <= 0.25 * truth
        out.append(
            {
                "at": r["at"],
                "shown_usd_per_h": shown,
                "delta": card.get("delta"),
                "settled_usd_per_h": truth,
                "decrease": decrease,
                "within_25pct": within,
                "marks_partial": partial_said,
                "ok": not decrease and (within or partial_said),
            }
        )
    return out


def _long_ranges(driver: Any, url: str) -> dict[str, dict[str, str]]:
    """The Cost and the per-day cards over 24 h, 7 and 30 days, picked in the sidebar."""
    seen = {}
    for label in ("Last 24 hours", "Last 7 days", "Last 30 days"):
        driver.get(url)
        _read_card(driver, url, "Cost")
        driver.execute_script(_RANGE, label)
        time.sleep(1)
        driver.execute_script(_OPTION, label)
        time.sleep(3)
        cards = {c["label"]: c["value"] for c in driver.execute_script(_CARD)}
        seen[label] = {k: v for k, v in cards.items() if k in ("Cost", "Cost / day", "Cost / hour", "Month to date")}
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=420)
    parser.add_argument("--port-offset", type=int, default=300)
    parser.add_argument("--every-s", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/demo_spike.json"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="aw-demo-spike-"))
    demo = Demo(tmp / "data", args.duration, args.port_offset)
    url = f"http://127.0.0.1:{8501 + args.port_offset}/"
    collector = f"http://127.0.0.1:{4318 + args.port_offset}"
    driver = None
    try:
        demo.wait_for("phase 1/2", 300)
        client = CollectorClient(collector, _read_key(tmp / "data"))
        driver = _chromium(tmp)
        readings = _spike_readings(driver, demo, client, url, args.every_s)
        demo.wait_for("runs recorded", args.duration + 900)
        time.sleep(20)  # the last spans settle (the watermark's own delay)
        judged = _judge(readings, client)
        ranges = _long_ranges(driver, url)
    finally:
        if driver is not None:
            driver.quit()
        demo.proc.terminate()
        demo.proc.wait(60)
    figures = {
        "duration_s": args.duration,
        "readings": judged,
        "ranges": ranges,
        "all_ok": all(r["ok"] for r in judged),
    }
    lines = [
        f"| {time.strftime('%H:%M:%S', time.gmtime(r['at']))} | {r['shown_usd_per_h']} | {r['delta']} | "
        f"{r['settled_usd_per_h']:.2f} | {'yes' if r['ok'] else 'NO'} |"
        for r in judged
    ]
    markdown = "\n".join(
        [
            f"# Cost / hour card during the demo's spike ({report.machine()})",
            "",
            f"`python -m bench.demo_spike --duration {args.duration}`",
            "",
            "| read at (UTC) | card $/h | delta | settled bucket $/h | ok |",
            "|---|---:|---|---:|---|",
            *lines,
            "",
            *(f"- {label}: {cards}" for label, cards in ranges.items()),
        ]
    )
    print(markdown)
    report.write(args.out, figures, markdown)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
