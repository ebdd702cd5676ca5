"""Child process: a Hive-enabled Spark session (the project's PySpark 4.x) that runs SQL
against catalog tables by name and prints the rows as one JSON line.

Why a child: the test session shares one SparkSession that is not Hive-enabled, and a
process has one catalog implementation for its life. Usage:
``python _spark_sql_child.py THRIFT_URI WAREHOUSE_DIR '{"name": "SELECT ...", ...}'``.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    uri, warehouse, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from streamer.spark import get_spark

    spark = get_spark(master="local[1]", app_name="catalog-sql", with_kafka=False, conf={
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": uri,
        "spark.sql.warehouse.dir": warehouse,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
    })
    out = {name: [row.asDict() for row in spark.sql(sql).collect()] for name, sql in queries.items()}
    print("RESULT " + json.dumps(out, default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
