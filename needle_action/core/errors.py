"""Errors a user can act on, and the exit codes they map to.

Every failure that stems from something the user wrote (config, template, fixture, CLI usage)
is raised as a :class:`NeedleError` subclass carrying the file, the line when known, and a hint.
The CLI and the action print it as ``file:line: message`` (plus a GitHub annotation in the
action) and exit with the class's code, never with a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1
EXIT_CONFIG = 2
EXIT_PROVIDER = 3


@dataclass
class Location:
    file: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if not self.file:
            return ""
        out = self.file
        if self.line:
            out += f":{self.line}"
            if self.column:
                out += f":{self.column}"
        return out


class Positioned(Protocol):
    """A parser's error that knows where it stopped: 1-based LINE and COLUMN when known."""

    @property
    def line(self) -> int | None: ...

    @property
    def column(self) -> int | None: ...


class NeedleError(Exception):
    """Base class: a problem the user can fix. Never shown with a traceback."""

    exit_code = EXIT_CONFIG
    title = "needle error"

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = Location(str(file) if file is not None else None, line, column)
        self.hint = hint

    @classmethod
    def at(
        cls,
        message: str,
        where: Positioned,
        *,
        file: str | Path,
        line: int | None = None,
        hint: str | None = None,
    ) -> Self:
        """MESSAGE about FILE, placed at the line and column where a parser's error WHERE stopped;
        LINE instead of WHERE's line when the parsed text does not start at FILE's first line."""
        return cls(
            message, file=file, line=where.line if line is None else line, column=where.column, hint=hint
        )

    def format(self) -> str:
        """``file:line: message`` then ``  hint: ...`` on its own line."""
        where = str(self.location)
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigError(NeedleError):
    """The threshold file, a fixture or a CLI argument is wrong (exit 2)."""

    title = "needle config error"


class TemplateError(NeedleError):
    """A prompt template does not parse or render (exit 2)."""

    title = "needle template error"


class TokenizerError(NeedleError):
    """A tokenizer cannot be loaded (e.g. tiktoken encoding missing offline) (exit 2)."""

    title = "needle tokenizer error"


class ProviderUnavailable(NeedleError):
    """The model provider cannot be reached or refuses us (exit 3 when configured to fail)."""

    exit_code = EXIT_PROVIDER
    title = "needle provider unavailable"


class RequestShapeError(ValueError):
    """A request (or a part of one) that does not have the shape the Messages API accepts.

    Not a NeedleError: the caller knows which file the request came from and rewords it as one.
    It lives here, below both, because the tools-file reader (:mod:`needle_action.request.toolformats`,
    used by config) and the request model (:mod:`needle_action.request.blocks`) both raise it.
    ``field_path`` names the field (``messages[1].content[0].type``); ``hint`` says what to do."""

    def __init__(self, field_path: str, message: str, hint: str | None = None, value: Any = None) -> None:
        self.field_path = field_path
        self.message = message
        self.hint = hint
        self.value = value  # the offending value, when there is one (to find it in a data file)
        super().__init__(f"{field_path}: {message}" if field_path else message)
