"""The pre-flight guard: refuse to send a request that would blow the token or dollar budget.

It loads the tokenizer (``needle_action.tokens``) and the price table
(``needle_action.providers.pricing``) when it is first built. See docs/runtime.md."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from needle_action.core.errors import EXIT_CHECKS_FAILED, NeedleError
from needle_action.request.wire import from_body

if TYPE_CHECKING:  # imported lazily at run time (see _to_rendered)
    from needle_action.request.prompt import RenderedPrompt
    from needle_action.tokens import TokenCounter

T = TypeVar("T")

__all__ = ["BudgetExceeded", "Estimate", "PreflightGuard"]


# --------------------------------------------------------------------------- pre-flight guard


@dataclass(frozen=True)
class Estimate:
    """What a request would cost before it is sent.

    ``tokens``: input tokens (tools, system, messages with their tool calls, tool results,
    documents, and images by their pixel size), after the tokenizer safety factor when tiktoken
    approximates a Claude model. ``cost_usd``: input tokens plus the output allowance at list
    price, or ``None`` when the model has no price. ``output_tokens``: the output allowance priced
    (the call's ``max_tokens``, else the guard's ``reserve_output_tokens``).
    """

    tokens: int
    cost_usd: float | None
    output_tokens: int = 0
    exact: bool = False
    tokenizer: str = ""


class BudgetExceeded(NeedleError):
    """Raised by :meth:`PreflightGuard.check` before a request goes out. Nothing was sent."""

    exit_code = EXIT_CHECKS_FAILED
    title = "needle budget exceeded"

    def __init__(self, message: str, *, estimate: Estimate, limit: float, kind: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.estimate = estimate
        self.limit = limit
        self.kind = kind  # "tokens" or "cost"


# keyword arguments of a create() call that are not part of what the model reads
_NOT_INPUT = frozenset(
    {
        "model",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "timeout",
        "extra_headers",
        "extra_query",
        "extra_body",
    }
)


def _plain(obj: Any) -> Any:
    """OBJ as plain JSON-able data: SDK objects (pydantic models, e.g. a previous response's
    content blocks) through their ``model_dump``."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return _plain(dump(exclude_none=True))
    return obj


def _to_rendered(
    system: Any, messages: Iterable[Any], extra: Mapping[str, Any] | None = None
) -> RenderedPrompt:
    """The request as the checker's ``RenderedPrompt``, so the same counters apply.

    Accepts the Anthropic shape (``system`` apart, content as string or blocks: tool_use,
    tool_result, document, image) and the OpenAI shape (``system``/``developer`` messages,
    assistant ``tool_calls``, ``role: "tool"`` messages, ``image_url`` parts), detected by
    ``RenderedPrompt.from_body``; EXTRA holds the call's other arguments (``tools``,
    ``tool_choice``, ``thinking``, ``response_format``, ...), counted with it.
    """
    # on first use: an app that imports runtime for edge_order skips Jinja2 and tiktoken
    from needle_action.request.blocks import RequestShapeError

    body: dict[str, Any] = {k: _plain(v) for k, v in (extra or {}).items() if k not in _NOT_INPUT}
    body["messages"] = _plain(list(messages))
    if _has_openai_parts(body["messages"]):
        body["max_completion_tokens"] = 1  # marks the body as OpenAI's for from_body (not counted)
    if system is not None and system != "":
        body["system"] = _plain(system)
    try:
        return from_body(body, source="<runtime>")
    except RequestShapeError as exc:
        raise ValueError(f"PreflightGuard cannot read this request: {exc}") from None


def _has_openai_parts(messages: list[Any]) -> bool:
    """Whether a message carries OpenAI-only content parts (``image_url``), which the request
    reader's detection by roles and fields alone does not see."""
    return any(
        isinstance(part, Mapping) and part.get("type") == "image_url"
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for part in m["content"]
    )


