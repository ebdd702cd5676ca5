"""Writing one section of ``benchmarks/RESULTS.md`` without touching the others."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pyarrow as pa

RESULTS = Path(__file__).with_name("RESULTS.md")


def machine_line() -> str:
    return (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}."
    )


def write_section(heading: str, body: list[str]) -> None:
    """Replace the section headed ``heading`` (a ``## ...`` line) or append it.

    Each table in ``body`` is also drawn as a PNG in ``benchmarks/charts/`` and linked
    below it (``benchmarks.charts``); without matplotlib (the ``charts`` extra) the
    section is written without pictures.
    """
    try:
        from benchmarks.charts import chart_section

        body = chart_section(heading, body, RESULTS.parent / "charts")
    except ImportError as e:
        print(f"note: no charts for {heading!r} ({e}); install the 'charts' extra", file=sys.stderr)
    section = "\n".join([heading, "", *body, "", ""])  # a blank line before the next section
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    if heading in text:
        start = text.index(heading)
        nxt = text.find("\n## ", start + len(heading))
        text = text[:start] + section + (text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    RESULTS.write_text(text)
