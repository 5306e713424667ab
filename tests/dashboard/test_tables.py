"""The HTML table component's script (``dashboard.tables``) run in headless Chromium on its own,
fed hostile values: text stays text, a click reports its row, a header its column, the chooser
hides columns, and a long table draws a chunk at a time."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from agentwatch_platform.dashboard import tables
from tests.dashboard import browser
from tests.support.poll import wait_until
from tests.support.ports import free_port

HOSTILE = [
    '<img src=x onerror="window.__aw_xss = 1">',
    "<script>window.__aw_xss = 2</script>",
    '"><svg onload="window.__aw_xss = 3">',
]

# The component's module, mounted as Streamlit mounts it: its default export called with the data
# (JSON bytes, as tables.table sends it) and callbacks; the callbacks record what the page would be told.
HARNESS = """<!doctype html><html><head><style>{css}</style></head><body><div id="root"></div>
<script type="module">
import mount from './table.js';
window.__aw_events = [];
window.__aw_mount = (data) => mount({{
  data: new TextEncoder().encode(JSON.stringify(data)), parentElement: document.getElementById('root'),
  setTriggerValue: (name, value) => window.__aw_events.push(['trigger', name, value]),
  setStateValue: (name, value) => window.__aw_events.push(['state', name, value]),
}});
window.__aw_ready = true;
</script></body></html>"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("table")
    (folder / "table.js").write_text(tables._JS)
    (folder / "index.html").write_text(HARNESS.format(css=tables._CSS))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    d = browser.Chromium()
    yield d
    d.quit()


def _data(rows: list[tables.Row], **extra: object) -> dict:
    columns = [
        tables.Column("name", "name", sortable=True),
        tables.Column("cost", "cost", numeric=True, sortable=True),
        tables.Column("user", "user"),
        tables.Column("time", "timeline", timeline=True),
    ]
    return {
        "key": "t",
        "columns": [
            {"key": c.key, "label": c.label, "numeric": c.numeric, "sortable": c.sortable, "timeline": c.timeline}
            for c in columns
        ],
        "rows": [tables._row(r) for r in rows],
        "clickable": True,
        "chooser": True,
        "hidden": [],
        "sort": None,
        "max_height": 300,
        "selected": None,
        "chunk": None,
    } | extra


def _mount(driver: WebDriver, url: str, data: dict) -> None:
    driver.get(url)
    wait_until(
        lambda: driver.execute_script("return window.__aw_ready === true"), 60, "the table's page never got ready"
    )
    driver.execute_script("window.__aw_mount(arguments[0])", json.loads(json.dumps(data)))


def _events(driver: WebDriver) -> list:
    return driver.execute_script("return window.__aw_events")


@pytest.mark.browser
def test_hostile_values_stay_text_and_clicks_report_rows_headers_and_columns(driver: WebDriver, harness: str) -> None:
    rows = [
        tables.Row(f"r{i}", [text, "$0.01", text, text], href=f"./run?run=r{i}", bars={"time": (0.1, 0.5, "#29b5e8")})
        for i, text in enumerate(HOSTILE)
    ]
    _mount(driver, harness, _data(rows))
    assert driver.execute_script("return window.__aw_xss") is None
    assert not driver.find_elements(By.CSS_SELECTOR, "#root img, #root script, #root svg")
    cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "tbody tr td:nth-child(3)")]
    assert cells == HOSTILE  # shown as written
    driver.find_elements(By.CSS_SELECTOR, "tbody tr")[1].find_elements(By.TAG_NAME, "td")[1].click()
    driver.find_element(By.XPATH, "//th/button[text()='cost']").click()
    assert _events(driver) == [["trigger", "open", "r1"], ["trigger", "sort", "cost"]]
    assert "aw-selected" in driver.find_elements(By.CSS_SELECTOR, "tbody tr")[1].get_attribute("class")
    driver.find_element(By.CSS_SELECTOR, ".aw-table-tools summary").click()
    driver.find_element(By.XPATH, "//label[contains(., 'user')]/input").click()
    assert _events(driver)[-1] == ["state", "hidden", ["user"]]
    hidden = driver.find_elements(By.CSS_SELECTOR, "td.user")
    assert hidden and all(not c.is_displayed() for c in hidden)
    bar = driver.find_element(By.CSS_SELECTOR, "tbody tr .aw-bar")
    assert bar.get_attribute("style").replace(" ", "").startswith("left:10%;width:50%")


@pytest.mark.browser
def test_the_pager_reports_the_page_asked_for(driver: WebDriver, harness: str) -> None:
    _mount(driver, harness, _data([tables.Row("r0", ["a", "b", "c", "d"])], pager=[1, 40]))
    buttons = {b.text: b for b in driver.find_elements(By.CSS_SELECTOR, ".aw-table-pager button")}
    assert [b.is_enabled() for b in buttons.values()] == [False, False, True, True]  # on the first page
    assert driver.find_element(By.CSS_SELECTOR, ".aw-table-page").text == "Page 1 of 40"
    buttons["Next ›"].click()
    buttons["»"].click()
    assert _events(driver) == [["trigger", "page", "2"], ["trigger", "page", "40"]]


@pytest.mark.browser
def test_a_long_table_draws_a_chunk_then_the_selected_row_then_more_as_it_scrolls(
    driver: WebDriver, harness: str
) -> None:
    rows = [tables.Row(f"s{i}", [f"span {i}", "", "", f"+{i}"], depth=i % 3) for i in range(2_000)]
    _mount(driver, harness, _data(rows, chunk=300, selected="s700"))
    drawn = len(driver.find_elements(By.CSS_SELECTOR, "tbody tr"))
    # up to the selected row, which is highlighted and scrolled to (the chunk after it once in view)
    assert drawn in (701, 1_001)
    assert driver.find_element(By.CSS_SELECTOR, "tr.aw-selected").get_attribute("data-id") == "s700"
    assert f"{drawn:,} of 2,000 rows drawn" in driver.find_element(By.CSS_SELECTOR, ".aw-table-more").text
    driver.execute_script("document.querySelector('.aw-table-wrap').scrollTop = 1e9")
    wait_until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) > drawn, 60, "no next chunk drawn")
    assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) == drawn + 300  # the next chunk
    indent = driver.find_element(By.CSS_SELECTOR, 'tr[data-id="s2"] td').value_of_css_property("padding-left")
    assert float(indent.rstrip("px")) > float(
        driver.find_element(By.CSS_SELECTOR, 'tr[data-id="s0"] td').value_of_css_property("padding-left").rstrip("px")
    )  # a deeper span is indented
