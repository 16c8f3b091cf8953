"""Shared prefixes of trial prompts, and which requests may go while a prefix is being cached.

Every trial of a cell uses the same filler, and every depth of a size draws it from the same
stream (:mod:`needle_action.recall.trials.haystack`), so the text before the needle at depth d is the same
for all trials of the cell and a prefix of the text before any deeper needle. A cell's **mark** is
where that shared text ends (the needle's position in its first trial) with a digest of the text
before it. A request carries the marks of its own cell and of every shallower cell whose text it
starts with (as :class:`Breakpoint` s: block boundaries), so a provider with explicit prefix
caching can read whatever an earlier request wrote there.

Writing costs more than reading (Anthropic: 1.25x vs 0.1x the input price), and a request that
starts before the prefix is cached writes it again. So a cacheable mark goes cold -> warming (its
first request, the *writer*, is in flight) -> warm (until the cache's TTL has passed since it was
last used). A request waits while a mark it would write is warming; one whose own (deepest) mark
is warm only reads it and never waits. The writer of a size is the
deepest cell's first trial: its text holds every shallower cell's prefix, and it marks up to four
of them (the API's limit) for caching, so one request writes the whole ladder and every other
request of that size reads it.

A provider that answers one call at a time and keeps the previous prompt's KV state (the embedded
model, :mod:`needle_action.providers.local.kv_reuse`) gains from the same structure without any marker:
the scheduler asks its trials in :func:`sequential_order`, so consecutive prompts share the longest
prefix.

Nothing here changes what is asked or what a trial answers: only the order in which requests start
and the cache markers they carry.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from needle_action.providers.base import Breakpoint
from needle_action.request.prompt import Message, RenderedPrompt

CACHE_TTL_S = 300.0  # Anthropic's default ephemeral cache lives 5 minutes from its last use
TTL_MARGIN_S = 30.0  # re-write rather than risk a miss at the edge of the TTL
MAX_CACHED = 4  # cache_control breakpoints per request


@dataclass(frozen=True)
class Mark:
    """Where the text shared by a cell's trials ends."""

    part: int  # -1 system, else the message index
    offset: int  # characters into that part
    tokens: int  # tokens of the prompt before it
    digest: str  # sha256 of the text before it


def sequential_order(
    needed: bool, prompt: int, size: int, depth: float, index: int, own_hay: bool = False
) -> tuple[float, ...]:
    """The order a one-call-at-a-time provider asks trials in: needed ones first, then one prompt
    after another (PROMPT: the prompt's rank by name, so the head's and the base's trials of a prompt side by side: they often share it
    whole), a size's cells deepest first, a cell's trials back to back. Each trial then starts with
    the text before the previous one's needle: a cell's trials share everything before it, and a
    shallower cell's text is a prefix of a deeper one's. Interleaving prompts (the order before)
    left nothing to keep: the demo evaluated all 32,642 prompt tokens of its 51 calls.

    OWN_HAY (gold trials: each trial orders the fixture's other documents its own way, the same at
    every depth): trial by trial, each trial's depths deepest first, since what a gold trial shares
    is with its own other depths, not with the cell's other trials (the demo's rag_answer: 5,967
    prompt tokens evaluated instead of 6,863; the same as sorting its 15 prompts' tokens)."""
    if own_hay:
        return (0 if needed else 1, prompt, size, index, -depth)
    return (0 if needed else 1, prompt, size, -depth, index)


