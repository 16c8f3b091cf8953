"""A loopback fake of an OpenAI-compatible ``POST /v1/chat/completions`` (real HTTP, real SDK).

Shapes follow the ``openai`` SDK's ``ChatCompletion`` type and OpenAI's error body
``{"error": {"message", "type", "param", "code"}}``. Kept small: the Anthropic fake is the one
the recall engine leans on; this one proves the openai_compat provider speaks the protocol that
OpenAI, vLLM, Ollama and llama.cpp's server share.

``FakeOpenAI(responder, api_key=None | "key", models=None | {...}, fail_first={status: n})``;
``api_key=None`` accepts any or no key, like a self-hosted server. ``fail_first`` answers the first
n requests with that status (429 carries ``retry-after``) before serving normally.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler

from tests.fakes.loopback import Loopback, Served


class FakeOpenAI(Served):
    def __init__(
        self,
        responder: Callable[[dict], str] | None = None,
        *,
        api_key: str | None = None,
        models: Iterable[str] | None = None,
        fail_first: dict[int | str, int] | None = None,
        retry_after_s: float = 0.05,
    ) -> None:
        self.responder = responder or (lambda _req: "fake answer")
        self.api_key = api_key
        self.models = set(models) if models is not None else None
        self.plan: list[int | str] = [s for s, n in (fail_first or {}).items() for _ in range(n)]
        self.retry_after_s = retry_after_s
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.calls: Counter = Counter()
        self._server: Loopback | None = None

    def __enter__(self) -> FakeOpenAI:
        self._server = Loopback(type("H", (_Handler,), {"fake": self}))
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return self._server.url + "/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeOpenAI

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # noqa: A002
        return

    def _send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("x-request-id", f"req_{time.monotonic_ns()}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, message: str, kind: str, code: str | None = None, headers=None) -> None:
        with self.fake.lock:
            self.fake.calls[str(status)] += 1
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        self._send(status, json.dumps(body).encode(), headers)

    def do_POST(self):  # noqa: N802
        fake = self.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with fake.lock:
            fake.requests.append({"path": self.path, "headers": headers, "json": body})
            fake.calls["total"] += 1
            planned = fake.plan.pop(0) if fake.plan else None
        refused = self._route(headers)
        if refused is not None:
            return self._error(*refused)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            return self._error(400, "messages and model are required", "invalid_request_error")
        problem = chat_problem(body)
        if problem is not None:
            return self._error(400, problem, "invalid_request_error")
        model = self._model(body)
        if model is None:
            return None
        return self._serve(body, model, planned)

    def _route(self, headers: dict) -> tuple | None:
        """(status, message, type, code) refusing the request's path or credentials, or None."""
        if self.path != "/v1/chat/completions":
            return 404, f"Unknown request URL: POST {self.path}", "invalid_request_error"
        if self.fake.api_key is not None and headers.get("authorization") != f"Bearer {self.fake.api_key}":
            return 401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
        return None

    def _model(self, body: dict) -> str | None:
        """The model the request names (None: refused, the error already sent)."""
        fake = self.fake
        if fake.models is not None and body["model"] not in fake.models:
            self._error(
                404,
                f"The model `{body['model']}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            )
            return None
        return str(body["model"])

    def _serve(self, body: dict, model: str, planned) -> None:
        """Answer a valid request: the planned fault, else the responder's text as a completion."""
        fake = self.fake
        if planned == "malformed":
            with fake.lock:
                fake.calls["malformed"] += 1
            return self._send(200, b'{"id": "chatcmpl-x", "choices": [')
        if planned is not None:
            extra = {"retry-after": f"{fake.retry_after_s:g}"} if planned == 429 else None
            return self._error(int(planned), "injected fault", "server_error", headers=extra)
        text = str(fake.responder(body))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        with fake.lock:
            fake.calls["ok"] += 1
        self._send(
            200,
            json.dumps(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len(text.split()),
                        "total_tokens": prompt_tokens + len(text.split()),
                    },
                }
            ).encode(),
        )


def chat_problem(body: dict) -> str | None:
    """Where a chat request breaks the rules the API enforces on tools, or None: every tool a
    function with a name, every ``role: "tool"`` message answering a ``tool_calls`` id of an
    assistant message before it, every tool call a function with JSON arguments."""
    for i, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            return f"Invalid value at tools[{i}]: each tool needs type 'function' and a function object."
        if not isinstance(function.get("name"), str) or not function["name"]:
            return f"Missing required parameter: 'tools[{i}].function.name'."
    called: set[str] = set()
    for i, message in enumerate(body["messages"]):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            return f"Invalid value at messages[{i}].role."
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            try:
                json.loads(arguments if isinstance(arguments, str) else "")
            except ValueError:
                return f"Invalid value at messages[{i}].tool_calls: arguments must be a JSON string."
            called.add(call.get("id"))
        if message["role"] == "tool" and message.get("tool_call_id") not in called:
            return f"messages[{i}]: a 'tool' message must answer a tool call of an earlier assistant message."
    return None
