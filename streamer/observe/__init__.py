"""Observability of running pipelines: metrics, progress events and logging.

Everything here observes :class:`~streamer.pipeline.report.BatchReport` records the
runner produces after each batch, so the log line, the JSON progress event and the
Prometheus series of a batch are the same facts. Nothing here may stop a pipeline: an
exporter or a push gateway that fails is logged, and ingestion goes on.
"""
