"""The ClickHouse HTTP interface over chDB, for the clickhouse-connect back end's tests.

No ClickHouse server can be installed on the development machine (Debian's is from 2018, too
old for clickhouse-connect; no other package reaches it), so ``ClickHouseStore`` is tested over
HTTP against this: the real ClickHouse engine (chDB) behind the part of the HTTP interface
that clickhouse-connect's ``HttpClient`` uses (queries in the body or the ``query`` parameter,
``database``, settings and ``param_*`` bindings as URL parameters, ``INSERT ... FORMAT`` with
the data after the statement, compressed request bodies, ``X-ClickHouse-Exception-Code`` on
errors). It is not a substitute for a server: point ``AGENTWATCH_CLICKHOUSE_URL`` at one to run
the same tests there.

    python -m tests.collector.clickhouse_http DATA_DIR  # prints the port, then serves on 127.0.0.1
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from chdb import session

# URL parameters of the HTTP interface that are not query settings.
_TRANSPORT = {
    "query",
    "database",
    "default_format",
    "session_id",
    "session_timeout",
    "session_check",
    "query_id",
    "compress",
    "decompress",
    "enable_http_compression",
    "client_protocol_version",
    "wait_end_of_query",
    "buffer_size",
    "quota_key",
    "user",
    "password",
    "send_progress_in_http_headers",
    "http_headers_progress_interval_ms",
    "http_zlib_compression_level",
}
_INSERT = re.compile(
    r"^\s*INSERT\s+INTO\s+(?P<target>.+?)\s+FORMAT\s+(?P<format>\w+)[ \t]*\r?\n?", re.IGNORECASE | re.DOTALL
)
_CODE = re.compile(r"Code: (\d+)")


class _Engine:
    """One chDB session; requests take turns (settings and the current database are session state)."""

    def __init__(self, path: Path) -> None:
        self._session = session.Session(str(path))
        self._lock = threading.Lock()
        self._scratch = Path(tempfile.mkdtemp(prefix="ch-http-"))
        self.timezone = self._session.query("SELECT timezone()", "TabSeparated").bytes().decode().strip()

    def run(self, sql: str, data: bytes | None, params: dict[str, str]) -> tuple[bytes, str]:
        database = params.get("database") or "default"
        settings = {k: v for k, v in params.items() if k not in _TRANSPORT and not k.startswith("param_")}
        binds = {k[len("param_") :]: v for k, v in params.items() if k.startswith("param_")}
        fmt = params.get("default_format") or "TabSeparated"
        with self._lock:
            self._session.query(f"USE {_identifier(database)}")
            for name, value in settings.items():
                self._session.query(f"SET {_identifier(name)} = {_literal(value)}")
            try:
                if (insert := _INSERT.match(sql)) is not None:
                    data = sql[insert.end() :].encode() if data is None else data
                    return self._insert(insert["target"], insert["format"], data), fmt
                return self._session.query(sql, fmt, params=binds or None).bytes(), fmt
            finally:
                for name in settings:
                    self._session.query(f"SET {_identifier(name)} = DEFAULT")

    def _insert(self, target: str, fmt: str, data: bytes) -> bytes:
        """``INSERT ... FORMAT X`` + data, as the server reads it: the data parsed by the engine."""
        path = self._scratch / "insert.data"
        path.write_bytes(data)
        self._session.query(f"INSERT INTO {target} SELECT * FROM file({_literal(str(path))}, {_literal(fmt)})")
        return b""


def _identifier(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"not an identifier: {name!r}")
    return name


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.decompress(body)
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    raise ValueError(f"Content-Encoding {encoding!r} is not handled here")


def _form_fields(body: bytes, content_type: str) -> dict[str, str]:
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if part.get_filename() is not None:
            raise ValueError("external data (form files) is not handled here")
        fields[str(name)] = part.get_payload(decode=True).decode()
    return fields


class _Handler(BaseHTTPRequestHandler):
    engine: _Engine
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet: the tests read results, not logs
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/ping":
            return self._reply(200, b"Ok.\n", {})
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = _decompress(self.rfile.read(length), self.headers.get("Content-Encoding", "")) if length else b""
            content_type = self.headers.get("Content-Type", "")
            if content_type.startswith("multipart/form-data"):  # large bindings: query and params as form fields
                params.update(_form_fields(body, content_type))
                body = b""
            if "query" in params:
                sql, data = params["query"], body or None
            else:
                sql, data = body.decode(), None
            out, fmt = self.engine.run(sql, data, params)
        except Exception as exc:  # the server's shape of an error: a code, the message, a 500
            message = str(exc)
            code = (m := _CODE.search(message)) and m.group(1) or "1000"
            text = message if message.startswith("Code:") else f"Code: {code}. DB::Exception: {message}"
            return self._reply(500, text.encode(), {"X-ClickHouse-Exception-Code": code})
        summary = json.dumps({"read_rows": "0", "read_bytes": "0", "written_rows": "0", "written_bytes": "0"})
        self._reply(
            200,
            out,
            {
                "X-ClickHouse-Format": fmt,
                "X-ClickHouse-Timezone": self.engine.timezone,
                "X-ClickHouse-Summary": summary,
            },
        )

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(argv: list[str]) -> int:
    _Handler.engine = _Engine(Path(argv[0]))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
