"""What every page shares: the login, the client, cached queries, filters, errors and units."""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import streamlit as st
import streamlit.components.v1 as components

from agentwatch_api.client import (
    AuthError,
    CollectorClient,
    CollectorError,
    CollectorUnavailable,
    NotFound,
)
from agentwatch_api.labels import metric_label as metric_label
from agentwatch_api.labels import unit_of as unit_of
from agentwatch_api.schemas import FilterValues, TimeSeries
from agentwatch_platform.dashboard.config import DashboardConfig
from agentwatch_platform.dashboard.formatting import BLANK as BLANK
from agentwatch_platform.dashboard.formatting import MONEY_RESIDUE_USD as MONEY_RESIDUE_USD
from agentwatch_platform.dashboard.formatting import fmt as fmt
from agentwatch_platform.dashboard.formatting import fmt_change as fmt_change
from agentwatch_platform.dashboard.formatting import fmt_delta as fmt_delta
from agentwatch_platform.dashboard.formatting import fmt_time as fmt_time
from agentwatch_platform.dashboard.formatting import plural as plural

_TTL_S = DashboardConfig.from_env().cache_ttl_s
OPEN_MODE_BANNER = (
    "Open local mode: this dashboard requires no login. Anyone who can reach it sees this project's data."
)
DEMO_HINT = "Run `agentwatch demo` (collector, simulated engine and reference agent) or point your agent's SDK at the collector."

RANGES: dict[str, tuple[int, int]] = {  # label -> (seconds, bucket step)
    "Last 15 minutes": (900, 15),
    "Last hour": (3600, 60),
    "Last 6 hours": (6 * 3600, 300),
    "Last 24 hours": (86400, 900),
    "Last 7 days": (7 * 86400, 3 * 3600),
    "Last 30 days": (30 * 86400, 12 * 3600),
}
ALL = "(all)"
_FAILED_LOGIN_DELAY_S = 1.0  # slows guessing down; the collector rate-limits keys too

# --- login -----------------------------------------------------------------------------


def config() -> DashboardConfig:
    """Read on every rerun, so a test (or a restart) with other variables sees them."""
    return DashboardConfig.from_env()


def login() -> bool:
    """Gate the app: True once the visitor may see data (open mode, password or a valid key)."""
    cfg = config()
    mode = cfg.login_mode
    if mode == "open":
        st.warning(OPEN_MODE_BANNER, icon=":material/lock_open:")
        if st.session_state.get("aw_api_key") not in cfg.api_keys:
            grant(cfg.api_keys)
        return True
    if st.session_state.get("aw_api_key") is not None:
        _sync_cookie()
        return True
    restored = _sessions().get(st.context.cookies.get(SESSION_COOKIE) or "")
    if restored is not None:  # a reload, or a deep link opened in the same browser
        grant(restored)
        st.session_state["aw_session"] = st.context.cookies.get(SESSION_COOKIE)
        return True
    _sync_cookie()
    st.title("agentwatch")
    with st.form("login"):
        label = "Dashboard password" if mode == "password" else "Project API key"
        secret = st.text_input(label, type="password", key="aw_login_secret")
        submitted = st.form_submit_button("Log in")
    if submitted:
        _try_login(cfg, secret)
    if st.session_state.get("aw_api_key") is None:
        st.info(
            f"This dashboard requires a login: enter the {label.lower()}."
            + (" Create a key with `agentwatch keys create`." if mode == "key" else "")
        )
        return False
    st.rerun()
    return True


def _try_login(cfg: DashboardConfig, secret: str) -> None:
    if cfg.login_mode == "password":
        if hmac.compare_digest(secret.encode(), cfg.password.encode()):
            grant(cfg.api_keys)
            _remember(cfg.api_keys)
        else:
            time.sleep(_FAILED_LOGIN_DELAY_S)
            st.error("Wrong password.")
        return
    try:
        with CollectorClient(cfg.collector_url, secret, timeout_s=cfg.timeout_s) as probe:
            probe.filters()
    except AuthError:
        time.sleep(_FAILED_LOGIN_DELAY_S)
        st.error("The collector rejected this API key (unknown or revoked).")
    except CollectorError as exc:
        st.error(f"Cannot check the key: {exc}")
    else:
        grant((secret,))
        _remember((secret,))


