"""Issue 11 acceptance 4: public write and read APIs take options by keyword only.

After the data (or path, or query) argument every option is keyword-only, as the
deltalake package does: a call site says what each value means, and an option can be
added or reordered without silently shifting another.
"""

from __future__ import annotations

import inspect

import pytest

from streamer.read.table import Table
from streamer.write.writer import HudiWriter

#: callable -> parameters that may be passed positionally (after self/cls)
POSITIONAL = {
    HudiWriter.create: ("path", "config"),
    HudiWriter.open: ("path",),
    HudiWriter.upsert: ("data",),
    HudiWriter.insert: ("data",),
    HudiWriter.delete: ("data",),
    HudiWriter.bulk_insert: ("data",),
    Table.open: ("path_or_uri",),
    Table.read: ("query",),
    Table.scan: ("query",),
    Table.plan: ("query",),
}


@pytest.mark.parametrize("fn", list(POSITIONAL), ids=lambda f: f.__qualname__)
def test_options_are_keyword_only(fn):
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    positional = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    assert positional == POSITIONAL[fn]
