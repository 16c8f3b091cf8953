"""``.prompty`` files: YAML front matter between ``---`` lines, then a Jinja2 body.

The front matter may supply default inputs (``sample``, ``inputs.X.default``/``sample``), so a
``.prompty`` renders without a fixture; a ``sample`` given as a file reference must stay inside the
config root like every other file.
"""

from __future__ import annotations

import base64
import copy
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needle_action.assemble.templates.fixtures import load_fixture_once
from needle_action.config.cases import MAX_FIXTURE_BYTES
from needle_action.core.dataformats import JSON, DataError, parse_json, parse_yaml
from needle_action.core.errors import TemplateError
from needle_action.core.filecache import FileCache
from needle_action.core.paths import display_path, read_text
from needle_action.core.workspace import Workspace
from needle_action.request.prompt import Message

_FILE_REF = re.compile(r"\$\{file:(.+)\}")


@dataclass(frozen=True)
class Prompty:
    """A ``.prompty`` file split into its front matter and its template body."""

    front: JSON
    body: str  # the file with front matter lines blanked, so body line N is file line N


def split_prompty(text: str, file: str) -> Prompty:
    """Front matter and body of a ``.prompty`` text (no front matter: the whole text is the body).

    Parsed once per text (a render splits its template, and recall renders it hundreds of times);
    the front matter returned is the caller's own copy."""
    parsed = _split(text, file)
    return Prompty(copy.deepcopy(parsed.front), parsed.body)


@functools.lru_cache(maxsize=32)  # keyed by the text itself: no file's content answers for another's
def _split(text: str, file: str) -> Prompty:
    lines = text.split("\n")
    first = lines[0].lstrip("\ufeff").strip() if lines else ""
    if first != "---":
        return Prompty({}, text)
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
    front = _front_matter("\n".join(lines[1:end]), file)
    body = "\n" * (end + 1) + "\n".join(lines[end + 1 :])
    return Prompty(front, body)


def _front_matter(front_text: str, file: str) -> JSON:
    try:
        front = parse_yaml(front_text) or {}
    except DataError as exc:
        raise TemplateError.at(
            f"YAML error in the .prompty front matter: {exc.message}",
            exc,
            file=file,
            line=exc.line + 1 if exc.line else None,  # the front matter starts on the file's second line
            hint="check indentation and quoting",
        ) from None
    if not isinstance(front, dict):
        raise TemplateError("the .prompty front matter must be a YAML mapping", file=file, line=2)
    return front


def prompty_defaults(front: JSON, prompty_path: Path, workspace: Workspace, file: str) -> JSON:
    """Default inputs from ``sample`` (mapping or file reference) and ``inputs.X.default/sample``.

    A sample file must stay inside the WORKSPACE (:meth:`Workspace.confine`). The values are the
    caller's own (sample files are read once per version, and copied out)."""
    return copy.deepcopy(_shared_defaults(front, prompty_path, workspace, file))


def with_defaults(
    variables: JSON, front: JSON, prompty_path: Path, workspace: Workspace, file: str
) -> tuple[JSON, bool]:
    """(VARIABLES over the :func:`prompty_defaults` key by key, whether there are any defaults).

    Exactly ``{**prompty_defaults(...), **VARIABLES}`` (keys in that order, every file checked and
    read as there), but a default VARIABLES replaces is not copied: recall's trial renders pass
    the whole case, sample included, with only the context and the question changed."""
    defaults = _shared_defaults(front, prompty_path, workspace, file)
    memo: dict[int, Any] = {}  # one copy: values the YAML shares (aliases) stay shared, as parsed
    out = {k: variables[k] if k in variables else copy.deepcopy(v, memo) for k, v in defaults.items()}
    out.update(variables)
    return out, bool(defaults)


def _shared_defaults(front: JSON, prompty_path: Path, workspace: Workspace, file: str) -> JSON:
    """:func:`prompty_defaults` with the values read from files shared with the cache: the callers
    above copy them out."""
    out = _input_defaults(front.get("inputs"))
    sample = front.get("sample")
    if isinstance(sample, dict):
        out.update(sample)
    elif isinstance(sample, str) and sample.strip():
        ref = sample.strip()
        m = _FILE_REF.fullmatch(ref)
        ref = m.group(1).strip() if m else ref
        target = workspace.confine(prompty_path.parent / ref, what="the .prompty sample file", file=file)
        out.update(load_fixture_once(_samples, target))
    # a value may itself be a file (`research: ${file:research.json}`), as Prompty reads it
    for key, value in out.items():
        m = _FILE_REF.fullmatch(value.strip()) if isinstance(value, str) else None
        if m is not None:
            target = workspace.confine(
                prompty_path.parent / m.group(1).strip(), what="a .prompty sample file", file=file
            )
            out[key] = _file_value(target, file)
    return out


