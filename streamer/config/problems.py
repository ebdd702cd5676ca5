"""What validation reports: every problem, each locatable (file, line, YAML path)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamer.errors import ConfigError


@dataclass(frozen=True, order=True)
class ConfigProblem:
    """One thing wrong with a config file.

    ``path`` is the YAML path of the field (``pipelines[0].policies.compaction.trigger``),
    empty for whole-file problems such as YAML syntax errors; ``line`` is 1-based.
    A ``warning`` (a source folder that does not exist yet) does not make the file invalid.
    """

    file: str
    line: int | None
    path: str
    message: str
    severity: str = "error"  # "error" | "warning"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        message = self.message if self.is_error else f"warning: {self.message}"
        return f"{where}: {self.path}: {message}" if self.path else f"{where}: {message}"


class ConfigValidationError(ConfigError):
    """Raised by :func:`~streamer.config.load_pipelines`; carries all problems found."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = [p for p in problems if p.is_error]
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in pipeline config:\n{lines}")
