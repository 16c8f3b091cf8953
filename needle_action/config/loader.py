"""``needle.toml`` -> :class:`~needle_action.config.Config`, or a ``ConfigError`` with file:line.

Three passes, each with its own reason to exist:

1. ``tomllib`` parses the text (syntax errors carry their line only inside the message, so we
   parse it back out);
2. a small line scanner (:func:`scan_lines`) remembers where every table header and key sits, so
   that pydantic errors, missing files and bad globs can point at the line the user must edit;
3. ``[defaults]`` is merged into each ``[prompts.NAME]`` key by key (the nested ``recall`` and
   ``providers.NAME`` tables too, the prompt winning) and pydantic validates the result; then every
   path is checked: it exists, and it stays inside the config root (no absolute paths, no ``..``,
   no symlink resolving outside), because templates and fixtures come from pull requests.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import typing
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ValidationError

from needle_action.config.model import PROVIDERS, Config, PromptConfig, PromptSettings
from needle_action.errors import ConfigError

FIXTURE_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
_GLOB_CHARS = "*?["
_PROMPT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_PROMPT_ONLY_KEYS = ("template", "fixtures", "description")


# --------------------------------------------------------------------------- display helpers


def display_path(path: str | os.PathLike) -> str:
    """A path as the user should read it: relative to the working directory when below it."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        rel = os.path.relpath(p)
    except ValueError:  # another drive on Windows
        return str(p)
    return str(p) if rel.startswith("..") else rel


def last_content_line(text: str) -> int:
    """1-based number of the last non-blank line (where "at end of document" errors really are)."""
    lines = text.splitlines()
    for i in range(len(lines), 0, -1):
        if lines[i - 1].strip():
            return i
    return 1


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


# --------------------------------------------------------------------------- line scanner

_KEY_SEGMENT = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")


def _parse_key(text: str, pos: int) -> tuple[list[str], int] | None:
    """Dotted key at ``text[pos:]`` -> (segments, position after it), or None."""
    segments: list[str] = []
    while True:
        m = _KEY_SEGMENT.match(text, pos)
        if not m or m.end() == pos:
            return None
        bare, basic, literal = m.groups()
        if bare is None and basic is None and literal is None:
            return None
        segments.append(bare if bare is not None else basic if basic is not None else literal)
        pos = m.end()
        if pos < len(text) and text[pos] == ".":
            pos += 1
            continue
        return segments, pos


def _scan_value(text: str, i: int, depth: int, in_ml: str | None) -> tuple[int, str | None]:
    """Track bracket depth and multi-line strings through ``text[i:]`` (a value or its continuation)."""
    n = len(text)
    while i < n:
        if in_ml:
            end = text.find(in_ml, i)
            if end < 0:
                return depth, in_ml
            i = end + 3
            in_ml = None
            continue
        c = text[i]
        if c == "#":
            break
        if c in "\"'":
            if text.startswith(c * 3, i):
                in_ml = c * 3
                i += 3
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if (c == '"' and text[j] == "\\") else 1
            i = j + 1
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return depth, in_ml


