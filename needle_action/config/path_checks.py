"""The threshold file's paths checked against the files on disk: templates, fixtures, the recall
fixture and filler globs exist, and each stays inside the config root and out of hidden files and
folders (unless the workspace allows them). Every problem is a ConfigError at the line of
the key (or of the value in a list) the user must edit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from needle_action.config.cases import CASE_FILE_SUFFIXES, is_case_file, read_cases, split_case
from needle_action.config.model import PromptConfig
from needle_action.config.pydantic_errors import did_you_mean, origin_key
from needle_action.config.toml_lines import nearest_line, value_line
from needle_action.core.dataformats import DataError, parse_json
from needle_action.core.errors import ConfigError
from needle_action.core.paths import PathEscape, display_path, is_inside, read_text, relative
from needle_action.core.workspace import ESCAPE_REASONS, HIDDEN_HINT, Workspace
from needle_action.request.jsonpointer import PointerError, resolve
from needle_action.request.toolformats import load_tools

MAX_REQUEST_BYTES = 20_000_000
FIXTURE_SUFFIXES = (".yaml", ".yml", ".json", ".toml", *CASE_FILE_SUFFIXES)
_GLOB_CHARS = "*?["
OUTSIDE_HINT = "paths are relative to the threshold file's folder and may not leave it"

ErrorAt = Callable[..., ConfigError]  # (message, *, key=None, line=None, hint=None) -> ConfigError


class PathChecks:
    """The path checks of one threshold file (its WORKSPACE, its text and key lines for locating errors)."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        lines: dict[str, int],
        text_lines: list[str],
        error: ErrorAt,
    ) -> None:
        self.workspace, self.root = workspace, workspace.root
        self.lines, self.text_lines = lines, text_lines
        self.error = error

    def _inside(self, rel: str) -> tuple[Path | None, str | None]:
        """(absolute path, None) when REL stays inside the root and out of hidden files and folders,
        else (None, "escapes the config root: WHY" or "is hidden: WHY")."""
        if not rel or not rel.strip():
            return None, "is empty"
        try:
            full = self.workspace.path(rel)
        except PathEscape as exc:
            verb = "is refused" if exc.kind in ("hidden", "invalid") else "escapes the config root"
            return None, f"{verb}: {ESCAPE_REASONS[exc.kind]}"
        return full, None

    def check_prompt(self, prompt: PromptConfig, raw: dict[str, Any], defaults_raw: dict[str, Any]) -> None:
        """Every path PROMPT names (RAW: its table as written; DEFAULTS_RAW: [defaults] as written)."""
        base = f"prompts.{prompt.name}"
        if prompt.request is not None:
            self._check_request(prompt, base)
        elif prompt.builder is not None:
            module = prompt.builder.rpartition(":")[0]
            self._check_template(module, f"{base}.builder", what="builder module")
        else:
            self._check_template(prompt.template, f"{base}.template")
        self._check_fixtures(prompt.fixtures, origin_key(("fixtures",), raw, {}, base))
        if prompt.tools is not None:
            self._check_tools(prompt.tools, origin_key(("tools",), raw, defaults_raw, base))
        recall = prompt.recall
        if recall.fixture is not None:
            key = origin_key(("recall", "fixture"), raw, defaults_raw, base)
            self._check_recall_fixture(recall.fixture, key)
        if recall.filler_globs:
            key = origin_key(("recall", "filler_globs"), raw, defaults_raw, base)
            for pattern in recall.filler_globs:
                line = value_line(self.text_lines, nearest_line(self.lines, key), pattern)
                self._expand(pattern, line, what="filler")

    def _check_template(self, template: str, key: str, *, what: str = "template") -> Path:
        full, why = self._inside(template)
        if full is None:
            raise self.error(f"{what} path {template!r} {why}", key=key, hint=_hint(why))
        if not full.exists():
            raise self.error(f"{what} file not found: {template}", key=key, hint=self._missing_hint(template))
        if not full.is_file():
            raise self.error(f"{what} path {template!r} is not a file", key=key)
        return full

    def _check_request(self, prompt: PromptConfig, base: str) -> None:
        """The recorded request exists, is a JSON object, and both pointers resolve in it."""
        assert prompt.request is not None
        full = self._check_template(prompt.request, f"{base}.request", what="request")
        file = display_path(full)
        try:
            body = parse_json(read_text(full, what="request", file=file, max_bytes=MAX_REQUEST_BYTES))
        except DataError as exc:
            raise ConfigError(
                f"the request is not valid JSON: {exc.message}", file=file, line=exc.line
            ) from None
        if not isinstance(body, dict):
            raise ConfigError("a recorded request is a JSON object (the request body)", file=file)
        for key in ("context_path", "question_path"):
            pointer = getattr(prompt, key)
            if pointer is None:
                continue
            try:
                resolve(body, pointer)
            except PointerError as exc:
                raise self.error(
                    f"{key} {pointer!r} does not resolve in {prompt.request}: {exc.message.split(': ', 1)[-1]}",
                    key=f"{base}.{key}",
                    hint=exc.hint,
                ) from None

    def _check_fixtures(self, patterns: list[str], key: str) -> None:
        """Every fixture pattern matches files with a known extension, each file listed once."""
        seen: dict[Path, str] = {}
        for pattern in patterns:
            line = value_line(self.text_lines, nearest_line(self.lines, key), pattern)
            for match in self._expand(pattern, line, what="fixture"):
                if match.suffix.lower() not in FIXTURE_SUFFIXES:
                    raise self.error(
                        f"fixture {display_path(match)} has an unsupported extension",
                        line=line,
                        hint=f"fixtures are YAML, JSON or TOML files, or case files ({', '.join(FIXTURE_SUFFIXES)})",
                    )
                if is_case_file(match) and match.is_file():
                    read_cases(match)  # a header or size problem now, at its file:line
                real = match.resolve()
                if real in seen:
                    raise self.error(
                        f"fixture {relative(self.root, match)} is listed twice (by {seen[real]!r} and {pattern!r})",
                        line=line,
                        hint="each fixture is one case; list it once",
                    )
                seen[real] = pattern

    def _check_tools(self, tools: str, key: str) -> None:
        """The tools file exists inside the root and holds a valid tool list (errors at its line)."""
        full, why = self._inside(tools)
        if full is None:
            raise self.error(f"tools path {tools!r} {why}", key=key, hint=_hint(why))
        if not full.is_file():
            raise self.error(f"tools file not found: {tools}", key=key, hint=self._missing_hint(tools))
        load_tools(full, file=display_path(full))

    def _check_recall_fixture(self, fixture: str, key: str) -> None:
        """The recall fixture exists inside the root; a case name (``cases.jsonl:3``) names a case."""
        name, number = split_case(fixture)
        full, why = self._inside(name.as_posix())
        if full is None:
            raise self.error(f"recall fixture {fixture!r} {why}", key=key, hint=_hint(why))
        if not full.is_file():
            raise self.error(
                f"recall fixture not found: {name.as_posix()}",
                key=key,
                hint=self._missing_hint(name.as_posix()),
            )
        if number is not None and number not in {c.number for c in read_cases(full)}:
            raise self.error(
                f"recall fixture {fixture!r}: {name.name} has no case {number}",
                key=key,
                hint="a case is named by its line (.jsonl) or its row after the header (.csv)",
            )

    def _expand(self, pattern: str, line: int | None, *, what: str) -> list[Path]:
        """The files PATTERN (a path or a glob) names, each checked to stay inside the root."""
        full, why = self._inside(pattern)
        if full is None:
            raise self.error(f"{what} path {pattern!r} {why}", line=line, hint=_hint(why))
        if not any(c in pattern for c in _GLOB_CHARS):
            self._check_single_file(full, pattern, line, what=what)
            return [full]
        return self._glob(pattern, line, what=what)

    def _check_single_file(self, full: Path, pattern: str, line: int | None, *, what: str) -> None:
        if not full.exists():
            raise self.error(f"{what} file not found: {pattern}", line=line, hint=self._missing_hint(pattern))
        if not full.is_file():
            raise self.error(
                f"{what} path {pattern!r} is a folder, not a file",
                line=line,
                hint=f"use a glob like {pattern.rstrip('/')}/*.yaml",
            )

    def _glob(self, pattern: str, line: int | None, *, what: str) -> list[Path]:
        try:
            # hidden matches are skipped, as a shell's glob skips them (a `*` in pathlib matches them)
            matches = [p for p in self.workspace.glob(pattern) if p.is_file()]
        except (ValueError, OSError) as exc:
            raise self.error(f"bad {what} glob {pattern!r}: {exc}", line=line) from None
        if not matches:
            raise self.error(
                f"{what} glob {pattern!r} matches no files",
                line=line,
                hint=f"globs are relative to {display_path(self.root) or '.'}; check the folder and the extension",
            )
        for m in matches:
            if not is_inside(self.root, m):
                raise self.error(
                    f"{what} {relative(self.root, m)} (from {pattern!r}) resolves through a symlink outside the config root",
                    line=line,
                    hint=OUTSIDE_HINT,
                )
        return matches

    def _missing_hint(self, rel: str) -> str:
        full = self.root / rel
        parent = full.parent
        if parent.is_dir():
            names = [p.name for p in parent.iterdir()]
            guess = did_you_mean(full.name, names)
            if guess:
                return f"did you mean {(PurePosixPath(rel).parent / guess).as_posix()}?"
        return f"paths are relative to the threshold file's folder ({display_path(self.root) or '.'})"


def _hint(why: str | None) -> str:
    return HIDDEN_HINT if why and "hidden" in why else OUTSIDE_HINT
