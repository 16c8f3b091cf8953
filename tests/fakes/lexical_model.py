"""A simulated model that finds facts by word overlap, the way a lexical matcher (BM25, keyword
search, a model leaning on surface cues) does: a sibling of ``simulated_model.SimulatedModel``.

``LexicalModel(curve, seed=0, min_cover=0.6, hallucinate=0.0)`` is a responder
``(request_json) -> str`` for ``tests/fakes/anthropic_server.FakeAnthropic``. For each request it:

1. takes the question: the last sentence with a ``?`` in the last user message (the question slot);
2. splits the request text (system + messages, joined as the fake's ``count_tokens`` joins them) into
   passages, one per line, the question's own line left out, and scores each by how many of the
   question's content stems it contains (``content_stems``: stop words dropped, suffixes stripped);
3. **found**: the best passage (the earliest on a tie) holds at least ``min_cover`` of the question's
   content stems. With probability ``curve(depth, size)`` (depth = the passage's character offset /
   the request length; size = o200k_base tokens, or characters / 4 with ``exact_size=False``) it
   answers from that passage: the value (``VALUE_RE``) of its sentence that overlaps the question
   most, or the passage itself when it holds no value (extractive QA); otherwise a wrong answer (a
   value from another passage, or ``NOT_FOUND``);
4. **not found**: with probability ``hallucinate`` it makes something up (the value of the best
   partial match, or a fresh value), otherwise it says ``NOT_FOUND``, which is an abstention.

Faithful to a lexical matcher: a fact that shares no words with its question (a non-lexical needle)
is never found; a near miss that shares most of the question's words (an absent trial with a
high-similarity near miss) is taken for the answer; the gold document of a real RAG question is
found when it is the passage with the most question words in it. Draws depend only on (seed, the
request text), so retries and concurrency change nothing, and every distinct trial gets its own draw.
"""

from __future__ import annotations

import hashlib
import random
import threading
from dataclasses import dataclass

from needle_action.recall.trials.needles import VALUE_RE, make_value
from needle_action.recall.trials.probes.lexical import content_stems
from tests.fakes.simulated_model import NOT_FOUND, Curve, _texts, find_question

MAX_PASSAGE_ANSWER = 600  # an extractive answer quotes at most this much of its passage


@dataclass(frozen=True)
class LexicalObservation:
    """What the lexical model saw in one request and what it did."""

    question: str
    passage: str | None  # the best passage (None: no passage shares a word with the question)
    cover: float  # share of the question's content stems in it
    found: bool  # cover >= min_cover
    depth: float | None  # the best passage's relative position, 0..1 of the request text
    size: int
    p: float  # probability of answering from the passage (found) or of making one up (not found)
    answered: bool  # the draw went the way of p
    answer: str


def _passages(text: str, skip: range) -> list[tuple[int, str]]:
    out, at = [], 0
    for line in text.split("\n"):
        if line.strip() and not (at in skip or at + len(line) - 1 in skip):
            out.append((at, line))
        at += len(line) + 1
    return out


def _extract(passage: str, qstems: set[str]) -> str:
    """The value of the passage's sentence that overlaps the question most, else the passage."""
    best: tuple[int, str] | None = None
    for sentence in passage.replace("? ", ". ").replace("! ", ". ").split(". "):
        m = VALUE_RE.search(sentence)
        if m is not None:
            score = len(qstems & content_stems(sentence))
            if best is None or score > best[0]:
                best = (score, m.group(0))
    return best[1] if best is not None else passage.strip()[:MAX_PASSAGE_ANSWER]


class LexicalModel:
    """Responder ``(request_json) -> str``: answers from the passage with the most question words."""

    def __init__(
        self,
        curve: Curve,
        *,
        seed: int = 0,
        min_cover: float = 0.6,
        hallucinate: float = 0.0,
        exact_size: bool = False,
    ) -> None:
        self.curve, self.seed = curve, seed
        self.min_cover, self.hallucinate = min_cover, hallucinate
        self.exact_size = exact_size
        self.observations: list[LexicalObservation] = []
        self._lock = threading.Lock()

    def _uniform(self, text: str, purpose: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{purpose}:{text}".encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _size(self, text: str) -> int:
        if not self.exact_size:
            return len(text) // 4
        from needle_action.tokens import load_encoding

        return len(load_encoding("o200k_base").encode(text, disallowed_special=()))

    def observe(self, body: dict) -> LexicalObservation:
        """Everything ``__call__`` does, returned (and recorded) as a :class:`LexicalObservation`."""
        parts, last_user = _texts(body)
        text = "\n".join(parts)
        size = self._size(text)
        question = find_question(last_user)
        qstems = content_stems(question)
        q_at = text.rfind(question) if question else -1
        skip = range(q_at, q_at + len(question)) if q_at >= 0 else range(0)
        scored = [(len(qstems & content_stems(p)), at, p) for at, p in _passages(text, skip)]
        best = max(scored, key=lambda s: (s[0], -s[1]), default=(0, 0, ""))
        cover = best[0] / len(qstems) if qstems else 0.0
        found = cover >= self.min_cover and best[0] > 0
        depth = best[1] / max(1, len(text)) if best[0] else None
        p = min(1.0, max(0.0, float(self.curve(depth or 0.0, size)))) if found else self.hallucinate
        answered = self._uniform(text, "answer") < p
        answer = self._answer(text, found, answered, best[2] if best[0] else None, qstems, scored)
        obs = LexicalObservation(question, best[2] or None, cover, found, depth, size, p, answered, answer)
        with self._lock:
            self.observations.append(obs)
        return obs

    def _answer(
        self, text: str, found: bool, answered: bool, passage: str | None, qstems: set[str], scored: list
    ) -> str:
        if found and answered and passage is not None:
            return _extract(passage, qstems)
        if found:  # found but missed: another passage's value, or nothing
            others = [m.group(0) for s, _, p in scored if p != passage and (m := VALUE_RE.search(p))]
            return others[int(self._uniform(text, "other") * len(others))] if others else NOT_FOUND
        if answered:  # made up: the best partial match's value, or a fresh one
            partial = VALUE_RE.search(passage or "")
            if partial is not None:
                return partial.group(0)
            return make_value(random.Random(f"{self.seed}:{hashlib.sha256(text.encode()).hexdigest()}"))
        return NOT_FOUND

    def __call__(self, body: dict) -> str:
        return self.observe(body).answer
