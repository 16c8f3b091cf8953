"""The release scripts, offline: scripts/pin-image rewrites action.yml to a digest-pinned image
that still matches GitHub's action schema, and scripts/release-notes holds pyproject,
__version__, the CHANGELOG, the examples in the docs and the tag to one version."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from needle_action import __version__
from tests.integration.test_static_checks import report, run, tool
from tests.lockfile import pyproject

REPO = Path(__file__).resolve().parents[2]
PIN = REPO / "scripts" / "pin-image"
NOTES = REPO / "scripts" / "release-notes"
DIGEST = "sha256:" + "4f1c" * 16  # made up: nothing is pulled


def script(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=60, env=env
    )


# --------------------------------------------------------------------------- pin-image


def test_pin_image_rewrites_only_the_image_and_the_result_matches_the_schema(tmp_path):
    action = tmp_path / "action.yml"
    shutil.copy(REPO / "action.yml", action)
    before = action.read_text()
    proc = script(
        PIN, "1.2.3", DIGEST, action, env={"PATH": "/usr/bin:/bin", "GITHUB_REPOSITORY_OWNER": "Octo-Org"}
    )
    assert proc.returncode == 0, report(proc)

    after = action.read_text()
    want = f"docker://ghcr.io/octo-org/needle-action:v1.2.3@{DIGEST}"  # GHCR names are lower-case
    assert yaml.safe_load(after)["runs"] == {"using": "docker", "image": want}
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert changed == [("  image: Dockerfile", f"  image: {want}")]

    schema = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", action)
    assert schema.returncode == 0, report(schema)

    # pinning again (the next release) replaces the reference, it does not stack
    again = script(PIN, "v1.2.4", DIGEST.replace("4f1c", "9ab0"), action, env={"PATH": "/usr/bin:/bin"})
    assert again.returncode == 0, report(again)
    assert yaml.safe_load(action.read_text())["runs"]["image"] == (
        "docker://ghcr.io/needle-action/needle-action:v1.2.4@sha256:" + "9ab0" * 16
    )


@pytest.mark.parametrize(
    ("version", "digest", "message"),
    [
        ("1.2", DIGEST, "expected X.Y.Z"),
        ("1.2.3", "sha256:abc", "expected sha256:<64"),
        ("1.2.3", DIGEST.upper(), "expected sha256:<64"),
        ("1.2.3; rm -rf /", DIGEST, "expected X.Y.Z"),
    ],
)
def test_pin_image_refuses_bad_input_and_leaves_the_file_alone(tmp_path, version, digest, message):
    action = tmp_path / "action.yml"
    shutil.copy(REPO / "action.yml", action)
    proc = script(PIN, version, digest, action)
    assert proc.returncode == 2, report(proc)
    assert message in proc.stderr, report(proc)
    assert "Traceback" not in proc.stderr
    assert action.read_text() == (REPO / "action.yml").read_text()


def test_the_repository_action_builds_the_dockerfile_or_pulls_a_pinned_digest():
    # main builds from source until switched with scripts/pin-image (docs/releasing.md); then only
    # a digest-pinned GHCR reference is acceptable, never a bare tag
    image = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["image"]
    assert image == "Dockerfile" or re.fullmatch(
        r"docker://ghcr\.io/[a-z0-9-]+/needle-action:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}", image
    ), image


# --------------------------------------------------------------------------- one version


def test_one_version_everywhere_and_the_release_notes_are_the_changelog_section():
    version = pyproject()["project"]["version"]
    assert version == __version__
    proc = script(NOTES, "--check-tag", f"v{version}")
    assert proc.returncode == 0, report(proc)
    assert proc.stdout.strip()
    assert "## [" not in proc.stdout


def test_a_wrong_tag_is_refused():
    proc = script(NOTES, "--check-tag", "v99.0.0")
    assert proc.returncode == 1, report(proc)
    assert "tag v99.0.0 is not v" in proc.stderr, report(proc)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in (
        "pyproject.toml",
        "CHANGELOG.md",
        "README.md",
        ".pre-commit-hooks.yaml",
        "needle_action/__init__.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, root / rel)
    shutil.copytree(REPO / "docs", root / "docs")
    return root


def test_disagreements_are_each_named_with_file_and_line(tmp_path):
    root = _copy(tmp_path)
    version = pyproject()["project"]["version"]
    init = root / "needle_action" / "__init__.py"
    init.write_text(init.read_text().replace(f'"{version}"', '"9.9.9"'))
    (root / "docs" / "extra.md").write_text(
        "x\n    rev: v0.0.7\n- uses: needle-action/needle-action@v1\n"
        "- uses: needle-action/needle-action@0123456789abcdef0123456789abcdef01234567 # v0.0.7\n"
        "pipx install needle-action==1.0.0\n"
    )
    changelog = root / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace(f"## [{version}] - ", f"## [{version}] ("))
    proc = script(NOTES, "--root", root)
    assert proc.returncode == 1, report(proc)
    for expected in (
        "needle_action/__init__.py: __version__ is '9.9.9'",
        "CHANGELOG.md: `## [",  # the heading lost its date
        "docs/extra.md:2: pre-commit rev names 0.0.7",
        "docs/extra.md:3: @v1 is a moving tag",
        "docs/extra.md:4: SHA pin comment names 0.0.7",
        "docs/extra.md:4: 0123456789abcdef0123456789abcdef01234567 is a made-up SHA",
        "docs/extra.md:5: package pin names 1.0.0",
    ):
        assert expected in proc.stderr, f"missing {expected!r}\n{report(proc)}"
