"""The trend of main-branch results: tokens, effective context and mid-depth recall per commit.

Main-branch runs with ``data-branch`` store one results file per commit on the data branch
(action/databranch.py) and append the commit to ``results/index.json``, so the branch holds the
history in order, even in a one-commit-deep fetch. ``needle history`` reads it from a git ref
(``--data-branch``) or from a folder of results files (``--dir``); the PR comment charts it for the
prompts a pull request changes, with the PR's head as the last point.

Model drift: when a prompt's recall fingerprint (what decides its answers: the assembled prompt,
model, needle settings; compare/recall.py ``same_fingerprint``) is the same at two consecutive
points and its mid-depth recall fell, the prompt did not change: the model did. The fall must pass
the comparison's own floor (at least half of ``min_drop``) and be a shift of the run's level beyond
what unchanged runs differ by: the spread of the prompt's other runs with that fingerprint
(stats/runs.py; fewer than three: the stated prior), at the family ``alpha``. Runs have levels,
so the exact test of one run against the next called 12-26% of unchanged pairs drift (issue 31).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from needle_action.compare.models import PromptTrend, TrendPoint
from needle_action.compare.recall import same_fingerprint
from needle_action.core.dataformats import DataError, parse_json
from needle_action.core.errors import ConfigError
from needle_action.results import RecallResult, Results, load_results
from needle_action.stats.groups import CellKey, cell_key
from needle_action.stats.runs import RunSpread, estimate_spread, uniform_pvalue
from needle_action.stats.sequential import drop_floor

INDEX = "results/index.json"
MAX_RESULTS_BYTES = 20 * 1024 * 1024
TREND_POINTS = 12  # main commits the PR comment's chart shows (the CLI prints them all)
_SHA = 40


def _middle(r: RecallResult) -> list[tuple[tuple[str, int, float], int, int]]:
    return [((c.style, c.size, c.depth), c.hits, c.trials) for c in r.cells if 0 < c.depth < 1 and c.trials]


def _mid_counts(r: RecallResult, style: str) -> dict[CellKey, tuple[int, int]]:
    return {cell_key(k[1], k[2]): (h, n) for k, h, n in _middle(r) if k[0] == style}


def run_spread(runs: Sequence[RecallResult]) -> RunSpread:
    """How far unchanged runs' mid-depth recall wanders (logit scale), from RUNS (one fingerprint):
    the estimate of stats/runs.py, the stated prior with fewer than three runs."""
    if not runs:
        return RunSpread.prior()
    style = runs[0].style_names()[0] if runs[0].cells else ""
    return estimate_spread([_mid_counts(r, style) for r in runs])


def drift(before: RecallResult, after: RecallResult, spread: RunSpread | None = None) -> str | None:
    """Why AFTER's mid-depth recall is model drift from BEFORE's, or None: same fingerprint, a fall
    that clears the comparison's floor, and a shift of the run's level beyond what two unchanged
    runs differ by (SPREAD: the runs' spread, estimated from the history; None: the stated prior),
    at the family alpha."""
    if not same_fingerprint(after, before):
        return None
    a = {k: (h, n) for k, h, n in _middle(before)}
    strata = [(a[k][0], a[k][1], h, n) for k, h, n in _middle(after) if k in a]
    if not strata:
        return None
    base_rate = sum(s[0] for s in strata) / sum(s[1] for s in strata)
    head_rate = sum(s[2] for s in strata) / sum(s[3] for s in strata)
    if base_rate - head_rate < drop_floor(after.min_drop):
        return None
    style = after.style_names()[0]
    spread = spread or RunSpread.prior()
    p = uniform_pvalue(_mid_counts(before, style), _mid_counts(after, style), spread)
    if p >= after.alpha:
        return None
    return (
        f"model drift: mid-depth recall fell {base_rate:.0%} → {head_rate:.0%} with the prompt, model and "
        f"needle settings unchanged (p = {p:.2g}; runs differ by sd {spread.tau:.2f} on the logit scale, "
        f"{'estimated from ' + str(spread.runs) + ' runs' if spread.method == 'moments' else 'the stated prior'})"
    )


def _point(commit: str, results: Results, name: str) -> TrendPoint | None:
    pr = results.prompt(name)
    if pr is None:
        return None
    point = TrendPoint(commit=commit, tokens=max((c.count.tokens for c in pr.cases), default=None))
    if pr.recall is not None:
        mid = _middle(pr.recall)
        point.effective_context = pr.recall.effective_context
        point.mid_hits, point.mid_trials = sum(h for _, h, _ in mid), sum(n for _, _, n in mid)
        point.mid_rate = point.mid_hits / point.mid_trials if point.mid_trials else None
    return point


def trends(history: Iterable[Results], only: Iterable[str] | None = None) -> list[PromptTrend]:
    """Per prompt (ONLY those, when given), its points over HISTORY (oldest first), drift marked."""
    runs = list(history)
    names = list(dict.fromkeys(p.name for r in runs for p in r.prompts))
    wanted = set(only) if only is not None else None
    out = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        trend = PromptTrend(prompt=name)
        last: RecallResult | None = None
        spreads = _spreads(runs, name)
        for results in runs:
            point = _point(results.commit or "?", results, name)
            if point is None:
                continue
            found = results.prompt(name)  # never None here: _point found it
            recall = found.recall if found is not None else None
            if last is not None and recall is not None:
                others = [r for r in spreads.get(_fingerprint(recall), []) if r is not recall]
                point.drift = drift(last, recall, run_spread(others))
            last = recall or last
            trend.points.append(point)
        out.append(trend)
    return out


def _fingerprint(r: RecallResult) -> str:
    return r.pool_key or r.settings_hash


def _spreads(runs: Sequence[Results], name: str) -> dict[str, list[RecallResult]]:
    """Per recall fingerprint of prompt NAME, its complete runs in RUNS: drift's yardstick is their
    spread, the run under test left out (a drifted run must not widen its own yardstick)."""
    by_key: dict[str, list[RecallResult]] = {}
    for results in runs:
        found = results.prompt(name)
        if found is not None and found.recall is not None and not found.recall.partial:
            by_key.setdefault(_fingerprint(found.recall), []).append(found.recall)
    return by_key


def pr_trends(runs: list[Results], head: Results) -> list[PromptTrend]:
    """The PR comment's trends: every prompt over the last RUNS (main commits), the head last (the
    comment charts the changed prompts and calls out drift in any)."""
    return [t for t in trends([*runs[-TREND_POINTS:], head]) if len(t.points) > 1]


# --------------------------------------------------------------------------- reading


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=str(repo), capture_output=True, timeout=120)  # noqa: S603, S607 - git from PATH with a fixed argv (no shell); the path is the runner's choice


def read_index(raw: bytes | None) -> list[str]:
    """The commits of ``results/index.json`` in order (a list of ``{"commit": sha}``); [] when
    missing or unreadable: the caller falls back to the branch's log."""
    if raw is not None and len(raw) > MAX_RESULTS_BYTES:
        return []
    try:  # nesting and number limits too: whoever can push to the data branch wrote this
        entries = parse_json((raw or b"[]").decode("utf-8"))
    except (DataError, UnicodeDecodeError):
        return []
    if not isinstance(entries, list):
        return []
    shas = [e.get("commit") for e in entries if isinstance(e, dict)]
    return [s for s in shas if isinstance(s, str) and len(s) == _SHA]


