"""``streamer kafka-local``: the project's own Kafka broker, for trying the Kafka configs.

The same single-node KRaft broker the tests use (``streamer.local.kafka``, from the
Maven jars in ``.jvm/kafka``), optionally with the same schema registry (Apicurio,
Confluent-compatible API), in the foreground on 127.0.0.1: it prints the addresses
and how to point ``configs/kafka_json.yaml`` at them, and stops both on Ctrl-C (or
SIGTERM). Loopback only and data in a temp folder by default: a sandbox, not a server.
"""

from __future__ import annotations

import argparse
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from streamer.errors import ConfigError, KafkaBrokerError

if TYPE_CHECKING:
    from streamer.local.kafka import LocalKafkaBroker
    from streamer.local.registry import LocalSchemaRegistry

DEFAULT_PORT = 9092
DEFAULT_REGISTRY_PORT = 8081
#: How often the foreground loop checks that the broker (and registry) still run.
_CHECK_S = 1.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "kafka-local",
        help="start a local Kafka broker (and schema registry) to try the Kafka configs; Ctrl-C stops it",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--port", type=int, default=None,
                   help=f"broker port on 127.0.0.1 (default {DEFAULT_PORT}, or any free port if it is taken; "
                        "0 = any free port)")
    p.add_argument("--registry", action="store_true", help="also start the schema registry (for kafka_avro.yaml)")
    p.add_argument("--registry-port", type=int, default=None,
                   help=f"registry port (default {DEFAULT_REGISTRY_PORT}, or any free port if it is taken)")
    p.add_argument("--create-topic", action="append", default=[], type=topic_arg, metavar="NAME[:PARTITIONS]",
                   help="create this topic once the broker is up (repeatable), e.g. trips:3")
    p.add_argument("--data", default=None,
                   help="keep the broker's data in this folder across runs (default: a temp folder, removed on exit)")
    p.set_defaults(func=run)


def topic_arg(text: str) -> tuple[str, int]:
    """``NAME`` or ``NAME:PARTITIONS`` → (name, partitions)."""
    name, _, count = text.partition(":")
    try:
        partitions = int(count) if count else 1
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: PARTITIONS must be a number, as in trips:3") from None
    if not name or partitions < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME:PARTITIONS with PARTITIONS >= 1")
    return name, partitions


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def choose_port(asked: int | None, default: int, what: str) -> int:
    """The asked port (which must be free), else ``default`` if free, else 0 (any free port)."""
    if asked is None:
        return default if port_is_free(default) else 0
    if asked != 0 and not port_is_free(asked):
        raise ConfigError(f"{what} port {asked} on 127.0.0.1 is in use; pick another or pass 0 for any free port")
    return asked


def run(args: argparse.Namespace) -> int:
    from streamer.local.kafka import LocalKafkaBroker

    stop = threading.Event()
    port = choose_port(args.port, DEFAULT_PORT, "broker")
    if args.port is None and port == 0:
        print(f"port {DEFAULT_PORT} is in use; using a free port instead", flush=True)
    data = Path(args.data).resolve() if args.data else None
    if data is not None:
        data.mkdir(parents=True, exist_ok=True)
    broker = LocalKafkaBroker(port=port, workdir=data)
    registry = None
    try:
        print("starting the Kafka broker (KRaft, single node) ...", flush=True)
        broker.start()
        for name, partitions in args.create_topic:
            broker.create_topic(name, partitions)
        if args.registry:
            registry = _start_registry(args.registry_port)
        _print_ready(broker, registry, args.create_topic, kept=data is not None)
        _on_signals(stop)
        while not stop.wait(_CHECK_S):
            for proc in (broker, registry):
                if proc is not None and proc.exit_code() is not None:
                    raise KafkaBrokerError(
                        f"{proc.describe()} exited with code {proc.exit_code()}; log tail:\n{proc.log_tail()}"
                    )
    except KeyboardInterrupt:  # Ctrl-C during start-up
        pass
    finally:
        print("stopping ...", flush=True)
        if registry is not None:
            registry.stop()
        broker.stop()
    print("stopped", flush=True)
    return 0


def _start_registry(asked: int | None) -> LocalSchemaRegistry:
    from streamer.local.registry import LocalSchemaRegistry

    port = choose_port(asked, DEFAULT_REGISTRY_PORT, "registry")
    print("starting the schema registry (Apicurio, Confluent-compatible API) ...", flush=True)
    return LocalSchemaRegistry(port=port).start()


def _on_signals(stop: threading.Event) -> None:
    """Ctrl-C and SIGTERM end the foreground wait (main thread only, as Python requires)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())


def _print_ready(broker: LocalKafkaBroker, registry: LocalSchemaRegistry | None, topics: list[tuple[str, int]], kept: bool) -> None:
    where = f"{broker.workdir} (kept)" if kept else f"{broker.workdir} (removed on exit)"
    lines = [
        f"Kafka broker ready at {broker.bootstrap_servers}",
        f"  data: {where}",
    ]
    lines += [f"  topic {name}: {n} partition(s)" for name, n in topics]
    env = f"KAFKA_BOOTSTRAP={broker.bootstrap_servers}"
    if registry is not None:
        lines.append(f"Schema registry ready at {registry.url}")
        env_avro = f"{env} SCHEMA_REGISTRY_URL={registry.url}"
    lines += [
        "",
        "Try the JSON pipeline against it (its topic is KAFKA_TOPIC, default trips; the source does not",
        "create topics: pass --create-topic trips:3 here, or produce to it first):",
        f"  {env} streamer run configs/kafka_json.yaml",
    ]
    if registry is not None:
        lines.append(f"  {env_avro} streamer run configs/kafka_avro.yaml")
    lines += ["", "Ctrl-C stops it."]
    print("\n".join(lines), flush=True)
