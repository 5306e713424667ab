"""Reading the store for the API: the query service, re-pricing, what-if estimates, measured
lever savings and the fleet-wide ingest counters."""
