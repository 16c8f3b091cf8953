"""Build one recall trial inside the user's real prompt: fill the context slot, hide the needle, ask.

The fixture's variables are kept; the context slot (``context_var``) is replaced by filler with the
needle inside and the question slot (``question_var``) by the needle's question; the template renders
that exactly as it renders production data. The filler amount is tuned until the *whole* rendered
prompt measures ``size`` tokens with the prompt's own counter (within 0.5% in practice).

Slot shapes:

- a **list of dicts** (retrieved documents, chat turns): every filler unit and the needle become items
  with the fixture items' own keys. The longest text field is the body; a ``role`` key gets ``user``
  for the needle (filler turns repeat the fixture's role pattern); title-like keys get a title; any
  other key is copied from a fixture item. The needle item goes at the item boundary nearest to
  ``depth`` of the slot's tokens (``round(depth * n)`` when items are the same size).
- a **list of strings**: the same with plain strings.
- a **string** (a ticket thread, a document): paragraphs joined by blank lines; the needle goes at
  the sentence boundary nearest to ``depth`` of the slot's tokens.

Distractors go at other depths (0.1 .. 0.9, at least 0.15 away from the needle); a multi-hop needle's
second fact goes near the end (depth 0.95, or just after the first fact when that is deeper).

Gold (``needle = "gold"``): the fixture's gold item (or passage) is the needle, placed as it is; the
hay of gold trials is the fixture's context *without* it, then the same repository and generated
filler, so the gold item moves among the real items it was retrieved with.

Sizing: filler units are pre-counted in one batch call; a monotone search over "how many words of
filler" starts from an estimate built on those counts and the per-item template overhead, then
corrects with real measurements of the rendered prompt (a handful of renders, not hundreds).
``token_offset`` is the count of the prompt cut just before the needle's first fact, framing included.
"""

from __future__ import annotations

import bisect
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from needle_action.assemble import RenderedPrompt, render_case
from needle_action.assemble.recorded import prompt_variables
from needle_action.config import Config, PromptConfig
from needle_action.errors import ConfigError, TemplateError
from needle_action.recall.filler import Passage, generated_passages, repo_passages, scrub, split_paragraphs
from needle_action.recall.prefix import cut_before
from needle_action.recall.probes.gold import resolve_gold
from needle_action.recall.probes.needle import Needle
from needle_action.tokens import TiktokenCounter

DISTRACTOR_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)
SECOND_HOP_DEPTH = 0.95
_TITLE_KEYS = {"title", "name", "heading", "subject", "source", "filename", "file", "url", "label", "id"}
_BODY_KEYS = ("text", "content", "body", "page_content", "chunk", "message", "snippet")
_NEEDLE_TITLES = (
    "Operations note",
    "Internal memo",
    "Records update",
    "Team bulletin",
    "Reference sheet",
    "Status digest",
)
# sentence ends where a fact may go: after . ! ? (and a closing quote/bracket) before whitespace
SHARED_STREAM = 0  # the one filler stream every trial and depth draws from (trial 0's of old)
_BOUNDARY = re.compile(r"[.!?][\"')\]]?(?=\s)|\n")


class SizeTooSmall(ConfigError):
    """The requested size is below what the prompt needs with an empty context and the needle."""


@dataclass(frozen=True)
class Trial:
    rendered: RenderedPrompt
    size: int  # target tokens
    depth: float  # 0..1 within the context slot
    # tokens of the whole rendered prompt: measured for a cell's first trial; the others count only
    # their own needle on top of the first's measure (the rest of the text is the same)
    prompt_tokens: int
    token_offset: int  # absolute token offset of the needle (first fact) in the whole prompt
    needle: Needle


# --------------------------------------------------------------------------------------------
# the slot's shape


