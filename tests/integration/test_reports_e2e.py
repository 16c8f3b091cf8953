"""The pictures and JUnit end to end: two real recall runs (base, then a pull request that changes
the template) against the fake Anthropic API with a simulated model that loses the middle, then the
real ``needle report --html --junit``; the HTML report opened in headless Chromium.

The browser test takes a screenshot and keeps it under pytest's tmp path (the path is printed: run
with ``-s`` to see it, or look under ``/tmp/pytest-of-$USER``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import xmlschema

from needle_action.results import load_results
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.integration.headless import Chromium, find_chromium
from tests.integration.recall_helpers import write_project
from tests.needle_cli import run_needle

REPO = Path(__file__).resolve().parents[2]
XSD = REPO / "tests" / "data" / "junit-10.xsd"
SIZES, DEPTHS = (400, 800), (0.0, 0.25, 0.5, 0.75, 1.0)
# the CSS of report.html.j2, as Chromium computes it
FILLS = {
    "pass": "rgb(45, 164, 78)",
    "near": "rgb(212, 167, 44)",
    "fail": "rgb(207, 34, 46)",
    "none": "rgb(234, 238, 242)",
}


def needle(args: list[str], fake: FakeAnthropic, tmp: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        ANTHROPIC_BASE_URL=fake.base_url,
        ANTHROPIC_API_KEY=fake.api_key,
        NEEDLE_CACHE_DIR=str(tmp / "cache"),
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    return run_needle(args, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """base.json (recall holds everywhere), head.json (a changed template; the middle is lost), and
    the report of the pair: comment.md, report.html, junit.xml (and the head run's own JUnit)."""
    tmp = tmp_path_factory.mktemp("reports")
    with FakeAnthropic() as fake:
        # the base runs every planned trial, as the action's base run does: comparable with the head
        cfg = write_project(
            tmp / "proj", sizes=SIZES, depths=DEPTHS, trials=6, recall_extra="early_stop = false"
        )
        fake.responder = SimulatedModel(flat(0.99), seed=3)
        base = needle(
            ["check", "--config", str(cfg), "--json", str(tmp / "base.json"), "--no-progress"], fake, tmp
        )
        assert base.returncode == 0, base.stdout + base.stderr
        template = tmp / "proj" / "prompts" / "qa.j2"
        template.write_text(
            template.read_text().replace("Answer from the notes.", "Answer from the notes only.")
        )
        fake.responder = SimulatedModel(u_shape(edge=0.99, middle=0.05, margin=0.08), seed=3)
        args = ["check", "--config", str(cfg), "--json", str(tmp / "head.json"), "--no-progress"]
        args += ["--baseline", str(tmp / "base.json"), "--junit", str(tmp / "check-junit.xml")]
        head = needle(args, fake, tmp)
        assert head.returncode == 1, head.stdout + head.stderr
        report = needle(
            [
                "report",
                str(tmp / "head.json"),
                "--base",
                str(tmp / "base.json"),
                "-o",
                str(tmp / "comment.md"),
                "--html",
                str(tmp / "out" / "report.html"),
                "--junit",
                str(tmp / "out" / "junit.xml"),
            ],
            fake,
            tmp,
        )
    assert report.returncode == 1, report.stdout + report.stderr  # the middle regressed
    assert "Traceback" not in report.stderr
    return {
        name: tmp / rel
        for name, rel in {
            "base": "base.json",
            "head": "head.json",
            "comment": "comment.md",
            "html": "out/report.html",
            "junit": "out/junit.xml",
            "check_junit": "check-junit.xml",
        }.items()
    }


@pytest.mark.slow  # two measured recall runs and the report, in real processes
def test_comment_shows_the_mermaid_chart_of_the_changed_prompt(runs):
    comment = runs["comment"].read_text()
    assert "```mermaid\nxychart-beta\n" in comment
    block = comment.split("```mermaid\n", 1)[1].split("```", 1)[0]
    bar = next(line for line in block.splitlines() if line.strip().startswith("bar "))
    line = next(line for line in block.splitlines() if line.strip().startswith("line "))
    base_rates = [float(v) for v in bar.split("[", 1)[1].rstrip("]").split(",")]
    head_rates = [float(v) for v in line.split("[", 1)[1].rstrip("]").split(",")]
    assert len(base_rates) == len(head_rates) == len(DEPTHS)
    # the simulated head loses the middle: the line dips where the bars stay high
    assert min(base_rates) >= 80
    assert head_rates[2] < 50
    assert head_rates[0] >= 80
    assert len(comment) <= 65536


@pytest.mark.slow
def test_junit_files_validate_and_carry_the_regression(runs):
    schema = xmlschema.XMLSchema(str(XSD))
    for name in ("junit", "check_junit"):
        text = runs[name].read_text()
        schema.validate(text)
        assert 'name="middle depths (25%-75%)"' in text, name
        assert "<failure" in text, name


@pytest.mark.slow
def test_html_report_renders_in_chromium(runs, tmp_path):
    executable = find_chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    html = runs["html"]
    head = load_results(runs["head"]).prompts[0].recall
    assert head is not None
    with Chromium(executable, tmp_path / "profile") as browser:
        browser.open(html.as_uri())
        page = browser.evaluate(
            """(() => ({
                scripts: document.scripts.length,
                cells: [...document.querySelectorAll('rect.cell')].map(r => {
                    const box = r.getBoundingClientRect();
                    return {side: r.dataset.side, size: +r.dataset.size, depth: +r.dataset.depth,
                            tier: r.dataset.tier, cls: r.getAttribute('class'), fill: getComputedStyle(r).fill,
                            w: box.width, h: box.height, tip: r.querySelector('title').textContent};
                }),
                charts: document.querySelectorAll('svg.chart polyline').length,
            }))()"""
        )
        shot = browser.screenshot(tmp_path / "report.png")
        urls = browser.requested_urls()
    print(f"\nHTML report screenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000

    assert page["scripts"] == 0
    assert all(u.startswith("file://") for u in urls), urls  # nothing from the network
    cells = page["cells"]
    for side in ("base", "head"):
        grid = {(c["size"], c["depth"]) for c in cells if c["side"] == side}
        assert len([c for c in cells if c["side"] == side]) == len(SIZES) * len(DEPTHS)
        assert grid == {(s, d) for s in SIZES for d in DEPTHS}, side
    by_key = {(c.size, c.depth): c for c in head.cells}
    for c in cells:
        assert c["w"] > 20
        assert c["h"] > 20
        assert c["fill"] == FILLS[c["tier"]]
        assert f"fill-{c['tier']}" in c["cls"]
        if c["side"] == "head":
            measured = by_key[(c["size"], c["depth"])]
            assert f"{measured.hits}/{measured.trials} =" in c["tip"]
            assert "Wilson interval" in c["tip"]
            want = "pass" if measured.hits / measured.trials >= 0.8 else None
            if want:
                assert c["tier"] == want
    assert any(c["tier"] == "fail" and c["side"] == "head" for c in cells)  # the lost middle shows
    assert page["charts"] == 1  # the recall-by-depth chart (head line)
