"""Benchmarks: measured beside a peer in the same run, never asserted. See RESULTS.md."""
