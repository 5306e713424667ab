"""agentwatch dashboard: a Streamlit app over the collector's query API (``agentwatch dashboard``).

It reads only the query API with a project key, never the store's files; settings in
``dashboard.config``, pages in ``dashboard/views``, the API client in ``agentwatch_api.client``.
"""
