"""docs/options.md is what the config models say today, and names every key they accept."""

from __future__ import annotations

from pathlib import Path

from streamer.config.pipeline import PipelineConfig
from streamer.config.reference import render, sections

DOC = Path(__file__).resolve().parents[3] / "docs" / "options.md"


def test_options_md_is_current():
    assert DOC.read_text() == render(), (
        "docs/options.md is stale: run `python -m streamer.config.reference > docs/options.md`"
    )


def test_every_pipeline_key_has_a_row():
    by_path = {s.path: {o.key for o in s.options} for s in sections()}
    assert by_path["pipelines[]"] == {f.alias or n for n, f in PipelineConfig.model_fields.items()}
    for path in ("pipelines[].source (type: kafka)", "pipelines[].source (type: files)",
                 "pipelines[].transforms[] (type: sql)", "pipelines[].policies.compaction.trigger",
                 "pipelines[].target.key_generator (type: timestamp)"):
        assert path in by_path


def test_types_defaults_and_descriptions_come_from_the_models():
    rows = {(s.path, o.key): o for s in sections() for o in s.options}
    small = rows[("pipelines[].policies.log_compaction", "small_block_bytes")]
    assert (small.type, small.default) == ("size", "`16MiB`")
    assert "small" in small.description
    interval = rows[("pipelines[].trigger", "interval")]
    assert (interval.type, interval.default) == ("duration", "`10s`")
    assert rows[("pipelines[].source (type: files)", "schema")].type == "string \\| null"  # the alias
    assert rows[("pipelines[].target", "path")].default == "**required**"
