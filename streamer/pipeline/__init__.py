"""Pipelines: source → transforms → MOR table, once or continuously, exactly once.

The source position of every batch is stored in the Hudi commit that writes it
(``extraMetadata``, Hudi's own checkpoint key), so the table itself says where to
resume: a restarted or replayed batch is neither written twice nor skipped.
"""
