"""OTLP trace ingestion: decoding of ``ExportTraceServiceRequest`` bodies (protobuf and the
OTLP JSON mapping), the HTTP route ``POST /v1/traces`` and the shared pipeline into the
spool and writer."""