@dataclass
class _Shape:
    kind: str  # "string" | "list_str" | "list_dict"
    items: list[Any] = field(default_factory=list)  # the fixture's own items (list slots)
    body_key: str | None = None
    role_key: str | None = None
    title_keys: tuple[str, ...] = ()

    def empty(self) -> Any:
        return "" if self.kind == "string" else []

    def item(self, body: str, title: str, *, index: int, needle: bool) -> Any:
        """A slot item carrying BODY, shaped like the fixture's items."""
        if self.kind != "list_dict":
            return body
        template = self.items[index % len(self.items)]
        out = dict(template)
        for key in self.title_keys:
            out[key] = title
        if self.role_key:
            out[self.role_key] = "user" if needle else template[self.role_key]
        out[self.body_key] = body
        return out

    def body(self, item: Any) -> str:
        if self.kind == "list_dict":
            return item.get(self.body_key) or ""
        return item

    def with_body(self, item: Any, body: str) -> Any:
        if self.kind == "list_dict":
            return {**item, self.body_key: body}
        return body

    def text_of(self, item: Any) -> str:
        """What an item contributes to the prompt, for pre-counting."""
        if self.kind == "list_dict":
            return " ".join(str(v) for v in item.values() if isinstance(v, (str, int, float)))
        return item


def _deep_scrub(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _deep_scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_scrub(v) for v in value]
    return value


def _detect_shape(value: Any, var: str, where: dict) -> _Shape:
    if value is None or isinstance(value, str):
        return _Shape("string")
    if isinstance(value, list):
        if not value:
            raise ConfigError(
                f"the recall fixture's {var!r} list is empty, so there is no item to copy the shape from",
                **where,
                hint="give the fixture at least one item, shaped like what the application passes",
            )
        if all(isinstance(v, str) for v in value):
            return _Shape("list_str", items=list(value))
        if all(isinstance(v, dict) for v in value):
            keys = [k for k in value[0] if all(k in v for v in value)]
            text_keys = [k for k in keys if all(isinstance(v[k], str) for v in value)]
            if not text_keys:
                raise ConfigError(
                    f"the items of {var!r} have no text field recall could fill",
                    **where,
                    hint="items need a string field such as text or content",
                )
            role_key = next((k for k in text_keys if k.lower() == "role"), None)
            candidates = [k for k in text_keys if k != role_key]
            if not candidates:
                raise ConfigError(f"the items of {var!r} have only a role, no text field", **where)
            named = [k for k in candidates if k.lower() in _BODY_KEYS]
            body_key = named[0] if named else max(candidates, key=lambda k: sum(len(v[k]) for v in value))
            titles = tuple(k for k in candidates if k != body_key and k.lower() in _TITLE_KEYS)
            return _Shape(
                "list_dict", items=list(value), body_key=body_key, role_key=role_key, title_keys=titles
            )
        raise ConfigError(
            f"the items of {var!r} mix types; recall needs all strings or all tables/dicts", **where
        )
    raise ConfigError(
        f"recall cannot fill {var!r}: it is a {type(value).__name__}, not text or a list",
        **where,
        hint="context_var must name the variable holding the context: a string, or a list of documents/turns",
    )


# --------------------------------------------------------------------------------------------
# filler units


@dataclass
class _Unit:
    item: Any
    tokens: int
    word_ends: list[int]  # char offsets in the body after each word (for cutting)

    @property
    def words(self) -> int:
        return max(1, len(self.word_ends))


