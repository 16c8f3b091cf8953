"""What every fake API shares: a real HTTP server on 127.0.0.1 (a free port) in a daemon thread."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # listen() backlog: the stdlib default of 5 resets connections when an engine opens 16-64 at once
    request_queue_size = 512

    def handle_error(self, request, client_address):
        # a client that cancels a call resets its connection: normal for the engine, not a fake bug
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Loopback:
    """Serves HANDLER on 127.0.0.1 until :meth:`close`; :attr:`url` is ``http://127.0.0.1:PORT``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str | None = None) -> None:
        self.server = _Server(("127.0.0.1", 0), handler)
        # poll_interval: close() waits for the serve loop's next poll (0.5 s by default, on every
        # `with Fake...()` exit); 0.05 s keeps that wait out of every test that uses a fake
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Served:
    """A fake's end of life: its ``__enter__`` sets ``_server`` (a :class:`Loopback`); leaving the
    ``with`` block closes it (its URL stays readable, for assertions after the block)."""

    _server: Loopback | None = None

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