def scan_lines(text: str) -> dict[str, int]:
    """Map dotted keys ("prompts.rag", "prompts.rag.max_growth", "defaults.recall.sizes",
    "defaults.recall.needles.0") to their 1-based line.

    Not a TOML parser: it only has to be right for files ``tomllib`` already accepted, and only
    as precise as a line. Keys inside inline tables on one line get that line.
    """
    lines: dict[str, int] = {}
    aot_count: dict[str, int] = {}
    prefix: list[str] = []
    depth, in_ml = 0, None

    def record(path: list[str], lineno: int, exact: bool = True) -> None:
        for k in range(1, len(path)):
            lines.setdefault(".".join(path[:k]), lineno)
        key = ".".join(path)
        if exact or key not in lines:
            lines[key] = lineno

    for lineno, raw in enumerate(text.splitlines(), start=1):
        if in_ml or depth:
            depth, in_ml = _scan_value(raw, 0, depth, in_ml)
            continue
        stripped = raw.lstrip()
        start = len(raw) - len(stripped)
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("[["):
            parsed = _parse_key(raw, start + 2)
            if parsed:
                path = parsed[0]
                key = ".".join(path)
                index = aot_count.get(key, 0)
                aot_count[key] = index + 1
                record(path, lineno, exact=False)
                prefix = [*path, str(index)]
                record(prefix, lineno)
            continue
        if stripped.startswith("["):
            parsed = _parse_key(raw, start + 1)
            if parsed:
                prefix = parsed[0]
                record(prefix, lineno)
            continue
        parsed = _parse_key(raw, start)
        if not parsed:
            continue
        segments, pos = parsed
        if pos >= len(raw) or raw[pos] != "=":
            continue
        path = [*prefix, *segments]
        record(path, lineno)
        value_start = pos + 1
        brace = raw.find("{", value_start)
        if brace >= 0 and raw[value_start:brace].strip() == "":
            # inline table: its keys live on this line
            for m in re.finditer(r"([A-Za-z0-9_-]+)\s*=", raw[brace:]):
                lines.setdefault(".".join([*path, m.group(1)]), lineno)
        depth, in_ml = _scan_value(raw, value_start, 0, None)
    return lines


def value_line(text_lines: list[str], key_line: int | None, value: str) -> int | None:
    """The line of ``value`` (a string literal in a possibly multi-line array) under ``key_line``."""
    if not key_line:
        return None
    needles = (f'"{value}"', f"'{value}'")
    for idx in range(key_line - 1, min(len(text_lines), key_line + 200)):
        line = text_lines[idx]
        if idx > key_line - 1 and re.match(r"""^\s*(\[|[A-Za-z0-9_."'-]+\s*=)""", line):
            break
        if any(n in line for n in needles):
            return idx + 1
    return key_line


# --------------------------------------------------------------------------- merging


def _merge(defaults: dict, prompt: dict) -> dict:
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


# --------------------------------------------------------------------------- the loader


