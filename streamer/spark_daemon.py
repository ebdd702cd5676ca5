"""The Python worker daemon of a local Spark session: ``pyspark.daemon``, imported from the
installed pyspark rather than from the ``pyspark.zip`` Spark puts first on the path.

Why: Spark starts every Python daemon with ``$SPARK_HOME/python/lib/pyspark.zip`` at the
head of ``PYTHONPATH``. With pyspark from PyPI, ``SPARK_HOME`` is the installed package
itself, so the zip holds the very code that is installed - but a zip keeps no bytecode
cache, and each daemon and each worker it forks compiles pyspark's modules from source
again: about 0.9 CPU-s per daemon, where the installed modules load from their cached
bytecode in 0.2. A local session starts two or three daemons (Spark's lookup of Python
data sources, the SQL workers, the RDD workers), so every ``streamer run`` paid ~2 CPU-s
and a second of start-up for nothing.

Here the zip is dropped from ``sys.path`` only when it belongs to that installed package
(``<site>/pyspark/python/lib/pyspark.zip`` with ``<site>/pyspark`` importable), so the
same files are imported; any other Spark's zip (a cluster's ``SPARK_HOME``) stays first,
as Spark put it. Then ``pyspark.daemon`` runs as it would have, with the same arguments.

:mod:`streamer.spark` names this module as ``spark.python.daemon.module`` for local
masters only: a cluster's executors need not have this package installed. It imports
nothing else from this project, and nothing from pyspark before the path is mended.
"""

from __future__ import annotations

import os
import sys

#: The module name ``spark.python.daemon.module`` is set to.
MODULE = "streamer.spark_daemon"


def installed_zip(entry: str, path: list[str]) -> bool:
    """``entry`` is the ``pyspark.zip`` of the pyspark installed in a folder on ``path``."""
    if os.path.basename(entry) != "pyspark.zip":
        return False
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))
    if os.path.basename(home) != "pyspark" or not os.path.isfile(os.path.join(home, "__init__.py")):
        return False
    site = os.path.dirname(home)
    return any(p and os.path.abspath(p) == site for p in path)


def mended_path(path: list[str]) -> list[str]:
    """``path`` without the installed pyspark's own zip (see the module docstring)."""
    return [p for p in path if not installed_zip(p, path)]


def main() -> None:
    sys.path[:] = mended_path(sys.path)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
