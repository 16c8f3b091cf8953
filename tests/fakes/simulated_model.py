"""A simulated model for the fake Anthropic server: finds the needle with a probability from a curve.

``SimulatedModel(curve, seed=0)`` is a responder ``(request_json) -> str`` for
``tests/fakes/anthropic_server.FakeAnthropic``. For each ``/v1/messages`` request it:

1. reads the tools' JSON, the system text and every message: strings or content blocks, a
   ``tool_result``'s or a ``document``'s text included (``tests/fakes/anthropic_request.py``);
2. takes the question: the last sentence with a ``?`` in the last user message (the question slot);
3. finds the needle fact: among the sentences that hold a ``VALUE_RE`` value, the one sharing the most
   content words with the question (so look-alike distractors about other subjects lose). Multi-hop:
   a sentence with a bridge key (``BRIDGE_RE``, "locker 4471") and no value that overlaps the question
   names the key; the value sentence with that same key is the answer (decoys with other keys lose);
4. measures ``depth`` = character offset of the fact's sentence / length of the whole request text
   (tools + system + messages joined), and ``size`` = tiktoken ``o200k_base`` tokens of that text — the same
   number the fake's ``count_tokens`` endpoint reports, so a ``cliff(at_size=...)`` lines up with
   the sizes the harness targets (exactly when the harness counts with o200k_base, within a few
   percent otherwise; ``exact_size=False`` uses characters / 4 instead, much cheaper for tests that make
   thousands of large calls). Characters rather than tokens for depth: a fraction is insensitive to the
   unit and this keeps one encode per distinct prompt (cached), which matters over thousands of calls;
5. answers the value with probability ``curve(depth, size)`` (multi-hop: the product at both facts),
   otherwise a plausible wrong answer: a distractor's value, a made-up value of the same shape, or
   "I could not find it.".

With ``tool_call_rate``, that share of the requests carrying ``tools`` is answered with a
``tool_use`` block calling the first tool (no text), as an agent model sometimes does.

The draw is a pure function of ``(seed, expected value)``: retries, concurrency and call order do not
change an outcome, and the same needle asked twice gets the same answer.

**Run level** (``level``, on the logit scale): a real model does not answer at the same level in every
run (serving changes, load, silent updates move a whole run up or down). With ``level`` every
probability becomes ``expit(logit(curve) + level)``; ``SimulatedModel.for_run(curve, run=R, run_sd=S)``
draws the level of run R from N(0, S) (a pure function of ``(run, run_sd)``), so a study gives each
process it runs (``needle check``, ``needle recall``) its own level by swapping the fake's responder
between runs. ``level = 0`` (the default) is the curve itself.

Depth here is the position in the *whole* request, not in the context slot: the system prompt before
the slot and the question after it move the needle away from 0 and 1, as they do for a real model.
Use large sizes or ``u_shape(margin=...)`` if a test needs the slot's edges to count as edges.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from needle_action.recall.trials.needles import BRIDGE_RE, VALUE_RE, make_value
from tests.fakes.anthropic_request import request_parts

Curve = Callable[[float, int], float]

NOT_FOUND = "I could not find it."


# --- curves -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class flat:  # noqa: N801 - reads like a function at call sites: flat(0.9)
    """The same probability everywhere."""

    p: float

    def __call__(self, depth: float, size: int) -> float:
        return self.p


@dataclass(frozen=True)
class u_shape:  # noqa: N801
    """Lost in the middle: ``edge`` at depth 0 and 1, ``middle`` at 0.5, quadratic in between.

    ``margin``: positions within this distance of either end count as the edge (the curve is
    stretched over ``[margin, 1 - margin]``), for prompts whose fixed text keeps the slot off the ends.
    """

    edge: float = 0.97
    middle: float = 0.15
    margin: float = 0.0

    def __call__(self, depth: float, size: int) -> float:
        span = 1.0 - 2.0 * self.margin
        x = min(1.0, max(0.0, (depth - self.margin) / span)) if span > 0 else 0.0
        return self.middle + (self.edge - self.middle) * (2.0 * x - 1.0) ** 2


@dataclass(frozen=True)
class cliff:  # noqa: N801
    """``before`` below ``at_size`` tokens, ``after`` from ``at_size`` on, at every depth."""

    at_size: int
    before: float = 0.97
    after: float = 0.05

    def __call__(self, depth: float, size: int) -> float:
        return self.before if size < self.at_size else self.after


def shifted(p: float, level: float) -> float:
    """P moved by LEVEL on the logit scale (0 and 1 stay where they are)."""
    if level == 0.0 or p <= 0.0 or p >= 1.0:
        return p
    return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) + level)))


def run_level(run: int, run_sd: float) -> float:
    """Run RUN's level: a draw from N(0, RUN_SD) on the logit scale, a pure function of its arguments."""
    return random.Random(f"run-level:{run}").gauss(0.0, run_sd) if run_sd else 0.0


