"""Ingestion: OTLP over HTTP and gRPC (``otlp/``), decoding and normalisation into span rows,
bounds and redaction, the durable spool, the batching writer, and what the writer does after an
insert (runs listed from their first span, engine spans joined to the client's)."""
