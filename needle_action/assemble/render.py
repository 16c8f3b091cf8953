"""Templates + fixtures -> the exact request the application would send (:class:`RenderedPrompt`).

Templates and fixtures come from pull requests, so they are treated as hostile:

* Jinja2 runs in an ``ImmutableSandboxedEnvironment`` (no ``__dunder__`` access, no mutation of
  fixture data, ``str.format`` checked) with ``StrictUndefined`` and autoescape off;
* the only globals are the fixture's variables and Jinja's harmless helpers (``range``, ``dict``,
  ``namespace``, ``cycler``, ``joiner``); nothing from ``os.environ`` or the process is reachable;
* includes, imports and extends resolve only inside the config root: absolute names, ``..`` and
  symlinks that leave the root are refused;
* role markers (``system:`` / ``user:`` / ``assistant:`` on a line of their own) are honoured only
  when they are template text: every interpolated value is wrapped in private-use sentinels by the
  environment's ``finalize`` hook, so a retrieved document or a user message cannot forge a
  ``system:`` line. See docs/templates.md for the convention.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
import tomllib
import traceback
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import yaml
from jinja2.exceptions import SecurityError, TemplateNotFound, TemplateSyntaxError, UndefinedError
from jinja2.runtime import BlockReference, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from needle_action.assemble.prompt import Message, RenderedPrompt
from needle_action.config.model import Config, PromptConfig
from needle_action.errors import ConfigError, NeedleError, TemplateError
from needle_action.paths import display_path, last_content_line

# Private-use code points (Supplementary Private Use Area-A): they bracket every interpolated value
# in the raw render and are removed before anything leaves this module.
OPEN = "\U000f8e00"
CLOSE = "\U000f8e01"


def strip_sentinels(text: str) -> str:
    # two str.replace calls are ~50x faster than str.translate for astral code points
    return text.replace(OPEN, "").replace(CLOSE, "")


_SENTINEL_RE = re.compile(f"[{OPEN}{CLOSE}]")

_PAD = f"[ \\t\\r{OPEN}{CLOSE}]*"
_MARKER_RE = re.compile(rf"^{_PAD}(system|user|assistant){_PAD}:{_PAD}$", re.IGNORECASE | re.MULTILINE)
_SOURCE_MARKER_RE = re.compile(r"^\s*(system|user|assistant)\s*:\s*$", re.IGNORECASE)

# Cheap guards against templates that try to exhaust memory ('x' * 10**10, 9 ** 9 ** 9).
MAX_SEQUENCE_PRODUCT = 20_000_000
MAX_EXPONENT = 1024


# --------------------------------------------------------------------------- fixtures


def _yaml_error(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem


def _parse_fixture_text(text: str, suffix: str, file: str) -> Any:
    if suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            line, col, problem = _yaml_error(exc)
            raise ConfigError(
                f"YAML syntax error in fixture: {problem}",
                file=file,
                line=line,
                column=col,
                hint="check indentation and quoting on this line",
            ) from None
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"JSON syntax error in fixture: {exc.msg}",
                file=file,
                line=exc.lineno,
                column=exc.colno,
                hint="check commas, quotes and brackets on this line",
            ) from None
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
            line = col = None
            if m:
                line, col, message = int(m.group(1)), int(m.group(2)), message[: m.start()]
            elif message.endswith("(at end of document)"):
                line = last_content_line(text)
            raise ConfigError(
                f"TOML syntax error in fixture: {message}",
                file=file,
                line=line,
                column=col,
                hint="check quotes, brackets and `key = value` pairs on this line",
            ) from None
    raise ConfigError(
        f"unsupported fixture type {suffix or '(no extension)'}",
        file=file,
        hint="fixtures are YAML (.yaml, .yml), JSON (.json) or TOML (.toml) files",
    )


def load_fixture(path: str | os.PathLike) -> dict:
    """A fixture file's variables. YAML, JSON or TOML; the top level must be a mapping."""
    p = Path(path)
    file = display_path(p)
    if not p.is_file():
        raise ConfigError(
            "fixture file not found" if not p.exists() else "fixture path is not a file",
            file=file,
            hint="fixture paths are relative to the threshold file's folder",
        )
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(
            "fixture is not valid UTF-8", file=file, line=line, hint="save it as UTF-8"
        ) from None
    data = _parse_fixture_text(text, p.suffix.lower(), file)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(
            f"the fixture's top level must be a mapping of variable names to values, but it is {kind}",
            file=file,
            line=1,
            hint="write e.g. `question: ...` and `documents: [...]` at the top level",
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(
            f"fixture variable names must be strings, got {bad[0]!r}",
            file=file,
            line=_key_line(text, str(bad[0])),
            hint="quote the key",
        )
    return data


def _key_line(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith((key, f'"{key}"', f"'{key}'")):
            return i
    return None


# --------------------------------------------------------------------------- .prompty


@dataclass(frozen=True)
class _Prompty:
    front: dict
    body: str  # the file with front matter lines blanked, so body line N is file line N


def _split_prompty(text: str, file: str) -> _Prompty:
    lines = text.split("\n")
    first = lines[0].lstrip("\ufeff").strip() if lines else ""
    if first != "---":
        return _Prompty({}, text)
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise TemplateError(
            "the .prompty front matter starting here is never closed by a `---` line",
            file=file,
            line=1,
            hint="end the YAML front matter with a line holding only ---",
        )
    front_text = "\n".join(lines[1:end])
    try:
        front = yaml.safe_load(front_text) or {}
    except yaml.YAMLError as exc:
        line, col, problem = _yaml_error(exc)
        raise TemplateError(
            f"YAML error in the .prompty front matter: {problem}",
            file=file,
            line=line + 1 if line else None,
            column=col,
            hint="check indentation and quoting",
        ) from None
    if not isinstance(front, dict):
        raise TemplateError("the .prompty front matter must be a YAML mapping", file=file, line=2)
    body = "\n" * (end + 1) + "\n".join(lines[end + 1 :])
    return _Prompty(front, body)


def _prompty_defaults(front: dict, prompty_path: Path, root: Path, file: str) -> dict:
    """Default inputs from ``sample`` (mapping or file reference) and ``inputs.X.default/sample``."""
    out: dict = {}
    inputs = front.get("inputs")
    if isinstance(inputs, dict):
        for name, spec in inputs.items():
            if isinstance(spec, dict):
                for key in ("default", "sample"):
                    if key in spec:
                        out[str(name)] = spec[key]
                        break
    sample = front.get("sample")
    if isinstance(sample, dict):
        out.update(sample)
    elif isinstance(sample, str) and sample.strip():
        ref = sample.strip()
        m = re.fullmatch(r"\$\{file:(.+)\}", ref)
        ref = m.group(1).strip() if m else ref
        target = _confined(root, prompty_path.parent / ref, what="the .prompty sample file", file=file)
        out.update(load_fixture(target))
    return out


# --------------------------------------------------------------------------- the sandbox


class _AccessDenied(Exception):
    """A template reached for a file outside the config root (turned into TemplateError)."""


class _Rendered(str):
    """Output of a macro, ``caller()`` or ``super()``: template text, already sentinel-marked inside."""


class RootLoader(jinja2.BaseLoader):
    """Resolves template names only inside ROOT; refuses absolute names, '..' and escaping symlinks."""

    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.real_root = self.root.resolve()
        self.filenames: dict[str, str] = {}  # absolute filename -> display path

    def check_name(self, name: str) -> Path:
        posix = name.replace("\\", "/")
        if PurePosixPath(posix).is_absolute() or re.match(r"^[A-Za-z]:", posix):
            raise _AccessDenied(
                f"template name {name!r} is an absolute path; only files inside the config root may be used"
            )
        if ".." in PurePosixPath(posix).parts:
            raise _AccessDenied(
                f"template name {name!r} contains '..'; only files inside the config root may be used"
            )
        full = self.root / posix
        try:
            real = full.resolve()
        except (OSError, RuntimeError):
            raise _AccessDenied(f"template {name!r} cannot be resolved (symlink loop?)") from None
        if real != self.real_root and self.real_root not in real.parents:
            raise _AccessDenied(f"template {name!r} resolves through a symlink outside the config root")
        return full

    def get_source(self, environment, template):
        full = self.check_name(template)
        if not full.is_file():
            raise TemplateNotFound(template)
        mtime = full.stat().st_mtime_ns
        try:
            text = full.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            line = full.read_bytes()[: exc.start].count(b"\n") + 1
            raise TemplateError(
                "template is not valid UTF-8", file=display_path(full), line=line, hint="save it as UTF-8"
            ) from None
        filename = str(full)
        self.filenames[filename] = display_path(full)
        if full.suffix.lower() == ".prompty":
            text = _split_prompty(text, display_path(full)).body

        def uptodate() -> bool:
            try:
                return full.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return text, filename, uptodate


def _finalize(value: Any) -> str:
    """Wrap every ``{{ ... }}`` result in sentinels so the marker splitter can tell data from template."""
    if isinstance(value, _Rendered):
        return value
    text = str(value)  # StrictUndefined raises here, which is what we want
    if OPEN in text or CLOSE in text:
        if _balanced(text):
            return text  # a {% set %} block or similar: template text with marked interpolations inside
        text = strip_sentinels(text)
    return f"{OPEN}{text}{CLOSE}"


def _balanced(text: str) -> bool:
    depth = 0
    for m in _SENTINEL_RE.finditer(text):
        depth += 1 if m.group() == OPEN else -1
        if depth < 0:
            return False
    return depth == 0


class PromptEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def __init__(self, root: Path) -> None:
        super().__init__(
            loader=RootLoader(root),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            finalize=_finalize,
            auto_reload=True,
            cache_size=400,
        )
        # Only harmless helpers: no lipsum, no url helpers, nothing that reaches modules.
        self.globals = {
            "range": self.globals["range"],
            "dict": dict,
            "namespace": self.globals["namespace"],
            "cycler": self.globals["cycler"],
            "joiner": self.globals["joiner"],
        }

    def join_path(self, template: str, parent: str) -> str:
        """``{% include "x.j2" %}`` finds x.j2 next to the including template first, then at the root."""
        posix = template.replace("\\", "/")
        if posix.startswith("/") or ".." in PurePosixPath(posix).parts:
            return template  # the loader refuses it with a clear message
        sibling = posixpath.join(posixpath.dirname(parent), posix)
        if sibling != posix and (self.loader.root / sibling).is_file():
            return sibling
        return template

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - mirrors Jinja's signature
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(__obj, (Macro, BlockReference)) and isinstance(result, str):
            return _Rendered(result)
        return result

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(n, int)
                    and len(seq) * n > MAX_SEQUENCE_PRODUCT
                ):
                    raise SecurityError("the template tried to build a sequence too large to be a prompt")
        if (
            operator == "**"
            and isinstance(right, int)
            and right > MAX_EXPONENT
            and isinstance(left, (int, float))
        ):
            if abs(left) > 1:
                raise SecurityError("the template tried to compute a number too large to be a prompt")
        return super().call_binop(context, operator, left, right)


_envs: dict[Path, PromptEnvironment] = {}
_envs_lock = threading.Lock()


def environment_for(root: Path) -> PromptEnvironment:
    """One environment per config root; Jinja caches compiled templates per (name, mtime) inside it."""
    key = root.absolute().resolve()
    with _envs_lock:
        env = _envs.get(key)
        if env is None:
            env = _envs[key] = PromptEnvironment(root)
        return env


# --------------------------------------------------------------------------- error mapping


def _template_frame(exc: BaseException, loader: RootLoader) -> tuple[str | None, int | None]:
    """The innermost template frame of EXC's traceback (Jinja rewrites them to template lines)."""
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in loader.filenames:
            found = (loader.filenames[frame.filename], frame.lineno)
    return found


def _as_template_error(exc: BaseException, loader: RootLoader, default_file: str) -> NeedleError:
    if isinstance(exc, NeedleError):
        return exc
    file, line = _template_frame(exc, loader)
    file = file or default_file
    if isinstance(exc, TemplateSyntaxError):
        file = loader.filenames.get(
            exc.filename or "", display_path(exc.filename) if exc.filename else default_file
        )
        return TemplateError(
            f"template syntax error: {exc.message}",
            file=file,
            line=exc.lineno,
            hint="check the {% ... %} and {{ ... }} tags on this line",
        )
    if isinstance(exc, _AccessDenied):
        return TemplateError(
            str(exc),
            file=file,
            line=line,
            hint="include templates by their path relative to the threshold file's folder",
        )
    if isinstance(exc, SecurityError):
        text = str(exc)
        if not text.startswith("the template"):
            text = f"the template tried to reach something the sandbox forbids: {text}"
        return TemplateError(
            text,
            file=file,
            line=line,
            hint="templates may only use their variables and plain filters; attributes "
            "starting with '_' and Python internals are off limits",
        )
    if isinstance(exc, UndefinedError):
        return TemplateError(
            f"undefined variable: {exc.message}",
            file=file,
            line=line,
            hint="add it to the fixture, or guard it with {% if name is defined %}",
        )
    if isinstance(exc, TemplateNotFound):
        return TemplateError(
            f"included template not found: {exc.name}",
            file=file,
            line=line,
            hint="include paths are relative to the including template's folder or the config root",
        )
    if isinstance(exc, RecursionError):
        return TemplateError("the template includes or calls itself without end", file=file, line=line)
    return TemplateError(f"rendering failed: {type(exc).__name__}: {exc}", file=file, line=line)


# --------------------------------------------------------------------------- messages


def _scrub(value: Any) -> Any:
    """Fixture data with any sentinel characters removed, so data cannot fake template text."""
    if isinstance(value, str):
        return strip_sentinels(value) if (OPEN in value or CLOSE in value) else value
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub(v) for v in value)
    return value


