"""Build one recall trial inside the user's real prompt: fill the context slot, hide the needle, ask.

The fixture's variables are kept; the context slot (``context_var``) is replaced by filler with the
needle inside and the question slot (``question_var``) by the needle's question; the template renders
that exactly as it renders production data. The filler amount is tuned until the *whole* rendered
prompt measures ``size`` tokens with the prompt's own counter (within 0.5% in practice).

The builder is the room's one door; its parts live beside it:

- :mod:`~needle_action.recall.trials.slot`: which variables are the slots, and the context's shape (a list
  of dicts, a list of strings, a string) that filler items copy;
- :mod:`~needle_action.recall.trials.sizing`: filler units pre-counted in batches, and the size search;
- :mod:`~needle_action.recall.trials.placement`: where the needle, later facts and look-alikes go, per
  slot shape.

Gold (``needle = "gold"``): the fixture's gold item (or passage) is the needle, placed as it is; the
hay of gold trials is the fixture's context *without* it, then the same repository and generated
filler, so the gold item moves among the real items it was retrieved with. The needle and question
are the same in every trial, so trials differ by the order of those other items
(:class:`~needle_action.recall.trials.probes.gold.TrialOrders`: trial 0 the retriever's, trial T a seeded
permutation, the same at every depth) and by their generated filler (a stream per trial).

``token_offset`` is the count of the prompt cut just before the needle's first fact, framing included.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needle_action.assemble.recorded import prompt_variables
from needle_action.assemble.render import render_case
from needle_action.config import Config, PromptConfig
from needle_action.core.names import GOLD_STYLE
from needle_action.recall.trials.filler import repo_passages, scrub, split_paragraphs
from needle_action.recall.trials.gold_hay import GoldHay
from needle_action.recall.trials.lost import data_where, lost_needle
from needle_action.recall.trials.placement import Placer
from needle_action.recall.trials.probes.gold import TrialOrders, resolve_gold
from needle_action.recall.trials.probes.needle import Needle
from needle_action.recall.trials.sizing import (
    ContextDoesNotGrow,
    FillerStream,
    FillerUnit,
    Render,
    SizeTooSmall,
    UnitMaker,
    search_words,
    unit_counter_for,
)
from needle_action.recall.trials.slot import deep_scrub, detect_shape, prompt_where, slot_variables
from needle_action.request.cut import cut_before
from needle_action.request.prompt import RenderedPrompt
from needle_action.tokens import TokenCounter

SHARED_STREAM = 0  # the one filler stream every trial and depth draws from (trial 0's of old)

__all__ = ["SHARED_STREAM", "HaystackBuilder", "SizeTooSmall", "Trial", "needle_anchor"]

# (size, depth, reference style, reference key, stream): one cell's filler, shared by its trials
CellKey = tuple[int, float, str, str, int | str]


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


class HaystackBuilder:
    """Trials for one prompt: ``build(size, depth, needle, trial) -> Trial``. Thread-safe."""

    STREAMS_KEPT = 8

    def __init__(
        self,
        config: Config,
        prompt: PromptConfig,
        counter: TokenCounter,
        *,
        seed: int,
        fixture_path: str | Path | None = None,
        deal: Callable[[list[Any]], list[Any]] | None = None,
    ) -> None:
        self.config, self.prompt, self.counter, self.seed = config, prompt, counter, seed
        # a list slot's items in placement order (= the ranking a retriever would return) dealt
        # into another order: recall.reorder_ab measures runtime.edge_order this way
        self.deal = deal
        self.context_var, self.question_var = slot_variables(config, prompt)
        if fixture_path is None:
            fixture_path = config.recall_fixture(prompt)
        self.fixture_path = Path(fixture_path) if fixture_path is not None else None
        self.variables: dict[str, Any] = prompt_variables(config, prompt, self.fixture_path)
        original = self.variables.get(self.context_var)
        where = data_where(config, prompt, self.fixture_path, self.variables)
        self._shape = detect_shape(original, self.context_var, where)
        if self._shape.is_list:
            self._shape.items = deep_scrub(self._shape.items)
        self._units = UnitMaker(self._shape, unit_counter_for(counter))
        self._lock = threading.RLock()
        self._streams: OrderedDict[tuple[int | str, bool], FillerStream] = OrderedDict()
        self._base: int | None = None
        # cell -> filler words: every trial of a cell uses the same filler, so trials share the
        # prefix before the needle (gold: per trial's stream)
        self._layout: dict[CellKey, int] = {}
        # cell -> (text before the needle, tokens, needle offset, the needle's own tokens) of the
        # reference trial: the cell's other trials reuse the counts when their text matches
        self._counted: dict[CellKey, tuple[str | None, int, int, int]] = {}
        self._overhead = 0.0 if self._shape.is_list else 2.0  # refined by _calibrate
        self.gold_needle: Needle | None = None
        self._fixed_units: list[FillerUnit] = []
        self._gold: GoldHay | None = None
        self._prepare_hay(original)
        self._calibrate()
        self._placer = Placer(self._shape, seed, self._overhead, deal)

    def _prepare_hay(self, original: Any) -> None:
        """The filler every trial shares: the fixture's own context, then the repository's files."""
        own: list[Any]
        if self._shape.is_list:
            own = list(self._shape.items)
        else:
            own = split_paragraphs(scrub(original or ""), min_chars=1)
        recall = self.prompt.recall
        repo = repo_passages(self.config.workspace, recall.filler_globs) if recall.filler_globs else []
        repo_items = self._units.items(repo, len(own))
        self._fixed_units = self._units.units(own + repo_items)
        if GOLD_STYLE in recall.styles:
            self._prepare_gold(prompt_where(self.config, self.prompt), repo_items)

    def _prepare_gold(self, config_where: dict[str, Any], repo_items: list[Any]) -> None:
        """The fixture's gold needle, and the hay of gold trials: its context without the gold."""
        gold = resolve_gold(
            self.variables,
            context_var=self.context_var,
            question_var=self.question_var,
            fixture=self.fixture_path,
            config_where=config_where,
        )
        rest: list[Any]
        if gold.index is not None:  # a list slot: the scrubbed item, as the template will show it
            item = self._shape.items[gold.index]
            rest = self._shape.items[: gold.index] + self._shape.items[gold.index + 1 :]
            self.gold_needle = gold.needle(
                item if self._shape.kind == "list_dict" else None, self._shape.body(item)
            )
        else:
            rest = split_paragraphs(scrub(gold.rest), min_chars=1)
            self.gold_needle = gold.needle(None, scrub(gold.passage or "").strip())
        units = self._units.units(rest + repo_items)
        where = self.fixture_path.name if self.fixture_path is not None else self.prompt.name
        orders = TrialOrders(len(rest), self.seed)
        self._gold = GoldHay(units[: len(rest)], units[len(rest) :], orders, where, self.prompt.name)

    # ---- measuring -----------------------------------------------------------------------------
    def _measure(self, rendered: RenderedPrompt) -> int:
        return int(self.counter.count_prompt(rendered))

    def _variables(self, context: Any, question: str) -> dict[str, Any]:
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
            stream = FillerStream(f"{self.seed}:-1", [], self._units, self._overhead)
            stream.extend()
            units = stream.units[:8]
        q = self._default_question()
        with_items = self._measure(self._render(self._shape.join([u.item for u in units]), q))
        empty = self.base_tokens()
        per_item = (with_items - empty - sum(u.tokens for u in units)) / len(units)
        self._overhead = max(0.0, per_item)

    @property
    def warnings(self) -> list[str]:
        """What the builder warned about (on stderr, once each): gold trials that repeat a prompt."""
        return self._gold.warnings if self._gold is not None else []

    @property
    def list_slot(self) -> bool:
        """Is the context slot a list of items (retrieved documents, turns), not one string?"""
        return self._shape.is_list

    def base_tokens(self) -> int:
        """Tokens of the prompt with an empty context slot (and the fixture's own question)."""
        with self._lock:
            if self._base is None:
                self._base = self._measure(self._render(self._shape.empty(), self._default_question()))
            return self._base

    # ---- building -----------------------------------------------------------------------------
    def _stream(self, key: int | str = SHARED_STREAM, gold: bool = False) -> FillerStream:
        """The filler stream KEY; GOLD: trial KEY's, over the fixture's context without its gold item
        in the trial's order."""
        s = self._streams.get((key, gold))
        if s is None:
            fixed = self._gold.units(int(key)) if gold and self._gold is not None else self._fixed_units
            s = FillerStream(f"{self.seed}:{key}", fixed, self._units, self._overhead)
            self._streams[(key, gold)] = s
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
        trial, so its trials differ only by their filler: trial T draws from a stream of its own, the
        fixture's other items in trial T's order then generated filler of its own (and its amount is
        searched for that stream), or a cell's trials would all be one prompt. Trial T's stream is
        the same at every depth, so its prompts still share the text before the shallower needle.
        """
        with self._lock:
            return self._build(size, depth, needle, trial, reference or needle)

    def trial_variables(
        self, size: int, depth: float, needle: Needle, trial: int, reference: Needle | None = None
    ) -> dict[str, Any] | None:
        """The variables ``build`` renders this trial with, once its cell's filler amount is known
        (its first trial built), else None: a prompt built in code gets them in one batch ahead."""
        reference = reference or needle
        depth = min(1.0, max(0.0, float(depth)))
        gold = needle.style == GOLD_STYLE
        stream_key = trial if gold else SHARED_STREAM
        with self._lock:
            words = self._layout.get((size, depth, reference.style, reference.key, stream_key))
            if words is None:
                return None
            context = self._placer.context(self._stream(stream_key, gold=gold).take(words), depth, needle)
            return self._variables(context, needle.question)

    def _build(self, size: int, depth: float, needle: Needle, trial: int, reference: Needle) -> Trial:
        depth = min(1.0, max(0.0, float(depth)))
        gold = needle.style == GOLD_STYLE
        stream_key: int | str = trial if gold else SHARED_STREAM
        stream = self._stream(stream_key, gold=gold)
        key: CellKey = (size, depth, reference.style, reference.key, stream_key)
        words = self._layout.get(key)
        if words is None:
            where = {**prompt_where(self.config, self.prompt), "prompt": self.prompt.name}
            try:
                words = search_words(size, self._renderer(stream, depth, reference), stream, where)
            except ContextDoesNotGrow as exc:
                render = self._render
                raise lost_needle(
                    self.config, self.prompt, self._shape, render, reference, (exc.size, exc.reached)
                ) from None
            self._layout[key] = words
        rendered = self._render(self._placer.context(stream.take(words), depth, needle), needle.question)
        if gold and self._gold is not None:
            self._gold.check_repeat(size, depth, trial, rendered)
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

    def _renderer(self, stream: FillerStream, depth: float, needle: Needle) -> Render:
        """Filler words -> (the prompt with NEEDLE at DEPTH in that much of STREAM, its tokens)."""

        def render(words: int) -> tuple[RenderedPrompt, int]:
            context = self._placer.context(stream.take(words), depth, needle)
            rendered = self._render(context, needle.question)
            return rendered, self._measure(rendered)

        return render

    def _needle_tokens(self, needle: Needle) -> int:
        return sum(self.counter.count_texts([*needle.facts, needle.question, *needle.distractors]))

    def _token_offset(self, rendered: RenderedPrompt, needle: Needle) -> int:
        """Tokens of everything before the needle's first fact: the tools, the system text, the
        turns before it and its own turn up to it (prefix.cut_before keeps all of the request).
        Framing tokens the counter adds for the reply are counted too; a cut prompt ending in an
        empty message costs only a few. Offsets are positions, so a few tokens either way are noise."""
        fact = needle_anchor(needle.facts[0])
        if rendered.system and (c := rendered.system.find(fact)) >= 0:
            return self._measure(cut_before(rendered, -1, c))
        for j, m in enumerate(rendered.messages):
            c = m.text.find(fact)
            if c >= 0:
                return self._measure(cut_before(rendered, j, c))
        raise lost_needle(self.config, self.prompt, self._shape, self._render, needle)


def needle_anchor(fact: str) -> str:
    """What to look for to find FACT in a rendered prompt: its first line (a gold item may be long,
    and a template may trim or wrap it)."""
    return (fact.strip().splitlines() or [""])[0][:120]


def _text_before(rendered: RenderedPrompt, fact: str) -> str | None:
    """The prompt's text up to FACT (None when absent): what a cell's trials must share."""
    joined = "\0".join(rendered.texts())
    at = joined.find(fact)
    return joined[:at] if at >= 0 else None
