"""Filler: the hay around the needle.

Sources, in the order the haystack uses them:

1. the fixture's own context (its documents, turns or text): the prompt as the application sends it;
2. paragraphs of repository files matched by ``[recall] filler_globs`` (docs, tickets...), only files
   under the config root, split at blank lines;
3. a built-in generator of diverse prose written for this project: legal clauses, sports reports,
   JSON records, history paragraphs, log lines, code snippets, meeting notes and product manual
   excerpts. Templated sentences over our own vocabulary, seeded (``random.Random(seed)``) and
   unlimited, no third-party text.

Every filler text passes through :func:`scrub`, which defuses anything shaped like a needle value
(``VALUE_RE``) or a multi-hop bridge key (``BRIDGE_RE``): the only values in a trial prompt are the
ones the needle put there. The generator also never writes a question mark, so the question the
prompt ends with is the only question a reader (or the simulated model) sees near the end.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from needle_action.core.paths import PathEscape, check_relative
from needle_action.core.workspace import Workspace
from needle_action.recall.trials.needles import BRIDGE_RE, VALUE_RE


@dataclass(frozen=True)
class Passage:
    title: str
    text: str
    source: str  # "fixture", "repo:<path>" or "generated:<genre>"


def scrub(text: str) -> str:
    """Defuse needle-shaped values and bridge keys that occur in filler by accident."""
    text = VALUE_RE.sub(lambda m: m.group(0).lower(), text)
    return BRIDGE_RE.sub(lambda m: m.group(0).replace(" ", " no. ", 1), text)


# --------------------------------------------------------------------------------------------
# repository files


def split_paragraphs(text: str, *, min_chars: int = 40, max_chars: int = 1500) -> list[str]:
    """Paragraphs at blank lines; long ones cut at sentence ends so no unit is huge."""
    out: list[str] = []
    for block in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        block = block.strip()
        if len(block) < min_chars:
            continue
        while len(block) > max_chars:
            cut = max(block.rfind(". ", 0, max_chars), block.rfind("\n", 0, max_chars))
            cut = cut + 1 if cut > max_chars // 3 else max_chars
            out.append(block[:cut].strip())
            block = block[cut:].strip()
        if len(block) >= min_chars:
            out.append(block)
    return out


def filler_files(workspace: Workspace, globs: list[str]) -> list[Path]:
    """The files GLOBS match in the WORKSPACE (resolved, each once, in pattern then path order).

    Patterns that are absolute, climb out with ``..`` or contain NUL are skipped, and so are matches
    that resolve outside the root or lie in hidden files and folders (``.git/``, ``.env``) the
    workspace does not allow: the repository is untrusted input.
    """
    root = workspace.root
    root_real = Path(root).resolve()
    seen: set[Path] = set()
    out: list[Path] = []
    for pattern in globs:
        try:
            check_relative(pattern)
            matches = sorted(Path(root).glob(pattern))
        except (PathEscape, ValueError, OSError):
            continue
        for path in matches:
            real = path.resolve()
            if real in seen or not real.is_relative_to(root_real) or not real.is_file():
                continue
            if not workspace.is_visible(path):
                continue
            seen.add(real)
            out.append(real)
    return out


def repo_passages(
    workspace: Workspace,
    globs: list[str],
    *,
    max_total_chars: int = 4_000_000,
    max_file_bytes: int = 1_000_000,
) -> list[Passage]:
    """Paragraphs of the files GLOBS match in the WORKSPACE (:func:`filler_files`), in sorted path order.

    Binary files, files over MAX_FILE_BYTES and anything past MAX_TOTAL_CHARS are skipped.
    """
    root_real = workspace.root.resolve()
    out: list[Passage] = []
    total = 0
    for real in filler_files(workspace, globs):
        if real.stat().st_size > max_file_bytes:
            continue
        try:
            raw = real.read_bytes()
            if b"\x00" in raw:
                continue
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        rel = real.relative_to(root_real).as_posix()
        for i, para in enumerate(split_paragraphs(text), start=1):
            if total >= max_total_chars:
                return out
            para = scrub(para)
            total += len(para)
            out.append(Passage(title=f"{rel} (part {i})", text=para, source=f"repo:{rel}"))
    return out


# --------------------------------------------------------------------------------------------
# the built-in generator: vocabulary


_FIRST = (
    "Ada",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elif",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Luca",
    "Mira",
    "Nils",
    "Olga",
    "Pavel",
    "Quinn",
    "Rosa",
    "Sanjay",
    "Tove",
    "Umar",
    "Vera",
    "Wim",
    "Yara",
)
_LAST = (
    "Albers",
    "Brandt",
    "Castillo",
    "Dalgaard",
    "Eriksen",
    "Fontaine",
    "Gallo",
    "Horvath",
    "Ivanova",
    "Jansen",
    "Kovac",
    "Lindgren",
    "Marsh",
    "Novak",
    "Ortega",
    "Petrov",
    "Quist",
    "Rinaldi",
    "Santos",
    "Thorne",
    "Ulrich",
    "Varga",
    "Whitlock",
    "Zeller",
)
_TOWNS = (
    "Ashford",
    "Brackley",
    "Corrow",
    "Dunmere",
    "Elsworth",
    "Farrowdale",
    "Glenhaven",
    "Holmbury",
    "Ivelton",
    "Kestwick",
    "Larchmont",
    "Millbrook",
    "Northwold",
    "Oakhurst",
    "Pembury",
    "Redmarsh",
    "Stowmere",
    "Thornbury",
    "Upwell",
    "Westerby",
)
_MASCOTS = ("Rovers", "Athletic", "Harriers", "United", "Wanderers", "Falcons", "Mariners", "Comets")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_NUMBER_WORDS = {
    5: "five",
    7: "seven",
    10: "ten",
    14: "fourteen",
    15: "fifteen",
    21: "twenty-one",
    30: "thirty",
    45: "forty-five",
    60: "sixty",
    90: "ninety",
}


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _pick(rng: random.Random, sentences: list[str], low: int, high: int) -> list[str]:
    """A random subset of SENTENCES, kept in their written order (so a report still reads in order)."""
    keep = sorted(rng.sample(range(len(sentences)), min(len(sentences), rng.randint(low, high))))
    return [sentences[i] for i in keep]


# --------------------------------------------------------------------------------------------
# genres


# the legal genre's vocabulary: a clause heading, the parties, what one owes, from when, the remedy
_CLAUSE_HEADINGS = (
    "Termination",
    "Confidentiality",
    "Limitation of liability",
    "Governing law",
    "Force majeure",
    "Assignment",
    "Notices",
    "Payment terms",
    "Warranties",
    "Indemnity",
    "Audit rights",
    "Data protection",
)
_PARTIES = ("Supplier", "Customer", "Licensee", "Licensor", "Contractor", "Client")
_OBLIGATIONS = (
    "deliver the goods described in the relevant schedule",
    "remedy any material breach",
    "return or destroy all confidential material",
    "pay each undisputed invoice",
    "maintain adequate professional indemnity insurance",
    "provide a written report of the incident",
    "give reasonable access to its premises and records",
)
_TRIGGERS = (
    "the effective date",
    "receipt of a valid invoice",
    "the end of each calendar quarter",
    "written notice from the other party",
    "completion of acceptance testing",
    "the date of termination",
)
_REMEDIES = (
    "suspend performance",
    "terminate this agreement",
    "recover its reasonable costs",
    "seek injunctive relief",
    "withhold payment of the disputed amount",
)
_DEFINED_TERMS = ("Business Day", "Deliverables", "Confidential Information", "Losses", "Services")
_DEFINITIONS = (
    "any day other than a weekend or a public holiday in the place of performance",
    "all documents, software and other materials supplied under this agreement",
    "information of a commercial or technical nature disclosed by either party",
    "all liabilities, costs, damages and expenses, including reasonable legal fees",
)


def _legal(rng: random.Random) -> Passage:
    # the draws stay in this order: the filler of every seed is part of what a run measures
    heading = rng.choice(_CLAUSE_HEADINGS)
    a, b = rng.sample(_PARTIES, 2)
    days = rng.choice(list(_NUMBER_WORDS))
    obligation = rng.choice(_OBLIGATIONS)
    event = rng.choice(_TRIGGERS)
    remedy = rng.choice(_REMEDIES)
    term = rng.choice(_DEFINED_TERMS)
    definition = rng.choice(_DEFINITIONS)
    sentences = [
        f"The {a} shall {obligation} within {_NUMBER_WORDS[days]} ({days}) days of {event}.",
        f"Nothing in this clause limits the right of the {b} to {remedy} where the law permits it.",
        f"Where the {a} fails to {obligation}, the {b} may {remedy} by giving written notice.",
        "Any notice under this agreement must be in writing and is deemed received on the second "
        "Business Day after posting.",
        f"This obligation survives termination of the agreement for a period of {rng.choice((6, 12, 24, 36))} months.",
        f'For the purposes of this clause, "{term}" means {definition}.',
        f"The aggregate liability of the {a} under this agreement shall not exceed the fees paid in the "
        f"{rng.choice(('twelve', 'six', 'eighteen'))} months before the claim arose.",
        "Neither party may assign its rights under this agreement without the prior written consent of the "
        "other, which shall not be unreasonably withheld.",
    ]
    n = rng.randint(1, 28)
    return Passage(
        f"Clause {n}.{rng.randint(1, 9)} {heading}", " ".join(_pick(rng, sentences, 3, 5)), "generated:legal"
    )


def _sports(rng: random.Random) -> Passage:
    t1, t2 = rng.sample(_TOWNS, 2)
    home, away = f"{t1} {rng.choice(_MASCOTS)}", f"{t2} {rng.choice(_MASCOTS)}"
    hs, as_ = rng.randint(1, 5), rng.randint(0, 3)
    scorer, other, coach = _name(rng), _name(rng), _name(rng)
    minute, late = rng.randint(3, 40), rng.randint(55, 89)
    crowd = rng.randint(2, 38) * 1000 + rng.randint(0, 999)
    sentences = [
        f"{home} beat {away} {hs}-{as_} on {rng.choice(_WEEKDAYS)} evening in front of {crowd:,} spectators.",
        f"{scorer} opened the scoring in the {_ordinal(minute)} minute after a "
        f"{rng.choice(('low cross from the left', 'long throw-in', 'quick free kick', 'loose ball in the box'))}.",
        f"The visitors had their best spell just before half-time, when {other} hit the "
        f"{rng.choice(('post', 'crossbar', 'side netting'))} from {rng.randint(12, 30)} metres.",
        f"A {_ordinal(late)}-minute header settled the match once the home side switched to a back three.",
        f"Afterwards {coach} said the squad had "
        f"{rng.choice(('shown real patience', 'defended as a unit', 'earned the win in training', 'ridden its luck at times'))}.",
        f"The result leaves {home} {_ordinal(rng.randint(1, 12))} in the table, "
        f"{rng.randint(1, 14)} points behind the leaders with {rng.randint(3, 15)} games left.",
        f"Attendance has risen by {rng.randint(3, 25)} percent this season, the club reported.",
    ]
    return Passage(
        f"Match report: {home} v {away}", " ".join(_pick(rng, sentences, 3, 6)), "generated:sports"
    )


def _json_records(rng: random.Random) -> Passage:
    records = []
    for _ in range(rng.randint(1, 3)):
        rid = rng.randint(10000, 99999)
        records.append(
            {
                "id": rid,
                "name": f"{rng.choice(('Compact', 'Heavy-duty', 'Folding', 'Insulated', 'Modular'))} "
                f"{rng.choice(('shelf unit', 'water bottle', 'desk lamp', 'tool case', 'bike rack'))}",
                "sku": f"{rng.choice('ABCDEFGHJK')}{rng.choice('LMNPRSTUVW')}-{rng.randint(100, 9999)}",
                "price": round(rng.uniform(4, 900), 2),
                "currency": rng.choice(("EUR", "USD", "GBP")),
                "stock": rng.randint(0, 500),
                "warehouse": rng.choice(_TOWNS).lower(),
                "tags": rng.sample(
                    ["outdoor", "office", "sale", "new", "bulky", "fragile", "eco"], rng.randint(1, 3)
                ),
                "updated": f"20{rng.randint(18, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "active": rng.random() < 0.8,
            }
        )
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    return Passage(f"catalog export {records[0]['id']}", text, "generated:json")


def _history(rng: random.Random) -> Passage:
    town, other = rng.sample(_TOWNS, 2)
    year = rng.randint(1150, 1890)
    person = _name(rng)
    sentences = [
        f"In {year} the market town of {town} received its charter, and with it the right to hold a "
        f"{rng.choice(('weekly', 'twice-weekly', 'seasonal'))} fair.",
        f"The {rng.choice(('stone bridge', 'grammar school', 'guildhall', 'water mill', 'parish library'))} "
        f"built by {person} in {year + rng.randint(5, 60)} still stands near the old square.",
        f"Trade with {other} grew steadily until a {rng.choice(('flood', 'fire', 'long drought', 'plague outbreak'))} "
        f"in {year + rng.randint(61, 120)} emptied half the houses on the river side.",
        f"Records kept by the {rng.choice(('abbey', 'town clerk', 'merchant guild', 'county court'))} show that "
        f"wool, salt and timber made up most of the goods passing through.",
        f"By the end of the {_ordinal(year // 100 + 1)} century the population had "
        f"{rng.choice(('doubled', 'fallen by a third', 'barely changed', 'grown to several thousand'))}.",
        f"Historians still disagree about whether {person} acted out of piety or out of a shrewd sense of business.",
        f"A survey from {_MONTHS[rng.randint(0, 11)]} {year + rng.randint(130, 200)} lists "
        f"{rng.randint(3, 40)} inns, {rng.randint(2, 12)} smithies and a single printing press.",
    ]
    return Passage(f"A short history of {town}", " ".join(_pick(rng, sentences, 3, 5)), "generated:history")


def _logs(rng: random.Random) -> Passage:
    service = rng.choice(("orders-api", "billing-worker", "search-indexer", "auth-gateway", "media-resizer"))
    day = f"20{rng.randint(22, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    h, m, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    lines = []
    for _ in range(rng.randint(4, 10)):
        s += rng.randint(0, 20)
        m, s = m + s // 60, s % 60
        h, m = (h + m // 60) % 24, m % 60
        level = rng.choices(("INFO", "DEBUG", "WARN", "ERROR"), weights=(6, 3, 2, 1))[0]
        msg = rng.choice(
            (
                f"request completed status=200 duration_ms={rng.randint(3, 900)} path=/v2/{rng.choice(('orders', 'users', 'carts'))}",
                f"cache miss key=user:{rng.randint(1000, 99999)} ttl={rng.choice((60, 300, 3600))}",
                f"retrying upstream call attempt={rng.randint(2, 5)} backoff_ms={rng.choice((200, 400, 800, 1600))}",
                f"picked up job {rng.randint(10000, 99999)} from queue {rng.choice(('emails', 'exports', 'thumbnails'))}",
                f"disk usage at {rng.randint(40, 97)}% on /var/lib/{service}",
                f"connection pool exhausted, waiting for a free slot (size={rng.choice((10, 20, 50))})",
                f"config reloaded, {rng.randint(2, 40)} keys changed",
            )
        )
        lines.append(f"{day}T{h:02d}:{m:02d}:{s:02d}Z {level:<5} {service}[{rng.randint(100, 9999)}] {msg}")
    return Passage(f"{service}.log excerpt", "\n".join(lines), "generated:logs")


def _code(rng: random.Random) -> Passage:
    noun = rng.choice(("order", "invoice", "sensor", "booking", "shipment", "reading", "account"))
    verb = rng.choice(("filter", "group", "summarise", "validate", "merge", "rank"))
    attr = rng.choice(("amount", "weight", "score", "age_days", "priority"))
    limit = rng.choice((10, 25, 50, 100))
    variants = [
        (
            f"{noun}s.py",
            "\n".join(
                [
                    f"def {verb}_{noun}s({noun}s, threshold={rng.randint(1, 99)}, limit={limit}):",
                    f'    """{verb.capitalize()} {noun}s whose {attr} passes the threshold, largest first."""',
                    "    kept = []",
                    f"    for item in {noun}s:",
                    f"        if item.{attr} >= threshold:",
                    "            kept.append(item)",
                    f"    kept.sort(key=lambda item: item.{attr}, reverse=True)",
                    "    return kept[:limit]",
                ]
            ),
        ),
        (
            f"{noun}Store.js",
            "\n".join(
                [
                    f"export function {verb}{noun.capitalize()}s(rows, opts = {{}}) {{",
                    f"  const limit = opts.limit || {limit};",
                    f"  const out = rows.filter((row) => row.{attr} > {rng.randint(0, 50)});",
                    f"  out.sort((a, b) => b.{attr} - a.{attr});",
                    "  return out.slice(0, limit);",
                    "}",
                ]
            ),
        ),
        (
            f"{noun}_report.sql",
            "\n".join(
                [
                    f"SELECT region, COUNT(*) AS {noun}_count, AVG({attr}) AS avg_{attr}",
                    f"FROM {noun}s",
                    f"WHERE created_at >= DATE '20{rng.randint(20, 26)}-{rng.randint(1, 12):02d}-01'",
                    "GROUP BY region",
                    f"HAVING COUNT(*) > {rng.randint(5, 500)}",
                    f"ORDER BY avg_{attr} DESC",
                    f"LIMIT {limit};",
                ]
            ),
        ),
    ]
    title, text = rng.choice(variants)
    return Passage(title, text, "generated:code")


def _meeting(rng: random.Random) -> Passage:
    people = rng.sample(_FIRST, 3)
    topic = rng.choice(
        ("the spring release", "office move", "hiring plan", "supplier review", "budget for next year")
    )
    sentences = [
        f"Attendees: {', '.join(people)}. Topic: {topic}.",
        f"{people[0]} summarised the status: {rng.randint(2, 9)} of {rng.randint(10, 14)} tasks are done.",
        f"{people[1]} raised the risk that {rng.choice(('the vendor slips again', 'testing starts late', 'two people are on leave in the same week'))}.",
        f"Decision: {rng.choice(('keep the current date', 'move the deadline by one week', 'split the work into two phases'))}.",
        f"Action for {people[2]}: {rng.choice(('draft the announcement', 'book the larger room', 'collect quotes from three suppliers'))} "
        f"by {rng.choice(_WEEKDAYS)}.",
        f"Next meeting on {rng.choice(_WEEKDAYS)} at {rng.randint(9, 16)}:{rng.choice(('00', '30'))}.",
    ]
    return Passage(f"Meeting notes: {topic}", " ".join(_pick(rng, sentences, 3, 6)), "generated:meeting")


def _manual(rng: random.Random) -> Passage:
    device = rng.choice(
        ("espresso machine", "label printer", "cordless drill", "air purifier", "e-bike charger")
    )
    part = rng.choice(("filter", "battery", "drip tray", "guide rail", "fan cover"))
    sentences = [
        f"Before cleaning the {device}, switch it off and let it cool for at least {rng.choice((10, 15, 30))} minutes.",
        f"To replace the {part}, press the release catch and slide the old {part} out towards you.",
        f"If the status light blinks {rng.choice(('amber', 'red', 'twice'))}, the {part} is not seated correctly.",
        "Do not use abrasive cleaners on the housing; a damp cloth is enough.",
        f"The {part} should be replaced every {rng.randint(2, 12)} months under normal use.",
        f"Store the {device} between {rng.randint(0, 10)} and {rng.randint(25, 35)} degrees Celsius.",
        "Keep the original packaging for transport and for warranty returns.",
    ]
    return Passage(
        f"{device.capitalize()} manual: {part}", " ".join(_pick(rng, sentences, 3, 5)), "generated:manual"
    )


GENRES: dict[str, Callable[[random.Random], Passage]] = {
    "legal": _legal,
    "sports": _sports,
    "json": _json_records,
    "history": _history,
    "logs": _logs,
    "code": _code,
    "meeting": _meeting,
    "manual": _manual,
}


def generate_passage(rng: random.Random) -> Passage:
    """One passage of a random genre, scrubbed."""
    p = GENRES[rng.choice(tuple(GENRES))](rng)
    return Passage(p.title, scrub(p.text), p.source)


def generated_passages(seed: int | str) -> Iterator[Passage]:
    """An unlimited, reproducible stream of generated passages."""
    rng = random.Random(f"needle-filler:{seed}")
    while True:
        yield generate_passage(rng)