def grant(keys: tuple[str, ...]) -> None:
    """The project keys this session may query with, the first one in use (``dashboard.projects``
    names their projects and switches between them)."""
    st.session_state["aw_keys"] = tuple(keys) or ("",)
    st.session_state["aw_api_key"] = st.session_state["aw_keys"][0]


def logout() -> None:
    st.session_state.pop("aw_api_key", None)
    st.session_state.pop("aw_keys", None)
    _sessions().drop(st.context.cookies.get(SESSION_COOKIE) or "")
    _sessions().drop(st.session_state.pop("aw_session", ""))
    st.session_state["aw_cookie"] = ""  # the next run clears the browser's cookie


# --- sessions that survive a reload ------------------------------------------------------------

SESSION_COOKIE = "agentwatch_session"
SESSION_TTL_S = 12 * 3600


class SessionStore:
    """Login sessions of this dashboard process: a random token (the browser's cookie, which
    carries no secret) -> the API keys the session may query with (the one in use first), until
    it expires. A restart of the dashboard forgets them all: everyone logs in again."""

    def __init__(self, *, clock: Any = time.time) -> None:
        self._sessions: dict[str, tuple[tuple[str, ...], float]] = {}
        self._clock = clock

    def create(self, keys: tuple[str, ...]) -> str:
        token = secrets.token_urlsafe(32)
        now = self._clock()
        self._sessions = {t: v for t, v in self._sessions.items() if v[1] > now}  # expired ones go
        self._sessions[token] = (keys, now + SESSION_TTL_S)
        return token

    def get(self, token: str) -> tuple[str, ...] | None:
        found = self._sessions.get(token) if token else None
        return found[0] if found is not None and found[1] > self._clock() else None

    def update(self, token: str, keys: tuple[str, ...]) -> None:
        """A live session's keys after a project switch or an added project (its expiry kept)."""
        if self.get(token) is not None:
            self._sessions[token] = (keys, self._sessions[token][1])

    def drop(self, token: str) -> None:
        self._sessions.pop(token, None)


@st.cache_resource(show_spinner=False)
def _sessions() -> SessionStore:
    return SessionStore()


def _remember(keys: tuple[str, ...]) -> None:
    """After a login: a session token for the browser to keep (set by the next run)."""
    token = _sessions().create(keys)
    st.session_state["aw_session"] = token
    st.session_state["aw_cookie"] = token


def remember_keys(keys: tuple[str, ...]) -> None:
    """The keys a reload restores, after a switch of project or an added one."""
    _sessions().update(st.session_state.get("aw_session") or "", keys)


def _sync_cookie() -> None:
    """Write (or clear, when empty) the session cookie the last login or logout asked for. A
    script in a zero-height component sets it on the page's own origin."""
    token = st.session_state.pop("aw_cookie", None)
    if token is None:
        return
    age = SESSION_TTL_S if token else 0
    components.html(
        f"<script>window.parent.document.cookie = '{SESSION_COOKIE}={token}; path=/; "
        f"max-age={age}; SameSite=Strict';</script>",
        height=0,
    )


P = ParamSpec("P")
R = TypeVar("R")


# --- queries ---------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _client(url: str, key: str, timeout_s: float) -> CollectorClient:
    return CollectorClient(url, key, timeout_s=timeout_s)


def _target() -> tuple[str, str, float]:
    cfg = config()
    return cfg.collector_url, st.session_state.get("aw_api_key") or "", cfg.timeout_s