class PreflightGuard:
    """Count a request's tokens and price it *before* sending it; raise ``BudgetExceeded`` if over.

    ``model``: the model the requests go to (used for pricing and for the Claude safety factor).
    ``max_input_tokens``: limit on input tokens + ``reserve_output_tokens`` (the same rule as the
    threshold file's budget). ``max_cost_usd``: limit on input + output allowance at list price; the
    output allowance is the call's ``max_tokens`` when given, else ``reserve_output_tokens``.
    ``tokenizer``: ``"tiktoken:o200k_base"`` (default), ``"tiktoken:cl100k_base"``, ``"anthropic"``
    (exact, one ``count_tokens`` API call per check) or ``"local"``. ``safety_factor``: multiplier
    applied when tiktoken approximates a Claude model (default: the threshold file's default).

    The guard holds no per-request state and can be shared between threads.
    """

    def __init__(
        self,
        model: str,
        *,
        max_input_tokens: int | None = None,
        max_cost_usd: float | None = None,
        tokenizer: str = "tiktoken:o200k_base",
        reserve_output_tokens: int = 0,
        safety_factor: float | None = None,
    ) -> None:
        # on first use: an app that imports runtime for edge_order skips Jinja2 and tiktoken
        from needle_action.config import PromptSettings

        if max_input_tokens is not None and max_input_tokens < 1:
            raise ValueError("max_input_tokens must be a positive number of tokens")
        if max_cost_usd is not None and not max_cost_usd > 0:
            raise ValueError("max_cost_usd must be a positive amount of dollars")
        if reserve_output_tokens < 0:
            raise ValueError("reserve_output_tokens must not be negative")
        self.model = model
        self.max_input_tokens = max_input_tokens
        self.max_cost_usd = max_cost_usd
        self.reserve_output_tokens = reserve_output_tokens
        self.settings = PromptSettings(model=model, tokenizer=tokenizer)
        if safety_factor is not None:
            self.settings = PromptSettings(
                model=model, tokenizer=tokenizer, tokenizer_safety_factor=safety_factor
            )
        self.tokenizer = tokenizer
        self._counter = self._make_counter()
        if max_cost_usd is not None:
            # Fail closed now, not on the first request: a dollar cap on an unpriced model is a bug.
            self._price(1, 1, strict=True)

    # -- internals kept small so the contract with tokens/pricing is in one place

    def _make_counter(self) -> TokenCounter:
        # on first use: an app that imports runtime for edge_order skips Jinja2 and tiktoken
        from needle_action.tokens import get_counter

        return get_counter(self.tokenizer, model=self.model, settings=self.settings)

    def _factor(self) -> float:
        # on first use: an app that imports runtime for edge_order skips Jinja2 and tiktoken
        from needle_action.tokens import safety_factor_for

        return safety_factor_for(self._counter, self.settings)

    def _price(self, input_tokens: int, output_tokens: int, *, strict: bool = False) -> float | None:
        # on first use: an app that imports runtime for edge_order skips Jinja2 and tiktoken
        from needle_action.providers.pricing import estimate_cost

        cost = estimate_cost(self.model, input_tokens, output_tokens)  # None: model not in the table
        if cost is None and strict:
            raise ValueError(
                f"max_cost_usd is set but model {self.model!r} has no price in needle_action's price table; "
                "use a priced model id or drop max_cost_usd"
            )
        return cost

    # -- public API

    def estimate(
        self,
        *,
        max_tokens: int | None = None,
        system: Any = None,
        messages: Iterable[Any] = (),
        **request: Any,
    ) -> Estimate:
        """Count and price a request without enforcing anything. REQUEST: the call's other
        arguments (``tools``, ``tool_choice``, ``thinking``, ...), counted with it."""
        rendered = _to_rendered(system, messages, request)
        # counter.count_prompt, not tokens.count_prompts: the latter keeps a process-wide cache of
        # every prompt it has seen, right for a CI run but a slow leak in a long-lived application.
        raw = self._counter.count_prompt(rendered)
        factor = self._factor()
        # round first, like tokens.count_prompts: 1000 * 1.15 is 1150.0000000000002 in floating point
        tokens = math.ceil(round(raw * factor, 6)) if factor != 1.0 else raw
        output = max_tokens if max_tokens is not None else self.reserve_output_tokens
        return Estimate(
            tokens=tokens,
            cost_usd=self._price(tokens, output),
            output_tokens=output,
            exact=self._counter.exact and factor == 1.0,
            tokenizer=self._counter.name,
        )

    def check(
        self,
        system: Any = None,
        messages: Iterable[Any] = (),
        *,
        max_tokens: int | None = None,
        **request: Any,
    ) -> Estimate:
        """Return the estimate, or raise ``BudgetExceeded`` if the request must not be sent."""
        est = self.estimate(system=system, messages=messages, max_tokens=max_tokens, **request)
        if (
            self.max_input_tokens is not None
            and est.tokens + self.reserve_output_tokens > self.max_input_tokens
        ):
            reserve = (
                f" + {self.reserve_output_tokens} reserved for output" if self.reserve_output_tokens else ""
            )
            raise BudgetExceeded(
                f"request has {est.tokens} input tokens{reserve}, over the limit of {self.max_input_tokens} "
                f"({est.tokenizer})",
                estimate=est,
                limit=self.max_input_tokens,
                kind="tokens",
                hint="retrieve fewer or shorter chunks, trim old conversation turns, or summarise them",
            )
        if self.max_cost_usd is not None and est.cost_usd is not None and est.cost_usd > self.max_cost_usd:
            raise BudgetExceeded(
                f"request would cost up to ${est.cost_usd:.4f} ({est.tokens} in + {est.output_tokens} out "
                f"on {self.model}), over the limit of ${self.max_cost_usd:.4f}",
                estimate=est,
                limit=self.max_cost_usd,
                kind="cost",
                hint="send less context, lower max_tokens, or use a cheaper model",
            )
        return est

    def _check_call(self, kwargs: Mapping[str, Any]) -> None:
        model = kwargs.get("model")
        if model is not None and model != self.model:
            raise ValueError(f"this PreflightGuard prices {self.model!r} but the call uses {model!r}")
        rest = {k: v for k, v in kwargs.items() if k not in ("system", "messages", "max_tokens")}
        max_tokens = kwargs.get("max_tokens", kwargs.get("max_completion_tokens"))
        self.check(kwargs.get("system"), kwargs.get("messages", ()), max_tokens=max_tokens, **rest)

    def wrap(self, create: Callable[..., T]) -> Callable[..., T]:
        """Wrap a ``messages.create``-like callable (sync or async); the check runs before each call.

        Arguments are read by keyword (``system``, ``messages``, ``max_tokens``, ``model``), the way
        the Anthropic SDK's ``create`` takes them. Usable as a decorator: ``@guard``.
        """
        if inspect.iscoroutinefunction(create):

            @functools.wraps(create)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                self._check_call(kwargs)
                return await create(*args, **kwargs)

            # awaiting the guarded call gives what awaiting create's gives: T, seen from outside
            wrapped: Callable[..., Any] = guarded_async
            return wrapped

        @functools.wraps(create)
        def guarded(*args: Any, **kwargs: Any) -> T:
            self._check_call(kwargs)
            return create(*args, **kwargs)

        return guarded

    __call__ = wrap
