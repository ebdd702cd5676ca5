"""Hudi's meta-field vocabulary: the one place these names are spelled.

Every Hudi table with meta fields stores these five columns before the data columns of
every base file and data block (``HoodieRecord.HOODIE_META_COLUMNS`` in Hudi), and a
boolean ``_hoodie_is_deleted`` data column marks a record as a delete (Hudi's
``HoodieRecord.HOODIE_IS_DELETED_FIELD``). Modules import the names from here, so a
typo fails at import and a reader and a writer can never disagree on a spelling.
"""

from __future__ import annotations

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"

#: The meta columns in the order Hudi writes them.
META_COLUMNS: tuple[str, ...] = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
#: The data column whose ``true`` makes a record a delete.
IS_DELETED = "_hoodie_is_deleted"

#: Footer keys of Hudi base files (``HoodieBloomFilterWriteSupport``).
BLOOM_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_FOOTER_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY_FOOTER_KEY = "hoodie_min_record_key"
MAX_KEY_FOOTER_KEY = "hoodie_max_record_key"
