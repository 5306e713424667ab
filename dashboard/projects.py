"""The project a page shows, named on every page, and the switch between a session's projects.

A link may name its project (``?project=<name>``, e.g. a run's deep link): a session holding a
key of that project switches to it.

A project API key sees one project. A session holds the keys it was given (``ui.grant``: the
login's key, or every key of ``AGENTWATCH_API_KEY`` in password and open modes, comma-separated)
and any added here, and queries with one of them. The collector names each key's project
(``/api/filters``), so a key is checked when it is added and the names are never guessed.
"""

from __future__ import annotations

import streamlit as st

from agentwatch_api.client import AuthError, CollectorClient, CollectorError
from agentwatch_platform.dashboard import ui

SWITCH_KEY = "aw_project_switch"


@st.cache_data(ttl=300, show_spinner=False, max_entries=200)
def project_of(collector_url: str, key: str, timeout_s: float) -> str:
    """The project a key belongs to, as the collector says (errors are not cached)."""
    with CollectorClient(collector_url, key, timeout_s=timeout_s) as client:
        return client.filters(start=0, end=1).project


def _names(keys: tuple[str, ...]) -> dict[str, str]:
    """Project name -> key, by name, for the keys whose project the collector can name now."""
    cfg = ui.config()
    names: dict[str, str] = {}
    for key in keys:
        try:
            names.setdefault(project_of(cfg.collector_url, key, cfg.timeout_s) or "(unnamed)", key)
        except CollectorError:
            continue  # a revoked key or a collector down: the pages say so on their own
    return dict(sorted(names.items()))


def sidebar() -> None:
    """The project in use at the top of the sidebar; a switcher when the session has several."""
    keys: tuple[str, ...] = st.session_state.get("aw_keys") or (st.session_state.get("aw_api_key") or "",)
    names = _names(keys)
    if (wanted := st.query_params.pop("project", None)) in names:  # a link that names its project (?project=...)
        _use(names[wanted], keys)
        st.session_state.pop(SWITCH_KEY, None)
    current = next((name for name, key in names.items() if key == st.session_state.get("aw_api_key")), None)
    with st.sidebar:
        if len(names) > 1 and current is not None:
            st.selectbox(
                "Project",
                list(names),
                index=list(names).index(current),
                key=SWITCH_KEY,
                on_change=_switch,
                args=(names,),
                help="The projects this session holds a key of; every page shows the one chosen.",
            )
        else:
            st.markdown(f"Project: **{current or '–'}**")
        if ui.config().login_mode == "key":
            _add_form(keys)


def _switch(names: dict[str, str]) -> None:
    key = names[st.session_state[SWITCH_KEY]]
    _use(key, st.session_state.get("aw_keys") or (key,))


def _use(key: str, keys: tuple[str, ...]) -> None:
    """Query with ``key`` from now on, in this session and after a reload; the agent and model
    chosen belong to the other project."""
    ordered = (key, *(k for k in keys if k != key))
    ui.grant(ordered)
    ui.remember_keys(ordered)
    for name in ("aw_agent", "aw_model"):
        st.session_state.pop(name, None)


def _add_form(keys: tuple[str, ...]) -> None:
    with st.expander("Add a project"), st.form("aw_add_project", clear_on_submit=True, border=False):
        secret = st.text_input("Its API key (read scope)", type="password", key="aw_add_project_key")
        if st.form_submit_button("Add and switch") and secret.strip():
            _add(secret.strip(), keys)


def _add(secret: str, keys: tuple[str, ...]) -> None:
    cfg = ui.config()
    try:
        project = project_of(cfg.collector_url, secret, cfg.timeout_s)
    except AuthError:
        st.error("The collector rejected this API key (unknown, revoked or without the read scope).")
        return
    except CollectorError as exc:
        st.error(f"Cannot check the key: {exc}")
        return
    _use(secret, (*keys, secret))
    st.session_state.pop(SWITCH_KEY, None)  # the switcher shows the new project
    st.toast(f"Project {project} added")
    st.rerun()
