"""JUnit XML for CI systems other than GitHub (GitLab, Jenkins, Buildkite, CircleCI).

``--junit FILE`` on ``budget``, ``recall``, ``check`` and ``report`` writes one ``<testsuites>``
document (the Jenkins xUnit ``junit-10.xsd`` dialect those systems read) with

* a ``needle.budget`` suite: one testcase per prompt x fixture (``classname`` ``budget.PROMPT``,
  ``name`` the fixture), failed when the case is over ``max_input_tokens`` or grew past
  ``max_growth``; a prompt that does not render is an ``<error>``;
* a ``needle.recall`` suite: one testcase per recall group of each prompt (``classname``
  ``recall.PROMPT``, ``name`` the group: "middle depths (25%-75%)", "depth 50%", "8,000 tokens").
  Against a base these are the groups the comparison tested (failed when Holm's procedure flags a
  drop); without a comparable base they are the diagnosis' pooled groups, failed when a group is
  below the threshold with family-wide confidence. Skipped recall, and recall unchanged since the
  base, is one ``<skipped>`` testcase; a run cut short adds an ``<error>`` testcase ("complete run").

The verdicts are the ones the comment shows: this module only re-words them. Text from a pull
request or a model is escaped by ElementTree and stripped of characters XML 1.0 cannot hold.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection
from dataclasses import dataclass, field

from needle_action.compare import Comparison, GroupDelta, PromptComparison, RecallComparison, TokenDelta
from needle_action.recall.diagnose import read_grid
from needle_action.results import Results
from needle_action.stats.groups import Estimate

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MAX_TEXT = 4000


def _clean(text: object) -> str:
    """TEXT as XML 1.0 can carry it (no control characters, no lone surrogates), at most 4,000 chars."""
    out = _XML_INVALID.sub("", str(text))
    return out if len(out) <= _MAX_TEXT else out[: _MAX_TEXT - 1] + "…"


@dataclass
class Case:
    """One testcase: a name, a class name, and at most one outcome other than a pass."""

    classname: str
    name: str
    file: str | None = None
    outcome: str | None = None  # failure | error | skipped
    kind: str = ""
    message: str = ""
    details: str = ""


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        """How many testcases ended in OUTCOME (failure, error, skipped)."""
        return sum(1 for c in self.cases if c.outcome == outcome)


# --------------------------------------------------------------------------- budget


def _budget_case(p: PromptComparison, t: TokenDelta) -> Case:
    case = Case(f"budget.{p.name}", t.fixture or "(no fixture)", file=p.template)
    if t.head_tokens is None:
        case.outcome, case.kind, case.message = "skipped", "removed", "the case is gone from the head"
        return case
    if not (t.budget_ok and t.growth_ok):
        case.outcome = "failure"
        case.kind = "budget" if not t.budget_ok else "growth"
        case.message = "; ".join(t.reasons) or "over budget"
    head = f"{t.head_tokens:,} tokens{'' if t.exact else ' (approximate)'}"
    limit = (
        f", budget {t.max_input_tokens:,} with {t.reserve_output_tokens:,} reserved"
        if t.max_input_tokens
        else ""
    )
    base = (
        f", base {t.base_tokens:,} ({t.delta:+,})"
        if t.base_tokens is not None and t.delta is not None
        else ""
    )
    case.details = f"{head}{limit}{base}; counted with {t.counter or 'unknown'}"
    return case


def budget_suite(comparison: Comparison) -> Suite:
    """One testcase per prompt x fixture (an error for a prompt that did not render)."""
    suite = Suite("needle.budget")
    for p in comparison.prompts:
        if p.error and not p.tokens:
            suite.cases.append(
                Case(f"budget.{p.name}", "render", p.template, "error", "render", p.error, p.error)
            )
            continue
        suite.cases.extend(_budget_case(p, t) for t in p.tokens)
    return suite


# --------------------------------------------------------------------------- recall


def _group_case(p: PromptComparison, g: GroupDelta) -> Case:
    case = Case(f"recall.{p.name}", g.label, file=p.template)
    rates = f"base {g.base_hits}/{g.base_trials}, head {g.head_hits}/{g.head_trials}"
    drop = "-" if g.drop is None else f"{-g.drop * 100:+.0f} pt"
    p_value = "not tested" if g.p_value is None else f"p={g.p_value:.3g} (Holm bound {g.holm_bound or 0:.3g})"
    case.details = f"{rates}; head change (mean) {drop}; {p_value}; verdict {g.verdict}"
    if g.verdict == "regressed":
        case.outcome, case.kind = "failure", "recall-regression"
        case.message = (
            f"recall of the {g.label} dropped ({rates}); exact stratified test p={g.p_value:.3g} "
            f"<= Holm bound {g.holm_bound:.3g}"
            if g.p_value is not None and g.holm_bound is not None
            else f"recall of the {g.label} dropped ({rates})"
        )
    return case


def _estimate_case(p: PromptComparison, label: str, e: Estimate, threshold: float) -> Case:
    case = Case(f"recall.{p.name}", label, file=p.template)
    rate = "not run" if e.rate is None else f"{e.rate:.0%}"
    case.details = (
        f"{e.hits}/{e.trials} = {rate}, interval {e.low:.0%}-{e.high:.0%}, threshold {threshold:.0%}"
    )
    if e.standing == "below":
        case.outcome, case.kind = "failure", "recall-threshold"
        case.message = (
            f"recall of {label} is {rate} ({e.hits}/{e.trials}), below the threshold {threshold:.0%}"
        )
    return case


def _threshold_cases(p: PromptComparison, head: Results) -> list[Case]:
    """Without a comparable base: the diagnosis' pooled groups against the threshold."""
    pr = head.prompt(p.name)
    hr = pr.recall if pr is not None else None
    if hr is None:
        return []
    reading = read_grid(hr.cells, threshold=hr.threshold, alpha=hr.alpha, partial=False)
    cases = [_estimate_case(p, f"depth {d * 100:.0f}%", e, hr.threshold) for d, e in reading.by_depth.items()]
    cases += [_estimate_case(p, f"{s:,} tokens", e, hr.threshold) for s, e in reading.by_size.items()]
    return cases


