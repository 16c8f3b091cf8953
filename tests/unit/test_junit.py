"""JUnit XML: valid against the Jenkins xUnit junit-10.xsd, one testcase per budget case and per
recall group, outcomes that agree with the comparison, hostile text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from needle_action.compare import compare
from needle_action.report.junit import junit_xml
from tests.unit._results_builder import case, grid, prompt, recall, results

XSD = Path(__file__).resolve().parents[1] / "data" / "junit-10.xsd"
FULL = {0.0: (10, 10), 0.5: (10, 10), 1.0: (10, 10)}
LOST = {0.0: (10, 10), 0.5: (0, 10), 1.0: (10, 10)}


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode("utf-8"))


def cases(root: ET.Element, suite: str) -> dict[tuple[str | None, str | None], ET.Element]:
    s = root.find(f"testsuite[@name='{suite}']")
    assert s is not None, suite
    return {(c.get("classname"), c.get("name")): c for c in s.findall("testcase")}


def outcome(tc: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if tc.find(tag) is not None:
            return tag
    return "pass"


def assert_counts_add_up(root: ET.Element) -> None:
    """junit-10.xsd types the counts as strings: check them against the testcases ourselves."""
    for s in root.findall("testsuite"):
        tcs = s.findall("testcase")
        assert int(s.attrib["tests"]) == len(tcs)
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(s.attrib[attr]) == sum(1 for t in tcs if t.find(tag) is not None), (
                s.get("name"),
                attr,
            )
    assert int(root.attrib["tests"]) == sum(int(s.attrib["tests"]) for s in root.findall("testsuite"))


def test_the_schema_catches_a_broken_document(schema):
    assert not schema.is_valid('<testsuites><testsuite tests="1"><testcase/></testsuite></testsuites>')
    assert not schema.is_valid(
        '<testsuites><testsuite name="x"><testcase name="a"/></testsuite></testsuites>'
    )
    assert not schema.is_valid('<testsuites><testcase name="a"/></testsuites>')
    assert schema.is_valid('<testsuites><testsuite tests="1"><testcase name="a"/></testsuite></testsuites>')


def test_regression_against_a_base(schema):
    base = results(prompt("rag", [case(1000), case(2000, fixture="fx/b.yaml")], rec=recall(grid(FULL))))
    head = results(
        prompt(
            "rag",
            [case(1050), case(9000, fixture="fx/b.yaml")],
            rec=recall(grid(LOST), kind="lost-in-the-middle"),
        )
    )
    comparison = compare(base, head)
    text = junit_xml(comparison, head)
    schema.validate(text)
    root = parse(text)
    assert_counts_add_up(root)
    budget = cases(root, "needle.budget")
    assert outcome(budget[("budget.rag", "fx/a.yaml")]) == "pass"
    over = budget[("budget.rag", "fx/b.yaml")]
    assert outcome(over) == "failure"
    assert "exceed max_input_tokens 8000" in over.find("failure").get("message")
    assert over.get("file") == "prompts/rag.j2"
    rec = cases(root, "needle.recall")
    # the groups the comparison tested: the middle, each depth, each size
    assert set(rec) == {
        ("recall.rag", name)
        for name in ("middle depth (50%)", "depth 0%", "depth 100%", "2,000 tokens", "8,000 tokens")
    }
    middle = rec[("recall.rag", "middle depth (50%)")]
    assert outcome(middle) == "failure"
    assert "Holm bound" in middle.find("failure").get("message")
    assert outcome(rec[("recall.rag", "depth 0%")]) == "pass"
    # the same verdicts as the comparison: each regressed group fails, nothing else
    groups = comparison.prompts[0].recall.groups
    assert {g.label for g in groups if g.verdict == "regressed"} == {
        name for (_, name), tc in rec.items() if outcome(tc) == "failure"
    }
    assert root.get("failures") == str(1 + sum(g.verdict == "regressed" for g in groups))


def test_without_a_base_groups_are_judged_against_the_threshold(schema):
    head = results(
        prompt("fine", [case(100)], rec=recall(grid(FULL))),
        prompt("lost", [case(100)], rec=recall(grid(LOST), kind="lost-in-the-middle", status="fail")),
    )
    text = junit_xml(compare(None, head), head, stages=("recall",))
    schema.validate(text)
    root = parse(text)
    assert root.find("testsuite[@name='needle.budget']") is None  # only the stages asked for
    rec = cases(root, "needle.recall")
    assert all(outcome(tc) == "pass" for (cls, _), tc in rec.items() if cls == "recall.fine")
    assert outcome(rec[("recall.lost", "depth 50%")]) == "failure"
    assert outcome(rec[("recall.lost", "depth 0%")]) == "pass"
    assert "below the threshold 80%" in rec[("recall.lost", "depth 50%")].find("failure").get("message")
    assert_counts_add_up(root)


def test_skipped_unchanged_and_partial_recall(schema):
    same = recall(grid(FULL), pool_key="same")
    base = results(prompt("same", [case(100)], rec=same), prompt("cut", [case(100)], rec=recall(grid(FULL))))
    head = results(
        prompt("same", [case(100)], rec=recall(grid(FULL), pool_key="same")),
        prompt("cut", [case(100)], rec=recall(grid(FULL), partial=True, pool_key="other")),
        prompt("nokey", [case(100)], skipped="ANTHROPIC_API_KEY is not set"),
    )
    text = junit_xml(compare(base, head), head)
    schema.validate(text)
    rec = cases(parse(text), "needle.recall")
    skipped = rec[("recall.nokey", "recall")].find("skipped")
    assert skipped is not None
    assert "ANTHROPIC_API_KEY" in skipped.get("message")
    assert "unchanged since the base" in rec[("recall.same", "recall")].find("skipped").get("message")
    error = rec[("recall.cut", "complete run")].find("error")
    assert error is not None
    assert error.get("type") == "underpowered"
    assert "max_calls" in error.get("message")
    assert_counts_add_up(parse(text))


def test_a_prompt_that_does_not_render_is_an_error(schema):
    broken = prompt("broken", [])
    broken.error = "prompts/broken.j2:3: undefined variable: 'x' is undefined"
    head = results(broken)
    text = junit_xml(compare(None, head), head, stages=("budget",))
    schema.validate(text)
    tc = cases(parse(text), "needle.budget")[("budget.broken", "render")]
    assert "undefined variable" in tc.find("error").get("message")


def test_hostile_text_is_escaped_and_xml_safe(schema):
    evil = 'a"b<c>&d]]>\x00\x1b[31m\ud800 <script>'
    head = results(prompt("p", [case(100, fixture=f"fx/{evil}.yaml")], rec=recall(grid(LOST), status="fail")))
    head.prompts[0].template = f"prompts/{evil}.j2"
    text = junit_xml(compare(None, head), head)
    schema.validate(text)
    root = parse(text)  # well-formed despite the control characters and the lone surrogate
    tc = next(iter(cases(root, "needle.budget").values()))
    assert tc.get("name") == 'fx/a"b<c>&d]]>[31m <script>.yaml'
    assert "<script>" not in text
    assert "\x00" not in text
