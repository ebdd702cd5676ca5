"""streamer.table: the only package that knows Hudi's bytes and file names.

- :mod:`.properties` - ``hoodie.properties`` (Java escaping, checksum)
- :mod:`.instant`, :mod:`.timeline` - instants; timeline layouts 1 (read/write) and 2 (read)
- :mod:`.metadata` - commit metadata (JSON/Avro), compaction/rollback/clean plans and metadata
- :mod:`.naming` - base/log file names, write tokens, partition paths
- :mod:`.fsview` - file groups and slices visible as of an instant
- :mod:`.log_format`, :mod:`.log_content`, :mod:`.base_file`, :mod:`.bloom`, :mod:`.avro_schema` - blocks and files
"""