def _recall_cases(p: PromptComparison, rc: RecallComparison, head: Results) -> list[Case]:
    name = f"recall.{p.name}"
    if rc.status == "skipped":
        return [Case(name, "recall", p.template, "skipped", "skipped", rc.skipped_reason or "skipped")]
    if rc.unchanged:
        why = "unchanged since the base (same prompt, model and needle settings): nothing to test"
        return [Case(name, "recall", p.template, "skipped", "unchanged", why)]
    cases = [_group_case(p, g) for g in rc.groups] if rc.groups else _threshold_cases(p, head)
    if rc.head is not None and rc.head.partial:
        why = rc.head.partial_reason or "the run was cut short"
        cases.append(
            Case(name, "complete run", p.template, "error", "underpowered", f"partial result: {why}")
        )
    return cases


def recall_suite(comparison: Comparison, head: Results) -> Suite:
    """One testcase per recall group of each prompt (or one skipped testcase)."""
    suite = Suite("needle.recall")
    for p in comparison.prompts:
        if p.recall is not None:
            suite.cases.extend(_recall_cases(p, p.recall, head))
    return suite


# --------------------------------------------------------------------------- the document


def _suite_element(suite: Suite, time: float) -> ET.Element:
    el = ET.Element(
        "testsuite",
        name=suite.name,
        tests=str(len(suite.cases)),
        failures=str(suite.count("failure")),
        errors=str(suite.count("error")),
        skipped=str(suite.count("skipped")),
        time=f"{time:.3f}",
    )
    if suite.properties:
        props = ET.SubElement(el, "properties")
        for k, v in suite.properties.items():
            ET.SubElement(props, "property", name=_clean(k), value=_clean(v))
    for c in suite.cases:
        attrs = {"classname": _clean(c.classname), "name": _clean(c.name), "time": "0"}
        if c.file:
            attrs["file"] = _clean(c.file)
        tc = ET.SubElement(el, "testcase", attrs)
        if c.outcome:
            out = ET.SubElement(tc, c.outcome, type=_clean(c.kind), message=_clean(c.message))
            out.text = _clean(c.message)
        if c.details:
            ET.SubElement(tc, "system-out").text = _clean(c.details)
    return el


def junit_xml(
    comparison: Comparison, head: Results, *, stages: Collection[str] = ("budget", "recall")
) -> str:
    """The JUnit document for STAGES of the run whose results are HEAD, as COMPARISON judged them."""
    suites = []
    props = {
        "verdict": comparison.verdict,
        "head_commit": head.commit or "",
        "tool_version": head.tool_version,
    }
    if "budget" in stages:
        suites.append(budget_suite(comparison))
    if "recall" in stages:
        suites.append(recall_suite(comparison, head))
    root = ET.Element("testsuites", name="needle")
    seconds = head.totals.seconds
    for suite in suites:
        suite.properties = dict(props)
        root.append(_suite_element(suite, seconds / max(1, len(suites))))
    root.set("tests", str(sum(len(s.cases) for s in suites)))
    root.set("failures", str(sum(s.count("failure") for s in suites)))
    root.set("errors", str(sum(s.count("error") for s in suites)))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["Case", "Suite", "budget_suite", "junit_xml", "recall_suite"]
