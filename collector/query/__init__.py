"""Reading the store for the API, one module per resource: ``runs``, ``metrics`` (time series),
``overview``, ``cost``, ``engines``, ``feedback``, ``spans``, ``users``, ``versions``, ``fleet``
(the fleet-wide ingest counters), with re-pricing, what-if estimates and measured lever savings.
``ranges`` holds what they share: a range checked, and where its figures come from.

Each router of ``collector.api`` calls its resource's module; the SQL lives in
``collector.storage.sql``.
"""