# --- reading the request ------------------------------------------------------------------------

_STOP = frozenset(
    "a an the is are was were be been of to in on for at by with and or not no what which who whom whose "
    "how when where why that this these those it its as from into under over only nothing else answer "
    "do does did please give me your you our we i".split()
)
_WORD = re.compile(r"[a-z0-9]+")
# what ends a sentence: terminal punctuation followed by a space, or a line break
_ENDS = (". ", "! ", "? ", ".\t", "\n")


def _texts(body: dict) -> tuple[list[str], str]:
    """(every text in order: tools, system, messages; the last user message's text). A message's
    blocks read as one text (tests/fakes/anthropic_request.py): a tool_result's content and a
    document's text are part of it, so a needle inside them is found."""
    parts = request_parts(body)
    users = [text for role, text in parts if role == "user"]
    return [text for _, text in parts], users[-1] if users else ""


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _sentence_at(text: str, i: int) -> tuple[int, str]:
    """(start, text) of the sentence around offset I: only local scans, cheap on huge prompts."""
    start = max((text.rfind(e, 0, i) + len(e) for e in _ENDS if text.rfind(e, 0, i) >= 0), default=0)
    ends = [j + 1 for e in _ENDS if (j := text.find(e, i)) >= 0]
    return start, text[start : min(ends, default=len(text))].strip()


def _first(pattern: re.Pattern[str], text: str) -> str:
    """PATTERN's first match in TEXT (the callers picked TEXT because it has one)."""
    m = pattern.search(text)
    if m is None:
        raise AssertionError(f"no {pattern.pattern!r} in {text!r}")
    return m.group(0)