def prefix_digest(rendered: RenderedPrompt, part: int, offset: int) -> str | None:
    """Digest of RENDERED's text before (PART, OFFSET); None when the point is outside the prompt.
    The tools and the request parameters come first: they are part of every prefix (the API
    renders the tools before the system text)."""
    h = hashlib.sha256(_head(rendered).encode("utf-8", "surrogatepass"))
    if part < 0:
        if offset > len(rendered.system or ""):
            return None
        h.update((rendered.system or "")[:offset].encode("utf-8", "surrogatepass"))
        return h.hexdigest()
    if part >= len(rendered.messages) or offset > len(rendered.messages[part].text):
        return None
    h.update((rendered.system or "").encode("utf-8", "surrogatepass"))
    for m in rendered.messages[:part]:
        h.update(b"\0" + m.role.encode() + b"\0" + _message_key(m).encode("utf-8", "surrogatepass"))
    m = rendered.messages[part]
    h.update(b"\0" + m.role.encode() + b"\0" + m.text[:offset].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _head(rendered: RenderedPrompt) -> str:
    """What precedes the system text in every request: the tools, the tool choice, the parameters."""
    if not rendered.tools and rendered.tool_choice is None and not rendered.params:
        return ""
    return json.dumps([rendered.tools, rendered.tool_choice, rendered.params], sort_keys=True, default=str)


def _message_key(m: Message) -> str:
    """A whole message as it is sent: its blocks (tool_use ids and inputs included), not only its text."""
    return m.content if isinstance(m.content, str) else json.dumps(m.content, sort_keys=True, default=str)


def find_mark(rendered: RenderedPrompt, fact: str, tokens: int) -> Mark | None:
    """The mark just before FACT (the needle's first fact) in RENDERED."""
    if rendered.system and (c := rendered.system.find(fact)) >= 0:
        digest = prefix_digest(rendered, -1, c)
        return Mark(-1, c, tokens, digest) if digest else None
    for j, m in enumerate(rendered.messages):
        c = m.text.find(fact)
        if c >= 0:
            digest = prefix_digest(rendered, j, c)
            return Mark(j, c, tokens, digest) if digest else None
    return None


def marks_in(rendered: RenderedPrompt, own: Mark | None, ladder: list[Mark]) -> list[Mark]:
    """The marks of LADDER (a size's cells) that RENDERED starts with, up to its own, shallow first."""
    if own is None or prefix_digest(rendered, own.part, own.offset) != own.digest:
        return []  # this trial's text differs from the cell's first before the needle: nothing shared
    out = [own]
    for m in ladder:
        if (
            m.tokens < own.tokens
            and m.digest != own.digest
            and prefix_digest(rendered, m.part, m.offset) == m.digest
        ):
            out.append(m)
    return sorted(out, key=lambda m: m.tokens)


def choose_cached(marks: list[Mark], own: Mark, limit: int = MAX_CACHED) -> list[Mark]:
    """Which of a writer's MARKS get a cache breakpoint: its own, plus the shallower ones whose
    increments over the previous mark are largest (a mark left out costs one extra write of its
    increment, later, by its own cell's first trial)."""
    others = [m for m in marks if m is not own]
    if len(others) < limit:
        return [own, *others]
    gains = []
    previous = 0
    for m in others:
        gains.append((m.tokens - previous, m))
        previous = m.tokens
    keep = {id(m) for _, m in sorted(gains, key=lambda g: -g[0])[: limit - 1]}
    return [own, *(m for m in others if id(m) in keep)]


@dataclass
class MarkStates:
    """cold / warming / warm per (provider, digest), shared by every plan of a run."""

    min_tokens: dict[int, int] = field(default_factory=dict)  # id(provider) -> shortest cached prefix
    clock: Callable[[], float] = time.monotonic
    # (provider, digest) -> {ladder: its writers in flight}
    _warming: dict[tuple[int, str], dict[object, int]] = field(default_factory=dict)
    _warm_until: dict[tuple[int, str], float] = field(default_factory=dict)

    def now(self) -> float:
        """The clock's time (injectable for tests)."""
        return self.clock()

    def cacheable(self, provider: int, mark: Mark) -> bool:
        """Is MARK's prefix long enough for PROVIDER to cache it?"""
        floor = self.min_tokens.get(provider)
        return floor is not None and mark.tokens >= floor

    def is_warm(self, provider: int, mark: Mark) -> bool:
        """Was MARK's prefix written recently enough to be read now?"""
        return self._warm_until.get((provider, mark.digest), 0.0) > self.now() + TTL_MARGIN_S

    def _writing(self, provider: int, mark: Mark, ladder: object = None) -> bool:
        """Is MARK being written (by LADDER's requests; None: by anyone's)?"""
        writers = self._warming.get((provider, mark.digest), {})
        return any(writers.values()) if ladder is None else bool(writers.get(ladder))

    def _to_write(self, provider: int, marks: list[Mark], ladder: object) -> list[Mark] | None:
        """The marks a request of LADDER carrying MARKS writes (None: it only reads its own)."""
        cacheable = [m for m in marks if self.cacheable(provider, m)]
        if not cacheable or self.is_warm(provider, cacheable[-1]):
            return None
        own = cacheable[-1]
        # a shallower mark another ladder (the other side of a pull request, another size over the
        # same system prompt) is writing right now is written again rather than waited for: one
        # extra write of a shared prefix instead of a round of latency on this ladder's chain
        cold = [
            m
            for m in cacheable
            if not self.is_warm(provider, m)
            and (m is own or not self._writing(provider, m) or self._writing(provider, m, ladder))
        ]
        return choose_cached(cold, own)

    def blocked(self, provider: int, marks: list[Mark], ladder: object = None) -> bool:
        """A request of LADDER (a size's cells) carrying MARKS must wait: its own mark, or a mark
        it would write (see ``plan_request``) that its own ladder is writing, is being written
        right now. A request whose own deepest mark is warm only reads that one and never waits."""
        writes = self._to_write(provider, marks, ladder)
        if not writes:
            return False
        own = writes[0]
        return self._writing(provider, own) or any(self._writing(provider, m, ladder) for m in writes)

    def plan_request(
        self, provider: int, marks: list[Mark], ladder: object = None
    ) -> tuple[tuple[Breakpoint, ...], list[Mark]]:
        """(breakpoints to send, marks this request writes) for a request of LADDER carrying MARKS."""
        cacheable = [m for m in marks if self.cacheable(provider, m)]
        if not cacheable:
            return (), []
        to_write = self._to_write(provider, marks, ladder)
        if to_write is None:
            cached = [cacheable[-1]]
            writes: list[Mark] = []
        else:
            cached = writes = to_write
            for m in writes:
                writers = self._warming.setdefault((provider, m.digest), {})
                writers[ladder] = writers.get(ladder, 0) + 1
        chosen = {id(m) for m in cached}
        return tuple(Breakpoint(m.part, m.offset, cache=id(m) in chosen) for m in marks), writes

    def finished(
        self, provider: int, read: Mark | None, writes: list[Mark], ok: bool, ladder: object = None
    ) -> None:
        """A request of LADDER that read READ (its deepest cached mark) and wrote WRITES has ended:
        the writes are warm when it succeeded, and the entry it read lives another TTL."""
        until = self.now() + CACHE_TTL_S
        for m in writes:
            key = (provider, m.digest)
            writers = self._warming.setdefault(key, {})
            writers[ladder] = max(0, writers.get(ladder, 0) - 1)
            if ok:
                self._warm_until[key] = until
        if ok and read is not None and (provider, read.digest) in self._warm_until:
            self._warm_until[(provider, read.digest)] = until
