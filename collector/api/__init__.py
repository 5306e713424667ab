"""The query API (``/api/...``) the dashboard and the alerts read."""