# Query results are kept as they are, not copied (``cache_resource``, not ``cache_data``): a copy is
# a pickle round trip on every rerun, 0.3-0.5 s for a 10,000-span run's detail on the 2-core machine,
# twice a load. The pages only read them (they build new lists and frames from them).
@st.cache_resource(ttl=_TTL_S, show_spinner=False, max_entries=500)
def _cached(target: tuple[str, str, float], method: str, kwargs: tuple[tuple[str, Any], ...]) -> Any:
    return getattr(_client(*target), method)(**dict(kwargs))


def viewer() -> str:
    """Who is asking (the collector and the key, hashed): part of the key of any cache shared by
    sessions, so a session never sees what another project's key fetched."""
    url, key, _ = _target()
    return hashlib.sha256(f"{url}\n{key}".encode()).hexdigest()[:16]


def clear_query_cache() -> None:
    """Forget every query result (``fetch``, ``fetch_later``, ``fetch_together``)."""
    _cached.clear()
    _together.clear()


def fetch(method: Callable[Concatenate[CollectorClient, P], R], *_: P.args, **kwargs: P.kwargs) -> R:
    """A query API call (a ``CollectorClient`` method and its keyword arguments, checked by the
    type checker), reused for ``cache_ttl_s`` across reruns (filters, clicks, pages)."""
    return _cached(_target(), method.__name__, tuple(sorted(kwargs.items())))  # type: ignore[no-any-return]


@st.cache_resource(show_spinner=False)
def _background() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentwatch-later")


def fetch_later(method: Callable[Concatenate[CollectorClient, P], R], *_: P.args, **kwargs: P.kwargs) -> Future[R]:
    """``fetch`` started now, its result awaited later (``.result()``): the page draws what it
    already has (the overview's cards and charts) while a slower query runs."""
    return _background().submit(_cached, _target(), method.__name__, tuple(sorted(kwargs.items())))


@st.cache_resource(ttl=_TTL_S, show_spinner=False, max_entries=100)
def _together(
    target: tuple[str, str, float], calls: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]
) -> dict[str, Any]:
    api = _client(*target)
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="agentwatch-fetch") as pool:
        futures = {name: pool.submit(getattr(api, method), **dict(kwargs)) for name, method, kwargs in calls}
        return {name: future.result() for name, future in futures.items()}


@dataclass(frozen=True)
class Call:
    """One query API call for ``fetch_together``: a ``CollectorClient`` method's name and its
    keyword arguments, made by ``call`` (which the type checker checks)."""

    method: str
    kwargs: tuple[tuple[str, Any], ...]


def call(method: Callable[Concatenate[CollectorClient, P], Any], *_: P.args, **kwargs: P.kwargs) -> Call:
    return Call(method.__name__, tuple(sorted(kwargs.items())))


def fetch_together(**calls: Call) -> dict[str, Any]:
    """Several query API calls at once, in parallel: name -> result, as ``fetch`` gives each (a
    page waits for its slowest query, not for their sum); the first error is raised."""
    return _together(_target(), tuple((name, c.method, c.kwargs) for name, c in sorted(calls.items())))


def series_calls(specs: Sequence[tuple[str, str]], **common: Any) -> dict[str, Call]:
    """``fetch_together``'s calls for (metric, group_by) series: one request per group_by."""
    by_group: dict[str, list[str]] = {}
    for metric, group_by in specs:
        by_group.setdefault(group_by, []).append(metric)
    return {
        f"series by {g}": call(CollectorClient.timeseries_set, metrics=tuple(metrics), group_by=g, **common)
        for g, metrics in by_group.items()
    }


def series_of(results: dict[str, Any]) -> dict[str, TimeSeries]:
    """The series among ``fetch_together``'s results (of ``series_calls``): metric -> series."""
    return {
        metric: found for name, got in results.items() if name.startswith("series by ") for metric, found in got.items()
    }


# --- filters ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step_s: int
    label: str

    def previous(self) -> tuple[float, float]:
        return self.start - (self.end - self.start), self.start


