"""``streamer sync``: register or update tables in a Hive metastore once, now.

The one-off counterpart of the after-commit sync (as Hudi's standalone ``HiveSyncTool``
is of ``HoodieStreamer --enable-sync``): catch up a table whose sync failed and that no
commit has retried since, or register an existing table for the first time.

Two ways to name what to sync:

- ``streamer sync PIPELINES.yaml [--pipeline NAME]``: every pipeline (or one; a whole-database
  pipeline stands for the tables it has written, ``PARENT-TABLE`` names one) whose
  ``target.catalog`` is set, with its settings;
- ``streamer sync --path TABLE --uri thrift://host:port [--database DB] [--table NAME]``:
  any MOR table, with Hudi's defaults for the rest (the table name defaults to
  ``hoodie.table.name``).

Prints one line per table synced; exits 1 when a sync fails (the error names the table
and the metastore).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from streamer.cli.arguments import documented_parser

if TYPE_CHECKING:
    from collections.abc import Callable

    from streamer.catalog.sync import HiveSync
    from streamer.config.pipeline import PipelineConfig
    from streamer.fs import FileSystem


def register(sub: argparse._SubParsersAction) -> None:
    p = documented_parser(sub, "sync", help="register/update tables in a Hive metastore (one-off Hive sync)", doc=__doc__)
    p.add_argument("config", nargs="?", metavar="FILE_OR_DIR", help="pipeline YAML (uses target.catalog)")
    p.add_argument("--pipeline", help="only this pipeline of the YAML")
    p.add_argument("--path", help="a table's path or URI (instead of a YAML)")
    p.add_argument("--uri", help="with --path: the metastore, thrift://host:port")
    p.add_argument("--database", default="default", help="with --path: Hive database (default: default)")
    p.add_argument("--table", help="with --path: Hive table name (default: hoodie.table.name)")
    p.add_argument("--skip-ro-suffix", action="store_true",
                   help="with --path: register the read-optimized table without the _ro suffix")
    p.set_defaults(func=run)


def _jobs(args: argparse.Namespace) -> list[tuple[HiveSync, FileSystem, str]]:
    """``(HiveSync, fs, path)`` per table to sync."""
    from streamer.catalog.sync import HiveSync
    from streamer.config.target import HiveCatalogConfig
    from streamer.errors import ConfigError
    from streamer.fs import resolve

    if args.path:
        if args.config or not args.uri:
            raise ConfigError("streamer sync: give either FILE_OR_DIR, or --path with --uri")
        from streamer.table.properties import load_properties

        fs, path = resolve(args.path)
        catalog = HiveCatalogConfig(type="hive", uri=args.uri, database=args.database, table=args.table,
                                    skip_ro_suffix=args.skip_ro_suffix)
        name = args.table or load_properties(fs, path).name
        return [(HiveSync(catalog, name, args.path), fs, path)]
    if not args.config:
        raise ConfigError("streamer sync: give a pipeline YAML, or --path and --uri")
    from streamer.config import load_pipelines
    from streamer.pipeline.database import listed_children, select

    configs = load_pipelines(args.config)
    only = None
    if args.pipeline:
        configs, only = select(configs, [args.pipeline], source=args.config)
    jobs: list[tuple[HiveSync, FileSystem, str]] = []
    for cfg, fs, path in _tables(configs, only, listed_children):
        if cfg.target.catalog is not None:
            jobs.append((HiveSync(cfg.target.catalog, cfg.target.table_name or cfg.name, cfg.target.path), fs, path))
    if not jobs:
        which = f"pipeline {args.pipeline!r}" if args.pipeline else "no pipeline"
        raise ConfigError(f"streamer sync: {which} in {args.config} has target.catalog set")
    return jobs


def _tables(configs: list[PipelineConfig], only: frozenset[str] | None,
            children: Callable[[PipelineConfig], list[PipelineConfig]]
            ) -> list[tuple[PipelineConfig, FileSystem, str]]:
    """One ``(config, fs, path)`` per table: a ``topic_pattern`` pipeline stands for its
    tables, those of the topics the broker lists whose table has been written (``only``: the
    children named)."""
    from streamer.table.properties import properties_path

    out: list[tuple[PipelineConfig, FileSystem, str]] = []
    for cfg in configs:
        if not cfg.is_pattern or cfg.target.catalog is None:
            out.append((cfg, *_located(cfg)))
            continue
        for child in children(cfg):
            if only is not None and child.name not in only and f"{cfg.name}-*" not in only:
                continue
            fs, path = _located(child)
            if fs.exists(properties_path(path)):
                out.append((child, fs, path))
            else:
                print(f"{child.name}: no table at {child.target.path} yet (nothing written): not synced",
                      file=sys.stderr)
    return out


def _located(cfg: PipelineConfig) -> tuple[FileSystem, str]:
    """The file system and path of ``cfg``'s table (its ``storage.s3`` settings applied)."""
    from streamer.fs import resolve

    return resolve(cfg.target.path, cfg.s3_settings())


def run(args: argparse.Namespace) -> int:
    from streamer.errors import StreamerError
    from streamer.table.snapshot import TableSnapshot

    status = 0
    for sync, fs, path in _jobs(args):
        try:
            result = sync.sync(TableSnapshot.load(fs, path))
        except StreamerError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
            continue
        print(result.line())
    return status