class _Stream:
    """Filler units: fixture + repo then generated passages, counted. One stream serves every trial
    and every depth, so the text before a needle is a prefix of the text before any deeper needle
    (what prompt caching and the local model's KV reuse feed on)."""

    BATCH = 48

    def __init__(self, builder: HaystackBuilder, key: int | str, fixed: list[_Unit]) -> None:
        self.b = builder
        self.units: list[_Unit] = list(fixed)
        self._gen: Iterator[Passage] = generated_passages(f"{builder.seed}:{key}")
        self._cum_words = [0]
        self._cum_tokens = [0.0]
        for u in self.units:
            self._append_cum(u)

    def _append_cum(self, u: _Unit) -> None:
        self._cum_words.append(self._cum_words[-1] + u.words)
        self._cum_tokens.append(self._cum_tokens[-1] + u.tokens + self.b._overhead)

    def extend(self) -> None:
        shape = self.b._shape
        passages = list(islice(self._gen, self.BATCH))
        start = len(self.units)
        items = [shape.item(p.text, p.title, index=start + i, needle=False) for i, p in enumerate(passages)]
        for u in self.b._make_units(items):
            self.units.append(u)
            self._append_cum(u)

    def estimate(self, words: int) -> float:
        """Estimated filler tokens (overhead included) for the first WORDS words."""
        while self._cum_words[-1] < words:
            self.extend()
        k = bisect.bisect_right(self._cum_words, words) - 1
        rest = words - self._cum_words[k]
        est = self._cum_tokens[k]
        if rest > 0:
            u = self.units[k]
            est += u.tokens * rest / u.words + self.b._overhead
        return est

    def words_for(self, tokens: float) -> int:
        """Smallest word count whose estimate reaches TOKENS."""
        while self._cum_tokens[-1] < tokens:
            self.extend()
        lo, hi = 0, self._cum_words[-1]
        while lo < hi:
            mid = (lo + hi) // 2
            if self.estimate(mid) >= tokens:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def take(self, words: int) -> list[tuple[Any, float]]:
        """(slot item, its tokens) for the first WORDS words: whole units, the last cut at a word end."""
        while self._cum_words[-1] < words:
            self.extend()
        k = bisect.bisect_right(self._cum_words, words) - 1
        out = [(u.item, float(u.tokens)) for u in self.units[:k]]
        rest = words - self._cum_words[k]
        if rest > 0:
            u = self.units[k]
            shape = self.b._shape
            body = shape.body(u.item)
            cut = body[: u.word_ends[rest - 1]] if u.word_ends else body
            out.append((shape.with_body(u.item, cut), u.tokens * rest / u.words))
        return out


# --------------------------------------------------------------------------------------------
# the builder


