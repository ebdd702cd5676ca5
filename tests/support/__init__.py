"""Shared test code: reference models, table builders and fixture helpers.

Test modules import from here (and take fixtures from ``conftest.py``), never from
one another:

* :mod:`tests.support.fixture_tables` - the Hudi-written fixture tables and the
  canonical JSONL form every conformance and integration test compares in;
* :mod:`tests.support.write_model` - a dict model of a table plus a batch generator,
  for the randomized writer tests, the crash tests and the engine tests;
* :mod:`tests.support.block_tables` - tables with many small log blocks and their dict
  model, for the table services (and the benchmarks);
* :mod:`tests.support.trip_model` - a dict model of a keyed Kafka topic and the snapshot
  checks the pipeline tests share;
* :mod:`tests.support.bloom_tables` - a table with base files and indexed log blocks,
  and the file group of every key, for the bloom index tests;
* :mod:`tests.support.java_hash` - Hadoop's MurmurHash and Hudi's bloom positions in
  scalar Python, the reference the vectorised bloom hashing is checked against;
* :mod:`tests.support.hudi_options` - the write options a Hudi user passes to continue
  one of our tables;
* :mod:`tests.support.kafka` - a Kafka broker and schema registry for the tests (an
  existing one, testcontainers', or :mod:`streamer.local`'s);
* :mod:`tests.support.minio` - MinIO through testcontainers, where Docker answers;
* :mod:`tests.support.hudi` (with :mod:`tests.support.hudi_worker`) - Apache Hudi's own
  Spark bundles as an oracle, in the ``.venv-hudi`` interpreter;
* :mod:`tests.support.spark_cluster` - a local Spark standalone cluster.

The servers a user starts too (Kafka, the schema registry, S3, the Hive metastore) are in
:mod:`streamer.local`; what is here is test-only and not in the wheel.
"""
