"""The budget table says where the tokens are for cases with tools or parameters, or that changed."""

from __future__ import annotations

from needle_action.report.terminal import print_budget
from tests.unit._results_builder import case, prompt, results


def test_sections_are_shown_for_cases_with_tools_and_hidden_otherwise(capsys):
    agent = case(3000, fixture="fx/agent.yaml")
    agent.sections = {"system": 100, "tools": 1450, "messages": 250, "context": 1200, "params": 0}
    plain = case(800, fixture="fx/plain.yaml")
    plain.sections = {"system": 100, "tools": 0, "messages": 200, "context": 500, "params": 0}
    print_budget(results(prompt("agent", cases=[agent]), prompt("plain", cases=[plain])))
    out = capsys.readouterr().out
    assert "agent [agent.yaml]: system 100 · tools 1,450 · messages 250 · context 1,200 · params 0" in out
    assert "plain [plain.yaml]:" not in out


def test_a_changed_case_shows_its_sections(capsys):
    grown = case(900, fixture="fx/plain.yaml")
    grown.sections = {"system": 100, "tools": 0, "messages": 300, "context": 500, "params": 0}
    grown.growth_tokens = 100
    print_budget(results(prompt("plain", cases=[grown])))
    assert "plain [plain.yaml]: system 100 · tools 0 · messages 300" in capsys.readouterr().out


def test_no_progress_line_after_the_progress_is_closed():
    import io

    from needle_action.report.terminal import recall_progress

    stream = io.StringIO()
    progress = recall_progress(8, label="recall qa", stream=stream)
    progress.advance(4)
    progress.close()  # the results print now
    progress.advance(4)  # a trial that settles late (an arm, a follower): nothing after the results
    assert stream.getvalue().splitlines() == ["recall qa: 4/8 trials settled"]


def test_the_power_sentence_reads_for_every_group():
    from needle_action.report.terminal import power_sentence
    from needle_action.results.recall import RecallPower

    def sentence(group: str) -> str:
        power = RecallPower(
            trials=2, auto=False, group=group, base_rate=0.9, base_rate_source="assumed",
            min_drop=0.2, power=0.1, detectable_drop=None,
        )  # fmt: skip
        return power_sentence(power)

    assert "a total loss across all cells with" in sentence("all cells")
    assert "a total loss in the middle depth (50%) with" in sentence("middle depth (50%)")
