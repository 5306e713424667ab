"""LLM engines: the registry of scrape targets, the Prometheus scraper and its SSRF guard, and
the GPU sampler."""
