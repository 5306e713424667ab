"""The dashboard's entry point: ``streamlit run dashboard/app.py`` (or ``agentwatch dashboard``).

Runs before every page: sets the layout, gates access (login or the open-mode banner),
draws the shared sidebar filters, then hands over to the chosen page.
"""

from __future__ import annotations

import streamlit as st

from agentwatch_platform.dashboard import projects, ui

MAIN_CSS = '[data-testid="stMainBlockContainer"] {padding-left: 2rem; padding-right: 2rem; max-width: none;}'
PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page("views/runs.py", title="Runs", icon=":material/list:"),
    st.Page("views/run_detail.py", title="Run detail", icon=":material/account_tree:", url_path="run"),
    st.Page("views/spans.py", title="Spans", icon=":material/manage_search:"),
    st.Page("views/cost.py", title="Cost", icon=":material/payments:"),
    st.Page("views/versions.py", title="Versions", icon=":material/difference:"),
    st.Page("views/users.py", title="Users", icon=":material/group:"),
    st.Page("views/sessions.py", title="Sessions", icon=":material/forum:"),
    st.Page("views/compare.py", title="Compare runs", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("views/engine.py", title="Engine", icon=":material/memory:"),
    st.Page("views/alerts.py", title="Alerts", icon=":material/notifications:"),
]

st.set_page_config(page_title="agentwatch", page_icon=":material/monitoring:", layout="wide")
# Wide pages use the width: Streamlit's 5 rem side margins cut the runs table's trace ids and the
# span tree's timeline at 1600 px. A style alone is drawn in no element's space.
st.html(f"<style>{MAIN_CSS}</style>")
authenticated = ui.login()
page = st.navigation(PAGES, position="sidebar" if authenticated else "hidden")
if not authenticated:
    st.stop()
if page.url_path == "" and st.query_params.get("run"):  # a deep link to the root: ?run=<trace>&span=<span>
    st.switch_page(PAGES[2], query_params=dict(st.query_params))
projects.sidebar()
ui.sidebar_filters()
page.run()
