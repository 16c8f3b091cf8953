"""Which settings a pull request may change for its own run, and which it only proposes.

A pull request's threshold file is written by its author. When that file is measured on the PR's
behalf (the action; a future ``needle check --base-ref``), two kinds of settings must not come from
it, because they are the reviewer's to set, not the author's:

* **endpoints and credentials** (:data:`ENDPOINT_KEYS`): which provider is called, at which URL, with
  the key from which variable, which local model file is loaded, and how tokens are counted (the
  ``anthropic`` tokenizer is an API call with the key). A PR that could set them could send the key
  anywhere;
* **policy** (:data:`POLICY_KEYS`, :data:`RECALL_POLICY_KEYS`): budgets, allowed growth, recall
  thresholds and the significance test, what counts as a found needle (style, scoring, the answer
  regex: ``scoring = "regex"`` with ``answer_regex = ".*"`` would pass every trial), spend caps and
  answer length, whether recall runs at all. A PR that could set them would judge itself.

* **running code** (``[files] builders``): a prompt built in code runs the pull request's Python;
  only a trusted file may enable that, and builder prompts are left out of the run otherwise
  (:func:`without_builders`, one :class:`SettingChange` each for the comment). Likewise
  ``[files] builders_unguarded``, which lets builders run where needle cannot take their network
  away: a pull request cannot give its own code the network, and ``[files] builder_python``, the
  interpreter builders run with (unset in the trusted file: ``"system"``, never a venv of the
  checkout, where a pull request could plant one).

Those come from the *trusted* file (the base branch's, which was reviewed when it merged): a prompt
the base has keeps the base's values, a new prompt gets the base's ``[defaults]``, and the files
templates may read (``[files]``) are the base's. Everything else (templates, fixtures,
model, recall sizes and depths, ...) is the change under review and is measured as the PR wrote it.
Every difference is returned as a :class:`SettingChange`, for the PR comment to list.

With no trusted file (the PR that adopts needle) the PR's policy applies, but endpoints and
credentials still do not: every ``providers`` table is dropped, so keys go only to each provider's
official API or to the URL the workflow's environment sets.

The clouds (``bedrock``, ``vertex``, ``azure``) follow the same rule and add nothing a file can set:
their credentials, region and project are read from the environment the workflow's cloud login
leaves (never from needle.toml), their endpoint from the base's ``providers.NAME.base_url`` or the
SDK's variable. What stays the PR's is the model id, which a cloud puts in the URL's path: the
providers refuse an id that is not one (a ``/`` segment of ``..``, a ``?``) before any call
(``providers/cloud_claude.check_model_id``), so it can choose the model, never the host or route.

Pure functions of two :class:`~needle_action.config.model.Config` objects; the CLI's own runs never
call this (a developer trusts their own file).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from needle_action.config.model import Config, FileAccess, PromptConfig, PromptSettings

ENDPOINT_KEYS = ("provider", "providers", "tokenizer", "tokenizer_safety_factor")
POLICY_KEYS = ("max_input_tokens", "reserve_output_tokens", "max_growth")
# what passes (threshold, the test), what counts as a found needle (style, scoring, the regex, which
# a PR could also make catastrophic to match), and what may be spent
RECALL_POLICY_KEYS = (
    "enabled",
    "threshold",
    "alpha",
    "min_drop",
    "max_calls",
    "max_cost_usd",
    "max_output_tokens",
    "reorder_ab",  # more calls: what may be spent
    "needle",
    "needles",
    "scoring",
    "answer_regex",
    # how hard a probe is and what counts as an abstention: abstain_regex = ".*" would pass every
    # absent trial, distractors = 0 would make a look-alike probe easy
    "distractors",
    "similarity",
    "abstain_phrases",
    "abstain_regex",
    # the sequential design's stop rules: a PR that turned stop_on_drop off would keep a regression
    # from stopping its run early, and one that changed stop_on_no_change would pick its own pass rule
    "stop_on_drop",
    "stop_on_no_change",
)

Kind = Literal["policy", "endpoint", "files"]


@dataclass(frozen=True)
class SettingChange:
    """One setting the PR's file sets differently from the trusted file (which was used)."""

    prompt: str | None  # None for file-wide settings ([files])
    key: str  # dotted, as written in needle.toml: "max_growth", "recall.threshold", "providers.openai.base_url"
    base: object
    head: object
    kind: Kind
    new_prompt: bool = False

    def describe(self) -> str:
        """One line for the PR comment, e.g. "⚠️ this PR raises max_input_tokens of rag_answer
        4,000 → 8,000: takes effect after merge"."""
        base, head = _show(self.base), _show(self.head)
        after = "takes effect after merge"
        if self.kind == "endpoint":
            after += " (endpoints and keys always come from the base branch)"
        if self.key == "builder":
            return (
                f"⚠️ {self.prompt} is built in code ({head}) and was not measured: builders run pull "
                "request code, so they run only when the base branch's needle.toml sets "
                "`[files] builders = true` (a pull request cannot enable them for itself)"
            )
        if self.key == "builder_python":
            return (
                f"⚠️ [files] builder_python {base} lies in the checkout, which the pull request "
                "writes: builders ran with the system's Python instead (name an interpreter outside "
                "the repository, e.g. a venv the workflow creates before this step)"
            )
        if self.prompt is None:
            return f"⚠️ this PR changes [files] {self.key.removeprefix('files.')} {base} → {head}: {after}"
        if self.new_prompt:
            return (
                f"⚠️ the new prompt {self.prompt} sets {self.key} to {head}; until it is merged the "
                f"base's [defaults] apply ({base})"
            )
        return f"⚠️ this PR {_verb(self.base, self.head)} {self.key} of {self.prompt} {base} → {head}: {after}"


