"""The store's SQL, one module per resource (runs, metrics, cost, engines, spans, ingest, ...).

Values are bound by ClickHouse (``{name:Type}``), never formatted in; the query services in
``collector.query`` pick a statement from here, bind it and shape its rows.
"""
