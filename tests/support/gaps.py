"""The one registry of known gaps of *external* readers (never of ours).

A gap is where a reader that is not ours returns something other than the independent
expected answer (a model of what was written) for a table that Apache Hudi's own
readers read right. Each gap has:

* an exception class of its own (a subclass of :class:`KnownGap`, itself an
  ``AssertionError``), raised only by :meth:`Gap.check` when the external reader
  differs from the expected answer;
* a strict ``xfail`` marker (:meth:`Gap.xfail`) with ``raises=`` narrowed to that class:
  the test is expected to fail with exactly that gap. When the gap closes (the reader
  now returns the expected answer) the test passes, and strict xfail turns it red: the
  entry and its markers are then removed. Any other failure - our reader differing
  from the model, a build step failing - is not an instance of the gap's class and
  is reported as the failure it is.

A test that meets a gap therefore asserts our own reader first, with a plain
``assert``, and then the external reader with ``GAP.check(...)``; the variant of the
test that asks the external reader at the gap is the one carrying ``GAP.xfail()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


class KnownGap(AssertionError):
    """An external reader differs from the expected answer, where a registered gap says it does."""


class HudiRsPendingCompactionSlice(KnownGap):
    """hudi-rs leaves out the log files of a pending compaction's new file slice."""


class HudiRsNestedFieldAdded(KnownGap):
    """hudi-rs cannot read a table whose struct column gained a field after its first files."""


@dataclass(frozen=True)
class Gap:
    name: str
    reader: str
    summary: str
    upstream: str
    error: type[KnownGap]

    def xfail(self) -> pytest.MarkDecorator:
        """The strict xfail of a test (or a parameter) that asks the reader at this gap."""
        return pytest.mark.xfail(reason=f"known gap {self.name} of {self.reader} (tests/support/gaps.py)",
                                 raises=self.error, strict=True)

    def check(self, matches: bool, what: str) -> None:
        """Raise this gap's error when the external reader's answer does not match."""
        if not matches:
            raise self.error(f"{self.reader} ({self.name}): {what}: {self.summary}")

    def param(self, value: object = "gap") -> object:
        """A pytest parameter ``value`` carrying this gap's strict xfail (id ``<name>``)."""
        return pytest.param(value, marks=self.xfail(), id=self.name)


HUDI_RS_PENDING_COMPACTION_SLICE = Gap(
    name="hudi-rs-pending-compaction-slice",
    reader="hudi-rs 0.5.0 (PyPI `hudi`)",
    summary=(
        "on a table-version-6 MOR table with a requested (pending) compaction, the log "
        "files written after scheduling are named with the plan's instant as base "
        "instant; hudi-rs attaches a log file only to the file slice whose base file has "
        "that instant, and no base file has it until the compaction commits, so the rows "
        "of those logs are missing from its snapshot, incremental and time-travel reads "
        "(Apache Hudi 0.15/1.0 merge them into the previous slice, as the async "
        "compaction design says)"
    ),
    upstream=(
        "hudi-rs: apache/hudi-rs#501 (attaches such logs to the newest earlier slice; merged "
        "upstream, not in a PyPI release at 0.5.0 - recorded by the project when the gap was "
        "found, the PR thread itself not found in the searchable corpus); the same bug in "
        "Apache Hudi's own MOR snapshot reader was HUDI-2480, fixed by apache/hudi#3703 "
        "('FileSlice after pending compaction-requested instant-time is ignored by MOR "
        "snapshot reader')"
    ),
    error=HudiRsPendingCompactionSlice,
)

HUDI_RS_NESTED_FIELD_ADDED = Gap(
    name="hudi-rs-nested-field-added",
    reader="hudi-rs 0.5.0 (PyPI `hudi`)",
    summary=(
        "a struct column that gained a field in a later write (``s: {x}``, then ``s: {x, y}``): "
        "hudi-rs refuses the whole snapshot read ('reconcile child-count mismatch for Struct'), "
        "where Apache Hudi 0.15 and 1.0 read every row with ``y`` null in the older ones (checked "
        "by hand with tests/support/hudi.py's readers; the JVM tier does not check it)"
    ),
    upstream="hudi-rs: not reported upstream by this project (no thread found in the searchable corpus)",
    error=HudiRsNestedFieldAdded,
)

#: Every registered gap, by name.
REGISTRY: dict[str, Gap] = {g.name: g for g in (HUDI_RS_PENDING_COMPACTION_SLICE, HUDI_RS_NESTED_FIELD_ADDED)}

#: The Hudi JVM tier's table kinds (tests/hudi_jvm/tables.py) and the query kinds at which
#: an external reader meets a gap: ``{table kind: {query kind: gap}}``. The tier asks
#: hudi-rs every other query in its main test, and each of these in a strict-xfail test.
JVM_TIER_HUDI_RS_GAPS: dict[str, dict[str, Gap]] = {
    "pending_compaction": {
        "snapshot": HUDI_RS_PENDING_COMPACTION_SLICE,
        "incremental": HUDI_RS_PENDING_COMPACTION_SLICE,
        "time_travel": HUDI_RS_PENDING_COMPACTION_SLICE,
    },
}
