"""Property-based fuzzing of everything a pull request writes: needle.toml, templates, fixtures.

The property: whatever the text, loading or rendering it either works or raises a ``NeedleError``
that names its file (and its line, for anything that is a position in a text: syntax errors,
nesting, number sizes, characters), within a bounded time. Never another exception, never a hang.

The budget is ``NEEDLE_FUZZ_EXAMPLES`` examples per property (default 40: a few seconds in the
fast tier). CI runs ``NEEDLE_FUZZ_EXAMPLES=2500`` (4 properties, 10,000 cases), and the run prints
how many cases it generated, how many were errors, and the slowest one.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from needle_action.assemble.render import render_case
from needle_action.assemble.templates.fixtures import load_fixture
from needle_action.config import load_config
from needle_action.core.errors import NeedleError

EXAMPLES = int(os.environ.get("NEEDLE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # timed by hand below: a shared CI core makes hypothesis' deadline flaky
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
    # CI replays the same cases on every machine (a fixed seed per test), so a red CI is always
    # reproducible; NEEDLE_FUZZ_RANDOM=1 explores fresh cases (do that when changing a parser).
    derandomize=os.environ.get("NEEDLE_FUZZ_RANDOM") != "1",
)
MAX_SECONDS = 10.0
# errors about a position in a text must carry its line
POSITIONAL = ("syntax error", "nested more than", "digits", "unacceptable character", "not a valid", "alias")

STATS: Counter = Counter()
SLOWEST: dict[str, float] = {}
_names = itertools.count()


def _check(kind: str, started: float, exc: BaseException | None) -> None:
    elapsed = time.perf_counter() - started
    STATS[kind] += 1
    SLOWEST[kind] = max(SLOWEST.get(kind, 0.0), elapsed)
    assert elapsed <= MAX_SECONDS, f"{kind} took {elapsed:.1f} s"
    if exc is None:
        return
    STATS[f"{kind} errors"] += 1
    assert isinstance(exc, NeedleError), f"{type(exc).__name__}: {exc}"
    assert exc.location.file, exc.format()
    if any(word in exc.message for word in POSITIONAL):
        assert exc.location.line, exc.format()
    assert "Traceback" not in exc.format()


def _attempt(kind: str, load: Callable[[], object], *made: Path) -> BaseException | None:
    """LOAD (reading the files MADE, removed afterwards), then :func:`_check` its time and error."""
    started, error = time.perf_counter(), None
    try:
        load()
    except Exception as exc:  # noqa: BLE001 - the property under test
        error = exc
    finally:
        for path in made:
            path.unlink()
    _check(kind, started, error)
    return error


def _render(cfg: Path, fixture: Path | None) -> None:
    config = load_config(cfg)
    render_case(config, config.prompts["p"], fixture)


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="needle-fuzz-") as tmp:
        root = Path(tmp)
        (root / "prompts").mkdir()
        (root / "prompts" / "p.j2").write_text("system:\nBe brief.\nuser:\n{{ question }}\n")
        (root / "fx.yaml").write_text("question: why?\nitems: [1, 2]\nx: hello\nn: 3\n")
        (root / ".git").mkdir()
        (root / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n")
        yield root
    print(f"\nfuzz cases: {dict(STATS)}; slowest: " + ", ".join(f"{k} {v:.2f}s" for k, v in SLOWEST.items()))


# --------------------------------------------------------------------------- needle.toml

KEYS = [
    "model", "provider", "tokenizer", "tokenizer_safety_factor", "max_input_tokens", "max_growth",
    "reserve_output_tokens", "template", "fixtures", "context_var", "question_var", "enabled", "sizes",
    "depths", "trials", "threshold", "alpha", "min_drop", "max_calls", "max_cost_usd", "seed", "base_url",
    "api_key_env", "model_path", "allow_hidden", "filler_globs", "fixture", "needle", "scoring",
    "answer_regex", "name", "zz-unknown", '"quoted key"', "a.b",
]  # fmt: skip
TABLES = [
    "[defaults]", "[defaults.recall]", "[prompts.p]", "[prompts.p.recall]", "[prompts.q]", "[files]",
    "[prompts.p.providers.anthropic]", "[defaults.providers.openai]", "[[prompts.p.recall.needles]]",
    "[prompts]", "[bogus]", "[prompts.'bad name']", "[",
]  # fmt: skip
STRINGS = [
    "prompts/p.j2", "fx.yaml", "../etc/passwd", "/etc/passwd", ".git/config", ".env", "*.yaml", "**/*",
    "prompts/\\u0000x.j2", "a\\u0000b", "10%", "300%", "anthropic", "openai", "local", "tiktoken:o200k_base",
    "auto", "C:\\\\x", "", "[", "x" * 50,
]  # fmt: skip

toml_scalar = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6).map(str),
    st.sampled_from(
        ["9" * 5000, "-0", "1_000", "0x1F", "1e400", "nan", "inf", "true", "false", "1979-05-27"]
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(STRINGS).map(lambda s: f'"{s}"'),
    st.text(max_size=20).map(json.dumps),
)
toml_value = st.recursive(
    toml_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(KEYS[:10]), inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in kv) + "}"
        ),
    ),
    max_leaves=8,
)
toml_line = st.one_of(
    st.sampled_from(TABLES),
    st.tuples(st.sampled_from(KEYS), toml_value).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.text(max_size=30),
    st.just("a = " + "[" * 600 + "]" * 600),
)
VALID_START = '[prompts.p]\ntemplate = "prompts/p.j2"\nfixtures = ["fx.yaml"]\n'


@st.composite
def _mutated(draw, base: st.SearchStrategy[str]) -> str:
    text = draw(base)
    if draw(st.booleans()) and text:
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(max_size=5)) + text[i + draw(st.integers(0, 3)) :]
    return text


toml_file = _mutated(
    st.tuples(st.booleans(), st.lists(toml_line, max_size=12)).map(
        lambda t: (VALID_START if t[0] else "") + "\n".join(t[1]) + "\n"
    )
)


@FUZZ
@given(text=toml_file)
def test_fuzz_threshold_file(workdir, text):
    path = workdir / f"needle-{next(_names)}.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _attempt("needle.toml", lambda: load_config(path), path)


# --------------------------------------------------------------------------- templates

FRAGMENTS = [
    "Hello ", "\n", "system:\n", "user:\n", "assistant:\n", "{{ x }}", "{{ question }}", "{{ items|join(', ') }}",
    "{% for i in items %}", "{% endfor %}", "{% if x %}", "{% else %}", "{% endif %}", "{{ x|upper }}",
    "{% include 'prompts/p.j2' %}", "{% include '.git/config' %}", "{% include '../x' %}", "{% include '/etc/passwd' %}",
    "{% include 'a\\x00b' %}", "{{ x.__class__.__mro__ }}", "{{ cycler.__init__.__globals__ }}", "{{ nope }}",
    "{{ 1/0 }}", "{{ '%s' % x }}", "{{ x[99] }}", "{{ n * 'ab' }}", "{{ 'x' * 100000000 }}", "{{ 10 ** 100000 }}",
    "{{ x|center(999999999) }}", "{{ '{:>99999999}'.format(x) }}", "{{ x|wordwrap(0) }}", "{{ items|batch(0) }}",
    "{% macro m(a) %}[{{ a }}]{% endmacro %}", "{{ m(x) }}", "{% set y = x ~ x %}{{ y }}", "{{", "}}", "{%", "%}",
    "{#", "#}", "{% raw %}", "{% endraw %}", "{% extends 'prompts/p.j2' %}", "{% block b %}", "{% endblock %}",
    "{{ range(1000000) }}", "{{ items|tojson(indent=2) }}", "{{ x|int }}", "{{ '9' * 5000|int }}", "{{ lipsum() }}",
    "{{ self }}", "{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}", "\U000f8e00", "{{ x|indent(3) }}",
]  # fmt: skip
template_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=14).map("".join)


@FUZZ
@given(source=template_text)
def test_fuzz_template(workdir, source):
    name = f"t{next(_names)}"
    template = workdir / "prompts" / f"{name}.j2"
    template.write_text(source, encoding="utf-8", errors="surrogatepass")
    cfg = workdir / f"{name}.toml"
    cfg.write_text(
        f'[prompts.p]\ntemplate = "prompts/{name}.j2"\nfixtures = ["fx.yaml"]\n'
        'context_var = "items"\nquestion_var = "question"\n'
    )
    error = _attempt("template", lambda: _render(cfg, workdir / "fx.yaml"), template, cfg)
    if error is not None:
        assert "c2VjcmV0" not in error.format()


# --------------------------------------------------------------------------- fixtures

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
data = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_size=5,
)
YAML_HOSTILE = [
    "a: !!float abc", "a: !!int x", "a: !!timestamp 2020-13-45", "a: !!binary '%%%'", "a: !!python/name:os.system",
    "a: " + "9" * 4400, "a: &a [*a]", "a: *nope", "a: [" * 200, "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 120)),
    "a: \x01", "a: \ud800", "? [a]\n: 1", "a: {<<: 1}", "- 1\n- 2", "", "a: b\n a: c",
    "a: &x [1,2,3]\nb: [*x,*x,*x,*x]\nc: [*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]",
]  # fmt: skip
JSON_HOSTILE = [
    "[" * 3000 + "]" * 3000,
    "9" * 5000,
    '{"a": ' + "9" * 5000 + "}",
    '{"a":',
    "\ud800",
    "NaN",
    "[]",
]
TOML_HOSTILE = [
    "a = " + "9" * 5000,
    "a = " + "[" * 3000 + "]" * 3000,
    "a = 1\na = 2",
    "[a]\nb = \x00",
    "a = ",
]


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if value is None:
        return '""'
    return json.dumps(value)


def _serialise(kind: str, value: dict) -> str:
    import yaml

    if kind == "yaml":
        return yaml.safe_dump(value, allow_unicode=True)
    if kind == "json":
        return json.dumps(value)
    return "\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items())


@st.composite
def fixture_text(draw) -> tuple[str, str]:
    kind = draw(st.sampled_from(["yaml", "json", "toml"]))
    hostile = {"yaml": YAML_HOSTILE, "json": JSON_HOSTILE, "toml": TOML_HOSTILE}[kind]
    text = draw(st.sampled_from(hostile)) if draw(st.booleans()) else _serialise(kind, draw(data))
    if draw(st.booleans()) and text:
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(max_size=4)) + text[i + draw(st.integers(0, 3)) :]
    return kind, text


@FUZZ
@given(case=fixture_text())
def test_fuzz_fixture(workdir, case):
    kind, text = case
    path = workdir / f"fx-{next(_names)}.{kind}"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    error = _attempt(f"{kind} fixture", lambda: load_fixture(path), path)
    if error is not None:
        assert path.name in str(error.location.file)


# --------------------------------------------------------------------------- a .prompty file


prompty_text = st.tuples(
    st.sampled_from(["---\n", "", "---\nname: x\n"]),
    st.one_of(st.sampled_from(YAML_HOSTILE), st.just("sample:\n  question: hi\n"), st.text(max_size=30)),
    st.sampled_from(["---\n", "", "--\n"]),
    template_text,
).map("".join)


@FUZZ
@given(source=prompty_text)
def test_fuzz_prompty(workdir, source):
    name = f"y{next(_names)}"
    template = workdir / "prompts" / f"{name}.prompty"
    template.write_bytes(source.encode("utf-8", "surrogatepass"))
    cfg = workdir / f"{name}.toml"
    cfg.write_text(f'[prompts.p]\ntemplate = "prompts/{name}.prompty"\n')
    _attempt("prompty", lambda: _render(cfg, None), template, cfg)
