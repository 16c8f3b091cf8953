"""Verdicts across runs, end to end through the real CLI (issue 31): how many pull requests a legal
RAG prompt's gate blocks when every run of the model answers at its own level.

Against the loopback fake of the Anthropic API (real HTTP, real SDK) answering with the simulated
model (tests/fakes/simulated_model.py), whose level is drawn afresh for every process run:
``logit(p) = logit(curve) + N(0, run_sd)``. A contract-clause RAG prompt (a list slot of retrieved
clauses, 3 sizes x 5 depths, the default recall settings: trials "auto", family alpha 0.01, min_drop
0.2). For each pull request:

    needle check --seed S --json history/<run>.json   main's stored earlier runs (6, other seeds;
                                                       a rolling window: main's history, shared by
                                                       consecutive PRs, as on the data branch)
    needle check --json base.json                      the base: main's latest run
    needle recall --baseline base.json [--history history/] --json head.json
                                                       the head (its prompt reworded), from another run
    needle report head.json --base base.json [--history history/]    exit 1: blocked

``--history`` is passed when the CLI has it (issue 31's run-level model); without it the study runs
today's path (the base's own trials, no history). Scenarios: ``unchanged`` (flat .8 on both sides) and
``middle-drop`` (the head loses 30 points in the middle of the request).

    python3 bench/runs_e2e.py --scenario unchanged --prs 40 --run-sd 0.6
    python3 bench/runs_e2e.py --scenario middle-drop --prs 40 --run-sd 0.3

prints one line per PR and a summary (``--json FILE`` writes them). A bench, not a test: 40 PRs take
tens of minutes; ``tests/integration/test_runs_e2e.py`` runs 2 of them (marked slow).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.workload import CLAUDE_DEFAULTS  # noqa: E402
from tests.builders import Project  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.simulated_model import SimulatedModel, run_level  # noqa: E402
from tests.needle_cli import needle_env, run_needle  # noqa: E402

SIZES = (600, 1200, 2400)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
HISTORY_RUNS = 6
BASE_RATE = 0.8
DROP = 0.3

TEMPLATE = """system:
You are the contracts assistant of the legal operations team at Harbourline Freight.
Answer the question using only the agreement clauses retrieved below.
- If the clauses do not settle the question, say "The retrieved clauses do not answer this." and stop.
- Quote notice periods, liability caps, dates and amounts exactly as the clause states them.
- Cite each clause you rely on by its heading in square brackets.
user:
Clauses retrieved from the master services agreement:

{% for clause in clauses -%}
<clause title="{{ clause.title }}">
{{ clause.text | trim }}
</clause>
{% endfor %}
Question: {{ question }}
"""
REWORDED = TEMPLATE.replace(
    "Answer the question using only", "Answer the question briefly, using only"
)  # the PR's change: the prompt differs, its recall does not

CLAUSES = """question: How many days' written notice must either party give to end the agreement for convenience?
clauses:
- title: 14.2 Termination for convenience
  text: Either party may end this agreement for convenience by giving the other party ninety days' written
    notice. Fees for services delivered up to the termination date remain payable in full.
- title: 9.1 Limitation of liability
  text: Apart from claims for unpaid fees, each party's total liability under this agreement in any contract
    year is capped at the fees paid or payable in the twelve months before the event giving rise to the claim.
- title: 6.4 Invoicing and late payment
  text: The supplier invoices monthly in arrears. Undisputed invoices are due within thirty days; late
    amounts carry interest at two percent above the central bank base rate.
- title: 11.3 Data protection
  text: Each party processes personal data only as the data processing addendum allows and notifies the
    other of a personal data breach without undue delay, and in any event within forty-eight hours.
- title: 17.1 Governing law
  text: This agreement and any dispute arising from it are governed by the laws of England and Wales, and
    the courts of London have exclusive jurisdiction.
- title: 4.2 Service levels
  text: The supplier keeps the booking platform available for at least 99.5 percent of each calendar month,
    measured as set out in the service level schedule; service credits are the customer's sole remedy.
"""


def config(sizes: tuple[int, ...] = SIZES, model: str = "claude-sonnet-5-5") -> str:
    return f"""{CLAUDE_DEFAULTS.format(model=model)}
[defaults.recall]
sizes = [{", ".join(str(s) for s in sizes)}]
depths = [{", ".join(repr(d) for d in DEPTHS)}]
trials = "auto"
threshold = 0.8
concurrency = 32
max_output_tokens = 32
seed = 0