def window() -> Window:
    """The time range chosen in the sidebar, its buckets aligned to their step (UTC): the range
    ends with the bucket now filling, so no bucket is cut (the collector reads whole minutes from
    its rollups) and reruns within a bucket reuse cached queries."""
    label = st.session_state.get("aw_range", "Last hour")
    seconds, step = RANGES.get(label, RANGES["Last hour"])
    end = math.floor(time.time() / step) * step + step
    return Window(end - seconds, end, step, label)


def partial_from(series: Iterable[TimeSeries | None]) -> float | None:
    """The start of the first bucket that the collector says is still filling (``SeriesPoint.partial``)."""
    starts = [p.t for ts in series if ts is not None for p in ts.points if p.partial]
    return min(starts) if starts else None


RANGE_SLUGS = dict(zip(RANGES, ("15m", "1h", "6h", "24h", "7d", "30d"), strict=True))  # ?range=7d
URL_FILTERS = {"range": "aw_range", "agent": "aw_agent", "model": "aw_model"}  # URL parameter -> widget key


def sidebar_filters() -> None:
    """Time range, agent and model, shared by every page (widget state survives page changes)
    and kept in the URL (``?range=7d&agent=researcher``), so a screen is shared as a link."""
    _filters_from_url()
    with st.sidebar:
        st.selectbox("Time range", list(RANGES), index=1, key="aw_range", on_change=_filters_to_url)
        win = window()
        try:
            values = _filter_values(_target(), math.floor(win.start / 60) * 60, math.ceil(win.end / 60) * 60)
            agents, models = values.agents, values.models
        except CollectorError:
            agents, models = [], []
        st.selectbox("Agent", _options(agents, "aw_agent"), key="aw_agent", on_change=_filters_to_url)
        st.selectbox("Model", _options(models, "aw_model"), key="aw_model", on_change=_filters_to_url)
        cfg = config()
        st.caption(f"Collector: {cfg.collector_url}" + _ingest_line())
        if cfg.login_mode != "open":
            st.button("Log out", on_click=logout)
    _filters_to_url()


def _options(names: Sequence[str], key: str) -> list[str]:
    """A filter's choices; the one chosen stays among them (a shared link's agent, quiet in this range)."""
    chosen_ = st.session_state.get(key)
    return [ALL, *names] + ([chosen_] if chosen_ and chosen_ != ALL and chosen_ not in names else [])


def _filters_from_url() -> None:
    """A link's filters, set before the widgets are drawn; a URL without them changes nothing
    (a page change keeps the session's filters)."""
    params = st.query_params
    by_slug = {slug: label for label, slug in RANGE_SLUGS.items()}
    if (label := by_slug.get(params.get("range", ""))) is not None:
        st.session_state["aw_range"] = label
    for param in ("agent", "model"):
        if value := params.get(param, ""):
            st.session_state[URL_FILTERS[param]] = value


def _filters_to_url() -> None:
    """The filters that differ from the defaults, into the URL; the defaults leave it."""
    wanted = {
        "range": RANGE_SLUGS.get(st.session_state.get("aw_range", "Last hour"), "1h"),
        "agent": chosen("aw_agent") or "",
        "model": chosen("aw_model") or "",
    }
    for param, value in wanted.items():
        if value and not (param == "range" and value == "1h"):
            if st.query_params.get(param) != value:
                st.query_params[param] = value
        elif param in st.query_params:
            del st.query_params[param]


FILTER_VALUES_TTL_S = 60.0


@st.cache_data(ttl=FILTER_VALUES_TTL_S, show_spinner=False, max_entries=100)
def _filter_values(target: tuple[str, str, float], start: float, end: float) -> FilterValues:
    """The agents and models of the range, on whole minutes, reused for a minute (a new agent
    shows in the sidebar within a minute): every page load asks before its title shows."""
    return _client(*target).filters(start=start, end=end)