def _logged_commits(repo: Path, rev: str) -> list[str]:
    """Main commits in the order the data branch first stored them (its log, oldest first)."""
    log = _git(repo, "log", "--reverse", "--format=%H", rev, "--", "results/")
    order: list[str] = []
    for data_commit in log.stdout.decode().split():
        changed = _git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "--root", data_commit)
        for path in changed.stdout.decode().split():
            stem = path.removeprefix("results/").removesuffix(".json")
            if path.startswith("results/") and len(stem) == _SHA and stem not in order:
                order.append(stem)
    return order


def _resolve(repo: Path, branch: str) -> str:
    for rev in (branch, f"origin/{branch}", f"refs/remotes/origin/{branch}"):
        if _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode == 0:
            return rev
    raise ConfigError(
        f"data branch {branch!r} not found in {repo} (neither locally nor as origin/{branch})",
        hint=f"fetch it first: git fetch origin {branch}:{branch}",
    )


def from_data_branch(repo: Path, branch: str) -> list[Results]:
    """The results stored on BRANCH (a local branch or origin's), oldest first."""
    rev = _resolve(repo, branch)
    shas = read_index(blob(repo, rev, INDEX)) or _logged_commits(repo, rev)
    out = []
    for sha in shas:
        raw = blob(repo, rev, f"results/{sha}.json")
        if raw is not None:
            out.append(parse_results(raw, f"{branch}:results/{sha}.json"))
    return out


def blob(repo: Path, rev: str, path: str) -> bytes | None:
    """A file of REV, or None when it has none."""
    proc = _git(repo, "cat-file", "blob", f"{rev}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def parse_results(raw: bytes, name: str) -> Results:
    """Stored results (a data branch's: written by any run that could push there) validated like
    any results file, size capped; ConfigError naming NAME when they are not results."""
    if len(raw) > MAX_RESULTS_BYTES:
        raise ConfigError("results file implausibly large (over 20 MiB)", file=name)
    with tempfile.TemporaryDirectory(prefix="needle-data-") as tmp:
        path = Path(tmp) / "results.json"
        path.write_bytes(raw)
        try:
            return load_results(path)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=name, line=exc.location.line) from None


def from_folder(folder: Path) -> list[Results]:
    """The results files in FOLDER, in the order of its ``index.json`` (as the data branch keeps
    it), else by modification time; ``*.meta.json``, ``latest.json`` and the index are skipped."""
    if not folder.is_dir():
        raise ConfigError(
            f"not a folder: {folder}", hint="pass a folder of results files (needle check --json)"
        )
    index = folder / "index.json"
    order = read_index(index.read_bytes() if index.is_file() else None)
    files = [
        f
        for f in folder.glob("*.json")
        if f.name not in ("latest.json", "index.json") and not f.name.endswith(".meta.json")
    ]
    if order:
        rank = {sha: i for i, sha in enumerate(order)}
        files = sorted((f for f in files if f.stem in rank), key=lambda f: rank[f.stem])
    else:
        files.sort(key=lambda f: (f.stat().st_mtime, f.name))
    return [load_results(f) for f in files]


__all__ = [
    "PromptTrend",
    "TrendPoint",
    "drift",
    "from_data_branch",
    "from_folder",
    "pr_trends",
    "read_index",
    "trends",
]