def _positions(text: str, ch: str) -> list[int]:
    out, i = [], text.find(ch)
    while i >= 0:
        out.append(i)
        i = text.find(ch, i + 1)
    return out


def _pairs(text: str) -> list[tuple[int, int, bool]]:
    """Matched (open, close, spans_a_newline) sentinel pairs, sorted by open position."""
    events = sorted([(i, 1) for i in _positions(text, OPEN)] + [(i, -1) for i in _positions(text, CLOSE)])
    out: list[tuple[int, int, bool]] = []
    stack: list[int] = []
    for pos, kind in events:
        if kind == 1:
            stack.append(pos)
        elif stack:
            o = stack.pop()
            out.append((o, pos, text.find("\n", o, pos) >= 0))
    for o in stack:
        out.append((o, len(text), text.find("\n", o) >= 0))
    out.sort()
    return out


def _visible(text: str) -> bool:
    return bool(strip_sentinels(text).strip())


def _honoured(
    text: str, start: int, end: int, pairs: list[tuple[int, int, bool]], opens: list[int], reach: list[int]
) -> bool:
    """A marker line counts only if its role word is template text or a whole one-line value, and
    at least one of its characters (the ':' at least) is template text.

    ``reach[i]`` is the furthest close of ``pairs[:i+1]``: a value opened before the line and still
    open at its start necessarily spans lines, so whatever of it shows on this line is data.
    """
    pos = start
    first = bisect_left(opens, start)
    if first and reach[first - 1] > start:
        pos = min(reach[first - 1], end)
        if _visible(text[start:pos]):
            return False
    has_template_text = False
    for o, c, _ in pairs[first : bisect_left(opens, end)]:
        if o < pos:
            continue  # nested inside a value already looked at
        if _visible(text[pos:o]):
            has_template_text = True
        if c >= end:  # opened on this line, closed on a later one: multi-line data
            if _visible(text[o:end]):
                return False
            return has_template_text
        pos = c + 1
    if pos < end and _visible(text[pos:end]):
        has_template_text = True
    return has_template_text


