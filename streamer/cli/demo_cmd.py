"""``streamer demo``: the embedded demo, runnable on a bare laptop (no server needed).

It runs ``configs/demo.yaml``: a seeded generator of taxi trips (with updates and
deletes) into a Hudi Merge-On-Read table under ``lake/``, several micro-batches so the
table services in its policies (log compaction, compaction, clean) have work to do,
then prints the table's timeline and a sample of its snapshot.
"""

from __future__ import annotations

import argparse
import posixpath
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamer.config.pipeline import PipelineConfig

_CHECKOUT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"


def default_config() -> Path:
    """``configs/demo.yaml`` in a checkout; an installed package runs its shipped copy."""
    if _CHECKOUT_CONFIG.is_file():
        return _CHECKOUT_CONFIG
    from importlib import resources

    return Path(str(resources.files("streamer.resources").joinpath("demo.yaml")))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demo pipeline (local Spark, local lake)")
    p.add_argument("--config", default=str(default_config()), help="demo pipeline YAML")
    p.add_argument("--lake", default="lake", help="lake folder (default: ./lake)")
    p.add_argument("--batches", type=int, default=7, help="micro-batches to run (default 7)")
    p.add_argument("--keep", action="store_true", help="continue an existing demo table instead of starting fresh")
    p.set_defaults(func=run)


def _relocate(cfg: PipelineConfig, lake: Path) -> PipelineConfig:
    """Point the demo's table, error table and checkpoints into ``lake``."""
    def inside(path: str) -> str:
        rel = path[len("lake/"):] if path.startswith("lake/") else posixpath.basename(path.rstrip("/"))
        return str(lake / rel)

    return cfg.model_copy(
        update={
            "target": cfg.target.model_copy(update={"path": inside(cfg.target.path)}),
            "errors": cfg.errors.model_copy(update={"path": inside(cfg.errors.path)}) if cfg.errors.path else cfg.errors,
            "checkpoint_dir": inside(cfg.checkpoint_dir) if cfg.checkpoint_dir else None,
        }
    )


def run(args: argparse.Namespace) -> int:
    from streamer.cli.show_cmd import format_sample, table_stats
    from streamer.cli.timeline_cmd import rows as timeline_rows
    from streamer.config import load_pipelines
    from streamer.config.sources import GeneratorSourceConfig
    from streamer.errors import ConfigError
    from streamer.fs import location_key
    from streamer.pipeline.multi import run_pipelines
    from streamer.read import Table

    lake_key = location_key(args.lake)  # `--lake file:/x` is the local folder /x
    if "://" in lake_key:
        raise ConfigError(f"demo --lake {args.lake}: the demo writes a local folder; "
                          "point a pipeline's target.path at object storage instead")
    lake = Path(lake_key)
    cfg = _relocate(load_pipelines(args.config)[0], lake)
    src = cfg.source
    if not isinstance(src, GeneratorSourceConfig):
        raise ConfigError(f"demo --config {args.config}: the demo's pipeline reads the generator source")
    print("mor-streamer demo")
    print(f"  pipeline : {cfg.summary()}")
    print(f"  source   : seeded generator, {src.records_per_batch} records per batch, "
          f"{src.update_ratio:.0%} updates, {src.delete_ratio:.0%} deletes (no server needed)")
    print(f"  table    : Hudi Merge-On-Read (table version 6) at {cfg.target.path}")
    pol = cfg.policies
    print(f"  services : log compaction {pol.log_compaction.mode} (min_blocks {pol.log_compaction.min_blocks}), "
          f"compaction {pol.compaction.mode} (every {pol.compaction.trigger.delta_commits} delta commits), "
          f"clean {pol.clean.mode}")
    if not args.keep:
        for p in (cfg.target.path, cfg.errors.path):
            if p and Path(p).exists():
                shutil.rmtree(p)
    print(f"\n1. Ingesting {args.batches} micro-batches (one Hudi deltacommit each; "
          "the source position is stored in the commit):")
    t0 = time.monotonic()
    from streamer.spark import get_spark

    spark = get_spark(master=cfg.spark.master, app_name="mor-streamer-demo")
    for _ in range(args.batches):
        run_pipelines([cfg], once=True, spark=spark, on_report=lambda r: print("   " + r.line(), flush=True))
    print(f"   done in {time.monotonic() - t0:.1f}s")

    print(f"\n2. The table's timeline (.hoodie/ in {cfg.target.path}):")
    for r in timeline_rows(cfg.target.path):
        print(f"   {r['instant']}  {r['action']:<28} {r['state']:<10} {r['details']}")
    print("   deltacommit = a micro-batch (or a finished log compaction); commit (compaction) = "
          "logs merged into new base files; clean = old file versions removed")

    table = Table.open(cfg.target.path)
    snapshot = table.read()
    print("\n3. What a snapshot query returns now:")
    for line in table_stats(table, snapshot).lines():
        print("   " + line)
    print("   sample:")
    cols = [c for c in ("uuid", "city", "ts", "fare_amount", "day") if c in snapshot.column_names] or None
    for line in format_sample(snapshot.sort_by("uuid"), 5, cols):
        print("  " + line)
    print("\nTry next:")
    print(f"  .venv/bin/streamer read {cfg.target.path} --limit 5 --format jsonl")
    print(f"  .venv/bin/streamer timeline {cfg.target.path}")
    print(f"  .venv/bin/python -c \"import hudi; t = hudi.HudiTableBuilder.from_base_uri('{cfg.target.path}')"
          ".build().read(); print(sum(b.num_rows for b in t))\"   # hudi-rs reads the same table")
    return 0
