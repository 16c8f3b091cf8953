"""``needle merge a.json b.json ...``: join the results files of ``--shard i/n`` runs into one.

Every shard of the same run must be there exactly once, measuring the same prompts with the same
settings (``settings_hash``). Cells are joined in grid order (style, size, then depth) and each
prompt's verdict (per-style summaries, effective length, diagnosis, status) is recomputed from them by the engine's own rule, so
the merged file reads like one unsharded run with the same seed: same cells, same answers, same
verdicts. What depends on how the work was split stays a sum: calls, cost, billed tokens.
"""

from __future__ import annotations

from pathlib import Path

from needle_action.core.errors import ConfigError
from needle_action.recall.run.engine import conclude
from needle_action.recall.run.shard import Shard
from needle_action.results import PromptResult, RecallResult, Results, load_results

ADDED = ("calls", "cached_calls", "saved_calls", "speculative_calls", "lost_trials")


def merge_files(paths: list[Path]) -> Results:
    """Load and merge PATHS (see :func:`merge`); a bad set is a ConfigError naming the file."""
    if not paths:
        raise ConfigError(
            "needle merge needs the results files of the shards", hint="needle merge a.json b.json"
        )
    return merge([(p, load_results(p)) for p in paths])


def _shards(loaded: list[tuple[Path, Results]]) -> int:
    seen: dict[str, Path] = {}
    count = None
    for path, results in loaded:
        tags = {p.recall.shard for p in results.prompts if p.recall is not None and p.recall.shard}
        if len(tags) > 1:
            raise ConfigError(f"mixes shards {sorted(tags)}", file=path)
        if not tags:
            raise ConfigError(
                "not a shard: no recall result carries a shard (run with --shard i/n)", file=path
            )
        tag = tags.pop()
        shard = Shard.parse(tag)
        if count is not None and shard.count != count:
            raise ConfigError(f"shard {tag} does not belong to a run split in {count}", file=path)
        count = shard.count
        if tag in seen:
            raise ConfigError(f"shard {tag} is also in {seen[tag]}", file=path)
        seen[tag] = path
    assert count is not None
    missing = [f"{i}/{count}" for i in range(1, count + 1) if f"{i}/{count}" not in seen]
    if missing:
        raise ConfigError(f"shard(s) {', '.join(missing)} missing", hint="pass every shard's results file")
    return count


def merge(loaded: list[tuple[Path, Results]]) -> Results:
    """One Results from the shards' LOADED (path, results) pairs."""
    _shards(loaded)
    first = loaded[0][1]
    out = first.model_copy(deep=True)
    out.prompts = []
    for path, results in loaded:
        for pr in results.prompts:
            _join(out, pr, path)
    for pr in out.prompts:
        if pr.recall is not None:
            _finish(pr.recall)
    t = out.totals
    t.calls = t.cached_calls = t.saved_calls = t.speculative_calls = 0
    t.cost_usd = t.seconds = 0.0
    t.usage = type(t.usage)()
    for _, results in loaded:
        for name in ADDED[:4]:
            setattr(t, name, getattr(t, name) + getattr(results.totals, name))
        t.cost_usd = round(t.cost_usd + results.totals.cost_usd, 6)
        t.seconds = max(t.seconds, results.totals.seconds)
        t.usage.add(results.totals.usage)
        t.partial = t.partial or results.totals.partial
        t.provider_unavailable = t.provider_unavailable or results.totals.provider_unavailable
    return out


def _join(out: Results, pr: PromptResult, path: Path) -> None:
    mine = out.prompt(pr.name)
    if mine is None:
        out.prompts.append(pr.model_copy(deep=True))
        return
    if pr.recall is None or mine.recall is None:
        if (pr.recall is None) != (mine.recall is None):
            raise ConfigError(f"prompt {pr.name!r} has recall in some shards only", file=path)
        return
    a, b = mine.recall, pr.recall
    if a.settings_hash != b.settings_hash:
        raise ConfigError(
            f"prompt {pr.name!r} was measured with other settings than in the other shards", file=path
        )
    taken = {(c.style, c.size, c.depth) for c in a.cells}
    if any((c.style, c.size, c.depth) in taken for c in b.cells):
        raise ConfigError(f"prompt {pr.name!r}: a cell is in two shards", file=path)
    a.cells.extend(c.model_copy(deep=True) for c in b.cells)
    for name in ADDED:
        setattr(a, name, getattr(a, name) + getattr(b, name))
    a.cost_usd = round(a.cost_usd + b.cost_usd, 6)
    a.usage.add(b.usage)
    a.partial = a.partial or b.partial
    a.partial_reason = a.partial_reason or b.partial_reason


def _finish(result: RecallResult) -> None:
    order = {s: i for i, s in enumerate(result.needle_style.split("+"))}
    result.cells.sort(key=lambda c: (order.get(c.style, len(order)), c.size, c.depth))
    result.shard = None
    sizes = sorted({c.size for c in result.cells})
    planned = (
        result.power.trials if result.power else max((c.planned_trials for c in result.cells), default=0)
    )
    conclude(result, sizes=sizes, planned_trials=planned)
