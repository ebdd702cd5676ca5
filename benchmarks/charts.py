"""PNG charts of the Markdown tables in ``benchmarks/RESULTS.md``.

Why from the Markdown: the tables there are the benchmarks' record (each section says
how it was measured); a chart drawn from the same text cannot disagree with it. Each
table becomes one PNG in ``benchmarks/charts/`` (one horizontal bar panel per numeric
column, a bar per row) and an image link right below the table.
``python -m benchmarks.charts`` redraws every chart of RESULTS.md; ``write_section``
(``benchmarks.results``) draws a section's charts when a benchmark records it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

_INT = re.compile(r"^-?\d{1,3}(?:,\d{3})*$|^-?\d+$")
_NUM = re.compile(r"^(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*(?:x|%|s|ms|MB|MiB|GB|GiB)?$")
_LEAD = re.compile(r"^(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\b")
_MAX_PANELS = 6


@dataclass(frozen=True)
class MarkdownTable:
    """A pipe table: its header cells and rows, in order."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    end: int  # index of the line after the table in the lines it came from


@dataclass(frozen=True)
class Series:
    name: str
    values: tuple[float | None, ...]  # None: the cell is not a number (no bar)


@dataclass(frozen=True)
class ChartData:
    """What one PNG shows: a bar per label in each series' panel."""

    title: str
    labels: tuple[str, ...]
    series: tuple[Series, ...]


def _cells(line: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in line.strip().strip("|").split("|"))


def parse_tables(lines: list[str]) -> list[MarkdownTable]:
    """Every pipe table (a header, a ``---`` rule, rows) in ``lines``."""
    out, i = [], 0
    while i + 1 < len(lines):
        rule = lines[i + 1].strip()
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*", rule):
            header, j, rows = _cells(lines[i]), i + 2, []
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            out.append(MarkdownTable(header, tuple(rows), j))
            i = j
        else:
            i += 1
    return out


def _plain(cell: str) -> str:
    return cell.replace("`", "").replace("*", "").strip()


def number(cell: str) -> float | None:
    """The number a cell shows (``52,487``, ``1.00x``, ``5.06 MB (...)``), or None."""
    m = _NUM.match(_plain(cell)) or _LEAD.match(_plain(cell))
    return float(m.group(1).replace(",", "")) if m else None


def chart_data(table: MarkdownTable, title: str) -> ChartData:
    """Labels from the leading text/integer columns, a series per later numeric column."""
    cols = list(zip(*table.rows, strict=False)) if table.rows else [() for _ in table.header]
    label_cols = 0
    for col in cols[:-1]:
        if all(_INT.match(_plain(c)) or number(c) is None for c in col):
            label_cols += 1
        else:
            break
    label_cols = max(label_cols, 1)
    labels = tuple(", ".join(_plain(c) for c in row[:label_cols]) for row in table.rows)
    series = []
    for name, col in zip(table.header[label_cols:], cols[label_cols:], strict=False):
        values = tuple(number(c) for c in col)
        if sum(v is not None for v in values) * 2 >= len(values) > 0:
            series.append(Series(_plain(name), values))
    return ChartData(title, labels, tuple(series[:_MAX_PANELS]))


def render_png(data: ChartData, path: Path) -> Path:
    """Draw ``data`` as horizontal bars, one panel per series (matplotlib, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = max(len(data.series), 1)
    height = 0.6 + n * (0.35 * len(data.labels) + 0.8)
    fig = Figure(figsize=(9, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    ys = list(range(len(data.labels)))
    for ax, s in zip(axes, data.series, strict=False):
        vals = [v if v is not None else 0.0 for v in s.values]
        bars = ax.barh(ys, vals, color=["#4c72b0" if v is not None else "#dddddd" for v in s.values])
        ax.bar_label(bars, labels=[_label(v) for v in s.values], fontsize=7, padding=2)
        positive = [v for v in s.values if v is not None and v > 0]
        if positive and max(positive) / min(positive) > 100:  # 2,000 beside 2,500,000: both readable
            ax.set_xscale("log")
        ax.set_yticks(ys, data.labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(s.name, fontsize=9, loc="left")
        ax.margins(x=0.15)
    fig.suptitle(data.title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _label(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lstrip("#").strip().lower()).strip("-")


def chart_section(heading: str, body: list[str], charts_dir: Path) -> list[str]:
    """``body`` with each table's chart drawn and linked below it (once)."""
    out, last = [], 0
    title = heading.lstrip("#").strip()
    for n, table in enumerate(parse_tables(body), start=1):
        name = f"{slug(heading)}{'' if n == 1 else f'-{n}'}.png"
        render_png(chart_data(table, title), charts_dir / name)
        link = f"![{title}: chart]({charts_dir.name}/{name})"
        out += body[last:table.end]
        rest = [line for line in body[table.end:table.end + 3] if line.strip()]
        if not (rest and rest[0] == link):
            out += ["", link]
        last = table.end
    return out + body[last:]


def chart_results(results: Path) -> list[Path]:
    """Draw (and link) every table of a RESULTS.md; returns the PNGs."""
    lines = results.read_text().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")] + [len(lines)]
    new = lines[: starts[0]]
    for a, b in zip(starts, starts[1:], strict=False):
        new += [lines[a], *chart_section(lines[a], lines[a + 1:b], results.parent / "charts")]
    results.write_text("\n".join(new))
    return sorted((results.parent / "charts").glob("*.png"))


if __name__ == "__main__":  # pragma: no cover
    from benchmarks.results import RESULTS

    for png in chart_results(RESULTS):
        print(png)
    sys.exit(0)
