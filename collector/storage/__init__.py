"""ClickHouse storage: one module of DDL and SQL, two back ends (embedded chDB, server)."""
