"""``needle plan``: what a compared recall run will cost, before any call."""

from __future__ import annotations

import json
from pathlib import Path

import click

from needle_action.cli.common import (
    FILE,
    baseline_option,
    config_option,
    handle_errors,
    history_option,
    load_baseline,
    load_history,
    only_option,
    write_text,
)
from needle_action.config.loader import load_config
from needle_action.pipeline.measure import select_prompts


@click.command()
@config_option
@only_option
@baseline_option
@history_option
@click.option("--json", "json_out", type=FILE, help="Write the plan here.")
@handle_errors
def plan(
    config_path: Path,
    only: tuple[str, ...],
    baseline: Path | None,
    history_dir: Path | None,
    json_out: Path | None,
) -> None:
    """Calls, tokens and dollars a compared recall run will spend, before any call (offline), and the
    power it has as tested (a --baseline is another run's: the cross-run test's power)."""
    from needle_action.recall.plan.cost import as_json, format_plans, plan_prompt
    from needle_action.results.cache import ResultCache, default_cache_path

    config = load_config(config_path)
    base = load_baseline(baseline)
    path = default_cache_path()  # read only: an absent cache is not created by a plan
    cache = ResultCache(path) if path.is_file() else None
    chosen = [p for p in select_prompts(config, list(only) or None) if p.recall.enabled]
    history = load_history(history_dir)
    plans = [plan_prompt(p, base, config=config, cache=cache, history=history) for p in chosen]
    click.echo(format_plans(plans))
    if json_out is not None:
        write_text(json_out, json.dumps(as_json(plans), indent=2) + "\n", "plan")