[prompts.clause_answer]
template = "prompts/clause_answer.j2"
fixtures = ["fixtures/clause_answer.yaml"]
context_var = "clauses"
question_var = "question"
"""


def write_project(root: Path, template: str, sizes: tuple[int, ...] = SIZES) -> Path:
    project = Project(root).template("prompts/clause_answer.j2", template)
    project = project.fixture("fixtures/clause_answer.yaml", CLAUSES)
    return project.config(config(sizes), dedent=False).config_path


Curve = Callable[[float, int], float]


def flat_base(depth: float, size: int) -> float:
    return BASE_RATE


def middle_dropped(depth: float, size: int) -> float:
    # the simulated model reads depth in the whole request: the slot's 25%-75% sit well inside 0.2-0.8
    return BASE_RATE - DROP if 0.2 < depth < 0.8 else BASE_RATE


SCENARIOS: dict[str, tuple[Curve, Curve, bool]] = {
    "unchanged": (flat_base, flat_base, False),
    "middle-drop": (flat_base, middle_dropped, True),
}


@dataclass
class PrOutcome:
    pr: int
    exit_code: int
    blocked: bool
    verdict: str
    base_level: float
    head_level: float
    head_trials: int | None
    head_calls: int
    history_used: bool
    tau: float | None  # the run-to-run sd the head's test used (None: today's CLI, no cross-run test)
    tau_method: str | None  # "moments" (estimated from the history) or "prior"
    seconds: float


@dataclass
class Study:
    scenario: str
    run_sd: float
    prs: int
    history_flag: bool
    outcomes: list[PrOutcome] = field(default_factory=list)

    @property
    def blocked(self) -> int:
        return sum(o.blocked for o in self.outcomes)


class Runner:
    """The CLI against one fake server, each run with its own simulated level."""

    def __init__(
        self, fake: FakeAnthropic, work: Path, run_sd: float, *, history_runs: int, sizes: tuple[int, ...]
    ) -> None:
        self.fake, self.work, self.run_sd = fake, work, run_sd
        self.history_runs, self.sizes = history_runs, sizes
        self.history_flag = "--history" in self.needle(["recall", "--help"], cache="help").stdout

    def needle(self, args: list[str], *, cache: str) -> subprocess.CompletedProcess[str]:
        env = needle_env(
            ANTHROPIC_BASE_URL=self.fake.base_url,
            ANTHROPIC_API_KEY=self.fake.api_key,
            NEEDLE_CACHE_DIR=str(self.work / "cache" / cache),
            NO_COLOR="1",
        )
        return run_needle(args, env=env, timeout=1800)

    def measured(self, run: int, curve: Curve, args: list[str], cache: str) -> tuple[int, float]:
        """ARGS as run RUN (the model at that run's level): (calls the server answered, the level)."""
        self.fake.responder = SimulatedModel.for_run(curve, run=run, run_sd=self.run_sd, exact_size=False)
        before = self.fake.calls["messages"]
        res = self.needle(args, cache=cache)
        if res.returncode not in (0, 1) or "Traceback" in res.stderr:
            raise RuntimeError(
                f"needle {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
            )
        return self.fake.calls["messages"] - before, run_level(run, self.run_sd)


def history_run(runner: Runner, base_cfg: Path, folder: Path, run: int, curve: Curve) -> bool:
    """Main's earlier run RUN (seed 1000 + RUN) stored in FOLDER, listed in its index (False: it was
    there already)."""
    out = folder / f"{run:040d}.json"
    index = folder / "index.json"
    order = json.loads(index.read_text()) if index.is_file() else []
    if out.is_file() and out.stem in order:
        return False  # measured by an earlier study in the same --work folder (same level, same draws)
    args = ["check", "--config", str(base_cfg), "--seed", str(1000 + run), "--json", str(out)]
    runner.measured(100_000 + run, curve, args, cache=f"history{run}")
    index.write_text(json.dumps([*order, out.stem]))
    return True


def history_window(pool: Path, pr: int, runs: int, dest: Path) -> Path:
    """PR's history: main's runs PR .. PR + RUNS - 1 (a rolling window) copied into DEST."""
    dest.mkdir(parents=True, exist_ok=True)
    names = [f"{run:040d}" for run in range(pr, pr + runs)]
    for name in names:
        shutil.copy(pool / f"{name}.json", dest / f"{name}.json")
    (dest / "index.json").write_text(json.dumps(names))
    return dest


def one_pr(runner: Runner, pr: int, scenario: str, pool: Path) -> PrOutcome:
    base_curve, head_curve, _ = SCENARIOS[scenario]
    started = time.perf_counter()
    tmp = runner.work / f"pr{pr}"
    base_cfg = write_project(tmp / "base", TEMPLATE, runner.sizes)
    head_cfg = write_project(tmp / "head", REWORDED, runner.sizes)
    history = history_window(pool, pr, runner.history_runs, tmp / "history")
    base, head = tmp / "base.json", tmp / "head.json"
    _, base_level = runner.measured(
        200_000 + pr, base_curve, ["check", "--config", str(base_cfg), "--json", str(base)], f"base{pr}"
    )
    extra = ["--history", str(history)] if runner.history_flag else []
    args = ["recall", "--config", str(head_cfg), "--baseline", str(base), *extra, "--no-progress"]
    calls, head_level = runner.measured(300_000 + pr, head_curve, [*args, "--json", str(head)], f"head{pr}")
    report = runner.needle(
        ["report", str(head), "--base", str(base), *extra, "--format", "json"], cache="report"
    )
    if report.returncode not in (0, 1) or "Traceback" in report.stderr:
        raise RuntimeError(f"needle report exited {report.returncode}:\n{report.stdout}\n{report.stderr}")
    comparison = json.loads(report.stdout)
    recall = json.loads(head.read_text())["prompts"][0]["recall"]
    power, cross = recall.get("power") or {}, recall.get("cross_run") or {}
    return PrOutcome(
        pr=pr,
        exit_code=report.returncode,
        blocked=report.returncode == 1,
        verdict=str(comparison.get("verdict")),
        base_level=round(base_level, 3),
        head_level=round(head_level, 3),
        head_trials=power.get("trials"),
        head_calls=calls,
        history_used=runner.history_flag,
        tau=cross.get("tau"),
        tau_method=cross.get("method"),
        seconds=round(time.perf_counter() - started, 1),
    )


def study(
    scenario: str,
    prs: int,
    run_sd: float,
    work: Path,
    *,
    history_runs: int = HISTORY_RUNS,
    sizes: tuple[int, ...] = SIZES,
    echo: bool = True,
) -> Study:
    """PRS pull requests of SCENARIO at RUN_SD, in WORK, each with HISTORY_RUNS stored main runs."""
    base_curve = SCENARIOS[scenario][0]
    with FakeAnthropic() as fake:
        runner = Runner(fake, work, run_sd, history_runs=history_runs, sizes=sizes)
        result = Study(scenario, run_sd, prs, runner.history_flag)
        pool = work / "main-runs"
        endpoint = pool / "endpoint.txt"
        if pool.is_dir() and (not endpoint.is_file() or endpoint.read_text() != fake.base_url):
            # runs measured against another server have another fingerprint (the endpoint is part of
            # it): the base would find no stored run of its own, so they are measured again
            shutil.rmtree(pool)
        pool.mkdir(parents=True, exist_ok=True)
        endpoint.write_text(fake.base_url)
        base_cfg = write_project(work / "main", TEMPLATE, sizes)
        for pr in range(prs):  # PR i needs main's runs i .. i + history_runs - 1: measured as it goes
            for run in range(pr, pr + history_runs):
                if history_run(runner, base_cfg, pool, run, base_curve) and echo:
                    print(f"main run {run}: level {run_level(100_000 + run, run_sd):+.2f}", file=sys.stderr)
            outcome = one_pr(runner, pr, scenario, pool)
            result.outcomes.append(outcome)
            if echo:
                print(json.dumps(asdict(outcome)), file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="unchanged")
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--run-sd", type=float, default=0.6, help="sd of a run's level on the logit scale")
    parser.add_argument(
        "--work",
        type=Path,
        help="keep the projects and results here (default: a temp dir); main's runs already there are reused",
    )
    parser.add_argument("--json", type=Path, help="write every PR's outcome and the summary here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="runs-e2e-") as tmp:
        work = args.work or Path(tmp)
        result = study(args.scenario, args.prs, args.run_sd, work)
    seconds = time.perf_counter() - started
    summary = (
        f"{args.scenario}, run sd {args.run_sd:g}, history {'used' if result.history_flag else 'not available'}: "
        f"{result.blocked} of {result.prs} PRs blocked ({result.blocked / result.prs:.0%}), {seconds:.0f} s"
    )
    print(summary)
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, **asdict(result), "seconds": round(seconds, 1)}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
