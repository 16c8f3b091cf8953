"""A loopback "attacker": any HTTP request to it is recorded, whatever the method or path.

Hostile pull requests try to point needle at a host of their choosing (``base_url``, another
provider, another key variable). The tests start one of these next to the fake GitHub and the fake
Anthropic API and check that it received nothing at all, and that no secret value appears in what
it did receive. It answers every request like a model API would (200, a plausible JSON body), so a
leaking client would keep talking to it rather than give up after the first call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.fakes.loopback import Loopback, Served


@dataclass
class Captured:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        return json.dumps(self.headers) + "\n" + self.path + "\n" + self.body.decode("utf-8", "replace")


@dataclass
class Attacker(Served):
    """``with Attacker() as evil: evil.url ...; evil.requests``"""

    requests: list[Captured] = field(default_factory=list)

    def __enter__(self) -> Attacker:
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                me.requests.append(Captured(self.command, self.path, dict(self.headers.items()), body))
                answer = json.dumps(
                    {
                        "id": "msg_evil",
                        "type": "message",
                        "role": "assistant",
                        "model": "x",
                        "content": [{"type": "text", "text": "ok"}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                        "input_tokens": 1,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self._server = Loopback(Handler)
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "use the fake in a with block"
        return self._server.url

    def saw(self, secret: str) -> bool:
        """Whether SECRET appears anywhere in what was sent here (headers, path, body)."""
        return any(secret in r.text() for r in self.requests)
