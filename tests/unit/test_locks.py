"""The hashed locks in requirements/ against pyproject.toml: a lock that no longer satisfies a
requirement (a bound changed, a dependency was added) fails here, without the network. Fix with
scripts/lock. The image installs runtime.txt with --require-hashes --no-deps (test_container.py
checks that its installed set equals the lock)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.lockfile import LOCKS, REQUIREMENTS, ROOT, entries, pins, pyproject, top_level, via

HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def unsatisfied(reqs: list[Requirement], locked: dict[str, str]) -> list[str]:
    out = []
    for req in reqs:
        name = canonicalize_name(req.name)
        if name not in locked:
            out.append(f"{req} is not in the lock")
        elif not req.specifier.contains(locked[name], prereleases=True):
            out.append(f"{req}: the lock pins {locked[name]}")
    return out


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_each_lock_satisfies_pyproject(lock):
    found = unsatisfied(top_level(LOCKS[lock]), pins(REQUIREMENTS / lock))
    assert not found, f"requirements/{lock} is stale, run scripts/lock:\n" + "\n".join(found)


def orphans(lock: Path, wanted: set[str]) -> list[str]:
    """Pins that only pyproject asked for (uv's `# via`) and pyproject no longer lists."""
    sources = via(lock)
    assert sources, f"{lock.name} has no `# via` comments: was it made by scripts/lock?"
    return sorted(
        n for n, by in sources.items() if by and all("pyproject.toml" in b for b in by) and n not in wanted
    )


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_no_lock_keeps_a_requirement_pyproject_dropped(lock):
    wanted = {canonicalize_name(r.name) for r in top_level(LOCKS[lock])}
    found = orphans(REQUIREMENTS / lock, wanted)
    assert not found, f"requirements/{lock} is stale (run scripts/lock): {found} no longer in pyproject"


def test_orphans_finds_a_pin_pyproject_dropped(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "oldpkg==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via needle-action (pyproject.toml)\n"
        "shared==2.0 \\\n    --hash=sha256:"
        + "1"
        * 64
        + "\n    # via\n    #   needle-action (pyproject.toml)\n"
        "    #   other\n"
    )
    assert orphans(lock, set()) == ["oldpkg"]
    assert orphans(lock, {"oldpkg"}) == []


def test_build_and_release_locks_satisfy_the_build_system():
    build = pyproject()["build-system"]["requires"]
    release = build + [
        line for line in (REQUIREMENTS / "release.in").read_text().splitlines() if line and line[0] != "#"
    ]
    for lock, reqs in (("build.txt", build), ("release.txt", release)):
        found = unsatisfied([Requirement(r) for r in reqs], pins(REQUIREMENTS / lock))
        assert not found, f"requirements/{lock} is stale, run scripts/lock:\n" + "\n".join(found)


@pytest.mark.parametrize("lock", sorted(p.name for p in REQUIREMENTS.glob("*.txt")))
def test_every_entry_is_pinned_and_hashed(lock):
    bad = [e for e in entries(REQUIREMENTS / lock) if "==" not in e.split()[0] or not HASH.search(e)]
    assert not bad, f"requirements/{lock}: entries without an exact pin and a sha256: {bad}"
    assert entries(REQUIREMENTS / lock), f"requirements/{lock} is empty"


def test_the_locks_agree_with_each_other():
    # dev.txt is what CI tests; the image must run the versions CI tested
    dev = pins(REQUIREMENTS / "dev.txt")
    for lock in ("runtime.txt", "runtime-local.txt"):
        differ = {n: (v, dev.get(n)) for n, v in pins(REQUIREMENTS / lock).items() if dev.get(n) != v}
        assert not differ, f"requirements/{lock} and dev.txt pin different versions: {differ}"


def test_unsatisfied_reports_a_stale_pin_and_a_missing_package():
    found = unsatisfied([Requirement("anthropic>=2.0,<3"), Requirement("newdep>=1")], {"anthropic": "3.1.0"})
    assert found == ["anthropic<3,>=2.0: the lock pins 3.1.0", "newdep>=1 is not in the lock"]


def test_the_dockerfile_installs_from_the_locks_with_hashes_and_no_resolution():
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    installs = [ln for ln in text.splitlines() if "$PIP install" in ln]
    assert installs, "the Dockerfile installs nothing with $PIP"
    for part in (seg for ln in installs for seg in ln.split("&&") if "$PIP install" in seg):
        assert "--no-deps" in part, f"resolves dependencies: {part.strip()}"
        if "-r " in part:
            assert "--require-hashes" in part, f"a lock installed without --require-hashes: {part.strip()}"
    assert "requirements/runtime.txt" in text
    assert "requirements/build.txt" in text


def test_the_default_base_image_is_pinned_by_digest():
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms == ["${BASE_IMAGE}"], f"one stage, FROM ${{BASE_IMAGE}}: {froms}"
    arg = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert arg, "no `ARG BASE_IMAGE=...` default"
    assert re.fullmatch(r"debian:bookworm-slim@sha256:[0-9a-f]{64}", arg.group(1)), arg.group(1)
    assert text.index("ARG BASE_IMAGE=") < text.index("FROM ${BASE_IMAGE}")


def test_lock_paths_exist():
    assert {p.name for p in REQUIREMENTS.glob("*.txt")} >= set(LOCKS) | {"build.txt", "release.txt"}
    assert Path(ROOT / "scripts" / "lock").is_file()
