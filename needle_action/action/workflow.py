"""GitHub Actions workflow commands and files: annotations, masks, outputs, job summary.

Escaping follows the runner's rules (actions/toolkit ``command.ts``): in the message ``%``, CR
and LF become ``%25``, ``%0D``, ``%0A``; in properties (``file=``, ``title=``) also ``:`` and
``,`` (``%3A``, ``%2C``). Template paths and prompt names come from pull requests, so without this
a crafted file name could smuggle a second workflow command into the log.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TextIO

# env vars whose values are secrets we may hold (provider keys, tokens; AWS's secret access key and
# Bedrock API key, whose names end otherwise)
_SECRET_NAME = re.compile(
    r"(?i)(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|SECRET_ACCESS_KEY)$|^INPUT_GITHUB-TOKEN$|^AWS_BEARER_TOKEN_BEDROCK$"
)


def escape_data(value: object) -> str:
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: object) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: object = "", out: TextIO | None = None, **props: object) -> str:
    """Write ``::name k=v,...::message`` and return the line."""
    shown = ",".join(f"{k}={escape_property(v)}" for k, v in props.items() if v is not None and v != "")
    line = f"::{name}{' ' + shown if shown else ''}::{escape_data(message)}"
    stream = out or sys.stdout
    stream.write(line + "\n")
    stream.flush()
    return line


def annotation(
    kind: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
    out: TextIO | None = None,
) -> str:
    """Write the workflow annotation ``::KIND file=..,line=..,title=..::MESSAGE``; return the line."""
    return command(kind, message, out, file=file, line=line, title=title)


error = partial(annotation, "error")
warning = partial(annotation, "warning")


def notice(message: str, *, title: str | None = None, out: TextIO | None = None) -> str:
    return command("notice", message, out, title=title)


def mask(value: str, out: TextIO | None = None) -> None:
    """``::add-mask::`` each line of VALUE (the runner masks line by line)."""
    for part in value.splitlines():
        if part.strip():
            command("add-mask", part, out)


def mask_secrets_in_env(env: Mapping[str, str] | None = None, out: TextIO | None = None) -> list[str]:
    """Mask every provider key / token found in the environment; returns the variable names."""
    source: Mapping[str, str] = os.environ if env is None else env
    names = sorted(n for n, v in source.items() if v and len(v) >= 4 and _SECRET_NAME.search(n))
    for n in names:
        mask(source[n], out)
    return names


@contextlib.contextmanager
def stop_commands(out: TextIO | None = None) -> Iterator[None]:
    """Print untrusted text inside: the runner ignores workflow commands until the token comes back."""
    token = secrets.token_hex(16)
    stream = out or sys.stdout
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield
    finally:
        stream.write(f"::{token}::\n")
        stream.flush()


def _delimiter(value: str) -> str:
    while True:
        d = f"ghadelimiter_{secrets.token_hex(16)}"
        if d not in value:
            return d


def set_output(name: str, value: object, path: str | Path | None = None) -> None:
    """Append NAME=VALUE to ``$GITHUB_OUTPUT`` in the multiline-safe heredoc form."""
    target = path or os.environ.get("GITHUB_OUTPUT")
    if not target:
        return
    text = "" if value is None else str(value)
    delim = _delimiter(text)
    with open(target, "a", encoding="utf-8") as f:
        f.write(f"{name}<<{delim}\n{text}\n{delim}\n")


def append_summary(markdown: str, path: str | Path | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY``; False when there is no summary file."""
    target = path or os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with open(target, "a", encoding="utf-8") as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


def read_outputs(path: str | Path) -> dict[str, str]:
    """Parse a ``$GITHUB_OUTPUT`` file the way the runner does (both forms); used by tests."""
    out: dict[str, str] = {}
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            j = lines.index(delim, i + 1)
            out[name] = "\n".join(lines[i + 1 : j])
            i = j + 1
            continue
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
        i += 1
    return out


class WorkflowNotices:
    """The action's notices (:class:`needle_action.pullrequest.notices.Notices`): progress in the
    job's log, warnings as annotations, derived secrets masked."""

    def say(self, message: str) -> None:
        print(message, flush=True)

    def warn(self, message: str) -> None:
        warning(f"needle: {message}")

    def mask(self, secret: str) -> None:
        mask(secret)
