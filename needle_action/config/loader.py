"""``needle.toml`` -> :class:`~needle_action.config.Config`, or a ``ConfigError`` with file:line.

Three passes, each with its own reason to exist:

1. ``tomllib`` parses the text, through :func:`~needle_action.core.dataformats.parse_toml` (syntax
   errors carry their line only inside the message, so it is parsed back out; integers beyond
   4,300 digits and deep nesting become errors with a line too);
2. a small line scanner (:func:`~needle_action.config.toml_lines.scan_lines`) remembers where every
   table header and key sits, so that pydantic errors, missing files and bad globs can point at
   the line the user must edit;
3. ``[defaults]`` is merged into each ``[prompts.NAME]`` key by key (the nested ``recall`` and
   ``providers.NAME`` tables too, the prompt winning) and pydantic validates the result
   (:mod:`~needle_action.config.pydantic_errors` words its errors); then every path is checked: it
   exists, and it stays inside the config root (no absolute paths, no ``..``, no symlink resolving
   outside, no hidden file or folder the workspace does not allow), because templates
   and fixtures come from pull requests.

``load_config(path, text=..., check_paths=False)`` reads a file that is not checked out (the
action reads the base branch's threshold file with ``git cat-file``): settings only, no file checks.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from needle_action.config.model import PROVIDERS, Config, FileAccess, PromptConfig, PromptSettings
from needle_action.config.path_checks import FIXTURE_SUFFIXES, PathChecks
from needle_action.config.pydantic_errors import Problem, describe, did_you_mean, origin_key
from needle_action.config.toml_lines import nearest_line, scan_lines
from needle_action.core.dataformats import DataError, parse_toml
from needle_action.core.errors import ConfigError
from needle_action.core.names import known_param
from needle_action.core.paths import (
    read_text,
)

_PROMPT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_TOP_LEVEL = ("defaults", "prompts", "files")
MAX_CONFIG_BYTES = 1_000_000


def _merge(defaults: dict[str, Any], prompt: dict[str, Any]) -> dict[str, Any]:
    """Key by key, the prompt winning; ``recall`` and each ``providers.NAME`` merged one level deeper."""
    out = dict(defaults)
    for key, value in prompt.items():
        base = out.get(key)
        if key == "recall" and isinstance(base, dict) and isinstance(value, dict):
            out[key] = {**base, **value}
        elif key == "providers" and isinstance(base, dict) and isinstance(value, dict):
            merged = dict(base)
            for pname, ptable in value.items():
                pbase = merged.get(pname)
                merged[pname] = (
                    {**pbase, **ptable} if isinstance(pbase, dict) and isinstance(ptable, dict) else ptable
                )
            out[key] = merged
        else:
            out[key] = value
    return out


class _Loader:
    """One threshold file: its text, where each key sits, and every check that needs both."""

    def __init__(
        self, path: Path, *, trusted_files: FileAccess | None = None, check_paths: bool = True
    ) -> None:
        self.path = path
        self.file = str(path)
        self.root = path.absolute().parent
        self.text = ""
        self.text_lines: list[str] = []
        self.lines: dict[str, int] = {}
        self.check_paths = check_paths
        # the [files] table the path checks follow: the file's own, unless a trusted one is given
        self.trusted_files = trusted_files
        self.files = FileAccess()
        self.warnings: list[str] = []

    def error(
        self, message: str, *, key: str | None = None, line: int | None = None, hint: str | None = None
    ) -> ConfigError:
        """A ConfigError in this file, at LINE or else at the line of the dotted KEY."""
        if line is None and key is not None:
            line = nearest_line(self.lines, key)
        return ConfigError(message, file=self.file, line=line, hint=hint)

    # ---- reading
    def read(self, text: str | None = None) -> dict[str, Any]:
        """The parsed TOML (of TEXT, else of the file); remembers the text and the line of every key."""
        if text is not None:
            self.text = text
        else:
            self.text = self._read_file()
        self.text_lines = self.text.splitlines()
        try:
            data = parse_toml(self.text)
        except DataError as exc:
            raise self._toml_error(exc) from None
        self.lines = scan_lines(self.text)
        return data

    def _read_file(self) -> str:
        if "\x00" in self.file:
            raise ConfigError("the threshold file's path contains a NUL character", file=repr(self.file))
        if not self.path.exists():
            raise ConfigError(
                "threshold file not found",
                file=self.file,
                hint="run `needle init` to write a starter needle.toml, or point --config at yours",
            )
        if self.path.is_dir():
            raise ConfigError(
                "expected a TOML file but this is a folder",
                file=self.file,
                hint="pass --config PATH/needle.toml",
            )
        try:
            return read_text(self.path, what="the file", file=self.file, max_bytes=MAX_CONFIG_BYTES)
        except OSError as exc:
            raise ConfigError(f"cannot read the file: {exc.strerror}", file=self.file) from None

    def _toml_error(self, exc: DataError) -> ConfigError:
        return ConfigError.at(
            f"TOML syntax error: {exc.message}{' at the end of the file' if exc.at_end else ''}",
            exc,
            file=self.file,
            hint="check quotes, brackets and `key = value` pairs on this line (https://toml.io)",
        )

    # ---- structure
    def split(self, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """([defaults] as written, {prompt name: its table as written}), the shape checked."""
        for key in data:
            if key not in _TOP_LEVEL:
                raise self._unknown_top_level(key, isinstance(data[key], dict))
        defaults = data.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self.error(
                "'defaults' must be a table", key="defaults", hint="write it as [defaults] followed by keys"
            )
        prompts = data.get("prompts")
        if prompts is None or (isinstance(prompts, dict) and not prompts):
            raise self.error(
                "no prompts defined: the file needs at least one [prompts.NAME] table",
                key="prompts",
                line=None if "prompts" in self.lines else 1,
                hint='add e.g. [prompts.answer] with template = "prompts/answer.j2"; `needle init` writes one for you',
            )
        if not isinstance(prompts, dict):
            raise self.error(
                "'prompts' must be a table of tables", key="prompts", hint="write [prompts.NAME] headers"
            )
        for name, table in prompts.items():
            self._check_prompt_table(name, table)
        self.files = self._files(data.get("files", {}))
        return defaults, prompts

    def _files(self, raw: object) -> FileAccess:
        if not isinstance(raw, dict):
            raise self.error("'files' must be a table", key="files", hint="write it as [files]")
        try:
            files = FileAccess.model_validate(raw)
        except ValidationError as exc:
            raise self._invalid(describe(exc, FileAccess, raw, {}, "files")) from None
        return files

    def _unknown_top_level(self, key: str, is_table: bool) -> ConfigError:
        guess = did_you_mean(key, _TOP_LEVEL)
        what = f"unknown table [{key}]" if is_table else f"unknown top-level key '{key}'"
        if guess:
            hint = f"did you mean [{guess}]?"
        elif is_table:
            hint = "the file has a [defaults] table and one [prompts.NAME] table per prompt"
        else:
            hint = "settings go under [defaults] or a [prompts.NAME] table"
        return self.error(what, key=key, hint=hint)

    def _check_prompt_table(self, name: str, table: object) -> None:
        if not isinstance(table, dict):
            raise self.error(
                f"prompts.{name} must be a table",
                key=f"prompts.{name}",
                hint=f'write it as [prompts.{name}] followed by template = "..." on the next line',
            )
        if not _PROMPT_NAME.match(name):
            raise self.error(
                f"prompt name {name!r} is not usable",
                key=f"prompts.{name}",
                hint="use letters, digits, '_' and '-' (it appears on the command line and in PR comments)",
            )
        if "name" in table:
            raise self.error(
                f"unknown key 'name' in [prompts.{name}]",
                key=f"prompts.{name}.name",
                hint=f'a prompt\'s name is its table name ({name}); use description = "..." for prose',
            )

    # ---- validation
    def validate(self, defaults_raw: dict[str, Any], prompts_raw: dict[str, dict[str, Any]]) -> Config:
        """The validated Config: defaults merged into each prompt, every path checked."""
        self._check_provider_names(defaults_raw, "defaults")
        try:
            defaults = PromptSettings.model_validate(defaults_raw)
        except ValidationError as exc:
            raise self._invalid(describe(exc, PromptSettings, {}, defaults_raw, "defaults")) from None
        prompts: dict[str, PromptConfig] = {}
        for name, raw in prompts_raw.items():
            self._check_provider_names(raw, f"prompts.{name}")
            merged = _merge(defaults_raw, raw)
            merged["name"] = name
            try:
                prompts[name] = PromptConfig.model_validate(merged)
            except ValidationError as exc:
                raise self._invalid(
                    describe(exc, PromptConfig, raw, defaults_raw, f"prompts.{name}")
                ) from None
            if self.check_paths:
                self._path_checks().check_prompt(prompts[name], raw, defaults_raw)
            self._warn_unknown_params(prompts[name], raw, defaults_raw)
        return Config(
            path=self.path,
            root=self.root,
            defaults=defaults,
            prompts=prompts,
            files=self.files,
            lines=self.lines,
            warnings=self.warnings,
        )

    def _warn_unknown_params(
        self, prompt: PromptConfig, raw: dict[str, Any], defaults_raw: dict[str, Any]
    ) -> None:
        """Request parameters neither API lists are sent as written (never dropped), with a warning."""
        for key in prompt.request_params:
            if known_param(key):
                continue
            dotted = origin_key(("request_params", key), raw, defaults_raw, f"prompts.{prompt.name}")
            where = ConfigError("", file=self.file, line=nearest_line(self.lines, dotted)).location
            text = (
                f"{where}: request parameter {key!r} is neither an Anthropic nor an OpenAI one; "
                "it is sent as written"
            )
            if text not in self.warnings:
                self.warnings.append(text)
                print(f"warning: {text}", file=sys.stderr, flush=True)

    def _path_checks(self) -> PathChecks:
        files = self.trusted_files or self.files
        return PathChecks(
            files.workspace(self.root), lines=self.lines, text_lines=self.text_lines, error=self.error
        )

    def _invalid(self, problem: Problem) -> ConfigError:
        """PROBLEM (a ValidationError :func:`describe`-d) at the line of its key."""
        return self.error(problem.message, key=problem.key, hint=problem.hint)

    def _check_provider_names(self, table: dict[str, Any], base: str) -> None:
        providers = table.get("providers")
        if not isinstance(providers, dict):
            return
        for pname in providers:
            if pname not in PROVIDERS:
                guess = did_you_mean(pname, PROVIDERS)
                raise self.error(
                    f"unknown provider '{pname}' in [{base}.providers]",
                    key=f"{base}.providers.{pname}",
                    hint=(f"did you mean '{guess}'? " if guess else "")
                    + f"providers are: {', '.join(PROVIDERS)}",
                )


def load_config(
    path: str | os.PathLike[str],
    *,
    text: str | None = None,
    check_paths: bool = True,
    trusted_files: FileAccess | None = None,
) -> Config:
    """Read, merge and validate the threshold file; every problem is a ``ConfigError`` with file:line.

    TEXT: the file's contents when it is not on disk (PATH then names it in messages and fixes the
    root). CHECK_PATHS=False skips every file check (templates, fixtures, globs): settings only.
    TRUSTED_FILES replaces the file's own ``[files]`` table in the path checks (the action passes the
    base branch's, so a pull request cannot allow-list ``.github/`` for itself).
    """
    loader = _Loader(Path(path), trusted_files=trusted_files, check_paths=check_paths)
    data = loader.read(text)
    defaults, prompts = loader.split(data)
    return loader.validate(defaults, prompts)


__all__ = ["FIXTURE_SUFFIXES", "load_config"]
