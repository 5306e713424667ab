"""Headless Debian Chromium driven by Selenium, and a running ``agentwatch dashboard`` to point it at."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from agentwatch_platform.dashboard import cards
from agentwatch_platform.reference_agent.supervisor import ProcessGroup
from tests.support.poll import wait_until
from tests.support.ports import free_port

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,2200",
)
EXCEPTION_BOX = '[data-testid="stException"]'
# One look at the page: idle when Streamlit's run state (``data-test-script-state`` on stApp, what
# Streamlit's own end-to-end tests wait on) says no run is under way, no element is greyed out as
# stale, and a title or a form is drawn; size is the number of elements, to see it hold still.
_LOOK = """
const app = document.querySelector('[data-testid="stApp"]');
const busy = document.querySelector('[data-testid="stStatusWidget"], [data-testid="stSkeleton"]');
const ready = document.querySelector('[data-testid="stMain"] h1, [data-testid="stForm"]');
return {
  idle: !!app && app.getAttribute('data-test-script-state') === 'notRunning' && !busy && !!ready,
  size: document.querySelectorAll('*').length,
};
"""
# Counts the script runs that start from now on (window.__awRuns): a change of the run state to or
# from running, anywhere in the document, or a new stApp element (the app drawn anew, as after a
# reconnection: an observer of the old element alone saw nothing, once, under stress). A page
# loaded since has none (_RUNS_SEEN answers -1: the click navigated, which starts a run of its own).
# How long a page may take to render, or an action to start its script run: generous, because a
# loaded CI machine (a make test beside stress --cpu 8) once took over 60 s to start the run a
# click asked for; a page that never gets there still fails, only later.
WAIT_S = 180.0

_WATCH_RUNS = """
const first = document.querySelector('[data-testid="stApp"]');
window.__awRuns = 0;
if (window.__awRunWatch) window.__awRunWatch.disconnect();
window.__awRunWatch = new MutationObserver(records => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (app !== first) { window.__awRuns++; return; }
  for (const r of records)
    if (r.type === 'attributes' && (r.oldValue === 'running' || r.target.getAttribute(r.attributeName) === 'running'))
      window.__awRuns++;
});
window.__awRunWatch.observe(document.documentElement, {
  subtree: true, childList: true, attributes: true, attributeOldValue: true,
  attributeFilter: ['data-test-script-state'],
});
"""
_RUNS_SEEN = "return window.__awRuns === undefined ? -1 : window.__awRuns"


def start_dashboards(group: ProcessGroup, collector: str, flags: dict[str, list[str]]) -> dict[str, str]:
    """``agentwatch dashboard`` child processes started side by side; their URLs once each answers."""
    urls = {}
    for name, extra in flags.items():
        port = free_port()
        group.start(
            name,
            [sys.executable, "-m", "agentwatch", "dashboard", "--port", str(port), "--collector", collector, *extra],
            {"AGENTWATCH_DASHBOARD_CACHE_TTL_S": "1"},
        )
        urls[name] = f"http://127.0.0.1:{port}"
    for name, url in urls.items():
        group.wait_ready(name, url + "/_stcore/health", timeout_s=90)
    return urls


class Chromium(webdriver.Chrome):
    """A headless Chromium with a profile of its own, deleted when it quits (each left ~25 MB in /tmp)."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="agentwatch-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in CHROME_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.profile}")
        try:
            super().__init__(service=Service(CHROMEDRIVER), options=options)
        except Exception:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        self.set_page_load_timeout(60)

    def quit(self) -> None:
        try:
            super().quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


