"""Test support that users may also run: a real Kafka broker for local pipelines."""