# what sample files hold, read once per version of the file: shared, copied out by the callers
_samples: FileCache[JSON] = FileCache(entries=32, max_bytes=64_000_000)
_values: FileCache[Any] = FileCache(entries=64, max_bytes=64_000_000)


def _file_value(path: Path, file: str) -> Any:
    """The value a ``${file:...}`` reference stands for: a JSON or YAML file's data, else its text."""
    if not path.is_file():
        raise TemplateError(
            f"the sample file {path.name} is not found",
            file=file,
            hint="${file:...} is relative to the .prompty file",
        )
    return _values.get(path, lambda: _read_value(path))


def _read_value(path: Path) -> Any:
    text = read_text(
        path,
        what="sample file",
        error_cls=TemplateError,
        file=display_path(path),
        max_bytes=MAX_FIXTURE_BYTES,
    )
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        return text
    try:
        return parse_json(text) if suffix == ".json" else parse_yaml(text)
    except DataError as exc:
        raise TemplateError.at(
            f"syntax error in the sample file: {exc.message}", exc, file=display_path(path)
        ) from None


def _input_defaults(inputs: object) -> JSON:
    """``inputs.X.default`` (else its ``sample`` or ``example``) for each declared input that has
    one: Prompty 1's mapping of inputs, or Prompty 2's list of ``{name, kind, default, example}``."""
    out: JSON = {}
    if isinstance(inputs, list):  # Prompty 2
        inputs = {
            spec["name"]: spec
            for spec in inputs
            if isinstance(spec, dict) and isinstance(spec.get("name"), str)
        }
    if not isinstance(inputs, dict):
        return out
    for name, spec in inputs.items():
        if isinstance(spec, dict):
            for key in ("default", "sample", "example"):
                if key in spec:
                    out[str(name)] = spec[key]
                    break
    return out


# --------------------------------------------------------------------------- images

# Prompty's parser turns markdown images in a message into image parts (parse_content in its
# parsers.py): ![alt](url), with http(s) and data: URLs passed through and local .png/.jpg/.jpeg
# files read (here: relative to the .prompty file, confined to the root) and sent as base64.
_IMAGE = re.compile(r"!\[[^\]]*\]\((?P<src>[^\s\")]*)[^)]*\)")
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MAX_IMAGE_BYTES = 20_000_000


def with_images(
    messages: tuple[Message, ...],
    prompty_path: Path,
    workspace: Workspace,
    file: str,
) -> tuple[Message, ...]:
    """MESSAGES with the markdown images of user turns as image blocks, as Prompty sends them."""
    return tuple(
        Message("user", _image_blocks(m.content, prompty_path, workspace, file))
        if m.role == "user" and isinstance(m.content, str) and "![" in m.content
        else m
        for m in messages
    )


def _image_blocks(text: str, prompty_path: Path, workspace: Workspace, file: str) -> str | tuple[JSON, ...]:
    blocks: list[JSON] = []
    pos = 0
    for m in _IMAGE.finditer(text):
        if text[pos : m.start()].strip():
            blocks.append({"type": "text", "text": text[pos : m.start()].strip()})
        blocks.append(_image(m.group("src"), prompty_path, workspace, file))
        pos = m.end()
    if not blocks:
        return text
    if text[pos:].strip():
        blocks.append({"type": "text", "text": text[pos:].strip()})
    return tuple(blocks)


def _image(src: str, prompty_path: Path, workspace: Workspace, file: str) -> JSON:
    if src.startswith("http"):
        return {"type": "image", "source": {"type": "url", "url": src}}
    if src.startswith("data:") and ";base64," in src:
        head, encoded = src[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": head, "data": encoded}}
    path = workspace.confine(prompty_path.parent / src, what="image", file=file)
    media = _IMAGE_TYPES.get(path.suffix.lower())
    if media is None or not path.is_file():
        raise TemplateError(
            f"image {src!r}: " + ("not found" if media else "only .png, .jpg and .jpeg images are supported"),
            file=file,
            hint="Prompty reads ![alt](file) images next to the .prompty file, or takes http(s) and data: URLs",
        )
    encoded = _images.get(path, lambda: _encoded_image(path, src, file))
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": encoded}}


# images as base64 (an immutable str), read once per version of the file: every trial sends them
_images: FileCache[str] = FileCache(entries=32, max_bytes=64_000_000)


def _encoded_image(path: Path, src: str, file: str) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_IMAGE_BYTES + 1)
    if len(data) > MAX_IMAGE_BYTES:
        raise TemplateError(f"image {src!r} is larger than {MAX_IMAGE_BYTES:,} bytes", file=file)
    return base64.b64encode(data).decode()


__all__ = ["Prompty", "prompty_defaults", "split_prompty", "with_defaults", "with_images"]