@dataclass
class Page:
    driver: WebDriver

    def open(self, url: str, *, timeout_s: float = WAIT_S) -> Page:
        self.driver.get(url)
        return self.settle(timeout_s=timeout_s)

    def settle(self, *, timeout_s: float = WAIT_S) -> Page:
        """Wait until the script run ended and the page stopped changing (charts drawn): Streamlit
        says no run is under way, nothing is greyed out, and the page's elements held still
        three looks in a row."""
        deadline, last, stable = time.monotonic() + timeout_s, None, 0
        while time.monotonic() < deadline:
            snapshot = self.driver.execute_script(_LOOK)
            stable = stable + 1 if snapshot["idle"] and snapshot["size"] == last else 0
            if stable >= 3:
                return self
            last = snapshot["size"]
            time.sleep(0.3)
        raise AssertionError(f"{self.driver.current_url} did not finish rendering in {timeout_s} s")

    def click(self, find: Callable[[], WebElement], *, settle: bool = True, timeout_s: float = WAIT_S) -> Page:
        """Click what ``find`` returns (found again if a rerun replaced it before the click), then
        wait as ``act`` does."""

        def clicked() -> None:
            for attempt in range(5):
                try:
                    element = find()
                    self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
                    element.click()
                    return
                except StaleElementReferenceException:
                    if attempt == 4:
                        raise

        return self.act(clicked, settle=settle, timeout_s=timeout_s)

    def act(self, action: Callable[[], object], *, settle: bool = True, timeout_s: float = WAIT_S) -> Page:
        """Do ``action`` (a click, a key) and wait for the script run it starts, seen in Streamlit's
        own run state rather than guessed by a sleep; then, unless ``settle=False``, for the page
        to settle."""
        self.driver.execute_script(_WATCH_RUNS)
        action()
        wait_until(lambda: self.driver.execute_script(_RUNS_SEEN) != 0, timeout_s, "the action started no script run")
        return self.settle(timeout_s=timeout_s) if settle else self

    def metrics(self) -> dict[str, str]:
        """label -> value of every figure: ``st.metric`` cards and ``dashboard.cards`` HTML cards
        (read in one script: a rerun cannot swap a card between finding it and reading it)."""
        return self.driver.execute_script(
            """
            const [card, label, value] = arguments, found = {};
            const text = (box, sel) => (box.querySelector(sel)?.innerText ?? '').trim();
            for (const box of document.querySelectorAll('[data-testid="stMetric"]'))
              found[text(box, '[data-testid="stMetricLabel"]')] = text(box, '[data-testid="stMetricValue"]');
            for (const box of document.querySelectorAll(`.${card}`))
              found[text(box, `.${label}`)] = text(box, `.${value}`);
            return found;
            """,
            cards.CARD_CLASS,
            cards.LABEL_CLASS,
            cards.VALUE_CLASS,
        )

    def truncated(self) -> list[str]:
        """Metric values and deltas drawn wider than their box (cut off with "…")."""
        return self.driver.execute_script(
            """
            const [card, value, delta] = arguments;
            return [...document.querySelectorAll(
                `[data-testid="stMetricValue"], [data-testid="stMetricDelta"], .${value}, .${delta}`)]
              .flatMap(box => [box, ...box.querySelectorAll('*')])
              .filter(el => el.scrollWidth > el.clientWidth + 1)
              .map(el => el.closest(`[data-testid="stMetric"], .${card}`).innerText.replace(/\\n/g, ' | '));
        """,
            cards.CARD_CLASS,
            cards.VALUE_CLASS,
            cards.DELTA_CLASS,
        )

    def text(self) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text

    def sidebar_text(self) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]').text

    def exceptions(self) -> list[str]:
        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, EXCEPTION_BOX)]

    def count(self, selector: str) -> int:
        return len(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def table_keys(self) -> list[str]:
        """The keys of the ``dashboard.tables`` tables on the page."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll('table.aw-table')].map(t => t.dataset.key)"
        )

    def table_rows(self, key: str) -> list[dict[str, str]]:
        """A ``dashboard.tables`` table's rows as drawn: header label -> cell text."""
        return self.driver.execute_script(
            """
            const table = document.querySelector(`table.aw-table[data-key="${arguments[0]}"]`);
            if (!table) throw new Error(`no table ${arguments[0]}`);
            const heads = [...table.tHead.rows[0].cells].map(c => c.textContent.replace(/ [↑↓]$/, ''));
            return [...table.tBodies[0].rows].map(r => Object.fromEntries([...r.cells].map((c, i) => [heads[i], c.textContent])));
            """,
            key,
        )

    def click_table_row(self, key: str, row: int = 0, *, settle: bool = True) -> Page:
        """Click a cell (not the link) of ``row`` of the ``dashboard.tables`` table ``key`` (a
        live page, never still for long, is not waited for: ``settle=False``)."""

        def cell() -> WebElement:
            table = self.driver.find_element(By.CSS_SELECTOR, f'table.aw-table[data-key="{key}"]')
            return table.find_elements(By.CSS_SELECTOR, "tbody tr")[row].find_elements(By.TAG_NAME, "td")[1]

        return self.click(cell, settle=settle)

    def click_label(self, text: str) -> Page:
        """Click a widget's label (a radio option, a toggle, a checkbox) by its text."""
        return self.click(lambda: self.driver.find_element(By.XPATH, f"//label[contains(., '{text}')]"))

    def choose(self, text: str, chosen: Callable[[], bool], *, tries: int = 3) -> Page:
        """Click the label ``text`` until ``chosen()`` holds, as a user clicks again a click that did
        nothing: beside ``stress --cpu 8`` a radio option clicked right after another page change was
        once followed by no script run at all (180 s), the option left as it was."""
        for attempt in range(tries):
            try:
                self.click_label(text)
            except AssertionError:
                if attempt == tries - 1:
                    raise
            try:
                wait_until(chosen, 15, f"clicking {text!r} {attempt + 1} times did not choose it", interval=0.3)
                return self
            except AssertionError:
                if attempt == tries - 1:
                    raise
        return self

    def screenshot(self, folder: Path, name: str) -> Path:
        path = folder / f"{name}.png"
        height = self.driver.execute_script("return document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        self.driver.set_window_size(1600, max(1200, min(int(height or 0) + 100, 8000)))
        self.settle()
        self.driver.save_screenshot(str(path))
        return path
