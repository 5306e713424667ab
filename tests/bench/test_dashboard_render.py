"""bench.dashboard_render judges each page against the floor that draws its elements, and its
floor app draws those elements (the dashboard's frame and the page's widgets) without a query."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from bench import dashboard_render

FLOOR_APP = Path(dashboard_render.__file__).with_name("dashboard_floor_app.py")


def _browser(cold: dict[str, int], load: float) -> dict[str, dict[str, float]]:
    return {
        name: {"cold_ms": ms, "warm_p50_ms": ms / 2, "warm_max_ms": ms / 2, "load_average": load}
        for name, ms in cold.items()
    }


def test_the_report_gives_each_page_its_cold_figure_over_its_floor() -> None:
    browser = _browser(
        {"floor: overview's elements": 1000, "floor: run detail's elements": 1500, "overview": 1300},
        load=1.2,
    )
    browser["run_detail_10k_spans"] = {**browser["overview"], "cold_ms": 2400, "load_average": 2.5}
    page = dashboard_render.render(
        {
            "command": "python -m bench.dashboard_render",
            "machine": "m",
            "spans": 10,
            "pages": {},
            "targets_met": {},
            "browser": browser,
            "browser_targets_met": {},
        }
    )
    assert "| overview | 1300 (–) | 1.30 |" in page
    assert "| run_detail_10k_spans | 2400 (–) | 1.60 |" in page
    assert "Not a quiet run: load >= 2.0 as these began: run_detail_10k_spans." in page


def test_the_floor_app_draws_the_dashboards_frame_and_the_pages_widgets() -> None:
    overview = AppTest.from_file(str(FLOOR_APP), default_timeout=60)
    for key, value in {"frame": "1", "tabs": "1", "cards": "18", "svg": "4"}.items():
        overview.query_params[key] = value
    overview.run()
    assert not overview.exception
    assert [box.label for box in overview.selectbox] == ["Time range", "Agent", "Model"]
    assert len(overview.get("segmented_control")) == 1

    run_detail = AppTest.from_file(str(FLOOR_APP), default_timeout=60)
    for key, value in {"frame": "1", "controls": "1", "charts": "4"}.items():
        run_detail.query_params[key] = value
    run_detail.run()
    assert not run_detail.exception
    assert len(run_detail.radio) == 1 and len(run_detail.get("vega_lite_chart")) == 4


class _Machine:
    """A load average that falls as the (fake) clock moves on."""

    def __init__(self, loads: list[float]) -> None:
        self.loads, self.now = loads, 0.0

    def load(self) -> float:
        return self.loads[min(int(self.now // 5), len(self.loads) - 1)]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_settle_waits_until_the_load_falls_below_the_threshold() -> None:
    machine = _Machine([3.2, 2.1, 1.4, 0.8, 0.5])
    got = dashboard_render.settle(1.0, 300, load=machine.load, sleep=machine.sleep, clock=lambda: machine.now)
    assert got == {"load": 0.8, "waited_s": 15, "threshold": 1.0}


def test_settle_gives_up_at_its_deadline_and_the_report_says_so() -> None:
    machine = _Machine([4.0])
    got = dashboard_render.settle(1.0, 20, load=machine.load, sleep=machine.sleep, clock=lambda: machine.now)
    assert got == {"load": 4.0, "waited_s": 20, "threshold": 1.0}
    lines = dashboard_render._settled_lines({"after_fill": got})
    assert lines[0] == (
        "Load average (1 min) waited for below 1.0: 4.00 after 20 s after the fill, before the script runs"
        " (the deadline passed first)."
    )
