"""Who calls and what they may do: project API keys, scopes and the table that scopes every
route, and the cached key check every request (HTTP and gRPC) goes through."""
