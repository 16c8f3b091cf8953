"""The hashed lock files in requirements/ (made by scripts/lock), read for the tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")

# lock file -> the extras of pyproject it resolves (beside [project].dependencies)
LOCKS = {
    "runtime.txt": ("clouds",),
    "runtime-local.txt": ("clouds", "local"),
    "dev.txt": ("clouds", "local", "dev"),
}


def pins(lock: Path) -> dict[str, str]:
    """{canonical name: version} of every ``name==version`` line of LOCK."""
    out: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = PIN.match(line)
        if m:
            out[canonicalize_name(m.group("name"))] = m.group("version")
    return out


def entries(lock: Path) -> list[str]:
    """The requirement entries of LOCK, continuation lines joined (``name==v --hash=... --hash=...``)."""
    text = re.sub(r"\\\n\s*", " ", lock.read_text(encoding="utf-8"))
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def top_level(extras: tuple[str, ...]) -> list[Requirement]:
    """[project].dependencies plus the given extras: what a lock for them must satisfy."""
    project = pyproject()["project"]
    reqs = list(project["dependencies"]) + [r for e in extras for r in project["optional-dependencies"][e]]
    return [Requirement(r) for r in reqs]


def freeze_pins(freeze: str) -> dict[str, str]:
    """{canonical name: version} of `pip freeze` output (``name @ url`` lines are skipped)."""
    return {
        canonicalize_name(m.group("name")): m.group("version")
        for m in (PIN.match(line.strip()) for line in freeze.splitlines())
        if m
    }


def via(lock: Path) -> dict[str, set[str]]:
    """{canonical name: what requires it} from uv's ``# via`` comments under each pin."""
    out: dict[str, set[str]] = {}
    current = None
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = PIN.match(line)
        if m:
            current = canonicalize_name(m.group("name"))
            out[current] = set()
        elif current and line.lstrip().startswith("#"):
            text = line.strip().lstrip("#").strip()
            text = text.removeprefix("via").strip()
            if text:
                out[current].add(text)
    return out
