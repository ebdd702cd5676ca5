"""RegistrySchemas over the Schema Registry REST API: ids cached, 404 → None, auth header sent.

No registry runs on these machines, so an in-process HTTP server answers the two
endpoints the client uses, exactly as the registry documents them.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sources.kafka_avro import RegistrySchemas
from streamer.config.sources import SchemaRegistry

SCHEMA = json.dumps({"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture()
def registry():
    calls: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            calls.append((self.path, self.headers.get("Authorization")))
            if self.path == "/schemas/ids/7" or self.path == "/subjects/t-value/versions/latest":
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


def test_ids_are_fetched_once_and_auth_is_sent(registry, monkeypatch):
    """The REST path taken when confluent_kafka's registry client is not importable."""
    import sources.kafka_avro as kafka_avro

    monkeypatch.setattr(kafka_avro, "_confluent_client", lambda cfg: None)
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
