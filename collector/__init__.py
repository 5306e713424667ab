"""agentwatch collector: OTLP ingestion into ClickHouse and the query API."""
