"""Headless Debian Chromium driven by Selenium, and a running ``agentwatch dashboard`` to point it at."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from agentwatch_platform.dashboard import cards
from agentwatch_platform.reference_agent.supervisor import ProcessGroup
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

    def open(self, url: str, *, timeout_s: float = 60.0) -> Page:
        self.driver.get(url)
        return self.settle(timeout_s=timeout_s)

    def settle(self, *, timeout_s: float = 60.0) -> Page:
        """Wait until the script run ended and the page stopped changing (charts drawn)."""
        deadline, last, stable = time.monotonic() + timeout_s, None, 0
        while time.monotonic() < deadline:
            busy = self.driver.find_elements(
                By.CSS_SELECTOR, '[data-testid="stStatusWidget"], [data-testid="stSkeleton"]'
            )
            ready = self.driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] h1, [data-testid="stForm"]')
            snapshot = self.driver.execute_script("return document.querySelectorAll('*').length")
            stable = stable + 1 if not busy and ready and snapshot == last else 0
            if stable >= 3:
                return self
            last = snapshot
            time.sleep(0.3)
        raise AssertionError(f"{self.driver.current_url} did not finish rendering in {timeout_s} s")

    def metrics(self) -> dict[str, str]:
        """label -> value of every figure: ``st.metric`` cards and ``dashboard.cards`` HTML cards."""
        found = {}
        for box in self.driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'):
            label = box.find_element(By.CSS_SELECTOR, '[data-testid="stMetricLabel"]').text.strip()
            found[label] = box.find_element(By.CSS_SELECTOR, '[data-testid="stMetricValue"]').text.strip()
        for box in self.driver.find_elements(By.CSS_SELECTOR, f".{cards.CARD_CLASS}"):
            label = box.find_element(By.CSS_SELECTOR, f".{cards.LABEL_CLASS}").text.strip()
            found[label] = box.find_element(By.CSS_SELECTOR, f".{cards.VALUE_CLASS}").text.strip()
        return found

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
        return [t.get_attribute("data-key") for t in self.driver.find_elements(By.CSS_SELECTOR, "table.aw-table")]

    def table_rows(self, key: str) -> list[dict[str, str]]:
        """A ``dashboard.tables`` table's rows as drawn: header label -> cell text."""
        table = self.driver.find_element(By.CSS_SELECTOR, f'table.aw-table[data-key="{key}"]')
        return self.driver.execute_script(
            """
            const table = arguments[0];
            const heads = [...table.tHead.rows[0].cells].map(c => c.textContent.replace(/ [↑↓]$/, ''));
            return [...table.tBodies[0].rows].map(r => Object.fromEntries([...r.cells].map((c, i) => [heads[i], c.textContent])));
            """,
            table,
        )

    def click_table_row(self, key: str, row: int = 0, *, settle: bool = True) -> Page:
        """Click a cell (not the link) of ``row`` of the ``dashboard.tables`` table ``key`` (a
        live page, never still for long, is not waited for: ``settle=False``)."""
        table = self.driver.find_element(By.CSS_SELECTOR, f'table.aw-table[data-key="{key}"]')
        cell = table.find_elements(By.CSS_SELECTOR, "tbody tr")[row].find_elements(By.TAG_NAME, "td")[1]
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        cell.click()
        time.sleep(0.5)
        return self.settle() if settle else self

    def click_label(self, text: str) -> Page:
        """Click a widget's label (a radio option, a toggle, a checkbox) by its text."""
        self.driver.find_element(By.XPATH, f"//label[contains(., '{text}')]").click()
        time.sleep(0.3)
        return self.settle()

    def screenshot(self, folder: Path, name: str) -> Path:
        path = folder / f"{name}.png"
        height = self.driver.execute_script("return document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        self.driver.set_window_size(1600, max(1200, min(int(height or 0) + 100, 8000)))
        self.settle()
        self.driver.save_screenshot(str(path))
        return path