def _ingest_line() -> str:
    """The collector's ingestion health in a few words (lag, queue, store), or nothing."""
    try:
        status = fetch(CollectorClient.ingest)
    except CollectorError:
        return ""
    lag = "" if status.lag_p95_s is None else f" · ingest lag p95 {fmt(status.lag_p95_s, 's')}"
    store = "" if status.store_available else " · store DOWN: spans are spooled"
    return f"{lag} · {plural(status.queued_spans, 'span')} queued{store}"


REFRESH_CHOICES = [5, 10, 30, 60]  # seconds (query results are reused for cache_ttl_s, 5 s by default)


def refresh_every(toggle_key: str, every_key: str, *, on: bool = False, label: str = "Auto-refresh") -> int | None:
    """A page's auto-refresh switch and interval in the sidebar: the seconds between refreshes of
    its live part (an ``st.fragment(run_every=...)``), or None when switched off. The interval
    shows only while it is on, as a select box like the filters': a slider's code alone cost about
    0.3 s of every page load in headless Chromium on the 2-core machine."""
    with st.sidebar:
        if not st.toggle(label, value=on, key=toggle_key):
            return None
        every = st.selectbox("Every", REFRESH_CHOICES, index=1, key=every_key, format_func=lambda s: f"{s} s")
    return int(every)


def chosen(key: str) -> str | None:
    value = st.session_state.get(key, ALL)
    return None if value in (ALL, None, "") else value


def agent_model() -> dict[str, Any]:
    return {"agent": chosen("aw_agent"), "model": chosen("aw_model")}


# --- errors and empty states -------------------------------------------------------------


@contextmanager
def guarded(what: str) -> Iterator[None]:
    """Show a query API failure as a message, never as a stack trace."""
    try:
        yield
    except AuthError as exc:
        st.error(
            f"The collector refused the API key while loading {what} ({exc.detail}). Log out and log in with a valid key."
        )
    except NotFound as exc:
        st.warning(f"Not found while loading {what}: {exc.detail}")
    except CollectorUnavailable as exc:
        st.error(f"The collector is unreachable: {exc}. Start it with `agentwatch collector`.")
    except CollectorError as exc:
        st.error(f"Could not load {what}: {exc}")


def empty(message: str, command: str = "") -> None:
    st.info(f"{message} {command or DEMO_HINT}")


def typed_number(
    where: Any,
    label: str,
    key: str,
    *,
    what: str = "number",
    whole: bool = False,
    value: str = "",
    placeholder: str = "any",
    help: str | None = None,
) -> float | None:
    """A number of 0 or more typed as text in ``where`` (the page, a column, the sidebar); blank:
    None, and a typo is said under the box and read as None. Text, not ``st.number_input``: that
    widget's code alone cost ~0.2 s of each page load in headless Chromium (bench.dashboard_ab)."""
    typed = where.text_input(label, value=value, key=key, placeholder=placeholder, help=help)
    try:
        return read_number(typed, whole=whole)
    except ValueError:
        where.error(number_typo(label, typed, what), icon=":material/error:")
        return None


def number_typo(label: str, typed: str | None, what: str = "number") -> str:
    """What a typo in a number box is told (``typed_number``, and boxes drawn only at times)."""
    return f"{label}: {typed!r} is not a {what} (0 or more)"


def keep_state(defaults: dict[str, Any]) -> None:
    """Keeps widgets' values while they are not drawn (a closed popover or expander drawing them
    only while open): Streamlit drops the state of a widget not drawn in a run, not a value set."""
    for key, default in defaults.items():
        st.session_state[key] = st.session_state.get(key, default)


MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def plain(text: str) -> str:
    """``text`` (a user id, a run's name: anything from the store) shown as itself in Markdown."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def read_number(typed: str | None, *, whole: bool = False) -> float | None:
    """What ``typed_number`` reads from its text: blank: None; not a number of 0 or more: ValueError."""
    text = (typed or "").strip().lstrip("$").replace(",", "")
    if not text:
        return None
    number = float(int(text)) if whole else float(text)
    if not (number >= 0 and math.isfinite(number)):
        raise ValueError(typed)
    return number
