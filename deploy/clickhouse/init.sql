-- Run by each ClickHouse node at its first start (docker-entrypoint-initdb.d): the database the
-- collectors' URL names. The collectors create every table themselves, once per cluster.
CREATE DATABASE IF NOT EXISTS agentwatch;
