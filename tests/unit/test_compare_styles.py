"""Comparing prompts that run several needle styles: cells pair by style, each style's groups are
tested under one Holm correction, a style the base did not run is judged against the threshold, and
an absent drop (the model inventing answers) regresses like recall."""

from __future__ import annotations

from needle_action.compare import compare
from needle_action.results import RecallAnswer, RecallDiagnosis, RecallResult, StyleSummary
from needle_action.stats.groups import family
from tests.unit._results_builder import case, grid, prompt, recall, results

DEPTHS = (0.0, 0.5, 1.0)


def _styled(parts: dict[str, dict], *, pool_key: str, failing: tuple[str, ...] = ()) -> RecallResult:
    """One result running PARTS' styles (style -> grid of (hits, trials)), style by style."""
    out = None
    for style, cells in parts.items():
        r = recall(cells)
        for c in r.cells:
            c.style = style
        if out is None:
            out = r
        else:
            out.cells += r.cells
    assert out is not None
    out.needle_style = "+".join(parts)
    out.pool_key, out.settings_hash = pool_key, "s" + pool_key
    out.styles = [
        StyleSummary(
            style=s,
            hits=sum(c.hits for c in out.cells if c.style == s),
            trials=sum(c.trials for c in out.cells if c.style == s),
            rate=None,
            status="fail" if s in failing else "pass",
            diagnosis=RecallDiagnosis(
                kind="hallucination" if s in failing else "all-pass", summary=f"{s} summary", fix="f"
            ),
        )
        for s in parts
    ]
    out.status = "fail" if failing else "pass"
    return out


def _compare(base: RecallResult | None, head: RecallResult):
    b = results(prompt("qa", [case(1000)], rec=base)) if base is not None else None
    return compare(b, results(prompt("qa", [case(1000)], rec=head)))


GOOD = grid({d: (30, 30) for d in DEPTHS})
BAD_MIDDLE = grid({0.0: (30, 30), 0.5: (6, 30), 1.0: (30, 30)})


def test_cells_pair_by_style_and_holm_spans_every_style():
    base = _styled({"codeword": GOOD, "absent": GOOD}, pool_key="base")
    head = _styled({"codeword": GOOD, "absent": BAD_MIDDLE}, pool_key="head")
    comparison = _compare(base, head)
    rc = comparison.prompt("qa").recall
    assert rc.styles == ["codeword", "absent"]
    assert len(rc.groups) == 2 * len(family([2000, 8000], list(DEPTHS)))  # one family over both styles
    regressed = [g for g in rc.groups if g.verdict == "regressed"]
    assert regressed
    assert {g.style for g in regressed} == {"absent"}
    assert {(c.style, c.depth) for c in rc.cells if c.verdict == "regressed"} == {("absent", 0.5)}
    assert comparison.recall_regressed
    message = comparison.failures[0].message
    assert "abstention [absent] at" in message, message
    assert "invents answers" in message, message


def test_the_same_drop_in_a_recall_style_names_that_style():
    base = _styled({"codeword": GOOD, "nonlexical": GOOD}, pool_key="b")
    head = _styled({"codeword": GOOD, "nonlexical": BAD_MIDDLE}, pool_key="h")
    comparison = _compare(base, head)
    assert any("recall [nonlexical] at middle depth" in f.message for f in comparison.failures), (
        comparison.failures
    )


def test_a_style_the_base_did_not_run_is_judged_against_the_threshold():
    base = _styled({"codeword": GOOD}, pool_key="b")
    head = _styled(
        {"codeword": GOOD, "absent": grid({d: (10, 30) for d in DEPTHS})}, pool_key="h", failing=("absent",)
    )
    for c in head.cells:
        if c.style == "absent":
            c.status = "fail"
    comparison = _compare(base, head)
    rc = comparison.prompt("qa").recall
    assert {g.style for g in rc.groups} == {"codeword"}  # only the style both ran is tested
    assert {c.verdict for c in rc.cells if c.style == "absent"} == {"below-threshold"}
    assert rc.status == "fail"
    assert comparison.recall_regressed
    assert any(
        f.kind == "recall-threshold" and "abstention [absent]: absent summary" in f.message
        for f in comparison.failures
    )


def test_a_base_written_before_cells_named_their_style_still_pairs():
    old = recall(GOOD).model_dump(mode="json")
    for c in old["cells"]:
        del c["style"]
    base = RecallResult.model_validate(old)
    assert {c.style for c in base.cells} == {"codeword"}  # named from needle_style
    head = _styled({"codeword": BAD_MIDDLE}, pool_key="h2")
    rc = _compare(base, head).prompt("qa").recall
    assert rc.comparable
    assert any(g.verdict == "regressed" for g in rc.groups)


def test_other_look_alikes_are_not_the_same_quantity():
    base = _styled({"codeword": GOOD}, pool_key="b")
    head = _styled({"codeword": BAD_MIDDLE}, pool_key="h")
    head.distractors, head.similarity = 3, "high"
    rc = _compare(base, head).prompt("qa").recall
    assert not rc.comparable
    assert not rc.groups


def _with_target(r: RecallResult, target: str) -> RecallResult:
    for c in r.cells:
        c.answers = [RecallAnswer(trial=0, needle=target, answer="...", hit=True)]
    return r


def test_a_pull_request_that_changes_the_gold_answer_is_not_compared():
    base = _with_target(_styled({"gold": GOOD}, pool_key="b"), "14 days")
    head = _with_target(_styled({"gold": BAD_MIDDLE}, pool_key="h"), "/./")
    rc = _compare(base, head).prompt("qa").recall
    assert not rc.groups  # another quantity: nothing tested against the base
    assert rc.notes == [
        "This pull request changes what the gold fixture counts as right (14 days → /./): gold is judged "
        "against the threshold alone, not compared with the base."
    ]
    same = _with_target(_styled({"gold": BAD_MIDDLE}, pool_key="h"), "14 days")
    assert any(g.verdict == "regressed" for g in _compare(base, same).prompt("qa").recall.groups)
