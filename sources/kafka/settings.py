"""Kafka client settings, shared by the JSON and Avro sources.

Two clients see the same settings: Spark's Kafka connector (``kafka.*`` options) and
librdkafka on the driver (partition list and watermarks, so every batch has explicit
end offsets). Dicts that carry credentials are :class:`RedactedOptions`, whose
``repr``/``str`` mask them; pass them to a client, never to a logger.
"""

from __future__ import annotations

from typing import Any

from streamer.config.base import is_secret_key, reveal
from streamer.config.sources import KafkaSecurity, KafkaSourceConfig
from streamer.errors import SourceError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class RedactedOptions(dict[str, str]):
    """A plain ``dict`` whose printed form hides secret values."""

    def __repr__(self) -> str:
        shown = {k: ("**********" if is_secret_key(k) else v) for k, v in self.items()}
        return f"RedactedOptions({shown!r})"

    __str__ = __repr__


def jaas_config(security: KafkaSecurity) -> str:
    """The ``sasl.jaas.config`` line for the Java client (contains the password)."""
    mechanism = security.effective_sasl_mechanism
    if mechanism is None or security.sasl_username is None or security.sasl_password is None:
        raise SourceError("jaas config needs a SASL protocol with sasl_username and sasl_password")

    def quote(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return (
        f"{_LOGIN_MODULES[mechanism]} required username={quote(security.sasl_username)} "
        f"password={quote(security.sasl_password.get_secret_value())};"
    )


#: ``fetch.max.wait.ms`` of Spark's Kafka consumers unless the source's ``options`` set it.
#: A micro-batch that reads up to the partition's end (every batch of a caught-up stream)
#: ends with a fetch the broker holds until this much time passes, as nothing more is
#: there: at the consumer's default (500 ms) a 20k-record read of a 3-partition topic took
#: 1.2 s wall on 2 cores (two waves of tasks), at 20 ms 0.3 s, the same JVM CPU
#: (measured with a local broker). A read of a backlog does not wait either way.
#: The cost of a short wait: an idle consumer asks the broker again sooner; Spark's bounded
#: reads stop at their end offsets, so it asks a few more times per batch at most.
FETCH_MAX_WAIT_MS = "20"


def spark_kafka_options(config: KafkaSourceConfig) -> RedactedOptions:
    """``kafka.*`` options for ``spark.read(Stream).format("kafka")`` (credentials included)."""
    s = config.security
    opts = RedactedOptions({"kafka.bootstrap.servers": config.bootstrap_servers,
                            "kafka.fetch.max.wait.ms": FETCH_MAX_WAIT_MS})
    opts["kafka.security.protocol"] = s.protocol
    if s.effective_sasl_mechanism:
        opts["kafka.sasl.mechanism"] = s.effective_sasl_mechanism
        opts["kafka.sasl.jaas.config"] = jaas_config(s)
    for key, value in _ssl_settings(s).items():
        opts[f"kafka.{key}"] = value
    if config.group_id:
        opts["kafka.group.id"] = config.group_id
    opts.update(reveal(config.options))
    return opts


def librdkafka_config(config: KafkaSourceConfig) -> RedactedOptions:
    """The same settings for ``confluent_kafka`` (driver-side metadata calls)."""
    s = config.security
    conf = RedactedOptions(
        {
            "bootstrap.servers": config.bootstrap_servers,
            "security.protocol": s.protocol,
            "group.id": config.commit_group_id,
            "enable.auto.commit": "false",
        }
    )
    if s.effective_sasl_mechanism:
        conf["sasl.mechanism"] = s.effective_sasl_mechanism
        conf["sasl.username"] = s.sasl_username or ""
        conf["sasl.password"] = s.sasl_password.get_secret_value() if s.sasl_password else ""
    if s.ssl_endpoint_identification_algorithm is not None:
        conf["ssl.endpoint.identification.algorithm"] = s.ssl_endpoint_identification_algorithm or "none"
    # Java keystores (JKS) do not translate to librdkafka; pass PEM paths via options if needed.
    return conf


def _ssl_settings(s: KafkaSecurity) -> dict[str, str]:
    out: dict[str, str] = {}
    for field in (
        "ssl_truststore_location",
        "ssl_truststore_password",
        "ssl_keystore_location",
        "ssl_keystore_password",
        "ssl_key_password",
        "ssl_endpoint_identification_algorithm",
    ):
        value: Any = getattr(s, field)
        if value is not None:
            out[field.replace("_", ".")] = value.get_secret_value() if hasattr(value, "get_secret_value") else value
    return out