class HaystackBuilder:
    """Trials for one prompt: ``build(size, depth, needle, trial) -> Trial``. Thread-safe."""

    MAX_MEASURES = 14
    STREAMS_KEPT = 8

    def __init__(
        self,
        config: Config,
        prompt: PromptConfig,
        counter,
        *,
        seed: int,
        fixture_path: str | Path | None = None,
        deal: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:

        self.config, self.prompt, self.counter, self.seed = config, prompt, counter, seed
        # a list slot's items in placement order (= the ranking a retriever would return) dealt
        # into another order: recall.reorder_ab measures runtime.edge_order this way
        self.deal = deal
        where: dict[str, Any] = {"file": config.path, "line": config.line_of(f"prompts.{prompt.name}")}
        slots = prompt.slots()  # variables, or a recorded request's JSON Pointers
        for (key, value), what in zip(
            slots, ("the context (the haystack slot)", "the question"), strict=True
        ):
            if not value:
                raise ConfigError(
                    f"prompt {prompt.name!r} has no {key}: recall needs to know which variable holds {what}",
                    **where,
                    hint=f'add {key} = "..." to [prompts.{prompt.name}], naming a variable of the template',
                )
        self.context_var: str = slots[0][1]  # type: ignore[assignment]
        self.question_var: str = slots[1][1]  # type: ignore[assignment]

        if fixture_path is None:
            fixture_path = config.recall_fixture(prompt)
        self.fixture_path = Path(fixture_path) if fixture_path is not None else None
        self.variables: dict = prompt_variables(config, prompt, self.fixture_path)
        fx_where = {"file": self.fixture_path or config.path}
        original = self.variables.get(self.context_var)
        self._shape = _detect_shape(original, self.context_var, fx_where)
        if self._shape.kind != "string":
            self._shape.items = _deep_scrub(self._shape.items)

        self._unit_counter = _unit_counter_for(counter)
        self._lock = threading.RLock()
        self._streams: OrderedDict[tuple[int | str, bool], _Stream] = OrderedDict()
        self._base: int | None = None
        # (size, depth, reference style and key, stream) -> filler words: every trial of a cell uses
        # the same filler, so trials share the prefix before the needle (gold: per trial's stream)
        self._layout: dict[tuple[int, float, str, str, int | str], int] = {}
        # same key -> (text before the needle, tokens, needle offset, the needle's own tokens) of the
        # reference trial: the cell's other trials reuse the counts when their text matches
        self._counted: dict[tuple[int, float, str, str, int | str], tuple[str | None, int, int, int]] = {}

        # fixture's own context, then repo files: shared by every trial
        own: list[Any]
        if self._shape.kind == "string":
            own = split_paragraphs(scrub(original or ""), min_chars=1)
        else:
            own = list(self._shape.items)
        repo = (
            repo_passages(config.root, prompt.recall.filler_globs, allow_hidden=config.files.allow_hidden)
            if prompt.recall.filler_globs
            else []
        )
        repo_items = [
            self._shape.item(p.text, p.title, index=len(own) + i, needle=False) for i, p in enumerate(repo)
        ]
        self._overhead = 2.0 if self._shape.kind == "string" else 0.0  # refined by _calibrate
        self._fixed_units = self._make_units(own + repo_items)
        self.gold_needle: Needle | None = None
        self._gold_units: list[_Unit] = []
        if "gold" in prompt.recall.styles:
            self._prepare_gold(where, repo_items)
        self._calibrate()

    def _prepare_gold(self, config_where: dict, repo_items: list[Any]) -> None:
        """The fixture's gold needle, and the hay of gold trials: its context without the gold."""
        gold = resolve_gold(
            self.variables,
            context_var=self.context_var,
            question_var=self.question_var,
            fixture=self.fixture_path,
            config_where=config_where,
        )
        if gold.index is not None:  # a list slot: the scrubbed item, as the template will show it
            item = self._shape.items[gold.index]
            rest = self._shape.items[: gold.index] + self._shape.items[gold.index + 1 :]
            self.gold_needle = gold.needle(
                item if self._shape.kind == "list_dict" else None, self._shape.body(item)
            )
        else:
            rest = split_paragraphs(scrub(gold.rest), min_chars=1)
            self.gold_needle = gold.needle(None, scrub(gold.passage or "").strip())
        self._gold_units = self._make_units(rest + repo_items)

    # ---- counting ------------------------------------------------------------------------------
    def _make_units(self, items: list[Any]) -> list[_Unit]:
        texts = [self._shape.text_of(it) for it in items]
        counts = self._unit_counter.count_texts(texts) if texts else []
        out = []
        for it, n in zip(items, counts, strict=True):
            body = self._shape.body(it)
            out.append(_Unit(it, int(n), [m.end() for m in re.finditer(r"\S+", body)]))
        return out

    def _measure(self, rendered: RenderedPrompt) -> int:
        return int(self.counter.count_prompt(rendered))

    def _variables(self, context: Any, question: str) -> dict:
        return {**self.variables, self.context_var: context, self.question_var: question}

    def _render(self, context: Any, question: str) -> RenderedPrompt:
        variables = self._variables(context, question)
        return render_case(self.config, self.prompt, self.fixture_path, variables=variables)

    def _default_question(self) -> str:
        q = self.variables.get(self.question_var)
        return (
            q
            if isinstance(q, str) and q
            else "What is the secret launch codeword? Answer with only the codeword."
        )

    def _calibrate(self) -> None:
        """Learn the template's per-item overhead from the fixture's own items (or a few generated ones)."""
        units = self._fixed_units[:8]
        if not units:
            stream = _Stream(self, -1, [])
            stream.extend()
            units = stream.units[:8]
        q = self._default_question()
        with_items = self._measure(self._render(self._join([u.item for u in units]), q))
        empty = self.base_tokens()
        per_item = (with_items - empty - sum(u.tokens for u in units)) / len(units)
        self._overhead = max(0.0, per_item)

    @property
    def list_slot(self) -> bool:
        """Is the context slot a list of items (retrieved documents, turns), not one string?"""
        return self._shape.kind != "string"

    def base_tokens(self) -> int:
        """Tokens of the prompt with an empty context slot (and the fixture's own question)."""
        with self._lock:
            if self._base is None:
                self._base = self._measure(self._render(self._shape.empty(), self._default_question()))
            return self._base

    # ---- placing the needle ------------------------------------------------------------------
    def _join(self, items: list[Any]) -> Any:
        return "\n\n".join(items) if self._shape.kind == "string" else list(items)

    def _placements(self, depth: float, needle: Needle) -> list[tuple[float, int, str, bool]]:
        """(depth, order, text, is_needle) for every fact and distractor."""
        out = [(depth, 0, needle.facts[0], True)]
        if len(needle.facts) > 1:
            second = SECOND_HOP_DEPTH if depth < SECOND_HOP_DEPTH else depth
            out.extend((second, i, f, True) for i, f in enumerate(needle.facts[1:], start=1))
        if needle.distractors:
            rng = random.Random(f"{self.seed}:{needle.key}:distractors")
            taken = [d for d, *_ in out]
            free = [d for d in DISTRACTOR_DEPTHS if all(abs(d - t) >= 0.15 for t in taken)]
            rng.shuffle(free)
            while len(free) < len(needle.distractors):  # few free depths: reuse them
                free.extend(free or list(DISTRACTOR_DEPTHS))
            for i, (text, d) in enumerate(zip(needle.distractors, free, strict=False)):
                out.append((d, 10 + i, text, False))
        return sorted(out, key=lambda p: (p[0], p[1]))

    def _needle_item(self, text: str, needle: Needle, order: int) -> Any:
        if order == 0 and needle.item is not None:
            return needle.item  # gold: the fixture's own item, title and role included
        # the needle item's title (and the fixture item it copies) do not depend on the needle's value:
        # every trial's text is then the same up to the fact itself, which is what trials can share
        rng = random.Random(f"{self.seed}:title:{order}")
        title = f"{rng.choice(_NEEDLE_TITLES)} {rng.randint(2, 48)}"
        return self._shape.item(text, title, index=rng.randrange(1 << 16), needle=True)

    def _context(self, taken: list[tuple[Any, float]], depth: float, needle: Needle) -> Any:
        places = self._placements(depth, needle)
        filler = [item for item, _ in taken]
        if self._shape.kind != "string":
            n = len(filler)
            # the item boundary nearest to DEPTH of the slot's tokens (= round(depth * n) for equal items)
            cum = [0.0]
            for _, tokens in taken:
                cum.append(cum[-1] + tokens + self._overhead)
            slots: dict[int, list[Any]] = {}
            for d, order, text, _ in places:
                k = bisect.bisect_left(cum, d * cum[-1])
                at = min(range(max(0, k - 1), min(n, k) + 1), key=lambda i: abs(cum[i] - d * cum[-1]))
                slots.setdefault(at, []).append(self._needle_item(text, needle, order))
            out: list[Any] = []
            for i in range(n + 1):
                out.extend(slots.get(i, []))
                if i < n:
                    out.append(filler[i])
            return self.deal(out) if self.deal is not None else out
        return self._string_context(filler, [c for _, c in taken], places)

    def _string_context(self, paragraphs: list[str], counts: list[float], places) -> str:
        text = "\n\n".join(paragraphs)
        if not text:
            return "\n\n".join(t for _, _, t, _ in places)
        # token position -> char position, through the pre-counted paragraphs
        starts: list[int] = []
        cum: list[float] = [0]
        pos = 0
        for p, c in zip(paragraphs, counts, strict=True):
            starts.append(pos)
            pos += len(p) + 2
            cum.append(cum[-1] + c)
        total = cum[-1] or 1
        bounds = [0] + [m.end() for m in _BOUNDARY.finditer(text)] + [len(text)]
        pieces, last = [], 0
        for d, _, fact, _ in places:
            if d <= 0:
                at = 0
            elif d >= 1:
                at = len(text)
            else:
                target = d * total
                j = min(len(paragraphs) - 1, max(0, bisect.bisect_right(cum, target) - 1))
                frac = (target - cum[j]) / max(1, counts[j])
                char = starts[j] + frac * len(paragraphs[j])
                k = bisect.bisect_left(bounds, char)
                at = min(bounds[max(0, k - 1) : k + 1], key=lambda b: abs(b - char))
            at = max(at, last)
            pieces.append(text[last:at])
            if at == 0:
                pieces.append(fact + "\n\n")
            elif at == len(text):
                pieces.append("\n\n" + fact)
            elif text[at - 1] == "\n":
                pieces.append(fact + "\n")
            else:
                pieces.append(" " + fact)
            last = at
        pieces.append(text[last:])
        return "".join(pieces)

    # ---- building -----------------------------------------------------------------------------
    def _stream(self, key: int | str = SHARED_STREAM, gold: bool = False) -> _Stream:
        """The filler stream KEY; GOLD: over the fixture's context without its gold item."""
        s = self._streams.get((key, gold))
        if s is None:
            fixed = self._gold_units if gold else self._fixed_units
            s = self._streams[(key, gold)] = _Stream(self, key, fixed)
            while len(self._streams) > self.STREAMS_KEPT:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end((key, gold))
        return s

    def build(
        self, size: int, depth: float, needle: Needle, trial: int, reference: Needle | None = None
    ) -> Trial:
        """The trial prompt of SIZE tokens with NEEDLE at DEPTH of the context slot.

        The filler is the same for every trial and depth (``trial`` does not select it). Its amount
        is searched once per cell with REFERENCE (the cell's first needle; default NEEDLE) and reused
        for the cell's other trials, so they differ only in the needle and its question: the whole
        text before the needle is shared, and the size stays within a few tokens of SIZE.

        Gold is the exception: its needle and question are the fixture's own, the same in every
        trial, so its trials differ only by their filler: trial T draws from a stream of its own (and
        its amount is searched for that stream), or a cell's trials would all be one prompt.
        """
        with self._lock:
            return self._build(size, depth, needle, trial, reference or needle)

    def trial_variables(
        self, size: int, depth: float, needle: Needle, trial: int, reference: Needle | None = None
    ) -> dict | None:
        """The variables ``build`` renders this trial with, once its cell's filler amount is known
        (its first trial built), else None: a prompt built in code gets them in one batch ahead."""
        reference = reference or needle
        depth = min(1.0, max(0.0, float(depth)))
        gold = needle.style == "gold"
        stream_key = trial if gold else SHARED_STREAM
        with self._lock:
            words = self._layout.get((size, depth, reference.style, reference.key, stream_key))
            if words is None:
                return None
            context = self._context(self._stream(stream_key, gold=gold).take(words), depth, needle)
            return self._variables(context, needle.question)

    def _build(self, size: int, depth: float, needle: Needle, trial: int, reference: Needle) -> Trial:
        depth = min(1.0, max(0.0, float(depth)))
        gold = needle.style == "gold"
        stream_key = trial if gold else SHARED_STREAM
        stream = self._stream(stream_key, gold=gold)

        def render_with(n: Needle):
            def render(words: int) -> tuple[RenderedPrompt, int]:
                rendered = self._render(self._context(stream.take(words), depth, n), n.question)
                return rendered, self._measure(rendered)

            return render

        key = (size, depth, reference.style, reference.key, stream_key)
        words = self._layout.get(key)
        if words is None:
            words = self._search_words(size, render_with(reference), stream)
            self._layout[key] = words
        rendered = self._render(self._context(stream.take(words), depth, needle), needle.question)
        before = _text_before(rendered, needle_anchor(needle.facts[0]))
        known = self._counted.get(key)
        if needle.key != reference.key and known is not None and known[0] == before:
            # the same text up to the needle and after it: only the needle's own tokens differ, so
            # count those instead of the whole prompt twice (the size is then exact to a token or two)
            _, measured_ref, offset, needle_ref = known
            measured = measured_ref - needle_ref + self._needle_tokens(needle)
            return Trial(rendered, size, depth, measured, offset, needle)
        measured = self._measure(rendered)
        offset = self._token_offset(rendered, needle)
        if needle.key == reference.key:
            self._counted[key] = (before, measured, offset, self._needle_tokens(needle))
        return Trial(rendered, size, depth, measured, offset, needle)

    def _needle_tokens(self, needle: Needle) -> int:
        return sum(self.counter.count_texts([*needle.facts, needle.question, *needle.distractors]))

    def _search_words(self, size: int, render, stream: _Stream) -> int:
        """Filler words whose rendered prompt (with the reference needle) measures SIZE tokens."""
        floor_prompt, floor = render(0)
        if floor > size:
            raise SizeTooSmall(
                f"size {size} is smaller than prompt {self.prompt.name!r} itself: {floor} tokens with an "
                "empty context and only the needle",
                file=self.config.path,
                line=self.config.line_of(f"prompts.{self.prompt.name}"),
                hint=f'use sizes above {floor} tokens, or sizes = "auto"',
            )
        tol = max(2, size // 200)
        best: tuple[int, RenderedPrompt, int, int] = (abs(size - floor), floor_prompt, floor, 0)
        if best[0] > tol:
            best = self._search(size, tol, floor, stream, render, best)
        return best[3]

    def _search(self, size, tol, floor, stream: _Stream, render, best):
        """Monotone search for the filler word count whose rendered prompt measures SIZE."""
        lo: tuple[int, int] = (0, floor)  # (words, measured) known to be below the target
        hi: tuple[int, int] | None = None  # known to be above
        # start from the estimate, never from another cell's answer: a cell's layout must not depend
        # on which cells were built before it (shards, concurrency), or prompts would differ
        words = stream.words_for(size - floor)
        for _ in range(self.MAX_MEASURES):
            rendered, m = render(words)
            if abs(size - m) < best[0]:
                best = (abs(size - m), rendered, m, words)
            if abs(size - m) <= tol:
                break
            if m < size:
                lo = max(lo, (words, m))
            elif hi is None or words < hi[0]:
                hi = (words, m)
            if hi is not None:
                if hi[0] - lo[0] <= 1:
                    break
                # secant between the bracket ends, kept strictly inside
                guess = lo[0] + (size - lo[1]) * (hi[0] - lo[0]) / max(1, hi[1] - lo[1])
                words = min(hi[0] - 1, max(lo[0] + 1, round(guess)))
            else:
                # no upper bound yet: step by the estimate's local rate of tokens per word
                rate = max(0.05, (stream.estimate(words + 50) - stream.estimate(words)) / 50)
                step = max(1, round((size - m) / rate))
                words = words + step
        return best

    def _token_offset(self, rendered: RenderedPrompt, needle: Needle) -> int:
        """Tokens of everything before the needle's first fact: the tools, the system text, the
        turns before it and its own turn up to it (prefix.cut_before keeps all of the request)."""
        fact = needle_anchor(needle.facts[0])
        if rendered.system and (c := rendered.system.find(fact)) >= 0:
            return self._prefix_tokens(cut_before(rendered, -1, c))
        for j, m in enumerate(rendered.messages):
            c = m.text.find(fact)
            if c >= 0:
                return self._prefix_tokens(cut_before(rendered, j, c))
        raise TemplateError(
            f"the needle does not appear in the rendered prompt {self.prompt.name!r}: the template does not "
            f"print {self.context_var!r} verbatim",
            file=self.config.template_path(self.prompt),
            hint=f"recall hides a fact in {self.context_var!r}; the template must show its text unchanged",
        )

    def _prefix_tokens(self, cut: RenderedPrompt) -> int:
        # framing tokens the counter adds for the reply would be counted too; a cut prompt ending in an
        # empty message costs only a few. Offsets are positions, so a few tokens either way are noise.
        return self._measure(cut)


def needle_anchor(fact: str) -> str:
    """What to look for to find FACT in a rendered prompt: its first line (a gold item may be long,
    and a template may trim or wrap it)."""
    return (fact.strip().splitlines() or [""])[0][:120]


def _text_before(rendered: RenderedPrompt, fact: str) -> str | None:
    """The prompt's text up to FACT (None when absent): what a cell's trials must share."""
    joined = "\0".join(rendered.texts())
    at = joined.find(fact)
    return joined[:at] if at >= 0 else None


def _unit_counter_for(counter):
    """A local counter for pre-counting filler units: tiktoken instead of one API call per unit."""
    if getattr(counter, "name", "") == "anthropic":
        return TiktokenCounter("o200k_base", model="claude")
    return counter