def _sentences_matching(text: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    out: dict[int, str] = {}
    for m in pattern.finditer(text):
        start, sentence = _sentence_at(text, m.start())
        out.setdefault(start, sentence)
    return sorted(out.items())


def find_question(last_user: str) -> str:
    """The last sentence with a question mark in the last user message (the question slot)."""
    tail = last_user[-4000:]
    q = tail.rfind("?")
    if q < 0:
        return tail[-400:]
    return _sentence_at(tail, q)[1]


@dataclass(frozen=True)
class Observation:
    """What the simulated model saw in one request and what it answered."""

    value: str | None  # the value it judged correct (None: no needle found)
    depths: tuple[float, ...]  # relative position of each fact it needed, 0..1 of the request text
    size: int  # o200k_base tokens of the request text
    p: float  # probability of answering correctly
    hit: bool
    answer: str


# --- the model ----------------------------------------------------------------------------------


class SimulatedModel:
    """Responder ``(request_json) -> str`` answering needle questions with probability ``curve``."""

    def __init__(
        self,
        curve: Curve,
        *,
        seed: int = 0,
        wrap: bool = False,
        exact_size: bool = True,
        keep: int = 10000,
        tool_call_rate: float = 0.0,
        level: float = 0.0,
    ) -> None:
        self.curve = curve
        self.level = level  # this run's level on the logit scale (module docstring, "Run level")
        # share of requests WITH tools answered by calling the first tool instead of with text
        # (drawn per request text, deterministic): what an agent model does when it wants more data
        self.tool_call_rate = tool_call_rate
        self.seed = seed
        self.wrap = wrap  # answer in a sentence ("The answer is X.") instead of the bare value
        # False: size = characters / 4 (no encoding; for tests making thousands of large calls whose
        # curve does not depend on size precisely)
        self.exact_size = exact_size
        self.observations: list[Observation] = []
        self.tool_calls = 0  # requests answered with a tool call
        self._keep = keep
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self._enc: Any = None  # a tiktoken Encoding, loaded on first use

    @classmethod
    def for_run(cls, curve: Curve, *, run: int, run_sd: float, **kwargs: Any) -> SimulatedModel:
        """The model as run RUN sees it: its level drawn from N(0, RUN_SD), its draws seeded by RUN
        (unless ``seed`` is given), so two runs answer independently."""
        kwargs.setdefault("seed", run)
        return cls(curve, level=run_level(run, run_sd), **kwargs)

    # deterministic uniform draw in [0, 1) from (seed, value, purpose)
    def _uniform(self, value: str, purpose: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{value}:{purpose}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _size(self, text: str) -> int:
        if not self.exact_size:
            return len(text) // 4
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            if key in self._sizes:
                self._sizes.move_to_end(key)
                return self._sizes[key]
            if self._enc is None:
                from needle_action.tokens import load_encoding  # cached per process, seeded offline

                self._enc = load_encoding("o200k_base")
        n = len(self._enc.encode(text, disallowed_special=()))
        with self._lock:
            self._sizes[key] = n
            while len(self._sizes) > 256:
                self._sizes.popitem(last=False)
        return n

    def observe(self, body: dict) -> Observation:
        """Everything ``__call__`` does, returned as an :class:`Observation` (also recorded)."""
        parts, last_user = _texts(body)
        text = "\n".join(parts)  # same join as the fake's count_tokens, so sizes agree
        size = self._size(text)
        question = find_question(last_user)
        qwords = _words(question)
        q_at = text.rfind(question) if question else -1
        q_span = range(q_at, q_at + len(question)) if q_at >= 0 else range(0)
        valued = [(pos, s) for pos, s in _sentences_matching(text, VALUE_RE) if pos not in q_span]
        if not valued:
            return self._record(Observation(None, (), size, 0.0, False, NOT_FOUND))

        target: tuple[int, str] | None = None
        positions: list[int] = []
        # multi-hop: a bridge sentence without a value that the question points at names the key
        bridges = [
            (len(qwords & _words(s)), pos, s)
            for pos, s in _sentences_matching(text, BRIDGE_RE)
            if not VALUE_RE.search(s) and pos not in q_span
        ]
        if bridges:
            overlap, pos_a, sent_a = max(bridges, key=lambda b: (b[0], -b[1]))
            key = _first(BRIDGE_RE, sent_a).lower()
            linked = [(pos, s) for pos, s in valued if key in s.lower()]
            if overlap >= 2 and linked:
                target = linked[0]
                positions = [pos_a, target[0]]
        if target is None:
            target = max(valued, key=lambda v: (len(qwords & _words(v[1])), -v[0]))
            positions = [target[0]]

        value = _first(VALUE_RE, target[1])
        length = max(1, len(text))
        depths = tuple(p / length for p in positions)
        p = 1.0
        for d in depths:
            p *= min(1.0, max(0.0, shifted(float(self.curve(d, size)), self.level)))
        hit = self._uniform(value, "hit") < p
        if hit:
            answer = f"The answer is {value}." if self.wrap else value
        else:
            answer = self._wrong(value, [_first(VALUE_RE, s) for _, s in valued])
        return self._record(Observation(value, depths, size, p, hit, answer))

    def _wrong(self, value: str, seen: list[str]) -> str:
        others = sorted({v for v in seen if v != value})
        u = self._uniform(value, "miss")
        if others and u < 0.5:
            return others[int(u * 2 * len(others)) % len(others)]  # a distractor: plausible, wrong
        if u < 0.75:
            fake = make_value(random.Random(f"{self.seed}:{value}:fabricate"))
            return fake if fake != value else NOT_FOUND
        return NOT_FOUND

    def _record(self, obs: Observation) -> Observation:
        with self._lock:
            self.observations.append(obs)
            if len(self.observations) > self._keep:
                del self.observations[: len(self.observations) - self._keep]
        return obs

    def tool_call(self, body: dict) -> list[dict] | None:
        """A ``tool_use`` answer for BODY (calling its first tool), or None: for a share
        ``tool_call_rate`` of the requests that carry tools."""
        tools = body.get("tools") or []
        if not tools or self.tool_call_rate <= 0:
            return None
        parts, _ = _texts(body)
        digest = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
        if self._uniform(digest, "tool_call") >= self.tool_call_rate:
            return None
        return [{"type": "tool_use", "name": tools[0].get("name", "tool"), "input": {"query": "more"}}]

    def __call__(self, body: dict) -> str | list[dict]:
        call = self.tool_call(body)
        if call is not None:
            with self._lock:
                self.tool_calls += 1
            return call
        return self.observe(body).answer
