"""``.prompty`` files: YAML front matter between ``---`` lines, then a Jinja2 body.

The front matter may supply default inputs (``sample``, ``inputs.X.default``/``sample``), so a
``.prompty`` renders without a fixture; a ``sample`` given as a file reference must stay inside the
config root like every other file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from needle_action.assemble.fixtures import load_fixture
from needle_action.dataformats import DataError, parse_yaml
from needle_action.errors import TemplateError
from needle_action.paths import confine

_FILE_REF = re.compile(r"\$\{file:(.+)\}")


@dataclass(frozen=True)
class Prompty:
    """A ``.prompty`` file split into its front matter and its template body."""

    front: dict
    body: str  # the file with front matter lines blanked, so body line N is file line N


def split_prompty(text: str, file: str) -> Prompty:
    """Front matter and body of a ``.prompty`` text (no front matter: the whole text is the body)."""
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


def _front_matter(front_text: str, file: str) -> dict:
    try:
        front = parse_yaml(front_text) or {}
    except DataError as exc:
        raise TemplateError(
            f"YAML error in the .prompty front matter: {exc.message}",
            file=file,
            line=exc.line + 1 if exc.line else None,  # the front matter starts on the file's second line
            column=exc.column,
            hint="check indentation and quoting",
        ) from None
    if not isinstance(front, dict):
        raise TemplateError("the .prompty front matter must be a YAML mapping", file=file, line=2)
    return front


def prompty_defaults(
    front: dict, prompty_path: Path, root: Path, file: str, *, allow_hidden: Sequence[str] = ()
) -> dict:
    """Default inputs from ``sample`` (mapping or file reference) and ``inputs.X.default/sample``.

    A sample file must stay inside ROOT and out of hidden folders (ALLOW_HIDDEN excepted)."""
    out = _input_defaults(front.get("inputs"))
    sample = front.get("sample")
    if isinstance(sample, dict):
        out.update(sample)
    elif isinstance(sample, str) and sample.strip():
        ref = sample.strip()
        m = _FILE_REF.fullmatch(ref)
        ref = m.group(1).strip() if m else ref
        target = confine(
            root,
            prompty_path.parent / ref,
            what="the .prompty sample file",
            file=file,
            allow_hidden=allow_hidden,
        )
        out.update(load_fixture(target))
    return out


def _input_defaults(inputs: object) -> dict:
    """``inputs.X.default`` (else ``inputs.X.sample``) for each declared input that has one."""
    out: dict = {}
    if not isinstance(inputs, dict):
        return out
    for name, spec in inputs.items():
        if isinstance(spec, dict):
            for key in ("default", "sample"):
                if key in spec:
                    out[str(name)] = spec[key]
                    break
    return out


__all__ = ["Prompty", "split_prompty", "prompty_defaults"]
