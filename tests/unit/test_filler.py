"""Filler: seeded, unlimited, diverse, and never shaped like a needle."""

from __future__ import annotations

import os
import random
from collections import Counter
from itertools import islice
from pathlib import Path

from needle_action.core.workspace import Workspace
from needle_action.recall.trials.filler import (
    GENRES,
    generated_passages,
    repo_passages,
    scrub,
    split_paragraphs,
)
from needle_action.recall.trials.needles import BRIDGE_RE, VALUE_RE


def test_generator_is_reproducible_and_seed_dependent():
    a = list(islice(generated_passages(1), 50))
    assert a == list(islice(generated_passages(1), 50))
    assert a != list(islice(generated_passages(2), 50))


def test_generator_covers_every_genre_and_rarely_repeats():
    passages = list(islice(generated_passages("diverse"), 4000))
    genres = Counter(p.source for p in passages)
    assert set(genres) == {f"generated:{g}" for g in GENRES}
    assert min(genres.values()) > 4000 / len(GENRES) / 2
    assert len({p.text for p in passages}) > 0.98 * len(passages)
    assert all(len(p.text) > 60 and p.title for p in passages)


def test_generated_filler_never_contains_needle_shapes_or_questions():
    # the raw genre writers, before scrub: the generator itself must not produce these shapes
    for name, write in GENRES.items():
        rng = random.Random(name)
        for _ in range(600):
            text = write(rng).text
            assert not VALUE_RE.search(text), text
            assert not BRIDGE_RE.search(text), text
            assert "?" not in text, text


def test_scrub_defuses_values_and_bridge_keys():
    text = "Ref QZT-4821-KLM is in Locker 4471 and locker 12345."
    out = scrub(text)
    assert not VALUE_RE.search(out)
    assert not BRIDGE_RE.search(out)
    assert "qzt-4821-klm" in out
    assert "Locker no. 4471" in out
    assert "locker 12345" in out


def test_split_paragraphs_cuts_long_blocks_at_sentences():
    long = " ".join(f"Sentence number {i} says something." for i in range(200))
    parts = split_paragraphs(f"short\n\n{long}\n\n  \nlast paragraph with enough text to keep it here.")
    assert "short" not in parts  # below min_chars
    assert all(len(p) <= 1500 for p in parts)
    assert all(p.endswith(".") for p in parts)
    assert parts[-1].startswith("last paragraph")


def test_repo_passages_stay_under_the_root_and_skip_binaries(tmp_path: Path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text(
        "First paragraph of docs, long enough to keep.\n\nSecond one mentions QZT-4821-KLM in passing, also long enough."
    )
    (root / "docs" / "bin.md").write_bytes(b"binary\x00data that is long enough to be a paragraph........")
    outside = tmp_path / "secret.md"
    outside.write_text("Outside the root: must never be read into a prompt.")
    os.symlink(outside, root / "docs" / "link.md")
    got = repo_passages(Workspace(root), ["docs/*.md", "../*.md", str(outside)])
    assert [p.source for p in got] == ["repo:docs/a.md", "repo:docs/a.md"]
    assert got[0].title == "docs/a.md (part 1)"
    assert not any(VALUE_RE.search(p.text) for p in got)  # scrubbed
    assert not any("Outside the root" in p.text for p in got)


def test_repo_passages_respect_the_total_cap(tmp_path: Path):
    (tmp_path / "big.txt").write_text(
        "\n\n".join(f"Paragraph {i} with a little more text in it, enough to keep." for i in range(500))
    )
    got = repo_passages(Workspace(tmp_path), ["*.txt"], max_total_chars=1000)
    assert 10 <= len(got) <= 25
