"""Local single-node servers for trying the project out and for the docs; not for production.

Each runs from the Maven-resolved jars (``streamer setup-jvm``) with the machine's Java,
on 127.0.0.1, its data in a temporary folder:

- :mod:`~streamer.local.kafka`: an Apache Kafka broker (KRaft) and :class:`KafkaClient`,
  the topic helper (``streamer kafka-local``, docs/kafka.md, the benchmarks);
- :mod:`~streamer.local.registry`: a Confluent-compatible schema registry (Apicurio,
  ``streamer kafka-local --registry``);
- :mod:`~streamer.local.s3`: an S3-compatible store (s3proxy, ``python -m
  streamer.local.s3``, docs/object-storage.md);
- :mod:`~streamer.local.hive`: a Hive metastore (docs/catalog.md);
- :mod:`~streamer.local.process`: :class:`ManagedProcess`, the start/stop/log handling
  they share.

The tests use the same servers; what only the tests need (testcontainers, the Apache
Hudi oracle, a local Spark cluster) lives in ``tests/support``, outside the package.
"""
