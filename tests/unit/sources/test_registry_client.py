"""RegistrySchemas (confluent_kafka's SchemaRegistryClient): ids cached, 404 → None, auth sent.

The real-registry behaviour is tested against Apicurio (tests/integration/sources);
this one needs what Apicurio here does not offer - basic auth - so a loopback HTTP
server answers the two endpoints the client uses, as the registry documents them,
and records what the client sent.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streamer.config.sources import SchemaRegistry
from streamer.sources.kafka.avro import RegistrySchemas

SCHEMA = json.dumps({"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture()
def registry():
    calls: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            calls.append((self.path.split("?")[0], self.headers.get("Authorization")))
            path = self.path.split("?")[0]
            if path == "/schemas/ids/7" or path == "/subjects/t-value/versions/latest":
                payload = json.dumps({"schema": SCHEMA}).encode()
                self.send_response(200)
            else:
                payload = b'{"error_code": 40403, "message": "Schema not found"}'
                self.send_response(404)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", calls
    server.shutdown()


def test_ids_are_fetched_once_and_auth_is_sent(registry):
    url, calls = registry
    client = RegistrySchemas(SchemaRegistry(url=url, basic_auth_user="u", basic_auth_password="p@ss"))
    assert client.schema_by_id(7) == SCHEMA
    assert client.schema_by_id(7) == SCHEMA
    assert [c[0] for c in calls] == ["/schemas/ids/7"]
    assert calls[0][1] == "Basic " + base64.b64encode(b"u:p@ss").decode()
    assert client.latest("t-value") == SCHEMA
    assert client.latest("missing-value") is None
    with pytest.raises(LookupError):
        client.schema_by_id(8)
    assert "p@ss" not in repr(client.cfg)