def _marker_lines(raw: str):
    """(start, end, role) of every line shaped like a role marker (cheap filter, then the regex)."""
    start = 0
    for line in raw.split("\n"):
        end = start + len(line)
        if ":" in line:
            m = _MARKER_RE.match(line)
            if m:
                yield start, end, m.group(1).lower()
        start = end + 1


def split_messages(raw: str) -> list[tuple[str, str, int]]:
    """Raw render (with sentinels) -> [(role, content, marker_index)] honouring the marker convention."""
    pairs = _pairs(raw) if OPEN in raw else []
    opens = [p[0] for p in pairs]
    reach: list[int] = []
    for _, c, _ in pairs:
        reach.append(max(c, reach[-1]) if reach else c)
    chunks: list[tuple[str, int, int]] = []
    role, cursor = "user", 0
    for start, end, marker_role in _marker_lines(raw):
        if not _honoured(raw, start, end, pairs, opens, reach):
            continue
        chunks.append((role, cursor, start))
        role = marker_role
        cursor = end + 1
    chunks.append((role, cursor, len(raw)))
    # Remove the sentinels once, then map raw offsets to clean ones (cheaper than per chunk).
    marks = sorted(_positions(raw, OPEN) + _positions(raw, CLOSE))
    clean = "".join(raw[a + 1 : b] for a, b in zip([-1, *marks], [*marks, len(raw)], strict=True))
    out = []
    for index, (r, a, b) in enumerate(chunks):
        a, b = a - bisect_left(marks, a), b - bisect_left(marks, b)
        content = _trim_blank_lines(clean[a:b]) if a < b else ""
        if content:
            out.append((r, content, index))
    return out


