"""mor-streamer: streaming ingestion into Apache Hudi Merge-On-Read tables.

The package tree mirrors the architecture (docs/architecture.md, its layers checked by a test):
``streamer.table`` knows Hudi's bytes and file names, ``streamer.read`` merges file
slices into query results, ``streamer.write`` / ``streamer.index`` / ``streamer.write.engine``
turn micro-batches into commits, ``streamer.services`` keeps tables healthy, and
``streamer.pipeline`` runs YAML-defined pipelines.
"""

__version__ = "0.1.0"