def _in_checkout(setting: str, root: Path) -> bool:
    """Whether ``[files] builder_python`` SETTING names a file inside the checkout ROOT (a relative
    path always does; an absolute one when it, or what it links to, lies under ROOT)."""
    if setting == "system":
        return False
    path = Path(setting)
    if not path.is_absolute():
        return True
    checkout = Path(os.path.realpath(root))
    return any(p == checkout or checkout in p.parents for p in (path, Path(os.path.realpath(path))))


def _verb(base: object, head: object) -> str:
    if isinstance(base, int | float) and isinstance(head, int | float) and not isinstance(base, bool):
        return "raises" if head > base else "lowers"
    if base is None:
        return "sets"
    if head is None:
        return "removes"
    return "changes"


def _show(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list) and value and not isinstance(value[0], str | int | float):
        return f"[{len(value)} entries]"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# --------------------------------------------------------------------------- comparing settings


def _provider_changes(base: PromptSettings, head: PromptSettings) -> Iterator[tuple[str, object, object]]:
    names = sorted(set(base.providers) | set(head.providers))
    for name in names:
        b, h = base.providers.get(name), head.providers.get(name)
        bd = b.model_dump() if b else {}
        hd = h.model_dump() if h else {}
        for field in sorted(set(bd) | set(hd)):
            if bd.get(field) != hd.get(field):
                yield f"providers.{name}.{field}", bd.get(field), hd.get(field)


def _differences(base: PromptSettings, head: PromptSettings) -> Iterator[tuple[str, object, object, Kind]]:
    for key in ENDPOINT_KEYS:
        if key == "providers":
            for dotted, b, h in _provider_changes(base, head):
                yield dotted, b, h, "endpoint"
        elif getattr(base, key) != getattr(head, key):
            yield key, getattr(base, key), getattr(head, key), "endpoint"
    for key in POLICY_KEYS:
        b, h = getattr(base, key), getattr(head, key)
        if b != h:
            yield (
                key,
                (str(b) if b is not None and key == "max_growth" else b),
                (str(h) if h is not None and key == "max_growth" else h),
                "policy",
            )
    for key in RECALL_POLICY_KEYS:
        b, h = getattr(base.recall, key), getattr(head.recall, key)
        if b != h:
            yield f"recall.{key}", b, h, "policy"


def _with_trusted(head: PromptConfig, source: PromptSettings) -> PromptConfig:
    """HEAD with every endpoint and policy setting taken from SOURCE."""
    updates: dict[str, Any] = {k: getattr(source, k) for k in (*ENDPOINT_KEYS, *POLICY_KEYS)}
    updates["providers"] = {k: v.model_copy() for k, v in source.providers.items()}
    recall = {k: getattr(source.recall, k) for k in RECALL_POLICY_KEYS}
    updates["recall"] = head.recall.model_copy(update=recall)
    return head.model_copy(update=updates)


# --------------------------------------------------------------------------- the merge


def without_builders(
    prompts: dict[str, PromptConfig],
) -> tuple[dict[str, PromptConfig], list[tuple[str, str]]]:
    """PROMPTS without those built in code, and (name, builder) of each left out: builders run
    pull request code, which only the trusted file's ``[files] builders = true`` allows."""
    kept = {name: p for name, p in prompts.items() if p.builder is None}
    dropped = [(name, p.builder) for name, p in prompts.items() if p.builder is not None]
    return kept, dropped


def apply_trust(head: Config, trusted: Config | None) -> tuple[Config, list[SettingChange]]:
    """HEAD (the PR's config) as it may be measured, and what the PR proposes to change.

    TRUSTED is the base branch's config, or None when the base has no threshold file (then the PR's
    policy stands and only endpoints and credentials are reset to the providers' defaults).
    """
    changes: list[SettingChange] = []
    prompts: dict[str, PromptConfig] = {}
    for name, prompt in head.prompts.items():
        if trusted is None:
            source: PromptSettings = prompt.model_copy(update={"providers": {}})
            new = False
        else:
            new = name not in trusted.prompts
            source = trusted.defaults if new else trusted.prompts[name]
        for key, b, h, kind in _differences(source, prompt):
            if trusted is None and kind != "endpoint":
                continue
            changes.append(SettingChange(name, key, b, h, kind, new_prompt=new))
        prompts[name] = _with_trusted(prompt, source)
    files = trusted.files if trusted is not None else FileAccess()
    for key in FileAccess.model_fields:
        if getattr(files, key) != getattr(head.files, key):
            changes.append(
                SettingChange(None, f"files.{key}", getattr(files, key), getattr(head.files, key), "files")
            )
    if files.builder_python is None:  # a venv in the checkout is the pull request's: never run it
        files = files.model_copy(update={"builder_python": "system"})
    elif _in_checkout(files.builder_python, head.root):
        # the base names an interpreter the pull request can replace (or a venv whose .pth files it
        # can plant): it would run before the builders' guard, with the network
        changes.append(SettingChange(None, "builder_python", files.builder_python, "system", "files"))
        files = files.model_copy(update={"builder_python": "system"})
    if not files.builders:
        prompts, dropped = without_builders(prompts)
        changes.extend(SettingChange(name, "builder", None, spec, "files") for name, spec in dropped)
    effective = head.model_copy(
        update={
            "prompts": prompts,
            "files": files.model_copy(),
            "defaults": trusted.defaults if trusted is not None else head.defaults,
        }
    )
    return effective, changes


__all__ = [
    "ENDPOINT_KEYS",
    "POLICY_KEYS",
    "RECALL_POLICY_KEYS",
    "SettingChange",
    "apply_trust",
    "without_builders",
]