class _Loader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = str(path)
        self.root = path.absolute().parent
        self.real_root = self.root.resolve()
        self.text = ""
        self.text_lines: list[str] = []
        self.lines: dict[str, int] = {}

    def error(
        self, message: str, *, key: str | None = None, line: int | None = None, hint: str | None = None
    ):
        if line is None and key is not None:
            line = self._line(key)
        return ConfigError(message, file=self.file, line=line, hint=hint)

    def _line(self, dotted: str) -> int | None:
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            found = self.lines.get(".".join(parts[:k]))
            if found:
                return found
        return None

    # ---- reading
    def read(self) -> dict:
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
            self.text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            line = self.path.read_bytes()[: exc.start].count(b"\n") + 1
            raise ConfigError(
                "the file is not valid UTF-8", file=self.file, line=line, hint="save it as UTF-8"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot read the file: {exc.strerror}", file=self.file) from None
        self.text_lines = self.text.splitlines()
        try:
            data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            raise self._toml_error(str(exc)) from None
        self.lines = scan_lines(self.text)
        return data

    def _toml_error(self, message: str) -> ConfigError:
        line = column = None
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
        if m:
            line, column = int(m.group(1)), int(m.group(2))
            message = message[: m.start()]
        else:
            m = re.search(r"\s*\(at end of document\)\s*$", message)
            if m:
                line = last_content_line(self.text)
                message = message[: m.start()] + " at the end of the file"
        return ConfigError(
            f"TOML syntax error: {message}",
            file=self.file,
            line=line,
            column=column,
            hint="check quotes, brackets and `key = value` pairs on this line (https://toml.io)",
        )

    # ---- structure
    def split(self, data: dict) -> tuple[dict, dict[str, dict]]:
        for key in data:
            if key not in ("defaults", "prompts"):
                guess = did_you_mean(key, ["defaults", "prompts"])
                is_table = isinstance(data[key], dict)
                what = f"unknown table [{key}]" if is_table else f"unknown top-level key '{key}'"
                hint = (
                    f"did you mean [{guess}]?"
                    if guess
                    else (
                        "the file has a [defaults] table and one [prompts.NAME] table per prompt"
                        if is_table
                        else "settings go under [defaults] or a [prompts.NAME] table"
                    )
                )
                raise self.error(what, key=key, hint=hint)
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
        return defaults, prompts

    # ---- validation
    def validate(self, defaults_raw: dict, prompts_raw: dict[str, dict]) -> Config:
        self._check_provider_names(defaults_raw, "defaults")
        try:
            defaults = PromptSettings.model_validate(defaults_raw)
        except ValidationError as exc:
            raise self._pydantic_error(exc, PromptSettings, {}, defaults_raw, "defaults") from None
        prompts: dict[str, PromptConfig] = {}
        for name, raw in prompts_raw.items():
            self._check_provider_names(raw, f"prompts.{name}")
            merged = _merge(defaults_raw, raw)
            merged["name"] = name
            try:
                prompts[name] = PromptConfig.model_validate(merged)
            except ValidationError as exc:
                raise self._pydantic_error(exc, PromptConfig, raw, defaults_raw, f"prompts.{name}") from None
            self._check_paths(prompts[name], raw, defaults_raw)
        return Config(path=self.path, root=self.root, defaults=defaults, prompts=prompts, lines=self.lines)

    def _check_provider_names(self, table: dict, base: str) -> None:
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

    def _origin(self, loc: tuple, prompt_raw: dict, defaults_raw: dict, base: str) -> str:
        """Dotted key where the offending value was written: the prompt's table, or [defaults]."""

        def present(raw: Any) -> int:
            cur = raw
            for i, part in enumerate(loc):
                if isinstance(cur, dict) and part in cur:
                    cur = cur[part]
                elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
                    cur = cur[part]
                else:
                    return i
            return len(loc)

        own = present(prompt_raw) if base != "defaults" else present(defaults_raw)
        inherited = present(defaults_raw) if base != "defaults" else 0
        if inherited > own:
            return ".".join(["defaults", *map(str, loc[:inherited])])
        return ".".join([base, *map(str, loc[:own])])

    def _pydantic_error(
        self, exc: ValidationError, model: type[BaseModel], prompt_raw: dict, defaults_raw: dict, base: str
    ) -> ConfigError:
        # Union members add tags such as 'list[int]' to the loc; they are not keys the user wrote.
        errors, seen = [], set()
        for e in exc.errors(include_url=False):
            clean = tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or "(" in p)))
            if clean not in seen:
                seen.add(clean)
                errors.append({**e, "loc": clean})
        err = errors[0]
        loc = tuple(err["loc"])
        origin = self._origin(loc, prompt_raw, defaults_raw, base)
        origin_base = "defaults" if origin.startswith("defaults") else base
        where_model = model if origin_base == base else PromptSettings
        more = (
            f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} after this one)"
            if len(errors) > 1
            else ""
        )
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(loc[-1])
            table = ".".join([origin_base, *map(str, loc[:-1])])
            hint = None
            if origin_base == "defaults" and key in _PROMPT_ONLY_KEYS and not loc[:-1]:
                hint = f"'{key}' is set per prompt: move it into each [prompts.NAME] table"
            else:
                fields = _fields_at(where_model, loc[:-1])
                guess = did_you_mean(key, fields) if fields else None
                if guess:
                    hint = f"did you mean '{guess}'?"
                elif fields:
                    hint = f"keys allowed here: {', '.join(sorted(fields))}"
            return self.error(f"unknown key '{key}' in [{table}]{more}", key=origin, hint=hint)
        if kind == "missing":
            key = str(loc[-1])
            table = ".".join([base, *map(str, loc[:-1])])
            hint = (
                'add template = "path/to/prompt.j2" (relative to this file\'s folder)'
                if key == "template"
                else None
            )
            return self.error(f"[{table}] is missing the required key '{key}'{more}", key=origin, hint=hint)
        msg = err["msg"].removeprefix("Value error, ")
        dotted = ".".join(map(str, loc)) or base
        got = err.get("input")
        shown = ""
        if isinstance(got, (str, int, float, bool)) and kind not in ("value_error", "assertion_error"):
            shown = f" (got {_short(got)})"
        if loc and isinstance(loc[-1], int) and len(loc) >= 2:
            what = f"entry {loc[-1] + 1} of '{loc[-2]}'"
            loc_table = loc[:-2]
        else:
            what = f"'{dotted.split('.')[-1]}'" if loc else f"[{base}]"
            loc_table = loc[:-1]
        table = ".".join([origin_base, *map(str, loc_table)])
        return self.error(
            f"{what} in [{table}]: {msg}{shown}{more}",
            key=origin,
            hint=_type_hint(loc, kind),
        )

    # ---- paths
    def _inside(self, rel: str) -> tuple[Path | None, str | None]:
        """(absolute path, None) when REL stays inside the root, else (None, reason)."""
        if not rel or not rel.strip():
            return None, "the path is empty"
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", rel):
            return None, "absolute paths are not allowed"
        if ".." in pure.parts:
            return None, "'..' is not allowed"
        full = self.root / rel
        try:
            real = full.resolve()
        except (OSError, RuntimeError):
            return None, "the path cannot be resolved (symlink loop?)"
        if real != self.real_root and self.real_root not in real.parents:
            return None, "it resolves (through a symlink) outside the folder of the threshold file"
        return full, None

    def _check_paths(self, prompt: PromptConfig, raw: dict, defaults_raw: dict) -> None:
        name = prompt.name
        base = f"prompts.{name}"
        outside_hint = "paths are relative to the threshold file's folder and may not leave it"

        key = f"{base}.template"
        full, why = self._inside(prompt.template)
        if why:
            raise self.error(
                f"template path {prompt.template!r} escapes the config root: {why}",
                key=key,
                hint=outside_hint,
            )
        if not full.exists():
            raise self.error(
                f"template file not found: {prompt.template}",
                key=key,
                hint=self._missing_hint(prompt.template),
            )
        if not full.is_file():
            raise self.error(f"template path {prompt.template!r} is not a file", key=key)

        fx_key = self._origin(("fixtures",), raw, {}, base)
        seen: dict[Path, str] = {}
        for pattern in prompt.fixtures:
            line = value_line(self.text_lines, self._line(fx_key), pattern)
            for match in self._expand(pattern, line, what="fixture", hint=outside_hint):
                if match.suffix.lower() not in FIXTURE_SUFFIXES:
                    raise self.error(
                        f"fixture {display_path(match)} has an unsupported extension",
                        line=line,
                        hint=f"fixtures are YAML, JSON or TOML files ({', '.join(FIXTURE_SUFFIXES)})",
                    )
                real = match.resolve()
                if real in seen:
                    raise self.error(
                        f"fixture {self._rel(match)} is listed twice (by {seen[real]!r} and {pattern!r})",
                        line=line,
                        hint="each fixture is one case; list it once",
                    )
                seen[real] = pattern

        recall = prompt.recall
        if recall.fixture is not None:
            key = self._origin(("recall", "fixture"), raw, defaults_raw, base)
            full, why = self._inside(recall.fixture)
            if why:
                raise self.error(
                    f"recall fixture {recall.fixture!r} escapes the config root: {why}",
                    key=key,
                    hint=outside_hint,
                )
            if not full.is_file():
                raise self.error(
                    f"recall fixture not found: {recall.fixture}",
                    key=key,
                    hint=self._missing_hint(recall.fixture),
                )
        if recall.filler_globs:
            key = self._origin(("recall", "filler_globs"), raw, defaults_raw, base)
            for pattern in recall.filler_globs:
                line = value_line(self.text_lines, self._line(key), pattern)
                self._expand(pattern, line, what="filler", hint=outside_hint)

    def _expand(self, pattern: str, line: int | None, *, what: str, hint: str) -> list[Path]:
        full, why = self._inside(pattern)
        if why:
            raise self.error(f"{what} path {pattern!r} escapes the config root: {why}", line=line, hint=hint)
        if not any(c in pattern for c in _GLOB_CHARS):
            if not full.exists():
                raise self.error(
                    f"{what} file not found: {pattern}", line=line, hint=self._missing_hint(pattern)
                )
            if not full.is_file():
                raise self.error(
                    f"{what} path {pattern!r} is a folder, not a file",
                    line=line,
                    hint=f"use a glob like {pattern.rstrip('/')}/*.yaml",
                )
            return [full]
        try:
            matches = sorted(p for p in self.root.glob(pattern) if p.is_file())
        except (ValueError, OSError) as exc:
            raise self.error(f"bad {what} glob {pattern!r}: {exc}", line=line) from None
        if not matches:
            raise self.error(
                f"{what} glob {pattern!r} matches no files",
                line=line,
                hint=f"globs are relative to {display_path(self.root) or '.'}; check the folder and the extension",
            )
        for m in matches:
            real = m.resolve()
            if real != self.real_root and self.real_root not in real.parents:
                raise self.error(
                    f"{what} {self._rel(m)} (from {pattern!r}) resolves through a symlink outside the config root",
                    line=line,
                    hint=hint,
                )
        return matches

    def _rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return display_path(path)

    def _missing_hint(self, rel: str) -> str:
        full = self.root / rel
        parent = full.parent
        if parent.is_dir():
            names = [p.name for p in parent.iterdir()]
            guess = did_you_mean(full.name, names)
            if guess:
                return f"did you mean {(PurePosixPath(rel).parent / guess).as_posix()}?"
        return f"paths are relative to the threshold file's folder ({display_path(self.root) or '.'})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_hint(loc: tuple, kind: str) -> str | None:
    last = str(loc[-1]) if loc else ""
    if last == "max_growth":
        return 'write max_growth = "10%" (percent of the base) or max_growth = 500 (tokens)'
    if last == "sizes":
        return 'write sizes = [2000, 8000] (tokens) or sizes = "auto"'
    if kind.startswith("int") or kind.startswith("float"):
        return "write a number without quotes"
    if kind.startswith("bool"):
        return "write true or false without quotes"
    if kind == "literal_error":
        return "use one of the values listed above, in double quotes"
    return None


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the BaseModel inside ANNOTATION, whether it sits in a list/dict that consumes a loc element)."""
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        inner, _ = _model_of(typing.get_args(annotation)[-1])
        return inner, True
    if origin is not None:  # Optional / Union
        for arg in typing.get_args(annotation):
            inner, container = _model_of(arg)
            if inner is not None:
                return inner, container
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _fields_at(model: type[BaseModel], path: tuple) -> list[str]:
    """Field names of the sub-model reached by walking PATH (a pydantic loc) from MODEL."""
    cur: type[BaseModel] | None = model
    i = 0
    while i < len(path):
        if cur is None:
            return []
        field = cur.model_fields.get(str(path[i]))
        if field is None:
            return []
        cur, container = _model_of(field.annotation)
        i += 2 if container else 1
    if cur is None:
        return []
    names = list(cur.model_fields)
    if cur is PromptConfig:
        names.remove("name")
    return names


def load_config(path: str | os.PathLike) -> Config:
    """Read, merge and validate the threshold file; every problem is a ``ConfigError`` with file:line."""
    loader = _Loader(Path(path))
    data = loader.read()
    defaults, prompts = loader.split(data)
    return loader.validate(defaults, prompts)


__all__ = [
    "load_config",
    "scan_lines",
    "display_path",
    "did_you_mean",
    "last_content_line",
    "FIXTURE_SUFFIXES",
]