def _trim_blank_lines(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _marker_source_line(source: str, role: str, nth: int) -> int | None:
    """Best guess at the template line of the NTH marker line for ROLE (1-based), else the last one."""
    hits = [
        i
        for i, line in enumerate(source.splitlines(), start=1)
        if (m := _SOURCE_MARKER_RE.match(line)) and m.group(1).lower() == role
    ]
    if not hits:
        return None
    return hits[min(nth, len(hits)) - 1]


def _to_prompt(
    parts: list[tuple[str, str, int]], source_text: str, file: str
) -> tuple[str | None, tuple[Message, ...]]:
    system: str | None = None
    messages: list[Message] = []
    seen_system = 0
    for position, (role, content, _) in enumerate(parts):
        if role == "system":
            seen_system += 1
            if seen_system > 1:
                raise TemplateError(
                    "the prompt renders more than one system message",
                    file=file,
                    line=_marker_source_line(source_text, "system", seen_system),
                    hint="merge the system text into the first `system:` section",
                )
            if position != 0:
                raise TemplateError(
                    "a system message must come first, before any user or assistant message",
                    file=file,
                    line=_marker_source_line(source_text, "system", seen_system),
                    hint="move the `system:` section to the top of the template",
                )
            system = content
        else:
            messages.append(Message(role=role, content=content))  # type: ignore[arg-type]
    if system is None and not messages:
        raise TemplateError(
            "the template renders an empty prompt",
            file=file,
            hint="check the fixture's variables and the template's {% if %} branches",
        )
    return system, tuple(messages)


# --------------------------------------------------------------------------- rendering


def _confined(root: Path, path: Path, *, what: str, file: str | None = None) -> Path:
    """PATH if it stays inside ROOT (symlinks resolved), else a ConfigError."""
    real_root = root.absolute().resolve()
    full = path if path.is_absolute() else (Path.cwd() / path)
    try:
        real = full.resolve()
    except (OSError, RuntimeError):
        raise ConfigError(
            f"{what} cannot be resolved (symlink loop?)", file=file or display_path(path)
        ) from None
    if real != real_root and real_root not in real.parents:
        raise ConfigError(
            f"{what} {display_path(path)} is outside the config root {display_path(real_root)}",
            file=file or display_path(path),
            hint="templates and fixtures must live inside the threshold file's folder",
        )
    return full


def _relative(root: Path, path: Path) -> str:
    for base, p in (
        (root.absolute(), path.absolute()),
        (root.absolute().resolve(), path.absolute().resolve()),
    ):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return display_path(path)


def render_case(
    config: Config,
    prompt: PromptConfig,
    fixture_path_or_None: str | os.PathLike | None,
    variables: dict | None = None,
) -> RenderedPrompt:
    """Render PROMPT with one fixture (or VARIABLES, which then replace the fixture's contents)."""
    root = config.root
    env = environment_for(root)
    loader: RootLoader = env.loader  # type: ignore[assignment]
    template_path = config.template_path(prompt)
    template_file = display_path(template_path)
    name = _relative(root, template_path)
    fixture_rel: str | None = None

    if variables is None:
        variables = {}
        if fixture_path_or_None is not None:
            fx = Path(fixture_path_or_None)
            fx = _confined(root, fx, what="fixture")
            fixture_rel = _relative(root, fx)
            variables = load_fixture(fx)
    elif fixture_path_or_None is not None:
        fixture_rel = _relative(root, Path(fixture_path_or_None))

    source_text = ""
    front: dict = {}
    try:
        if template_path.suffix.lower() == ".prompty":
            raw_text = _read_template(template_path, template_file)
            prompty = _split_prompty(raw_text, template_file)
            front = prompty.front
            source_text = raw_text
            defaults = _prompty_defaults(front, template_path, root, template_file)
            variables = {**defaults, **variables}
        template = env.get_template(name)
        if not source_text:
            source_text = _read_template(template_path, template_file)
        raw = template.render(_scrub(variables))
    except NeedleError:
        raise
    except Exception as exc:  # noqa: BLE001 - user templates can raise anything; never a traceback
        raise _as_template_error(exc, loader, template_file) from None

    system, messages = _to_prompt(split_messages(raw), source_text, template_file)
    meta = (
        {"front_matter": {k: v for k, v in front.items() if k in ("name", "description", "model")}}
        if front
        else {}
    )
    return RenderedPrompt(system=system, messages=messages, source=name, fixture=fixture_rel, meta=meta)


def _read_template(path: Path, file: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TemplateError("template file not found", file=file) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise TemplateError(
            "template is not valid UTF-8", file=file, line=line, hint="save it as UTF-8"
        ) from None


def undeclared_variables(env: jinja2.Environment, source: str) -> set[str]:
    """Variables a template reads from its context (for ``needle init``'s guesses)."""
    from jinja2 import meta

    return set(meta.find_undeclared_variables(env.parse(source)))


def referenced_templates(env: jinja2.Environment, source: str) -> list[str]:
    from jinja2 import meta

    return [t for t in meta.find_referenced_templates(env.parse(source)) if t]


__all__ = [
    "load_fixture",
    "render_case",
    "split_messages",
    "environment_for",
    "PromptEnvironment",
    "RootLoader",
    "undeclared_variables",
    "referenced_templates",
]
