"""Words as a lexical matcher sees them: normalised text, stop words, a small suffix stemmer.

Two users, one rule each:

- scoring compares answers after :func:`normalise` (case folded, punctuation and markup as spaces)
  and :func:`contains` (a normalised phrase on word boundaries);
- the non-lexical bank promises that a fact and its question share no content word:
  :func:`content_stems` (stop words dropped, suffixes stripped) is what "content word" means, and
  :func:`overlap` also counts a stem that is a prefix of another (``thai`` / ``thailand``), which a
  fuzzy matcher would catch.

The stemmer is deliberately small (plural, possessive, verb and a few derivational suffixes, a
final ``e``): it maps ``restore``/``restored``/``restorable`` and ``object``/``objects`` together,
which is all the overlap rule needs. It is not Porter; it never has to produce real words.
"""

from __future__ import annotations

import re
import unicodedata

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)
_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)

# Function words and the question scaffolding every probe shares ("answer with only the name,
# nothing else"): they carry no content, so a match on them is not a lexical cue.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can cannot could did do does doing down during each else few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not nothing now of off on once one only or other our ours ourselves
    out over own please same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom whose why will with would you your yours yourself yourselves answer
    """.split()
)

# longest first; each needs the stem left behind to keep at least three letters
_SUFFIXES = (
    "ational",
    "ations",
    "ation",
    "ingly",
    "ments",
    "ment",
    "ness",
    "able",
    "ible",
    "ings",
    "edly",
    "ing",
    "ies",
    "ied",
    "ers",
    "est",
    "ed",
    "er",
    "es",
    "ly",
    "s",
)
_MIN_STEM = 3
_PREFIX_MIN = 4  # a stem this long that starts another stem counts as shared (thai / thailand)


def normalise(text: str) -> str:
    """Casefolded words separated by single spaces; punctuation and markup are separators."""
    text = unicodedata.normalize("NFKC", text or "")
    return _PUNCT_OR_SPACE.sub(" ", text.casefold()).strip()


def contains(text: str, phrase: str) -> bool:
    """True when the normalised PHRASE appears in the normalised TEXT on word boundaries."""
    want = normalise(phrase)
    return bool(want) and f" {want} " in f" {normalise(text)} "


def _fold(word: str) -> str:
    # accents off (Família -> familia): a matcher that folds them must not see two words
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def stem(word: str) -> str:
    """WORD lower-cased, accents folded, possessive and one suffix stripped, final ``e`` dropped."""
    w = _fold(word.casefold())
    if w.endswith("'s") or w.endswith("’s"):
        w = w[:-2]
    for suffix in _SUFFIXES:
        if suffix == "s" and w.endswith(("ss", "us", "is")):
            continue  # "class", "status", "analysis" are not plurals
        if w.endswith(suffix) and len(w) - len(suffix) >= _MIN_STEM:
            w = w[: -len(suffix)]
            if suffix in ("ies", "ied"):
                w += "y"
            break
    if w.endswith("e") and len(w) > _MIN_STEM:
        w = w[:-1]
    # doubled final consonant left by -ing/-ed ("planned" -> "plann" -> "plan")
    if len(w) > _MIN_STEM and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    return w


def content_stems(text: str) -> set[str]:
    """The stems of TEXT's content words: words (not numbers) that are not stop words."""
    words = _WORD.findall(_fold((text or "").replace("’", "'").casefold()).replace("'s ", " "))
    return {stem(w) for w in words if not w.isdigit() and w not in STOP_WORDS and len(w) > 1}


def overlap(a: str, b: str) -> set[str]:
    """Content stems A and B share, a stem of at least four letters that begins the other's included."""
    sa, sb = content_stems(a), content_stems(b)
    shared = sa & sb
    for x in sa:
        for y in sb:
            short, long_ = (x, y) if len(x) <= len(y) else (y, x)
            if len(short) >= _PREFIX_MIN and long_.startswith(short):
                shared.add(short)
    return shared
